//! Parity of the unary ops with PyTorch (fixtures `ops/unary_*`) in f64
//! and in f32, and a finite-difference gradient check of each in f64.
//!
//! Tolerances: each fixture's own `rtol`/`atol` (1e-10 / 1e-12 in f64) and
//! `f32_rtol`/`f32_atol` in f32; see tests/fixtures/README.md for how they
//! were established.

use crate::common;
use common::Fixture;
use forge::{gradcheck, Float, Tensor};

fn apply<E: Float>(f: &Fixture, x: &Tensor<E>) -> Tensor<E> {
    let m = |k: &str| f.meta_f64(k);
    match f.meta("op") {
        "neg" => x.neg(),
        "exp" => x.exp(),
        "log" => x.log(),
        "log1p" => x.log1p(),
        "sqrt" => x.sqrt(),
        "rsqrt" => x.rsqrt(),
        "abs" => x.abs(),
        "sin" => x.sin(),
        "cos" => x.cos(),
        "tanh" => x.tanh(),
        "tan" => x.tan(),
        "erf" => x.erf(),
        "mish" => x.mish(),
        "sigmoid" => x.sigmoid(),
        "relu" => x.relu(),
        "leaky_relu" => x.leaky_relu(m("negative_slope")),
        "elu" => x.elu(m("alpha")),
        "gelu" if f.meta("approximate") == "tanh" => x.gelu_tanh(),
        "gelu" => x.gelu(),
        "silu" => x.silu(),
        "softplus" => x.softplus(m("beta"), m("threshold")),
        "square" => x.square(),
        "reciprocal" => x.reciprocal(),
        "pow_scalar" => x.powf(m("exponent")),
        "clamp" => x.clamp(Some(m("min")), Some(m("max"))),
        other => panic!("{}: unknown op {other}", f.name),
    }
}

#[test]
fn unary_ops_match_pytorch() {
    let files = common::fixtures_with_prefix("ops", "unary_");
    assert!(files.len() >= 29, "{files:?}");
    for file in files {
        let f = Fixture::load(&file);
        f.check_single_input(apply::<f64>);
        f.check_single_input(apply::<f32>);
    }
}

#[test]
fn unary_ops_pass_gradcheck() {
    for file in common::fixtures_with_prefix("ops", "unary_") {
        let f = Fixture::load(&file);
        let x = f.t("x");
        gradcheck(|v| apply::<f64>(&f, &v[0]), &[x], 1e-6, 1e-6, 1e-6)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
    }
}
