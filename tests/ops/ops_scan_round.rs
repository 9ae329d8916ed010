//! `cumsum`, `cumprod`, `prod`, `flip`, `roll`, `repeat_interleave`,
//! `unbind`, the rounding functions and `nan_to_num` against PyTorch
//! fixtures (written by tests/fixtures/gen/gen_ops2.py) in f64 and f32, an
//! f64 gradient check of each, double backward of the ops whose rules
//! have a separate `create_graph` branch (`cumprod`), and 1- vs 2-thread
//! bit identity of the parallel scan.
//!
//! Every option is read from the fixture's metadata. Tolerances: each
//! fixture's own `rtol`/`atol` (1e-10 / 1e-12 in f64) and
//! `f32_rtol`/`f32_atol` in f32 (tests/fixtures/README.md); gradcheck with
//! eps 1e-6 and atol = rtol = 1e-6 (the project's standard).

use crate::common;
use common::Fixture;
use forge::{gradcheck, Float, Rng, Tensor};

/// The op of a single-input fixture, options from its metadata.
fn apply<E: Float>(f: &Fixture, x: &Tensor<E>) -> Tensor<E> {
    let opt_dim = |k: &str| match f.meta(k) {
        "none" => None,
        v => Some(v.parse::<isize>().unwrap()),
    };
    let isizes =
        |k: &str| -> Vec<isize> { f.meta_list(k).iter().map(|v| v.parse().unwrap()).collect() };
    let opt_f = |k: &str| match f.meta(k) {
        "none" => None,
        v => Some(v.parse::<f64>().unwrap()),
    };
    match f.meta("op") {
        "cumsum" => x.cumsum(f.parse("dim")),
        "cumprod" => x.cumprod(f.parse("dim")),
        "prod" => match opt_dim("dim") {
            None => x.prod(),
            Some(d) => x.prod_dim(d, f.flag("keepdim")),
        },
        "flip" => x.flip(&isizes("dims")),
        "roll" => {
            let dims = if f.meta("dims") == "none" {
                vec![]
            } else {
                isizes("dims")
            };
            x.roll(&isizes("shifts"), &dims)
        }
        "repeat_interleave" if f.has("repeats") => {
            let counts: Vec<usize> = f
                .i("repeats")
                .to_vec()
                .iter()
                .map(|&r| r as usize)
                .collect();
            x.repeat_interleave_counts(&counts, opt_dim("dim"))
        }
        "repeat_interleave" => x.repeat_interleave(f.parse("repeats"), opt_dim("dim")),
        "floor" => x.floor(),
        "ceil" => x.ceil(),
        "round" => x.round(),
        "trunc" => x.trunc(),
        "sign" => x.sign(),
        "nan_to_num" => x.nan_to_num(f.meta_f64("nan"), opt_f("posinf"), opt_f("neginf")),
        other => panic!("{}: op {other}", f.name),
    }
}

const PREFIXES: [&str; 7] = [
    "cumsum_",
    "cumprod_",
    "prod_",
    "flip_",
    "roll_",
    "repeat_interleave_",
    "rounding_",
];

fn single_input_files() -> Vec<Fixture> {
    let mut files = Vec::new();
    for p in PREFIXES.iter().chain(&["nan_to_num_"]) {
        files.extend(common::fixtures_with_prefix("ops", p));
    }
    assert!(files.len() >= 24, "{files:?}");
    files.iter().map(|p| Fixture::load(p)).collect()
}

#[test]
fn scans_products_layout_and_rounding_match_pytorch_in_f64_and_f32() {
    for f in single_input_files() {
        f.check_single_input(apply::<f64>);
        f.check_single_input(apply::<f32>);
    }
}

#[test]
fn scans_products_layout_and_rounding_pass_gradcheck() {
    for f in single_input_files() {
        if matches!(f.meta("op"), "nan_to_num" | "round" | "sign") {
            // Non-finite inputs, halves and 0 (jumps within eps): their
            // gradients (zero, or masked) are checked against PyTorch above
            // and by the test below.
            continue;
        }
        let x = f.t("x");
        gradcheck(|v| apply::<f64>(&f, &v[0]), &[x], 1e-6, 1e-6, 1e-6)
            .unwrap_or_else(|e| panic!("{}: {e}", f.name));
    }
}

