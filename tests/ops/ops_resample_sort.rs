//! `interpolate` (every mode, `align_corners` both ways, `size` or
//! `scale_factor`) and `sort` / `topk` against PyTorch fixtures
//! (`ops/interpolate_*`, `ops/sort_*`, `ops/topk_*`, written by
//! tests/fixtures/gen/gen_ops2.py) in f64 and f32, an f64 gradient check of
//! each, and 1- vs 2-thread bit identity.
//!
//! Every option is read from the fixture's metadata, never from its name.
//! Tolerances: each fixture's own `rtol`/`atol` (1e-10 / 1e-12 in f64) and
//! `f32_rtol`/`f32_atol` in f32 (tests/fixtures/README.md). The indices of
//! sort/topk are compared exactly. gradcheck: central differences with eps
//! 1e-6 and atol = rtol = 1e-6 (the project's standard; these ops are
//! linear or piecewise linear in their input, so the differences are exact
//! to rounding away from ties).

use crate::common;
use common::Fixture;
use forge::ops::{Interpolate, InterpolateMode};
/// A boxed op of one f32 tensor.
type UnaryOp<'a> = Box<dyn Fn(&Tensor<f32>) -> Tensor<f32> + 'a>;

use forge::{gradcheck, Float, Rng, Tensor};

/// The options of an `interpolate` fixture, from its metadata.
fn interp_options(f: &Fixture) -> Interpolate {
    let mode = InterpolateMode::from_name(f.meta("mode"))
        .unwrap_or_else(|| panic!("{}: mode {}", f.name, f.meta("mode")));
    let mut o = if f.meta("size") != "none" {
        Interpolate::size(&f.usizes("size"))
    } else {
        let s: Vec<f64> = f
            .meta_list("scale_factor")
            .iter()
            .map(|v| v.parse().unwrap())
            .collect();
        Interpolate::scale_factors(&s)
    }
    .mode(mode);
    match f.meta("align_corners") {
        "none" => {}
        _ => o = o.align_corners(f.flag("align_corners")),
    }
    o
}

fn interp<E: Float>(f: &Fixture, x: &Tensor<E>) -> Tensor<E> {
    x.interpolate(&interp_options(f))
}

fn interp_files() -> Vec<Fixture> {
    let files: Vec<Fixture> = common::fixtures_with_prefix("ops", "interpolate_")
        .iter()
        .map(|p| Fixture::load(p))
        .collect();
    assert_eq!(files.len(), 19);
    files
}

#[test]
fn interpolate_matches_pytorch_in_f64_and_f32() {
    let mut modes = std::collections::BTreeSet::new();
    for f in interp_files() {
        assert_eq!(f.meta("op"), "interpolate");
        modes.insert(f.meta("mode").to_string());
        f.check_single_input(interp::<f64>);
        f.check_single_input(interp::<f32>);
    }
    assert_eq!(modes.len(), 6, "{modes:?}");
}

#[test]
fn interpolate_passes_gradcheck_and_its_gradient_is_differentiable() {
    for f in interp_files() {
        let x = f.t("x");
        gradcheck(
            |v| interp(&f, &v[0]),
            std::slice::from_ref(&x),
            1e-6,
            1e-6,
            1e-6,
        )
        .unwrap_or_else(|e| panic!("{}: {e}", f.name));
        // Double backward: the gradient taken with `create_graph` is
        // `A^T gout` for the op's matrix `A`; differentiating `v . A^T gout`
        // in `gout` must give `A v`, the forward map again.
        let xt = x.detach().requires_grad();
        let gout = f.t("gout").requires_grad();
        let g = interp(&f, &xt).backward_with(&gout, true);
        let g = g.get(&xt).unwrap().clone();
        let v = Tensor::<f64>::normal(x.shape(), 0.0, 1.0, &mut Rng::new(4));
        let second = g.mul(&v).sum().backward();
        common::assert_close(
            &format!("{} (double backward)", f.name),
            second.get(&gout).unwrap(),
            &interp(&f, &v),
            1e-12,
            1e-12,
        );
    }
}

