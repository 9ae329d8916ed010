//! `embedding_bag` / `nn::EmbeddingBag` (sum, mean, max; offsets,
//! `include_last_offset`, `padding_idx`, `per_sample_weights`) against
//! PyTorch fixtures (`nn/embedding_bag_*`, written by
//! tests/fixtures/gen/gen_ops3.py) in f64 and f32, an f64 gradient check
//! and a second-order check.
//!
//! Every option is read from the fixture's metadata. Tolerances: each
//! fixture's own `rtol`/`atol` (1e-10 / 1e-12 in f64) and
//! `f32_rtol`/`f32_atol` in f32. gradcheck: central differences with eps
//! 1e-6 and atol = rtol = 1e-6 (the project's standard; the op is linear in
//! the weight away from ties of a max, and the max fixtures' bags hold
//! distinct rows).

use crate::common;
use common::Fixture;
use forge::nn::functional::{embedding_bag, BagMode};
use forge::nn::EmbeddingBag;
use forge::{gradcheck, Float, Tensor};

fn files() -> Vec<Fixture> {
    let fs = common::fixtures_with_prefix("nn", "embedding_bag_");
    assert!(fs.len() >= 6, "{} files", fs.len());
    fs.iter().map(|p| Fixture::load(p)).collect()
}

fn padding_idx(f: &Fixture) -> Option<usize> {
    match f.meta("padding_idx") {
        "none" => None,
        _ => Some(f.parse("padding_idx")),
    }
}

fn mode(f: &Fixture) -> BagMode {
    BagMode::from_name(f.meta("mode")).unwrap_or_else(|| panic!("{}: mode", f.name))
}

/// The op on `v = [weight, per_sample_weights?]`.
fn run<E: Float>(f: &Fixture, v: &[Tensor<E>]) -> Tensor<E> {
    let offsets = f.flag("offsets").then(|| f.i("offsets"));
    embedding_bag(
        &f.i("input"),
        &v[0],
        offsets.as_ref(),
        mode(f),
        v.get(1),
        f.flag("include_last_offset"),
        padding_idx(f),
    )
}

#[test]
fn embedding_bag_matches_pytorch_in_f64_and_f32() {
    for f in files() {
        for_type::<f64>(&f);
        for_type::<f32>(&f);
        // The layer gives the same bags.
        let layer = EmbeddingBag {
            weight: f.t("weight"),
            mode: mode(&f),
            padding_idx: padding_idx(&f),
            include_last_offset: f.flag("include_last_offset"),
        };
        let offsets = f.flag("offsets").then(|| f.i("offsets"));
        let psw = f
            .has("per_sample_weights")
            .then(|| f.t("per_sample_weights"));
        f.check(
            "out",
            &layer.bags(&f.i("input"), offsets.as_ref(), psw.as_ref()),
        );
    }
}

fn for_type<E: Float>(f: &Fixture) {
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
fn embedding_bag_passes_gradcheck_and_second_order_checks() {
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
                41 + k as u64,
                &format!("{} (input {k})", f.name),
            );
        }
    }
}
