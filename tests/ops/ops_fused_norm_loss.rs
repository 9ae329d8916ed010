//! Fused group norm and K-dimensional cross-entropy: f64 gradchecks of
//! the fused backward rules, agreement with the same functions written in
//! composed tensor ops, gradients of gradients (the `create_graph` rules)
//! against central differences of the fused gradients, and bit-identical
//! results for 1 and 2 threads. PyTorch parity of both ops is in
//! `nn_norm_parity` (`nn/group_norm`) and `nn_loss_parity`
//! (`nn/loss_cross_entropy_kdim`).
//!
//! Group norm, `x` viewed as `[N, G, m]`, per row (biased variance):
//!
//! ```text
//! xhat = (x - mean) / sqrt(var + eps);  y = xhat w_ch + b_ch
//! dx = rstd (g w - mean(g w) - xhat mean(g w xhat))
//! dw_ch = sum g xhat;  db_ch = sum g
//! ```
//!
//! Cross-entropy, per position `p` (a row of `(N, C)` logits, `(i, d)` of
//! `(N, C, d1, ...)` ones), weights `w` (`W = sum w`), smoothing `ls`:
//!
//! ```text
//! loss = (1 - ls) w_t (lse - x_t) + ls / C sum_k w_k (lse - x_k)
//! dx_k = (1 - ls) w_t (p_k - [k = t]) + ls / C (W p_k - w_k)
//! ```
//!
//! reduced by sum, none, or the mean over the summed `w_t` of the targets
//! not ignored. The composed reference is the same loss in one-hot tensor
//! ops (`composed_loss`).
//!
//! Tolerances: gradcheck 1e-6 (central differences, step 1e-6, f64). The
//! fused op and the composed ops compute the same sums in other orders
//! (eight lanes per row or run, then runs image by image, against the
//! reduction kernels' order), so in f64 they agree to 1e-12 relative to
//! `max(|composed|, 1)`: rows of up to 3200 values, about 3200 * 2^-53 =
//! 4e-13 in the worst case. Second order: 1e-6 (differences of gradients).

use crate::composed_loss;
use crate::second_order;

use composed_loss::{close, randn};

use forge::nn::functional::{cross_entropy_with, group_norm, CrossEntropyOptions, Reduction};
use forge::{gradcheck, Rng, Tensor};

/// Group norm in composed tensor ops: reshape, mean, centred mean square,
/// `rsqrt`, then the per-channel affine.
fn group_norm_composed(
    x: &Tensor<f64>,
    groups: usize,
    w: Option<&Tensor<f64>>,
    b: Option<&Tensor<f64>>,
    eps: f64,
) -> Tensor<f64> {
    let s = x.shape().to_vec();
    let xg = x.reshape(&[s[0] as isize, groups as isize, -1]);
    let xc = xg.sub(&xg.mean_dim(&[2], true));
    let var = xc.square().mean_dim(&[2], true);
    let y = xc.mul(&var.add_scalar(eps).rsqrt()).view(&s);
    let mut cv = vec![1usize; s.len()];
    cv[1] = s[1];
    let y = w.map_or(y.clone(), |w| y.mul(&w.view(&cv)));
    b.map_or(y.clone(), |b| y.add(&b.view(&cv)))
}

/// `(shape, groups)` cases: several images and groups, rank 2 (no trailing
/// dimensions), one channel per group, one group.
const GN_CASES: [(&[usize], usize); 4] = [
    (&[3, 6, 2, 3], 3),
    (&[2, 4], 2),
    (&[2, 4, 5], 4),
    (&[1, 3, 4], 1),
];

#[test]
fn group_norm_fused_gradcheck() {
    for (k, &(shape, groups)) in GN_CASES.iter().enumerate() {
        let seed = 10 * k as u64;
        let c = shape[1];
        let (x, w, b) = (
            randn(shape, seed),
            randn(&[c], seed + 1),
            randn(&[c], seed + 2),
        );
        let case = format!("{shape:?} groups {groups}");
        gradcheck(
            |v| group_norm(&v[0], groups, Some(&v[1]), Some(&v[2]), 1e-5),
            &[x.clone(), w, b],
            1e-6,
            1e-6,
            1e-6,
        )
        .unwrap_or_else(|e| panic!("{case}, affine: {e}"));
        gradcheck(
            |v| group_norm(&v[0], groups, None, None, 1e-5),
            std::slice::from_ref(&x),
            1e-6,
            1e-6,
            1e-6,
        )
        .unwrap_or_else(|e| panic!("{case}, no affine: {e}"));
    }
}

