//! A finite-difference check of second derivatives: the gradient that
//! `backward_with(.., create_graph = true)` returns is differentiated again
//! and compared with central differences of the (first-order) gradient.
#![allow(dead_code)]

use forge::{Rng, Tensor};

/// `G(x) = d/dx <f(x), gout>`. Checks `d/dx <G(x), u>` (a Hessian-vector
/// product, computed through the recorded backward pass) against
/// `(<G(x + eps e_j), u> - <G(x - eps e_j), u>) / (2 eps)` for every
/// element `j` of `x`, with `|analytic - numeric| <= tol (1 + |numeric|)`.
pub fn check(what: &str, f: impl Fn(&Tensor<f64>) -> Tensor<f64>, x: &Tensor<f64>, tol: f64) {
    let mut rng = Rng::new(0xabc);
    let y0 = f(&x.detach());
    let gout = Tensor::<f64>::normal(y0.shape(), 0.0, 1.0, &mut rng);
    let u = Tensor::<f64>::normal(x.shape(), 0.0, 1.0, &mut rng);
    let grad = |x: &Tensor<f64>, create: bool| -> (Tensor<f64>, Tensor<f64>) {
        let xt = x.detach().requires_grad();
        let y = f(&xt);
        let g = y.backward_with(&gout, create);
        let g = g
            .get(&xt)
            .cloned()
            .unwrap_or_else(|| Tensor::zeros(x.shape()));
        (xt, g)
    };
    let (xt, g) = grad(x, true);
    let hv = g.mul(&u).sum().backward();
    let analytic = hv
        .get(&xt)
        .map(|t| t.to_vec())
        .unwrap_or_else(|| vec![0.0; x.numel()]);
    let eps = 1e-6;
    let dot = |t: &Tensor<f64>| -> f64 {
        t.as_slice()
            .iter()
            .zip(u.as_slice())
            .map(|(a, b)| a * b)
            .sum()
    };
    for j in 0..x.numel() {
        let mut p = x.to_vec();
        p[j] += eps;
        let mut m = x.to_vec();
        m[j] -= eps;
        let gp = dot(&grad(&Tensor::from_vec(p, x.shape()), false).1);
        let gm = dot(&grad(&Tensor::from_vec(m, x.shape()), false).1);
        let numeric = (gp - gm) / (2.0 * eps);
        let err = (analytic[j] - numeric).abs();
        assert!(
            err <= tol * (1.0 + numeric.abs()),
            "{what}: second order, element {j}: analytic {} vs numeric {numeric}",
            analytic[j]
        );
    }
}
