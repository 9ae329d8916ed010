//! The fused class losses (`cross_entropy_with` on logits, `nll_loss` on
//! log-probabilities) with a class weight that is tracked: f64 gradchecks
//! in the input and the weight, agreement of the loss and of both
//! gradients with the composed tensor ops (`composed_loss`), gradients of
//! gradients (the `create_graph` rule) in the input, in the weight and
//! mixed, against central differences of the fused gradients, and
//! bit-identical results for 1 and 2 threads. PyTorch parity with a
//! tracked weight: `nn/loss_*_weight_grad_*` in `nn_loss_parity`.
//!
//! Per position `p` (target `t`, not ignored), weights `w`, smoothing `ls`
//! (0 for `nll_loss`, whose `lse` is 0):
//!
//! ```text
//! loss_p = (1 - ls) w_t (lse - x_t) + ls / C sum_k w_k (lse - x_k)
//! d loss_p / d w_k = (1 - ls) [k = t] (lse - x_t) + ls / C (lse - x_k)
//! mean = sum_p loss_p / T, T = sum_p w_t:  d mean / d w_k = (sum_p d loss_p / d w_k - mean #{t_p = k}) / T
//! ```
//!
//! Tolerances: gradcheck 1e-6 (central differences, step 1e-6, f64); fused
//! against composed 1e-12 relative to `max(|composed|, 1)` (the same sums
//! in other orders, as in `ops_fused_norm_loss`); second order 1e-6.

use crate::composed_loss;
use crate::second_order;

use composed_loss::{close, randn};

use forge::nn::functional::{
    cross_entropy_with, nll_loss_with, CrossEntropyOptions, NllLossOptions, Reduction,
};
use forge::{gradcheck, Float, Rng, Tensor};

const IGNORE: i64 = -1;
const REDUCTIONS: [Reduction; 3] = [Reduction::Mean, Reduction::Sum, Reduction::None];

/// One loss: cross-entropy with label smoothing `ls`, or `nll_loss` (`Nll`).
#[derive(Clone, Copy, Debug)]
enum Loss {
    Ce(f64),
    Nll,
}
const LOSSES: [Loss; 3] = [Loss::Ce(0.0), Loss::Ce(0.2), Loss::Nll];

fn fused<E: Float>(
    loss: Loss,
    x: &Tensor<E>,
    t: &Tensor<i64>,
    w: Option<&Tensor<E>>,
    r: Reduction,
) -> Tensor<E> {
    match loss {
        Loss::Ce(ls) => cross_entropy_with(
            x,
            t,
            CrossEntropyOptions {
                weight: w.cloned(),
                ignore_index: IGNORE,
                label_smoothing: ls,
                reduction: r,
            },
        ),
        Loss::Nll => nll_loss_with(
            x,
            t,
            NllLossOptions {
                weight: w.cloned(),
                ignore_index: IGNORE,
                reduction: r,
            },
        ),
    }
}

fn composed(
    loss: Loss,
    x: &Tensor<f64>,
    t: &Tensor<i64>,
    w: Option<&Tensor<f64>>,
    r: Reduction,
) -> Tensor<f64> {
    match loss {
        Loss::Ce(ls) => composed_loss::class_loss(x, t, w, IGNORE, ls, r, true),
        Loss::Nll => composed_loss::class_loss(x, t, w, IGNORE, 0.0, r, false),
    }
}

/// Targets of shape `shape` in `0..c`, every fifth one ignored.
fn targets(shape: &[usize], c: usize, seed: u64) -> Tensor<i64> {
    let n: usize = shape.iter().product();
    let u = Tensor::<f64>::uniform(&[n], 0.0, c as f64, &mut Rng::new(seed)).to_vec();
    let t = u
        .iter()
        .enumerate()
        .map(|(i, &v)| match i % 5 == 3 {
            true => IGNORE,
            false => (v as i64).min(c as i64 - 1),
        })
        .collect();
    Tensor::from_vec(t, shape)
}

/// `(input shape, targets shape)`: rows, K-d with two and one trailing
/// dimensions, a trailing dimension of 1, and `(C,)`.
const CASES: [(&[usize], &[usize]); 5] = [
    (&[5, 4], &[5]),
    (&[2, 4, 3, 2], &[2, 3, 2]),
    (&[3, 5, 4], &[3, 4]),
    (&[3, 4, 1], &[3, 1]),
    (&[5], &[]),
];