#[test]
fn interpolate_option_errors_name_the_op() {
    let x = Tensor::<f32>::zeros(&[1, 1, 4, 4]);
    let err = |o: Interpolate| {
        let x = x.clone();
        let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || x.interpolate(&o)))
            .unwrap_err();
        e.downcast_ref::<String>().cloned().unwrap_or_default()
    };
    assert!(
        err(Interpolate::size(&[3]).mode(InterpolateMode::Linear)).contains("needs a 3-d input")
    );
    assert!(err(Interpolate::size(&[3]).align_corners(true)).contains("align_corners"));
    assert!(err(Interpolate::size(&[3, 3, 3])).contains("3 values of size"));
    let both = Interpolate {
        scale_factor: Some(vec![2.0]),
        ..Interpolate::size(&[3])
    };
    assert!(err(both).contains("exactly one"));
}

/// Values and input gradient of `f` on an input `[2, 8, 96, 96]` (147K
/// elements, upsampled to 576K: both passes run in parallel chunks).
fn run_big(f: impl Fn(&Tensor<f32>) -> Tensor<f32>) -> (Vec<f32>, Vec<f32>) {
    let x = Tensor::<f32>::normal(&[2, 8, 96, 96], 0.0, 1.0, &mut Rng::new(7)).requires_grad();
    let y = f(&x);
    let gout = Tensor::<f32>::normal(y.shape(), 0.0, 1.0, &mut Rng::new(8));
    let g = y.backward_with(&gout, false);
    (y.to_vec(), g.get(&x).unwrap().to_vec())
}

#[test]
fn interpolate_and_sort_are_bit_identical_for_1_and_2_threads() {
    let _threads = common::lock_thread_count();
    let ops: Vec<UnaryOp> = vec![
        Box::new(|x| {
            x.interpolate(&Interpolate::scale_factor(2.0).mode(InterpolateMode::Bilinear))
        }),
        Box::new(|x| {
            x.interpolate(
                &Interpolate::size(&[150, 131])
                    .mode(InterpolateMode::Bicubic)
                    .align_corners(true),
            )
        }),
        Box::new(|x| x.interpolate(&Interpolate::scale_factor(1.7))),
        Box::new(|x| x.sort(-1, true).0),
        Box::new(|x| x.topk(5, 2, true, true).0),
    ];
    for (k, op) in ops.iter().enumerate() {
        forge::runtime::set_num_threads(1);
        let one = run_big(op);
        forge::runtime::set_num_threads(2);
        let before = forge::runtime::pool_dispatches();
        let two = run_big(op);
        if k < 3 {
            assert!(
                forge::runtime::pool_dispatches() > before,
                "op {k}: no parallel dispatch"
            );
        }
        assert!(one == two, "op {k}: 1 and 2 threads differ");
    }
}

/// `(values, indices)` of a sort/topk fixture's op, options from metadata.
fn sort_op<E: Float>(f: &Fixture, x: &Tensor<E>) -> (Tensor<E>, Tensor<i64>) {
    let dim: isize = f.parse("dim");
    match f.meta("op") {
        "sort" => x.sort(dim, f.flag("descending")),
        "topk" => x.topk(f.parse("k"), dim, f.flag("largest"), f.flag("sorted")),
        other => panic!("{}: op {other}", f.name),
    }
}

fn sort_files() -> Vec<Fixture> {
    let mut files = common::fixtures_with_prefix("ops", "sort_");
    files.extend(common::fixtures_with_prefix("ops", "topk_"));
    assert_eq!(files.len(), 8);
    files.iter().map(|p| Fixture::load(p)).collect()
}

