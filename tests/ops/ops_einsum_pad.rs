//! `einsum` and `pad_with` (F.pad's reflect / replicate / circular /
//! constant modes) against PyTorch fixtures (`ops/einsum_*`, `ops/pad_*`,
//! written by tests/fixtures/gen/gen_ops3.py) in f64 and f32, an f64
//! gradient check and a second-order check of each, and 1- vs 2-thread
//! bit identity.
//!
//! Every option (the equation, the padding and mode) is read from the
//! fixture's metadata, never from its name. Tolerances: each fixture's own
//! `rtol`/`atol` (1e-10 / 1e-12 in f64) and `f32_rtol`/`f32_atol` in f32
//! (tests/fixtures/README.md). gradcheck: central differences with eps
//! 1e-6 and atol = rtol = 1e-6 (the project's standard; both ops are
//! polynomial of degree at most 4 in their inputs, so the differences are
//! exact to rounding).

use crate::common;
use common::Fixture;
use forge::nn::{self, Forward};
use forge::ops::PadMode;
use forge::{gradcheck, Float, Rng, Tensor};

/// The fixtures of `prefix` in `ops/`, at least `min` of them.
fn files(prefix: &str, min: usize) -> Vec<Fixture> {
    let files: Vec<Fixture> = common::fixtures_with_prefix("ops", prefix)
        .iter()
        .map(|p| Fixture::load(p))
        .collect();
    assert!(files.len() >= min, "{prefix}: {} files", files.len());
    files
}

/// The names of a fixture's operands (`grads`, in order).
fn operand_names(f: &Fixture) -> Vec<String> {
    f.meta_list("grads")
}

fn einsum<E: Float>(f: &Fixture, xs: &[Tensor<E>]) -> Tensor<E> {
    assert_eq!(xs.len(), f.parse::<usize>("operands"), "{}", f.name);
    let refs: Vec<&Tensor<E>> = xs.iter().collect();
    Tensor::einsum(f.meta("equation"), &refs)
}

/// The `(before, after)` pairs of F.pad's flat list, last dimension first.
fn pad_pairs(f: &Fixture) -> Vec<(usize, usize)> {
    f.usizes("pad").chunks(2).map(|p| (p[0], p[1])).collect()
}

fn pad_mode(f: &Fixture) -> PadMode {
    match PadMode::from_name(f.meta("mode")) {
        Some(PadMode::Constant(_)) => PadMode::Constant(f.meta_f64("value")),
        Some(m) => m,
        None => panic!("{}: mode {}", f.name, f.meta("mode")),
    }
}

fn pad<E: Float>(f: &Fixture, xs: &[Tensor<E>]) -> Tensor<E> {
    xs[0].pad_with(&pad_pairs(f), pad_mode(f))
}

/// The fixture's padding through the `nn` layer of its mode and rank.
fn pad_layer(f: &Fixture, x: Tensor<f64>) -> Tensor<f64> {
    let p = f.usizes("pad");
    let v = match f.meta("value") {
        "none" => 0.0,
        _ => f.meta_f64("value"),
    };
    let k = p.len() / 2;
    let a = |n: usize| -> Vec<usize> { p[..n].to_vec() };
    macro_rules! layer {
        ($one:ident, $two:ident, $three:ident $(, $val:expr)?) => {
            match k {
                1 => nn::$one::sides(a(2).try_into().unwrap() $(, $val)?).forward(x),
                2 => nn::$two::sides(a(4).try_into().unwrap() $(, $val)?).forward(x),
                _ => nn::$three::sides(a(6).try_into().unwrap() $(, $val)?).forward(x),
            }
        };
    }
    match f.meta("mode") {
        "reflect" => layer!(ReflectionPad1d, ReflectionPad2d, ReflectionPad3d),
        "replicate" => layer!(ReplicationPad1d, ReplicationPad2d, ReplicationPad3d),
        "circular" => layer!(CircularPad1d, CircularPad2d, CircularPad3d),
        _ if v == 0.0 => layer!(ZeroPad1d, ZeroPad2d, ZeroPad3d),
        _ => layer!(ConstantPad1d, ConstantPad2d, ConstantPad3d, v),
    }
}

type Op<E> = fn(&Fixture, &[Tensor<E>]) -> Tensor<E>;

/// Forward and every input gradient of `op` in element type `E` against
/// the fixture.
fn check<E: Float>(f: &Fixture, op: Op<E>) {
    let names = operand_names(f);
    let xs: Vec<Tensor<E>> = names
        .iter()
        .map(|n| f.input::<E>(n).requires_grad())
        .collect();
    let y = op(f, &xs);
    f.check_as("out", &y);
    let g = y.backward_with(&f.input::<E>("gout"), false);
    for (n, x) in names.iter().zip(&xs) {
        f.check_as(&format!("grad_{n}"), g.get(x).unwrap());
    }
}

/// gradcheck in f64, and the second order: the gradient taken with
/// `create_graph`, dotted with `v`, differentiated again, against central
/// differences of the plain gradient (`common::assert_hvp` on a scalar of
/// the op: `sum(op(x) * gout)` along a random direction).
fn check_grads(f: &Fixture, op: Op<f64>) {
    let xs: Vec<Tensor<f64>> = operand_names(f).iter().map(|n| f.t(n)).collect();
    gradcheck(|v| op(f, v), &xs, 1e-6, 1e-6, 1e-6).unwrap_or_else(|e| panic!("{}: {e}", f.name));
    let gout = f.t("gout");
    for k in 0..xs.len() {
        let scalar = |x: &Tensor<f64>| {
            let mut v = xs.clone();
            v[k] = x.clone();
            op(f, &v).mul(&gout).sum().mul(&op(f, &v).sum())
        };
        common::assert_hvp(
            scalar,
            &xs[k],
            5 + k as u64,
            &format!("{} (operand {k})", f.name),
        );
    }
}

