//! Second-order parity with PyTorch (fixtures `autograd/hvp_*`): the value
//! `f`, the gradient `g = df/dx` and the Hessian-vector product
//! `hvp = d(g . v)/dx`, where `g` comes from `backward_with_graph` and is
//! differentiated again.
//!
//! Tolerances: each fixture's own `rtol`/`atol` (1e-10 / 1e-12, f64), and
//! `f32_rtol`/`f32_atol` for the same computation in f32.

use crate::common;
use common::Fixture;
use forge::{Float, Tensor};

/// Checks `f`, `g` and `hvp` (and `hvp_mixed_<w>` for each extra tracked
/// input `w`) for a loss of the tracked inputs `wrt` and `others`.
fn check_hvp<E: Float>(
    f: &Fixture,
    wrt: &Tensor<E>,
    others: &[(&str, &Tensor<E>)],
    loss: &Tensor<E>,
) {
    f.check_as("f", loss);
    let grads = loss.backward_with_graph();
    let g = grads.get(wrt).expect("gradient wrt x");
    assert!(
        g.is_tracked(),
        "backward_with_graph must return tracked gradients"
    );
    f.check_as("g", g);
    let gv = g.mul(&f.input::<E>("v")).sum();
    let second = gv.backward();
    f.check_as("hvp", second.get(wrt).unwrap());
    for (name, w) in others {
        f.check_as(&format!("hvp_mixed_{name}"), second.get(w).unwrap());
    }
}

/// The functions the `hvp` fixtures name in their `function` metadata.
const MLP_W1: &str = "f(W1)=mse_loss(tanh(X@W1^T+b1)@W2^T+b2, Y) (mean)";
const TANH_MATMUL: &str = "f(x)=sum(tanh(x@W)^2)";
const SOFTMAX_ENTROPY: &str = "f(x)=sum(softmax(x,-1)*log_softmax(x,-1))";

/// Every `autograd/hvp_*` fixture, each in f64 and f32: the function comes
/// from the file's `function` metadata and the shapes from its tensors, so
/// any file of these functions passes unchanged.
#[test]
fn every_hvp_fixture_matches_pytorch() {
    let files = common::fixtures_for_ops("autograd", "hvp", &["hvp"]);
    assert!(files.len() >= 3, "hvp fixtures: {files:?}");
    for rel in files {
        let f = Fixture::load(&rel);
        match f.meta("function") {
            MLP_W1 => {
                assert_eq!(f.meta("wrt"), "W1", "{rel}");
                mlp_w1::<f64>(&f);
                mlp_w1::<f32>(&f);
            }
            TANH_MATMUL => {
                assert_eq!(f.meta("wrt"), "x", "{rel}");
                tanh_matmul::<f64>(&f);
                tanh_matmul::<f32>(&f);
            }
            SOFTMAX_ENTROPY => {
                assert_eq!(f.meta("wrt"), "x", "{rel}");
                softmax_entropy::<f64>(&f);
                softmax_entropy::<f32>(&f);
            }
            other => panic!("{rel}: no forge version of the hvp function {other:?}"),
        }
    }
}

fn mlp_w1<E: Float>(f: &Fixture) {
    let t = |n: &str| f.input::<E>(n);
    let w1 = t("W1").requires_grad();
    let h = t("X").matmul_t(&w1).add(&t("b1")).tanh();
    let pred = h.matmul_t(&t("W2")).add(&t("b2"));
    let loss = pred.sub(&t("Y")).square().mean();
    check_hvp(f, &w1, &[], &loss);
}

fn tanh_matmul<E: Float>(f: &Fixture) {
    let x = f.input::<E>("x").requires_grad();
    let w = f.input::<E>("W").requires_grad();
    let loss = x.matmul(&w).tanh().square().sum();
    check_hvp(f, &x, &[("W", &w)], &loss);
}

fn softmax_entropy<E: Float>(f: &Fixture) {
    let x = f.input::<E>("x").requires_grad();
    let loss = x.softmax(-1).mul(&x.log_softmax(-1)).sum();
    check_hvp(f, &x, &[], &loss);
}

/// The same MLP with every parameter tracked: the extra gradients do not
/// change the ones the fixture checks.
#[test]
fn hvp_mlp_w1_with_all_parameters_tracked() {
    for rel in common::fixtures_for_ops("autograd", "hvp", &["hvp"]) {
        let f = Fixture::load(&rel);
        if f.meta("function") != MLP_W1 {
            continue;
        }
        let p: Vec<Tensor<f64>> = ["W1", "b1", "W2", "b2"]
            .iter()
            .map(|n| f.t(n).requires_grad())
            .collect();
        let h = f.t("X").matmul_t(&p[0]).add(&p[1]).tanh();
        let loss = (h.matmul_t(&p[2]).add(&p[3]) - f.t("Y")).square().mean();
        check_hvp(&f, &p[0], &[], &loss);
    }
}