/// The fixture's `out`, `indices` and `gout` in forge's order: the same
/// for a sorted result; for `topk(sorted=false)` (PyTorch's order is
/// unspecified, forge's is increasing index) reordered by index.
fn expected(f: &Fixture) -> (Tensor<f64>, Tensor<i64>, Tensor<f64>) {
    let (out, idx, gout) = (f.t("out"), f.i("indices"), f.t("gout"));
    if f.meta("op") == "sort" || f.flag("sorted") {
        return (out, idx, gout);
    }
    let dim: isize = f.parse("dim");
    let p = idx.cast::<f64>().argsort(dim, false);
    let idx = Tensor::from_vec(
        idx.cast::<f64>()
            .gather(dim, &p)
            .to_vec()
            .iter()
            .map(|&v| v as i64)
            .collect(),
        idx.shape(),
    );
    (out.gather(dim, &p), idx, gout.gather(dim, &p))
}

fn check_sort<E: Float>(f: &Fixture) {
    let (out, idx, gout) = expected(f);
    let x = f.input::<E>("x").requires_grad();
    let (v, i) = sort_op(f, &x);
    assert_eq!(i.to_vec(), idx.to_vec(), "{}: indices", f.name);
    let (rtol, atol) = f.tol_for::<E>();
    common::assert_close(&f.name, &v.cast::<f64>(), &out, rtol, atol);
    let g = v.backward_with(&gout.cast::<E>(), false);
    common::assert_close(
        &format!("{}: grad_x", f.name),
        &g.get(&x).unwrap().cast::<f64>(),
        &f.t("grad_x"),
        rtol,
        atol,
    );
}

#[test]
fn sort_and_topk_match_pytorch_in_f64_and_f32() {
    for f in sort_files() {
        check_sort::<f64>(&f);
        check_sort::<f32>(&f);
        if f.meta("op") == "sort" {
            let dim: isize = f.parse("dim");
            let i = f.t("x").argsort(dim, f.flag("descending"));
            assert_eq!(i.to_vec(), f.i("indices").to_vec(), "{}: argsort", f.name);
        }
    }
}

#[test]
fn sort_and_topk_pass_gradcheck() {
    for f in sort_files() {
        let mut vals = f.t("x").to_vec();
        vals.sort_by(f64::total_cmp);
        if vals.windows(2).any(|w| w[0] == w[1]) {
            // Ties: a difference step reorders them. Their gradient is
            // checked against PyTorch's in the parity test.
            continue;
        }
        gradcheck(|v| sort_op(&f, &v[0]).0, &[f.t("x")], 1e-6, 1e-6, 1e-6)
            .unwrap_or_else(|e| panic!("{}: {e}", f.name));
    }
}

#[test]
fn sort_is_stable_and_puts_nan_last_ascending_first_descending() {
    let nan = f64::NAN;
    let t = Tensor::<f64>::from_vec(vec![2.0, nan, 1.0, 2.0, -0.0, 0.0, nan], &[7]);
    let (v, i) = t.sort(0, false);
    assert_eq!(i.to_vec(), vec![4, 5, 2, 0, 3, 1, 6]);
    assert!(v.to_vec()[5].is_nan() && v.to_vec()[6].is_nan());
    assert_eq!(t.argsort(0, true).to_vec(), vec![1, 6, 0, 3, 2, 4, 5]);
    // topk ties: the lower index first.
    let t = Tensor::<f32>::from_vec(vec![1.0, 3.0, 3.0, 0.0, 3.0], &[5]);
    assert_eq!(t.topk(2, 0, true, true).1.to_vec(), vec![1, 2]);
    assert_eq!(t.topk(3, 0, false, true).1.to_vec(), vec![3, 0, 1]);
}

#[test]
fn upsample_layer_is_interpolate() {
    use forge::nn::Upsample;
    use forge::Forward;
    let x = Tensor::<f64>::normal(&[1, 2, 3, 4], 0.0, 1.0, &mut Rng::new(3));
    let up = Upsample::size(&[5, 7])
        .mode(InterpolateMode::Bicubic)
        .align_corners(false);
    let o = Interpolate::size(&[5, 7])
        .mode(InterpolateMode::Bicubic)
        .align_corners(false);
    assert_eq!(up.forward(x.clone()).to_vec(), x.interpolate(&o).to_vec());
}
