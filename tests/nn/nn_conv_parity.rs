//! Parity of `conv1d`, `conv2d` and `conv_transpose2d` with PyTorch
//! (every fixture `nn/conv*`, in f64 and f32), their gradient checks in f64, second-order
//! gradients, shape-error messages and thread-count independence.
//!
//! Tolerances: each fixture's own `rtol`/`atol` (1e-10 / 1e-12 in f64);
//! see tests/fixtures/README.md for how they were established.

use crate::common;
use common::Fixture;
use forge::{gradcheck, Float, Rng, Tensor};

fn apply<E: Float>(f: &Fixture, x: &Tensor<E>, w: &Tensor<E>, b: Option<&Tensor<E>>) -> Tensor<E> {
    let groups: usize = f.meta("groups").parse().unwrap();
    let (s, p, d) = (
        f.meta_pair("stride"),
        f.meta_pair("padding"),
        f.meta_pair("dilation"),
    );
    match f.meta("op") {
        "conv1d" => x.conv1d(w, b, s[0], p[0], d[0], groups),
        "conv2d" => x.conv2d(w, b, s, p, d, groups),
        "conv_transpose2d" => {
            x.conv_transpose2d(w, b, s, p, f.meta_pair("output_padding"), groups, d)
        }
        other => panic!("{}: unknown op {other}", f.name),
    }
}

/// The file's case in element type `E`, against the tolerances for `E`.
fn check_file<E: Float>(f: &Fixture) {
    let x = f.input::<E>("x").requires_grad();
    let w = f.input::<E>("weight").requires_grad();
    let b = f.has("bias").then(|| f.input::<E>("bias").requires_grad());
    let y = apply(f, &x, &w, b.as_ref());
    f.check_as("out", &y);
    let g = y.backward_with(&f.input::<E>("gout"), false);
    f.check_as("grad_x", g.get(&x).unwrap());
    f.check_as("grad_weight", g.get(&w).unwrap());
    if let Some(b) = &b {
        f.check_as("grad_bias", g.get(b).unwrap());
    }
}

#[test]
fn every_conv_fixture_matches_pytorch() {
    let files = common::fixtures_for_ops("nn", "conv", &["conv1d", "conv2d", "conv_transpose2d"]);
    assert!(files.len() >= 3, "conv fixtures: {files:?}");
    for file in files {
        let f = Fixture::load(&file);
        check_file::<f32>(&f);
        let x = f.t("x").requires_grad();
        let w = f.t("weight").requires_grad();
        let b = f.has("bias").then(|| f.t("bias").requires_grad());
        let y = apply(&f, &x, &w, b.as_ref());
        f.check("out", &y);
        let g = y.backward_with(&f.t("gout"), false);
        f.check("grad_x", g.get(&x).unwrap());
        f.check("grad_weight", g.get(&w).unwrap());
        if let Some(b) = &b {
            f.check("grad_bias", g.get(b).unwrap());
        }
        let grads = f.meta_list("grads");
        assert_eq!(
            grads.len(),
            2 + usize::from(b.is_some()),
            "{file}: {grads:?}"
        );
    }
}

fn rand(shape: &[usize], seed: u64) -> Tensor<f64> {
    Tensor::normal(shape, 0.0, 1.0, &mut Rng::new(seed))
}

fn check(name: &str, f: impl Fn(&[Tensor<f64>]) -> Tensor<f64>, inputs: &[Tensor<f64>]) {
    gradcheck(f, inputs, 1e-6, 1e-6, 1e-6).unwrap_or_else(|e| panic!("{name}: {e}"));
}

#[test]
fn conv2d_passes_gradcheck() {
    let (x, w, b) = (
        rand(&[2, 4, 5, 6], 1),
        rand(&[4, 2, 3, 2], 2),
        rand(&[4], 3),
    );
    check(
        "conv2d",
        |v| v[0].conv2d(&v[1], Some(&v[2]), [2, 1], [1, 1], [1, 2], 2),
        &[x, w, b],
    );
}

#[test]
fn conv1d_passes_gradcheck() {
    let (x, w, b) = (rand(&[2, 3, 9], 4), rand(&[2, 3, 3], 5), rand(&[2], 6));
    check(
        "conv1d",
        |v| v[0].conv1d(&v[1], Some(&v[2]), 2, 1, 2, 1),
        &[x, w, b],
    );
}

#[test]
fn conv_transpose2d_passes_gradcheck() {
    let (x, w, b) = (
        rand(&[2, 4, 3, 3], 7),
        rand(&[4, 1, 3, 2], 8),
        rand(&[2], 9),
    );
    check(
        "conv_transpose2d",
        |v| v[0].conv_transpose2d(&v[1], Some(&v[2]), [2, 1], [1, 0], [1, 0], 2, [1, 2]),
        &[x, w, b],
    );
}

/// Finite-difference check of a scalar `f` whose value is built from
/// first-order gradients (`backward_with(.., true)`), so its gradient is a
/// second derivative. `gradcheck` cannot be used: it evaluates `f` under
/// `no_grad`, where no first-order gradient exists.
fn check_second_order(
    name: &str,
    f: impl Fn(&[Tensor<f64>]) -> Tensor<f64>,
    inputs: &[Tensor<f64>],
) {
    let tracked: Vec<Tensor<f64>> = inputs.iter().map(|t| t.requires_grad()).collect();
    let grads = f(&tracked).backward();
    let eps = 1e-6;
    for (i, x) in inputs.iter().enumerate() {
        let analytic = grads.get(&tracked[i]).unwrap().to_vec();
        for j in 0..x.numel() {
            let at = |delta: f64| {
                let mut xs: Vec<Tensor<f64>> = inputs.iter().map(|t| t.requires_grad()).collect();
                let mut v = x.to_vec();
                v[j] += delta;
                xs[i] = Tensor::from_vec(v, x.shape()).requires_grad();
                f(&xs).item()
            };
            let numeric = (at(eps) - at(-eps)) / (2.0 * eps);
            let err = (analytic[j] - numeric).abs();
            assert!(
                err <= 1e-6 + 1e-6 * numeric.abs(),
                "{name}: input {i}, element {j}: analytic {} vs numeric {numeric}",
                analytic[j]
            );
        }
    }
}