/// The case's input (log-probabilities for `nll_loss`), targets and a
/// positive weight.
fn case(
    loss: Loss,
    shape: &[usize],
    tshape: &[usize],
    seed: u64,
) -> (Tensor<f64>, Tensor<i64>, Tensor<f64>) {
    let axis = usize::from(shape.len() > 1);
    let c = shape[axis];
    let mut x = randn(shape, seed);
    if let Loss::Nll = loss {
        x = x.log_softmax(axis as isize);
    }
    let w = randn(&[c], seed + 1).abs().add_scalar(0.2);
    (x, targets(tshape, c, seed + 2), w)
}

#[test]
fn class_losses_gradcheck_in_input_and_weight() {
    for (k, &(shape, tshape)) in CASES.iter().enumerate() {
        for loss in LOSSES {
            let (x, t, w) = case(loss, shape, tshape, 10 * k as u64);
            for r in REDUCTIONS {
                let what = format!("{loss:?} {shape:?} {r:?}");
                gradcheck(
                    |v| fused(loss, &v[0], &t, Some(&v[1]), r),
                    &[x.clone(), w.clone()],
                    1e-6,
                    1e-6,
                    1e-6,
                )
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            }
        }
    }
}

/// The fused op against the composed ops: the loss, the input's and the
/// weight's gradients (a tracked weight), every reduction, with ignored
/// targets; the small cases and two over several blocks (5000 rows of 7
/// classes: 3 blocks of 2341 rows; 3 x 7 x 40 x 50: tiles crossing images
/// forward, 21 class runs of 2000 in blocks of 8 backward). Also the input
/// gradient with a constant weight and without one.
#[test]
fn class_losses_fused_match_composed() {
    let big: [(&[usize], &[usize]); 2] = [(&[5000, 7], &[5000]), (&[3, 7, 40, 50], &[3, 40, 50])];
    for (k, &(shape, tshape)) in CASES.iter().chain(&big).enumerate() {
        for loss in LOSSES {
            let (x, t, w) = case(loss, shape, tshape, 100 + 10 * k as u64);
            let u = randn(tshape, 105 + 10 * k as u64);
            let x = x.requires_grad();
            for r in REDUCTIONS {
                let what = format!("{loss:?} {shape:?} {r:?}");
                let weigh = |l: &Tensor<f64>| match r {
                    Reduction::None => l.mul(&u).sum(),
                    _ => l.mul_scalar(1.7),
                };
                let wt = w.requires_grad();
                let a = fused(loss, &x, &t, Some(&wt), r);
                let b = composed(loss, &x, &t, Some(&wt), r);
                close(&a, &b, &format!("{what}: loss"));
                let (ga, gb) = (weigh(&a).backward(), weigh(&b).backward());
                close(
                    ga.get(&x).unwrap(),
                    gb.get(&x).unwrap(),
                    &format!("{what}: dx"),
                );
                close(
                    ga.get(&wt).unwrap(),
                    gb.get(&wt).unwrap(),
                    &format!("{what}: dw"),
                );
                for (name, c) in [("constant weight", Some(&w)), ("no weight", None)] {
                    let a = fused(loss, &x, &t, c, r);
                    let b = composed(loss, &x, &t, c, r);
                    close(&a, &b, &format!("{what}, {name}: loss"));
                    let (ga, gb) = (weigh(&a).backward(), weigh(&b).backward());
                    let (ga, gb) = (ga.get(&x).unwrap(), gb.get(&x).unwrap());
                    close(ga, gb, &format!("{what}, {name}: dx"));
                }
            }
        }
    }
}

/// Under `create_graph` the gradients are rebuilt in tensor ops; their
/// first-order values must be the fused pass's (the second-order checks
/// cannot see a term that is constant in the input and the weight).
#[test]
fn class_losses_create_graph_gradients_equal_the_plain_ones() {
    for (k, &(shape, tshape)) in CASES.iter().enumerate() {
        for loss in LOSSES {
            let (x, t, w) = case(loss, shape, tshape, 200 + 10 * k as u64);
            let (x, w) = (x.requires_grad(), w.requires_grad());
            for r in REDUCTIONS {
                let what = format!("{loss:?} {shape:?} {r:?}");
                let u = randn(fused(loss, &x, &t, Some(&w), r).shape(), 9);
                let l = || fused(loss, &x, &t, Some(&w), r).mul(&u).sum();
                let (plain, graph) = (l().backward(), l().backward_with_graph());
                for (name, v) in [("dx", &x), ("dw", &w)] {
                    let (a, b) = (plain.get(v).unwrap(), graph.get(v).unwrap());
                    assert!(b.is_tracked(), "{what}: {name} is not on the tape");
                    close(b, a, &format!("{what}: create_graph {name}"));
                }
            }
        }
    }
}

