//! Second-order parity with PyTorch (fixtures `autograd/hvp_*`): the value
//! `f`, the gradient `g = df/dx` and the Hessian-vector product
//! `hvp = d(g . v)/dx`, where `g` comes from `backward_with_graph` and is
//! differentiated again. `hvp_softmax_entropy` needs softmax and is tested
//! with it.
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

#[test]
fn hvp_mlp_w1_matches_pytorch() {
    let f = Fixture::load("autograd/hvp_mlp_W1.safetensors");
    assert_eq!(
        f.meta("function"),
        "f(W1)=mse_loss(tanh(X@W1^T+b1)@W2^T+b2, Y) (mean)"
    );
    assert_eq!(f.meta("wrt"), "W1");
    mlp_w1::<f64>(&f);
    mlp_w1::<f32>(&f);
}

fn mlp_w1<E: Float>(f: &Fixture) {
    let t = |n: &str| f.input::<E>(n);
    let w1 = t("W1").requires_grad();
    let h = t("X").matmul_t(&w1).add(&t("b1")).tanh();
    let pred = h.matmul_t(&t("W2")).add(&t("b2"));
    let loss = pred.sub(&t("Y")).square().mean();
    check_hvp(f, &w1, &[], &loss);
}

#[test]
fn hvp_tanh_matmul_matches_pytorch() {
    let f = Fixture::load("autograd/hvp_tanh_matmul.safetensors");
    assert_eq!(f.meta("function"), "f(x)=sum(tanh(x@W)^2)");
    assert_eq!(f.meta("wrt"), "x");
    tanh_matmul::<f64>(&f);
    tanh_matmul::<f32>(&f);
}

fn tanh_matmul<E: Float>(f: &Fixture) {
    let x = f.input::<E>("x").requires_grad();
    let w = f.input::<E>("W").requires_grad();
    let loss = x.matmul(&w).tanh().square().sum();
    check_hvp(f, &x, &[("W", &w)], &loss);
}

/// The same MLP with every parameter tracked: the extra gradients do not
/// change the ones the fixture checks.
#[test]
fn hvp_mlp_w1_with_all_parameters_tracked() {
    let f = Fixture::load("autograd/hvp_mlp_W1.safetensors");
    let p: Vec<Tensor<f64>> = ["W1", "b1", "W2", "b2"]
        .iter()
        .map(|n| f.t(n).requires_grad())
        .collect();
    let h = f.t("X").matmul_t(&p[0]).add(&p[1]).tanh();
    let loss = (h.matmul_t(&p[2]).add(&p[3]) - f.t("Y")).square().mean();
    check_hvp(&f, &p[0], &[], &loss);
}
