//! Parity of softmax, log_softmax and logsumexp with PyTorch (fixtures
//! `ops/softmax_*`, `ops/log_softmax_*`, `ops/reduce_logsumexp_*`; the
//! second-order fixture `autograd/hvp_softmax_entropy` is checked with the
//! other `hvp` files in `tests/autograd/autograd_hvp.rs`), and
//! finite-difference gradient checks in f64, first and second order.
//!
//! The parity files are checked in f64 and in f32 (`f32_rtol`/`f32_atol`).
//!
//! Tolerances: each fixture's own `rtol`/`atol` (1e-10 / 1e-12 in f64);
//! see tests/fixtures/README.md for how they were established.

use crate::common;
use crate::second_order;
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
    match f.meta("op") {
        "softmax" => x.softmax(d[0]),
        "log_softmax" => x.log_softmax(d[0]),
        "logsumexp" => x.logsumexp_dim(&d, f.meta("keepdim") == "true"),
        other => panic!("{}: unknown op {other}", f.name),
    }
}

fn files() -> Vec<String> {
    let mut v = common::fixtures_with_prefix("ops", "softmax_");
    v.extend(common::fixtures_with_prefix("ops", "log_softmax_"));
    v.extend(common::fixtures_with_prefix("ops", "reduce_logsumexp_"));
    v
}

#[test]
fn softmax_family_matches_pytorch() {
    let files = files();
    assert!(files.len() >= 10, "expected 3 + 3 + 4 fixtures");
    for file in files {
        let f = Fixture::load(&file);
        f.check_single_input(apply::<f64>);
        f.check_single_input(apply::<f32>);
    }
}

#[test]
fn softmax_family_passes_gradcheck() {
    for file in files() {
        let f = Fixture::load(&file);
        gradcheck(|v| apply(&f, &v[0]), &[f.t("x")], 1e-6, 1e-6, 1e-6)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
    }
}

/// Second order through each rule: the gradient computed with
/// `create_graph` is differentiated again and checked against finite
/// differences of the gradient.
#[test]
fn softmax_family_second_order() {
    for file in files() {
        let f = Fixture::load(&file);
        second_order::check(&file, |x| apply(&f, x), &f.t("x"), 1e-6);
    }
}

#[test]
fn softmax_is_stable_for_huge_logits() {
    let x = Tensor::<f32>::from_vec(vec![1e4, 0.0, -1e4, f32::NEG_INFINITY], &[4]);
    assert_eq!(x.softmax(0).to_vec(), vec![1.0, 0.0, 0.0, 0.0]);
    let l = x.log_softmax(0).to_vec();
    assert_eq!(l[0], 0.0);
    assert_eq!(l[1], -1e4);
    assert_eq!(l[3], f32::NEG_INFINITY);
    assert_eq!(x.logsumexp().item(), 1e4);
}

#[test]
#[should_panic(expected = "softmax: axis 2 is out of range for a tensor of rank 2")]
fn softmax_rejects_bad_axis() {
    Tensor::<f32>::zeros(&[2, 3]).softmax(2);
}