/// `(y, dx, dw, db)` of `sum(group_norm(x) u)`, fused or composed.
fn gn_run(t: &[Tensor<f64>; 4], groups: usize, fused: bool) -> [Tensor<f64>; 4] {
    let (x, w, b) = (
        t[0].requires_grad(),
        t[1].requires_grad(),
        t[2].requires_grad(),
    );
    let y = if fused {
        group_norm(&x, groups, Some(&w), Some(&b), 1e-5)
    } else {
        group_norm_composed(&x, groups, Some(&w), Some(&b), 1e-5)
    };
    let g = y.mul(&t[3]).sum().backward();
    let get = |v: &Tensor<f64>| g.get(v).unwrap().clone();
    [y.detach(), get(&x), get(&w), get(&b)]
}

fn gn_inputs(shape: &[usize], seed: u64) -> [Tensor<f64>; 4] {
    let c = shape[1];
    [
        randn(shape, seed).add_scalar(0.7),
        randn(&[c], seed + 1),
        randn(&[c], seed + 2),
        randn(shape, seed + 3),
    ]
}

/// The small cases and one over several blocks of every pass (24 rows of
/// 3200 values: statistics in 5 blocks of 5 rows; 48 runs of 1600 in 5
/// blocks of 10; elementwise passes in 6 blocks of one image).
#[test]
fn group_norm_fused_matches_composed() {
    let big: (&[usize], usize) = (&[6, 8, 40, 40], 4);
    for (k, &(shape, groups)) in GN_CASES.iter().chain([&big]).enumerate() {
        let t = gn_inputs(shape, 100 + 10 * k as u64);
        let (f, c) = (gn_run(&t, groups, true), gn_run(&t, groups, false));
        for (i, what) in ["output", "dx", "dw", "db"].iter().enumerate() {
            close(&f[i], &c[i], &format!("{shape:?} groups {groups} {what}"));
        }
    }
}

/// Gradients of gradients go through the `create_graph` rule: its
/// Hessian-vector products in `x` match central differences of the fused
/// first-order gradients, and the mixed derivative `d(dL/dx . v)/dw`
/// equals the composed ops'.
#[test]
fn group_norm_second_order() {
    let (w, b) = (randn(&[6], 41), randn(&[6], 42));
    let x = randn(&[2, 6, 3], 43);
    second_order::check(
        "group_norm",
        |v| group_norm(v, 3, Some(&w), Some(&b), 1e-5),
        &x,
        1e-6,
    );
    second_order::check(
        "group_norm without affine",
        |v| group_norm(v, 2, None, None, 1e-5),
        &x,
        1e-6,
    );
    let (u, v) = (randn(&[2, 6, 3], 44), randn(&[2, 6, 3], 45));
    let (xt, wt) = (x.requires_grad(), w.requires_grad());
    let mixed = |y: Tensor<f64>| {
        let g = (y * &u).sum().backward_with_graph();
        let gx = g.get(&xt).unwrap().clone();
        assert!(gx.is_tracked(), "the gradient must be on the tape");
        (gx * &v).sum().backward().get(&wt).unwrap().clone()
    };
    close(
        &mixed(group_norm(&xt, 3, Some(&wt), Some(&b), 1e-5)),
        &mixed(group_norm_composed(&xt, 3, Some(&wt), Some(&b), 1e-5)),
        "d(dL/dx . v)/dw",
    );
}

/// Inputs with no values (no images; no trailing values): an empty
/// output and zero weight and bias gradients, as the composed ops give.
#[test]
fn group_norm_of_empty_inputs() {
    for shape in [[0, 4, 3], [2, 4, 0]] {
        let (x, w, b) = (
            Tensor::<f64>::zeros(&shape).requires_grad(),
            randn(&[4], 51).requires_grad(),
            randn(&[4], 52).requires_grad(),
        );
        for eps in [1e-5, 0.0] {
            let y = group_norm(&x, 2, Some(&w), Some(&b), eps);
            assert_eq!(y.shape(), &shape);
            let g = y.sum().backward();
            assert_eq!(g.get(&x).unwrap().shape(), &shape);
            assert_eq!(g.get(&w).unwrap().to_vec(), vec![0.0; 4], "{shape:?}");
            assert_eq!(g.get(&b).unwrap().to_vec(), vec![0.0; 4], "{shape:?}");
        }
    }
}

