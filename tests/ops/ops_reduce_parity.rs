//! Parity of the reductions with PyTorch (fixtures `ops/reduce_*` except
//! `reduce_logsumexp_*`, which belongs with softmax), a finite-difference
//! gradient check of each in f64, and the semantics the fixtures do not
//! cover (ties, `min`, arg-reductions, NaN).
//!
//! Tolerances: each fixture's own `rtol`/`atol` (1e-10 / 1e-12 in f64);
//! see tests/fixtures/README.md for how they were established.

use crate::common;
use common::Fixture;
use forge::{gradcheck, Float, Tensor};

fn dims(f: &Fixture) -> Vec<isize> {
    f.meta_list("dim")
        .iter()
        .map(|d| d.parse().unwrap())
        .collect()
}

fn apply<E: Float>(f: &Fixture, x: &Tensor<E>) -> Tensor<E> {
    let d = dims(f);
    let keep = f.flag("keepdim");
    let c = || f.parse::<usize>("correction");
    match f.meta("op") {
        "sum" => x.sum_dim(&d, keep),
        "mean" => x.mean_dim(&d, keep),
        "amax" => x.max_dim(&d, keep),
        "var" => x.var_dim(&d, c(), keep),
        "std" => x.std_dim(&d, c(), keep),
        other => panic!("{}: unknown op {other}", f.name),
    }
}

fn reduce_files() -> Vec<String> {
    let files: Vec<String> = common::fixtures_with_prefix("ops", "reduce_")
        .into_iter()
        .filter(|n| !n.contains("reduce_logsumexp_"))
        .collect();
    assert!(files.len() >= 28, "expected the 28 reduce fixtures");
    files
}

#[test]
fn reductions_match_pytorch() {
    for file in reduce_files() {
        let f = Fixture::load(&file);
        f.check_single_input(apply::<f64>);
        f.check_single_input(apply::<f32>);
    }
}

#[test]
fn reductions_pass_gradcheck() {
    for file in reduce_files() {
        let f = Fixture::load(&file);
        gradcheck(|v| apply::<f64>(&f, &v[0]), &[f.t("x")], 1e-6, 1e-6, 1e-6)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
    }
}

/// The whole-tensor forms agree with the `_dim` forms over every axis
/// (listed by positive and by negative index), on every fixture's input.
#[test]
fn whole_tensor_forms_match_dim_forms() {
    for file in reduce_files() {
        let x = Fixture::load(&file).t("x");
        let r = x.rank() as isize;
        let pos: Vec<isize> = (0..r).collect();
        let neg: Vec<isize> = (-r..0).collect();
        assert_eq!(x.max().to_vec(), x.max_dim(&pos, false).to_vec(), "{file}");
        assert_eq!(
            x.min().to_vec(),
            x.min_dim(&[] as &[isize], false).to_vec(),
            "{file}"
        );
        assert_eq!(x.max().shape(), &[] as &[usize]);
        assert_eq!(x.sum().to_vec(), x.sum_dim(&neg, false).to_vec(), "{file}");
        for c in [0, 1] {
            assert_eq!(
                x.var(c).to_vec(),
                x.var_dim(&[] as &[isize], c, false).to_vec()
            );
            assert_eq!(x.std(c).to_vec(), x.std_dim(&neg, c, false).to_vec());
        }
    }
}

/// `min_dim(x) == -max_dim(-x)`, values and gradients, on the amax fixtures.
#[test]
fn min_is_negated_max_of_negation() {
    for file in common::fixtures_with_prefix("ops", "reduce_amax_") {
        let f = Fixture::load(&file);
        let d = dims(&f);
        let keep = f.meta("keepdim") == "true";
        let x = f.t("x").requires_grad();
        let y = x.min_dim(&d, keep);
        let gout = f.t("gout");
        let g = y.backward_with(&gout, false);
        let x2 = f.t("x").requires_grad();
        let y2 = x2.neg().max_dim(&d, keep).neg();
        let g2 = y2.backward_with(&gout, false);
        assert_eq!(y.to_vec(), y2.to_vec(), "{file}");
        assert_eq!(g.get(&x).unwrap().to_vec(), g2.get(&x2).unwrap().to_vec());
        gradcheck(|v| v[0].min_dim(&d, keep), &[f.t("x")], 1e-6, 1e-6, 1e-6)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
    }
}

#[test]
fn max_and_min_split_the_gradient_among_ties() {
    let x = Tensor::<f64>::from_vec(vec![3.0, 1.0, 3.0, 3.0, 2.0, 0.0, 2.0, 2.0], &[2, 4])
        .requires_grad();
    let gout = Tensor::from_vec(vec![6.0, 4.0], &[2]);
    let g = x.max_dim(&[1], false).backward_with(&gout, false);
    let gx = g.get(&x).unwrap().to_vec();
    let t = 4.0 / 3.0;
    assert_eq!(gx, vec![2.0, 0.0, 2.0, 2.0, t, 0.0, t, t]);
    let g = x.min_dim(&[1], false).backward_with(&gout, false);
    assert_eq!(
        g.get(&x).unwrap().to_vec(),
        vec![0.0, 6.0, 0.0, 0.0, 0.0, 4.0, 0.0, 0.0]
    );
    let g = x.max().backward();
    assert_eq!(
        g.get(&x).unwrap().to_vec(),
        vec![1.0 / 3.0, 0.0, 1.0 / 3.0, 1.0 / 3.0, 0.0, 0.0, 0.0, 0.0]
    );
}