#[test]
fn einsum_matches_pytorch_in_f64_and_f32() {
    let fs = files("einsum_", 17);
    for f in &fs {
        assert_eq!(f.meta("op"), "einsum");
        check::<f64>(f, einsum::<f64>);
        check::<f32>(f, einsum::<f32>);
    }
    // Every kind of equation the generator writes is among them.
    let eqs: Vec<&str> = fs.iter().map(|f| f.meta("equation")).collect();
    assert!(eqs.iter().any(|e| e.contains("...")), "{eqs:?}");
    assert!(eqs.iter().any(|e| !e.contains("->")), "{eqs:?}");
    assert!(fs.iter().any(|f| f.parse::<usize>("operands") == 4));
}

#[test]
fn einsum_passes_gradcheck_and_second_order_checks() {
    for f in files("einsum_", 17) {
        check_grads(&f, einsum::<f64>);
    }
}

#[test]
fn einsum_errors_name_the_equation_and_shapes() {
    let a = Tensor::<f32>::zeros(&[2, 3]);
    let b = Tensor::<f32>::zeros(&[4, 5]);
    let err = |eq: &'static str, ops: Vec<Tensor<f32>>| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            let r: Vec<&Tensor<f32>> = ops.iter().collect();
            Tensor::einsum(eq, &r)
        }))
        .unwrap_err()
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default()
    };
    let m = err("ij,jk->ik", vec![a.clone(), b.clone()]);
    assert!(
        m.contains("einsum") && m.contains("subscript j has sizes 3 and 4"),
        "{m}"
    );
    assert!(err("ij,jk", vec![a.clone()]).contains("2 input terms for 1 operands"));
    assert!(err("i->i", vec![a.clone()]).contains("1 subscripts for an operand of rank 2"));
    assert!(err("ij->ii", vec![a.clone()]).contains("more than once"));
    assert!(err("i.j->ij", vec![a]).contains("invalid subscript"));
}

#[test]
fn pad_matches_pytorch_in_f64_and_f32() {
    let fs = files("pad_", 12);
    let mut modes = std::collections::BTreeSet::new();
    for f in &fs {
        assert_eq!(f.meta("op"), "pad");
        modes.insert(f.meta("mode").to_string());
        check::<f64>(f, pad::<f64>);
        check::<f32>(f, pad::<f32>);
        f.check("out", &pad_layer(f, f.t("x")));
    }
    assert_eq!(modes.len(), 4, "{modes:?}");
}

#[test]
fn pad_passes_gradcheck_and_its_gradient_is_differentiable() {
    for f in files("pad_", 12) {
        let x = f.t("x");
        gradcheck(|v| pad(&f, v), std::slice::from_ref(&x), 1e-6, 1e-6, 1e-6)
            .unwrap_or_else(|e| panic!("{}: {e}", f.name));
        // The op is linear, y = A x: the gradient `A^T gout` taken with
        // `create_graph`, dotted with v and differentiated in gout, must
        // give `A v`, the forward map again (the constant's offset aside).
        let xt = x.detach().requires_grad();
        let gout = f.t("gout").requires_grad();
        let g = pad(&f, std::slice::from_ref(&xt)).backward_with(&gout, true);
        let g = g.get(&xt).unwrap().clone();
        let v = Tensor::<f64>::normal(x.shape(), 0.0, 1.0, &mut Rng::new(4));
        let second = g.mul(&v).sum().backward();
        let zero = Tensor::<f64>::zeros(x.shape());
        let av = pad(&f, &[v]).sub(&pad(&f, &[zero]));
        common::assert_close(
            &format!("{} (double backward)", f.name),
            second.get(&gout).unwrap(),
            &av,
            1e-12,
            1e-12,
        );
    }
}

#[test]
fn pad_errors_name_the_mode_and_shape() {
    let err = |shape: &'static [usize], pads: &'static [(usize, usize)], mode: PadMode| {
        std::panic::catch_unwind(move || Tensor::<f32>::zeros(shape).pad_with(pads, mode))
            .unwrap_err()
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default()
    };
    let m = err(&[1, 3], &[(3, 0)], PadMode::Reflect);
    assert!(m.contains("reflect") && m.contains("below the size"), "{m}");
    let m = err(&[1, 3], &[(0, 4)], PadMode::Circular);
    assert!(m.contains("at most the size"), "{m}");
    let m = err(&[4], &[(1, 1)], PadMode::Replicate);
    assert!(m.contains("rank 2 or 3") && m.contains("[4]"), "{m}");
}

#[test]
fn einsum_and_pad_are_bit_identical_for_1_and_2_threads() {
    let _threads = common::lock_thread_count();
    let run = |k: usize| {
        let a = Tensor::<f32>::normal(&[8, 64, 96], 0.0, 1.0, &mut Rng::new(1)).requires_grad();
        let b = Tensor::<f32>::normal(&[8, 96, 80], 0.0, 1.0, &mut Rng::new(2)).requires_grad();
        let y = match k {
            0 => Tensor::einsum("bij,bjk->bki", &[&a, &b]),
            _ => a
                .reshape(&[2, 4, 64, 96])
                .pad_with(&[(5, 7), (3, 2)], PadMode::Reflect),
        };
        let gout = Tensor::<f32>::normal(y.shape(), 0.0, 1.0, &mut Rng::new(3));
        let g = y.backward_with(&gout, false);
        (y.to_vec(), g.get(&a).unwrap().to_vec())
    };
    for k in 0..2 {
        let (one, two, _) = common::at_1_and_2_threads(|| run(k));
        assert!(one == two, "case {k}: 1 and 2 threads differ");
    }
}