/// `(y, dx, dw, db)` bits of `sum(group_norm(x) u)` in f32, at the current
/// thread count.
fn gn_bits(t: &[Tensor<f32>; 4], groups: usize) -> Vec<Vec<u32>> {
    let (x, w, b) = (
        t[0].requires_grad(),
        t[1].requires_grad(),
        t[2].requires_grad(),
    );
    let y = group_norm(&x, groups, Some(&w), Some(&b), 1e-5);
    let g = y.mul(&t[3]).sum().backward();
    let bits = |v: &Tensor<f32>| v.to_vec().iter().map(|e| e.to_bits()).collect();
    vec![
        bits(&y),
        bits(g.get(&x).unwrap()),
        bits(g.get(&w).unwrap()),
        bits(g.get(&b).unwrap()),
    ]
}

/// Every split comes from the shape: 1 and 2 threads give the same bits,
/// and at 2 threads the passes do use the worker pool. (The only test here
/// that sets the thread count.)
#[test]
fn fused_ops_are_bit_identical_for_1_and_2_threads() {
    let _threads = crate::common::lock_thread_count();
    let mut rng = Rng::new(61);
    let shape = [8, 32, 16, 16];
    let gn: [Tensor<f32>; 4] = [
        Tensor::normal(&shape, 0.5, 2.0, &mut rng),
        Tensor::normal(&[32], 1.0, 0.3, &mut rng),
        Tensor::normal(&[32], 0.0, 0.3, &mut rng),
        Tensor::normal(&shape, 0.0, 1.0, &mut rng),
    ];
    // K-d cross-entropy over 4 x 32 x 32 positions of 10 classes
    let logits = Tensor::<f32>::normal(&[4, 10, 32, 32], 0.0, 2.0, &mut rng);
    let t = kd_targets(&[4, 32, 32], 10, 62);
    let w = Tensor::<f32>::normal(&[10], 1.0, 0.3, &mut rng);
    let ce_bits = || {
        let x = logits.requires_grad();
        let o = CrossEntropyOptions {
            weight: Some(w.clone()),
            ignore_index: -1,
            label_smoothing: 0.1,
            reduction: Reduction::Mean,
        };
        let l = cross_entropy_with(&x, &t, o);
        let g = l.backward();
        let bits =
            |v: &Tensor<f32>| -> Vec<u32> { v.to_vec().iter().map(|e| e.to_bits()).collect() };
        vec![bits(&l), bits(g.get(&x).unwrap())]
    };
    forge::runtime::set_num_threads(1);
    let one = (gn_bits(&gn, 8), ce_bits());
    forge::runtime::set_num_threads(2);
    let before = forge::runtime::pool_dispatches();
    let gn_two = gn_bits(&gn, 8);
    let gn_dispatched = forge::runtime::pool_dispatches() > before;
    let before = forge::runtime::pool_dispatches();
    let ce_two = ce_bits();
    let ce_dispatched = forge::runtime::pool_dispatches() > before;
    for (k, what) in ["output", "dx", "dw", "db"].iter().enumerate() {
        assert!(
            one.0[k] == gn_two[k],
            "group_norm {what} differs between 1 and 2 threads"
        );
    }
    for (k, what) in ["loss", "gradient"].iter().enumerate() {
        assert!(
            one.1[k] == ce_two[k],
            "cross_entropy {what} differs between 1 and 2 threads"
        );
    }
    assert!(
        gn_dispatched,
        "group_norm at 2 threads did not use the worker pool"
    );
    assert!(
        ce_dispatched,
        "cross_entropy at 2 threads did not use the worker pool"
    );
}

/// Targets of shape `shape` in `0..c`, every fifth one ignored (`-1`).
fn kd_targets(shape: &[usize], c: usize, seed: u64) -> Tensor<i64> {
    let n: usize = shape.iter().product();
    let mut rng = Rng::new(seed);
    let u = Tensor::<f64>::uniform(&[n], 0.0, c as f64, &mut rng).to_vec();
    let t = u
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            if i % 5 == 3 {
                -1
            } else {
                (v as i64).min(c as i64 - 1)
            }
        })
        .collect();
    Tensor::from_vec(t, shape)
}