#[test]
fn nan_to_num_passes_the_gradient_only_where_finite() {
    let x = Tensor::<f64>::from_vec(
        vec![1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -2.0],
        &[5],
    )
    .requires_grad();
    let y = x.nan_to_num(0.0, None, Some(-7.0));
    assert_eq!(y.to_vec(), vec![1.0, 0.0, f64::MAX, -7.0, -2.0]);
    let g = y.backward_with(
        &Tensor::from_vec(vec![3.0, 4.0, 5.0, 6.0, 7.0], &[5]),
        false,
    );
    assert_eq!(g.get(&x).unwrap().to_vec(), vec![3.0, 0.0, 0.0, 0.0, 7.0]);
}

/// Double backward: the gradient (with `create_graph`) as a function of
/// the input is checked by finite differences of the plain gradient.
#[test]
fn cumprod_and_prod_second_derivatives_match_differences_through_zeros() {
    for f in single_input_files() {
        // cumsum is linear: its gradient does not depend on the input.
        if !matches!(f.meta("op"), "cumprod" | "prod") {
            continue;
        }
        let gout = f.t("gout");
        let ff = |x: &Tensor<f64>| apply(&f, x).mul(&gout).sum();
        common::assert_hvp(ff, &f.t("x"), 5, &f.name);
    }
}

#[test]
fn unbind_matches_pytorch() {
    for file in common::fixtures_with_prefix("ops", "unbind_") {
        let f = Fixture::load(&file);
        let outs = f.meta_list("outputs");
        let x = f.t("x").requires_grad();
        let parts = x.unbind(f.parse("dim"));
        assert_eq!(parts.len(), outs.len());
        let mut loss = Tensor::<f64>::scalar(0.0);
        for (p, name) in parts.iter().zip(&outs) {
            f.check(name, p);
            loss = loss.add(&p.mul(&f.t(&format!("gout_{name}"))).sum());
        }
        f.check("grad_x", loss.backward().get(&x).unwrap());
    }
}

#[test]
fn classification_tests_match_pytorch() {
    let files = common::fixtures_with_prefix("ops", "classify_");
    assert!(!files.is_empty(), "no classify_* fixtures");
    let as_i64 = |t: Tensor<bool>| t.to_vec().iter().map(|&b| b as i64).collect::<Vec<_>>();
    for file in files {
        let f = Fixture::load(&file);
        let x = f.t("x");
        // Each file names the classifications it holds (`op`, `outputs`).
        for out in f.meta_list("outputs") {
            let want = f.i(&out).to_vec();
            let (got, got32) = match out.as_str() {
                "isnan" => (x.isnan(), x.cast::<f32>().isnan()),
                "isinf" => (x.isinf(), x.cast::<f32>().isinf()),
                "isfinite" => (x.isfinite(), x.cast::<f32>().isfinite()),
                other => panic!("{file}: unknown classification {other}"),
            };
            assert_eq!(as_i64(got), want, "{file}: {out}");
            assert_eq!(as_i64(got32), want, "{file}: {out} in f32");
        }
    }
}

#[test]
fn cumsum_and_cumprod_are_bit_identical_for_1_and_2_threads() {
    let _threads = common::lock_thread_count();
    let x = Tensor::<f32>::normal(&[64, 40, 48], 0.0, 1.0, &mut Rng::new(11))
        .mul_scalar(0.3)
        .add_scalar(1.0);
    let gout = Tensor::<f32>::normal(&[64, 40, 48], 0.0, 1.0, &mut Rng::new(12));
    for dim in [0isize, 1, 2] {
        let run = || {
            let xt = x.detach().requires_grad();
            let y = xt.cumsum(dim).add(&xt.cumprod(dim));
            let g = y.backward_with(&gout, false);
            (y.to_vec(), g.get(&xt).unwrap().to_vec())
        };
        forge::runtime::set_num_threads(1);
        let one = run();
        forge::runtime::set_num_threads(2);
        let before = forge::runtime::pool_dispatches();
        let two = run();
        if dim < 2 {
            assert!(
                forge::runtime::pool_dispatches() > before,
                "dim {dim}: no parallel dispatch"
            );
        }
        assert!(one == two, "dim {dim}: 1 and 2 threads differ");
    }
}