/// Gradients of gradients: the gradient of `sum(grad_x^2) + sum(grad_w^2)`
/// (all three conv primitives appear in it) checked by finite differences.
#[test]
fn conv2d_second_order_passes_gradcheck() {
    let (x, w, u) = (
        rand(&[2, 2, 5, 4], 10),
        rand(&[2, 1, 3, 3], 11),
        rand(&[2, 2, 3, 2], 12),
    );
    check_second_order(
        "conv2d double backward",
        |v| {
            let y = v[0].conv2d(&v[1], None, [2, 1], [1, 0], [1, 1], 2);
            let g = y.backward_with(&u, true);
            let (gx, gw) = (g.get(&v[0]).unwrap(), g.get(&v[1]).unwrap());
            gx.square().sum().add(&gw.square().sum())
        },
        &[x, w],
    );
}

#[test]
fn conv_transpose2d_second_order_passes_gradcheck() {
    let (x, w, u) = (
        rand(&[1, 2, 3, 3], 13),
        rand(&[2, 2, 2, 2], 14),
        rand(&[1, 2, 6, 6], 15),
    );
    check_second_order(
        "conv_transpose2d double backward",
        |v| {
            let y = v[0].conv_transpose2d(&v[1], None, [2, 2], [0, 0], [0, 0], 1, [1, 1]);
            let g = y.backward_with(&u, true);
            let (gx, gw) = (g.get(&v[0]).unwrap(), g.get(&v[1]).unwrap());
            gx.square().sum().add(&gw.mul(&v[1]).sum())
        },
        &[x, w],
    );
}

/// Bit-identical for 1 and 2 threads, on a 12x12 plane (dense im2col) and
/// on the tiny planes of ResNet-18's last stages, large enough for the
/// gemms to split across threads: 2x2 (one tap class per position), 2x2
/// with stride 2 and 1x1 (the taps that meet the image only).
#[test]
fn conv2d_is_identical_for_one_and_two_threads() {
    let _threads = crate::common::lock_thread_count();
    for (x, w, s) in [
        ([9, 3, 12, 12], [8, 3, 3, 3], 1),
        ([16, 128, 2, 2], [128, 128, 3, 3], 1),
        ([16, 128, 2, 2], [96, 128, 3, 3], 2),
        ([16, 128, 1, 1], [128, 128, 3, 3], 1),
    ] {
        let x = Tensor::<f32>::normal(&x, 0.0, 1.0, &mut Rng::new(1)).requires_grad();
        let w = Tensor::<f32>::normal(&w, 0.0, 1.0, &mut Rng::new(2)).requires_grad();
        let run = |threads| {
            forge::runtime::set_num_threads(threads);
            let y = x.conv2d(&w, None, [s, s], [1, 1], [1, 1], 1);
            let g = y.square().sum().backward();
            (
                y.to_vec(),
                g.get(&x).unwrap().to_vec(),
                g.get(&w).unwrap().to_vec(),
            )
        };
        let one = run(1);
        let two = run(2);
        forge::runtime::set_num_threads(2);
        assert!(one == two, "results differ between 1 and 2 threads");
    }
}

#[test]
#[should_panic(
    expected = "conv2d: input [2, 3, 8, 8] has 3 channels, weight [16, 4, 3, 3] expects 4 (groups 1)"
)]
fn conv2d_channel_mismatch_names_shapes() {
    let x = Tensor::<f32>::zeros(&[2, 3, 8, 8]);
    x.conv2d(
        &Tensor::zeros(&[16, 4, 3, 3]),
        None,
        [1, 1],
        [0, 0],
        [1, 1],
        1,
    );
}

#[test]
#[should_panic(expected = "conv1d: input [2, 8] must be 3-d [N, C, L]")]
fn conv1d_rank_error_names_shape() {
    let x = Tensor::<f32>::zeros(&[2, 8]);
    x.conv1d(&Tensor::zeros(&[1, 2, 3]), None, 1, 0, 1, 1);
}

#[test]
#[should_panic(
    expected = "conv_transpose2d: input [1, 3, 4, 4] has 3 channels, weight [2, 5, 3, 3] expects 2"
)]
fn conv_transpose2d_channel_mismatch_names_shapes() {
    let x = Tensor::<f32>::zeros(&[1, 3, 4, 4]);
    x.conv_transpose2d(
        &Tensor::zeros(&[2, 5, 3, 3]),
        None,
        [1, 1],
        [0, 0],
        [0, 0],
        1,
        [1, 1],
    );
}

/// The bias gradient of `sum(y^2) / 2` is the channel sum of `y`, which
/// depends on every input: its own gradient goes through the dedicated
/// bias-gradient op's rule.
#[test]
fn conv2d_bias_gradient_is_differentiable() {
    let (x, w, b) = (
        rand(&[2, 2, 4, 3], 16),
        rand(&[3, 2, 2, 2], 17),
        rand(&[3], 18),
    );
    check_second_order(
        "conv2d bias double backward",
        |v| {
            let y = v[0].conv2d(&v[1], Some(&v[2]), [1, 1], [1, 0], [1, 1], 1);
            let g = y.square().sum().mul_scalar(0.5).backward_with_graph();
            g.get(&v[2]).unwrap().square().sum()
        },
        &[x, w, b],
    );
}