fn ce_opts(w: Option<&Tensor<f64>>, ls: f64, r: Reduction) -> CrossEntropyOptions<f64> {
    CrossEntropyOptions {
        weight: w.cloned(),
        ignore_index: -1,
        label_smoothing: ls,
        reduction: r,
    }
}

const REDUCTIONS: [Reduction; 3] = [Reduction::Mean, Reduction::Sum, Reduction::None];

/// `(logits shape, targets shape)`: K-d with two and one trailing
/// dimensions, a trailing dimension of 1 (the row kernel), and `(C,)`.
const CE_CASES: [(&[usize], &[usize]); 4] = [
    (&[2, 4, 3, 2], &[2, 3, 2]),
    (&[3, 5, 4], &[3, 4]),
    (&[3, 4, 1], &[3, 1]),
    (&[5], &[]),
];

#[test]
fn cross_entropy_kdim_gradcheck_and_second_order() {
    for (k, &(shape, tshape)) in CE_CASES.iter().enumerate() {
        let c = shape[if shape.len() == 1 { 0 } else { 1 }];
        let x = randn(shape, 70 + k as u64);
        let t = kd_targets(tshape, c, 80 + k as u64);
        let w = randn(&[c], 90 + k as u64).abs().add_scalar(0.2);
        for weight in [None, Some(&w)] {
            for ls in [0.0, 0.2] {
                for r in REDUCTIONS {
                    let f = |v: &Tensor<f64>| cross_entropy_with(v, &t, ce_opts(weight, ls, r));
                    let case = format!("{shape:?} weight {} ls {ls} {r:?}", weight.is_some());
                    gradcheck(|v| f(&v[0]), std::slice::from_ref(&x), 1e-6, 1e-6, 1e-6)
                        .unwrap_or_else(|e| panic!("{case}: {e}"));
                    second_order::check(&case, f, &x, 1e-6);
                }
            }
        }
    }
}

/// The fused op against the composed ops (`composed_loss`): loss and
/// logit gradient, every reduction, with smoothing and
/// ignored targets, the small cases and one over several blocks (6000
/// positions of 7 classes: 3 forward blocks of 2340 positions, tiles
/// crossing images; 21 class runs of 2000 in 3 backward blocks of 8).
#[test]
fn cross_entropy_kdim_fused_matches_composed() {
    let big: (&[usize], &[usize]) = (&[3, 7, 40, 50], &[3, 40, 50]);
    for (k, &(shape, tshape)) in CE_CASES.iter().chain([&big]).enumerate() {
        let c = shape[if shape.len() == 1 { 0 } else { 1 }];
        let x = randn(shape, 110 + k as u64).requires_grad();
        let t = kd_targets(tshape, c, 120 + k as u64);
        let w = randn(&[c], 130 + k as u64).abs().add_scalar(0.2);
        let u = randn(tshape, 140 + k as u64);
        for fused_w in [None, Some(&w)] {
            for ls in [0.0, 0.1] {
                for r in REDUCTIONS {
                    let case = format!("{shape:?} weight {} ls {ls} {r:?}", fused_w.is_some());
                    let fused = cross_entropy_with(&x, &t, ce_opts(fused_w, ls, r));
                    let composed = composed_loss::class_loss(&x, &t, fused_w, -1, ls, r, true);
                    close(&fused, &composed, &format!("{case} loss"));
                    let weigh = |l: &Tensor<f64>| match r {
                        Reduction::None => l.mul(&u).sum(),
                        _ => l.mul_scalar(1.7),
                    };
                    let gf = weigh(&fused).backward();
                    let gc = weigh(&composed).backward();
                    close(
                        gf.get(&x).unwrap(),
                        gc.get(&x).unwrap(),
                        &format!("{case} grad"),
                    );
                }
            }
        }
    }
}

