//! `conv_transpose1d` / `nn::ConvTranspose1d` and `bilinear` /
//! `nn::Bilinear` against PyTorch fixtures (`nn/conv_transpose1d_*`,
//! `nn/bilinear_*`, written by tests/fixtures/gen/gen_ops3.py) in f64 and
//! f32, an f64 gradient check and a second-order check of each.
//!
//! Every option (stride, padding, output_padding, groups, dilation, bias)
//! is read from the fixture's metadata. Tolerances: each fixture's own
//! `rtol`/`atol` (1e-10 / 1e-12 in f64) and `f32_rtol`/`f32_atol` in f32.
//! gradcheck: central differences with eps 1e-6 and atol = rtol = 1e-6
//! (the project's standard; both ops are multilinear in their inputs, so
//! the differences are exact to rounding).

use crate::common;
use common::Fixture;
use forge::nn::functional::bilinear;
use forge::nn::{Bilinear, ConvTranspose1d, Forward};
use forge::{gradcheck, Float, Tensor};

fn files() -> Vec<Fixture> {
    let mut all = Vec::new();
    for (prefix, min) in [("conv_transpose1d_", 4), ("bilinear_", 3)] {
        let fs = common::fixtures_with_prefix("nn", prefix);
        assert!(fs.len() >= min, "{prefix}: {} files", fs.len());
        all.extend(fs.iter().map(|p| Fixture::load(p)));
    }
    all
}

/// The fixture's op on its inputs, in the order of `grads` (every input).
fn run<E: Float>(f: &Fixture, v: &[Tensor<E>]) -> Tensor<E> {
    let bias = f.flag("bias").then(|| v[v.len() - 1].clone());
    match f.meta("op") {
        "conv_transpose1d" => v[0].conv_transpose1d(
            &v[1],
            bias.as_ref(),
            f.parse("stride"),
            f.parse("padding"),
            f.parse("output_padding"),
            f.parse("groups"),
            f.parse("dilation"),
        ),
        "bilinear" => bilinear(&v[0], &v[1], &v[2], bias.as_ref()),
        other => panic!("{}: op {other}", f.name),
    }
}

/// The same op through its layer, from the fixture's weights.
fn run_layer(f: &Fixture, v: &[Tensor<f64>]) -> Tensor<f64> {
    let bias = f.flag("bias").then(|| v[v.len() - 1].clone());
    match f.meta("op") {
        "conv_transpose1d" => {
            let mut l = ConvTranspose1d::from_weights(v[1].clone(), bias).unwrap();
            l.groups = f.parse("groups");
            l.stride(f.parse("stride"))
                .padding(f.parse("padding"))
                .output_padding(f.parse("output_padding"))
                .dilation(f.parse("dilation"))
                .forward(v[0].clone())
        }
        _ => Bilinear {
            weight: v[2].clone(),
            bias,
        }
        .forward((v[0].clone(), v[1].clone())),
    }
}

fn check<E: Float>(f: &Fixture) {
    let names = f.meta_list("grads");
    let xs: Vec<Tensor<E>> = names
        .iter()
        .map(|n| f.input::<E>(n).requires_grad())
        .collect();
    let y = run(f, &xs);
    f.check_as("out", &y);
    let g = y.backward_with(&f.input::<E>("gout"), false);
    for (n, x) in names.iter().zip(&xs) {
        f.check_as(&format!("grad_{n}"), g.get(x).unwrap());
    }
}

#[test]
fn conv_transpose1d_and_bilinear_match_pytorch_in_f64_and_f32() {
    for f in files() {
        check::<f64>(&f);
        check::<f32>(&f);
        let xs: Vec<Tensor<f64>> = f.meta_list("grads").iter().map(|n| f.t(n)).collect();
        f.check("out", &run_layer(&f, &xs));
    }
}

#[test]
fn conv_transpose1d_and_bilinear_pass_gradcheck_and_second_order_checks() {
    for f in files() {
        let xs: Vec<Tensor<f64>> = f.meta_list("grads").iter().map(|n| f.t(n)).collect();
        gradcheck(|v| run(&f, v), &xs, 1e-6, 1e-6, 1e-6)
            .unwrap_or_else(|e| panic!("{}: {e}", f.name));
        let gout = f.t("gout");
        for k in 0..xs.len() {
            let scalar = |x: &Tensor<f64>| {
                let mut v = xs.clone();
                v[k] = x.clone();
                let y = run(&f, &v);
                y.mul(&gout).sum().mul(&y.sum())
            };
            common::assert_hvp(
                scalar,
                &xs[k],
                31 + k as u64,
                &format!("{} (input {k})", f.name),
            );
        }
    }
}