/// `d/dw <dL/dx, u>` through `backward_with(.., create_graph = true)`
/// (x and w tracked) against central differences in `w` of the fused
/// `<dL/dx, u>`.
fn mixed_check(
    what: &str,
    f: impl Fn(&Tensor<f64>, &Tensor<f64>) -> Tensor<f64>,
    x: &Tensor<f64>,
    w: &Tensor<f64>,
) {
    let mut rng = Rng::new(0x5eed);
    let gout = Tensor::<f64>::normal(f(x, w).shape(), 0.0, 1.0, &mut rng);
    let u = Tensor::<f64>::normal(x.shape(), 0.0, 1.0, &mut rng);
    let gx_dot = |w: &Tensor<f64>, create: bool| {
        let (xt, wt) = (x.detach().requires_grad(), w.detach().requires_grad());
        let g = f(&xt, &wt).backward_with(&gout, create);
        (g.get(&xt).unwrap().mul(&u).sum(), wt)
    };
    let (dot, wt) = gx_dot(w, true);
    let analytic = dot
        .backward()
        .get(&wt)
        .map_or(vec![0.0; w.numel()], |t| t.to_vec());
    for j in 0..w.numel() {
        let at = |d: f64| {
            let mut v = w.to_vec();
            v[j] += d;
            gx_dot(&Tensor::from_vec(v, w.shape()), false).0.item()
        };
        let numeric = (at(1e-6) - at(-1e-6)) / 2e-6;
        let err = (analytic[j] - numeric).abs();
        assert!(
            err <= 1e-6 * (1.0 + numeric.abs()),
            "{what}: mixed second order, weight {j}: analytic {} vs numeric {numeric}",
            analytic[j]
        );
    }
}

#[test]
fn class_losses_second_order_in_input_and_weight() {
    for (k, &(shape, tshape)) in CASES.iter().enumerate() {
        for loss in LOSSES {
            let (x, t, w) = case(loss, shape, tshape, 300 + 10 * k as u64);
            for r in REDUCTIONS {
                let what = format!("{loss:?} {shape:?} {r:?}");
                let wt = w.requires_grad();
                second_order::check(&what, |v| fused(loss, v, &t, Some(&wt), r), &x, 1e-6);
                second_order::check(&what, |v| fused(loss, &x, &t, Some(v), r), &w, 1e-6);
                mixed_check(&what, |a, b| fused(loss, a, &t, Some(b), r), &x, &w);
            }
        }
    }
}

/// Every split comes from the shape: the loss and both gradients have the
/// same bits for 1 and 2 threads (rows and K-d logits, smoothing, a tracked
/// weight), and at 2 threads the passes use the worker pool. (The only
/// test here that sets the thread count.)
#[test]
fn class_losses_are_bit_identical_for_1_and_2_threads() {
    let _threads = crate::common::lock_thread_count();
    let mut rng = Rng::new(71);
    let cases = [
        (vec![4096, 40], vec![4096]),
        (vec![4, 10, 32, 32], vec![4, 32, 32]),
    ];
    let data: Vec<_> = cases
        .iter()
        .enumerate()
        .map(|(k, (s, ts))| {
            let x = Tensor::<f32>::normal(s, 0.0, 2.0, &mut rng);
            let w = Tensor::<f32>::normal(&[s[1]], 1.0, 0.3, &mut rng);
            (x, targets(ts, s[1], 72 + k as u64), w)
        })
        .collect();
    let bits = |v: &Tensor<f32>| -> Vec<u32> { v.to_vec().iter().map(|e| e.to_bits()).collect() };
    let run = || {
        let mut out = Vec::new();
        for (x, t, w) in &data {
            for loss in [Loss::Ce(0.1), Loss::Nll] {
                let (xt, wt) = (x.requires_grad(), w.requires_grad());
                let l = fused(loss, &xt, t, Some(&wt), Reduction::Mean);
                let g = l.backward();
                out.push(vec![
                    bits(&l),
                    bits(g.get(&xt).unwrap()),
                    bits(g.get(&wt).unwrap()),
                ]);
            }
        }
        out
    };
    let (one, two, dispatched) = crate::common::at_1_and_2_threads(run);
    for (k, (a, b)) in one.iter().zip(&two).enumerate() {
        for (what, (p, q)) in ["loss", "dx", "dw"].iter().zip(a.iter().zip(b)) {
            assert!(p == q, "case {k}: {what} differs between 1 and 2 threads");
        }
    }
    assert!(
        dispatched,
        "the class losses at 2 threads did not use the worker pool"
    );
}