#[test]
fn max_over_middle_axes_and_nan() {
    let x = Tensor::<f32>::from_fn(&[2, 3, 4], |i| ((i * 7) % 11) as f32);
    // amax over dims (0, 2): by hand
    let mut want = vec![f32::NEG_INFINITY; 3];
    for (i, v) in x.as_slice().iter().enumerate() {
        let j = (i / 4) % 3;
        want[j] = want[j].max(*v);
    }
    assert_eq!(x.max_dim(&[0, 2], false).to_vec(), want);
    assert_eq!(x.max_dim(&[2, 0], true).shape(), &[1, 3, 1]);
    let n = Tensor::<f32>::from_vec(vec![1.0, f32::NAN, 3.0, 0.5], &[2, 2]);
    let m = n.max_dim(&[1], false).to_vec();
    assert!(m[0].is_nan() && m[1] == 3.0);
    assert!(n.min().item().is_nan());
}

#[test]
fn argmax_and_argmin_follow_torch() {
    let x = Tensor::<f32>::from_vec(vec![1.0, 9.0, 9.0, -4.0, 7.0, -4.0], &[2, 3]);
    assert_eq!(x.argmax().item(), 1);
    assert_eq!(x.argmin().item(), 3);
    assert_eq!(x.argmax().shape(), &[] as &[usize]);
    assert_eq!(x.argmax_dim(1, false).to_vec(), vec![1, 1]);
    assert_eq!(x.argmin_dim(-1, false).to_vec(), vec![0, 0]);
    assert_eq!(x.argmax_dim(0, false).to_vec(), vec![0, 0, 0]);
    assert_eq!(x.argmin_dim(0, true).to_vec(), vec![1, 1, 1]);
    assert_eq!(x.argmin_dim(0, true).shape(), &[1, 3]);
    assert_eq!(x.argmax_dim(-1, true).shape(), &[2, 1]);
    // NaN counts as the extremum for both, first NaN wins.
    let n = Tensor::<f64>::from_vec(vec![1.0, f64::NAN, 5.0, f64::NAN], &[4]);
    assert_eq!(n.argmax().item(), 1);
    assert_eq!(n.argmin().item(), 1);
    // Integers work too, and a 0-d tensor has index 0.
    let i = Tensor::<i64>::from_vec(vec![3, 8, 8, 1], &[2, 2]);
    assert_eq!(i.argmax_dim(0, false).to_vec(), vec![1, 0]);
    assert_eq!(Tensor::<f32>::scalar(2.0).argmax_dim(0, false).item(), 0);
    // Not differentiable: the result carries no tape.
    let t = Tensor::<f64>::ones(&[3]).requires_grad();
    assert!(!t.argmax().is_tracked() && t.max().is_tracked());
}

#[test]
fn var_and_std_edge_cases() {
    let x = Tensor::<f64>::from_vec(vec![2.0, 2.0, 2.0, 1.0, 2.0, 6.0], &[2, 3]).requires_grad();
    let s = x.std_dim(&[1], 1, false);
    assert_eq!(s.to_vec()[0], 0.0);
    // Zero deviation gives a zero gradient, as in PyTorch (not NaN).
    let g = s.sum().backward();
    let gx = g.get(&x).unwrap().to_vec();
    assert_eq!(&gx[..3], &[0.0, 0.0, 0.0]);
    assert!(gx[3..].iter().all(|v| v.is_finite() && *v != 0.0));
    // N - correction <= 0 divides by zero: NaN or inf, like PyTorch.
    let one = Tensor::<f64>::from_vec(vec![4.0], &[1]);
    assert!(one.var(1).item().is_nan());
    assert_eq!(one.var(0).item(), 0.0);
    // Reduction over a middle axis.
    let y = Tensor::<f64>::from_fn(&[2, 3, 2], |i| (i * i) as f64);
    let v = y.var_dim(&[1], 0, false).to_vec();
    for (o, got) in v.iter().enumerate() {
        let (a, c) = (o / 2, o % 2);
        let vals: Vec<f64> = (0..3).map(|b| y.as_slice()[a * 6 + b * 2 + c]).collect();
        let m = vals.iter().sum::<f64>() / 3.0;
        let want = vals.iter().map(|t| (t - m) * (t - m)).sum::<f64>() / 3.0;
        assert!((got - want).abs() <= 1e-12 * want.abs(), "{got} vs {want}");
    }
}

/// Gradients of gradients through every nonlinear reduction fixture (amax,
/// var, std, with the file's dims, keepdim and correction): the
/// Hessian-vector product from `backward_with_graph` against central
/// differences of the first-order gradient along a fixed direction.
#[test]
fn second_order_through_reductions() {
    let mut n = 0;
    for file in reduce_files() {
        let f = Fixture::load(&file);
        if !["amax", "var", "std"].contains(&f.meta("op")) {
            continue;
        }
        n += 1;
        let x0 = f.t("x");
        let u = f.t("gout");
        let dir = Tensor::<f64>::from_fn(x0.shape(), |i| ((i * 37 % 17) as f64 - 8.0) / 8.0);
        // loss(x) = sum(op(x)^2 * u), so the gradient depends on x nonlinearly.
        let loss = |x: &Tensor<f64>| (&apply(&f, x).square() * &u).sum();
        let grad = |x: &Tensor<f64>| {
            let x = x.requires_grad();
            loss(&x).backward().get(&x).unwrap().clone()
        };
        let x = x0.requires_grad();
        let g = loss(&x).backward_with_graph();
        let hvp = (g.get(&x).unwrap() * &dir).sum().backward();
        let hvp = hvp.get(&x).unwrap();
        let eps = 1e-6;
        let numeric = (grad(&(&x0 + &(&dir * eps))) - grad(&(&x0 - &(&dir * eps)))) / (2.0 * eps);
        common::assert_close(&file, hvp, &numeric, 1e-6, 1e-6);
    }
    assert_eq!(n, 20);
}