/// A `-inf` logit in a class that is not the target leaves the loss (no
/// smoothing) finite, as in PyTorch; an ignored position's logits, even
/// NaN, contribute nothing and get a zero gradient.
#[test]
fn cross_entropy_kdim_special_values() {
    let mut v = randn(&[2, 3, 4], 151).to_vec();
    v[(3 + 2) * 4 + 1] = f64::NEG_INFINITY; // image 1, class 2, d = 1
    v[4 + 2] = f64::NAN; // image 0, class 1, d = 2 (ignored)
    let x = Tensor::from_vec(v, &[2, 3, 4]).requires_grad();
    let t = Tensor::<i64>::from_vec(vec![0, 1, -1, 2, 1, 0, 2, 1], &[2, 4]);
    for r in REDUCTIONS {
        let l = cross_entropy_with(&x, &t, ce_opts(None, 0.0, r));
        assert!(l.to_vec().iter().all(|v| v.is_finite()), "{r:?}: {l:?}");
        let g = l.sum().backward();
        let g = g.get(&x).unwrap().to_vec();
        for k in 0..3 {
            assert_eq!(g[k * 4 + 2], 0.0, "{r:?}: ignored position, class {k}");
        }
        assert_eq!(g[(3 + 2) * 4 + 1], 0.0, "{r:?}: the -inf logit");
        assert!(g.iter().all(|v| v.is_finite()), "{r:?}: {g:?}");
    }
}

/// Evaluation-mode batch norm with tracked running statistics stays one
/// fused op: `y = (x - rm) k + b`, `k = w / sqrt(rv + eps)`, so
/// `drm = -k sum(g)` and `drv = -k sum(g (x - rm)) / (2 (rv + eps))` per
/// channel, from the sums the weight and bias gradients use. Checked: an
/// f64 gradcheck in all five inputs; every gradient and the output equal to
/// the formula in tensor ops (1e-12); second order in each statistic (the
/// `create_graph` rule against differences of the fused gradients) and the
/// mixed `d(dL/dx . v)/drv` equal to the composed ops'.
#[test]
fn batch_norm_eval_tracked_statistics() {
    use forge::nn::functional::batch_norm;
    let x = randn(&[3, 2, 2, 3], 161);
    let (w, b, rm) = (randn(&[2], 162), randn(&[2], 163), randn(&[2], 164));
    let rv = randn(&[2], 165).square().add_scalar(0.5);
    let bn = |v: &[Tensor<f64>]| {
        let (x, w, b, rm, rv) = (&v[0], &v[1], &v[2], &v[3], &v[4]);
        batch_norm(x, Some(rm), Some(rv), Some(w), Some(b), false, 0.1, 1e-5).0
    };
    let composed = |v: &[Tensor<f64>]| {
        let pc = |t: &Tensor<f64>| t.view(&[1, 2, 1, 1]);
        let k = pc(&v[4]).add_scalar(1e-5).rsqrt().mul(&pc(&v[1]));
        v[0].sub(&pc(&v[3])).mul(&k).add(&pc(&v[2]))
    };
    let inputs = [x.clone(), w.clone(), b.clone(), rm.clone(), rv.clone()];
    gradcheck(bn, &inputs, 1e-6, 1e-6, 1e-6).unwrap();
    let u = randn(&[3, 2, 2, 3], 166);
    let tracked: Vec<Tensor<f64>> = inputs.iter().map(|t| t.requires_grad()).collect();
    let (yf, yc) = (bn(&tracked), composed(&tracked));
    close(&yf, &yc, "output");
    let (gf, gc) = ((&yf * &u).sum().backward(), (&yc * &u).sum().backward());
    for (t, what) in tracked.iter().zip(["x", "weight", "bias", "rm", "rv"]) {
        close(gf.get(t).unwrap(), gc.get(t).unwrap(), what);
    }
    let with = |i: usize, v: &Tensor<f64>| {
        let mut a = inputs.clone();
        a[i] = v.clone();
        bn(&a)
    };
    second_order::check("bn eval, rm", |v| with(3, v), &rm, 1e-6);
    second_order::check("bn eval, rv", |v| with(4, v), &rv, 1e-6);
    let v = randn(&[3, 2, 2, 3], 167);
    let mixed = |y: Tensor<f64>| {
        let g = (y * &u).sum().backward_with_graph();
        let gx = g.get(&tracked[0]).unwrap().clone();
        (gx * &v).sum().backward().get(&tracked[4]).unwrap().clone()
    };
    close(
        &mixed(bn(&tracked)),
        &mixed(composed(&tracked)),
        "d(dL/dx . v)/drv",
    );
}
