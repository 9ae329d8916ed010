//! Parity of `matmul` with PyTorch (every fixture `ops/matmul_*`: 2-D,
//! batched, broadcast-batched, matrix-vector, vector-matrix, batched
//! matrix-vector, dot), outputs and both gradients; a finite-difference
//! gradient check of each in f64; and `matmul_t` against `matmul` with an
//! explicit transpose.
//!
//! Tolerances: each fixture's own `rtol`/`atol` (1e-10 / 1e-12 in f64),
//! and `f32_rtol`/`f32_atol` for the same files in f32.

mod common;
use common::Fixture;
use forge::{gradcheck, Float};

fn check_file<E: Float>(f: &Fixture) {
    let a = f.input::<E>("a").requires_grad();
    let b = f.input::<E>("b").requires_grad();
    let y = a.matmul(&b);
    f.check_as("out", &y);
    let g = y.backward_with(&f.input::<E>("gout"), false);
    f.check_as("grad_a", g.get(&a).unwrap());
    f.check_as("grad_b", g.get(&b).unwrap());
}

#[test]
fn matmul_matches_pytorch() {
    let files = common::fixtures_with_prefix("ops", "matmul_");
    assert_eq!(files.len(), 7, "expected the 7 matmul fixtures");
    for file in files {
        let f = Fixture::load(&file);
        check_file::<f64>(&f);
        check_file::<f32>(&f);
    }
}

#[test]
fn matmul_passes_gradcheck() {
    for file in common::fixtures_with_prefix("ops", "matmul_") {
        let f = Fixture::load(&file);
        gradcheck(
            |v| v[0].matmul(&v[1]),
            &[f.t("a"), f.t("b")],
            1e-6,
            1e-6,
            1e-6,
        )
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    }
}

#[test]
fn matmul_t_agrees_with_matmul_of_transpose() {
    for file in [
        "ops/matmul_2d.safetensors",
        "ops/matmul_batched.safetensors",
    ] {
        let f = Fixture::load(file);
        let (a, b) = (f.t("a"), f.t("b"));
        let bt = b.transpose(-2, -1);
        let gout = f.t("gout");
        let (a1, b1) = (a.requires_grad(), bt.requires_grad());
        let y1 = a1.matmul_t(&b1);
        f.check("out", &y1);
        let g = y1.backward_with(&gout, false);
        f.check("grad_a", g.get(&a1).unwrap());
        f.check("grad_b", &g.get(&b1).unwrap().transpose(-2, -1));
        gradcheck(|v| v[0].matmul_t(&v[1]), &[a, bt], 1e-6, 1e-6, 1e-6)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
    }
}
