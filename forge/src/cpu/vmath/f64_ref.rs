//! The `f64` versions: the reference formulas (`std`/`libm` per element,
//! libm-accurate, matching PyTorch's double kernels to ~1e-16) and
//! [`VecMath`] for `f64` built on them.

use super::slices::each2_base;
use super::VecMath;
use std::mem::MaybeUninit;

pub(super) fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}
pub(super) fn softplus(x: f64, beta: f64, threshold: f64) -> f64 {
    let bx = beta * x;
    if bx > threshold {
        x
    } else {
        bx.exp().ln_1p() / beta
    }
}
pub(super) fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + libm::erf(x * std::f64::consts::FRAC_1_SQRT_2))
}
pub(super) const C: f64 = 0.797_884_560_802_865_4; // sqrt(2/pi)
pub(super) const K: f64 = 0.044715;
pub(super) fn gelu_tanh(x: f64) -> f64 {
    0.5 * x * (1.0 + (C * (x + K * x * x * x)).tanh())
}

/// `g * gelu_tanh'(x)`.
fn gelu_tanh_grad(x: f64, g: f64) -> f64 {
    let x2 = x * x;
    let t = (C * (x + K * x2 * x)).tanh();
    let du = C * (1.0 + 3.0 * K * x2);
    g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du)
}

fn each64(x: &mut [f64], f: impl Fn(f64) -> f64) {
    for v in x.iter_mut() {
        *v = f(*v);
    }
}

impl VecMath for f64 {
    fn v_exp(x: &mut [f64]) {
        each64(x, f64::exp)
    }
    fn v_ln(x: &mut [f64]) {
        each64(x, f64::ln)
    }
    fn v_tanh(x: &mut [f64]) {
        each64(x, f64::tanh)
    }
    fn v_sigmoid(x: &mut [f64]) {
        each64(x, sigmoid)
    }
    fn v_erf(x: &mut [f64]) {
        each64(x, libm::erf)
    }
    fn v_gelu(x: &mut [f64]) {
        each64(x, gelu)
    }
    fn v_gelu_tanh(x: &mut [f64]) {
        each64(x, gelu_tanh)
    }
    fn v_silu(x: &mut [f64]) {
        each64(x, |v| v * sigmoid(v))
    }
    fn v_softplus(x: &mut [f64], beta: f64, threshold: f64) {
        each64(x, |v| softplus(v, beta, threshold))
    }
    fn v_mish(x: &mut [f64]) {
        each64(x, |v| v * softplus(v, 1.0, 20.0).tanh())
    }
    fn v_gelu_grad(x: &[f64], g: &mut [f64]) {
        let inv_sqrt_2pi = 0.5 * std::f64::consts::FRAC_2_SQRT_PI * std::f64::consts::FRAC_1_SQRT_2;
        each2_base(x, g, |x, g| {
            let cdf = 0.5 * (1.0 + libm::erf(x * std::f64::consts::FRAC_1_SQRT_2));
            g * (cdf + x * ((-0.5 * x * x).exp() * inv_sqrt_2pi))
        })
    }
    #[cfg(test)]
    fn v_gelu_tanh_grad(x: &[f64], g: &mut [f64]) {
        each2_base(x, g, gelu_tanh_grad)
    }
    fn v_gelu_tanh_into(x: &[f64], out: &mut [MaybeUninit<f64>]) {
        assert_eq!(x.len(), out.len(), "vmath: length mismatch");
        for (o, &v) in out.iter_mut().zip(x) {
            o.write(gelu_tanh(v));
        }
    }
    fn v_gelu_tanh_grad_into(x: &[f64], g: &[f64], out: &mut [MaybeUninit<f64>]) {
        assert!(
            x.len() == g.len() && g.len() == out.len(),
            "vmath: length mismatch"
        );
        for ((o, &xv), &gv) in out.iter_mut().zip(x).zip(g) {
            o.write(gelu_tanh_grad(xv, gv));
        }
    }
    fn v_silu_grad(x: &[f64], g: &mut [f64]) {
        each2_base(x, g, |x, g| {
            let s = sigmoid(x);
            g * (s * (1.0 + x * (1.0 - s)))
        })
    }
    fn v_softplus_grad(x: &[f64], g: &mut [f64], beta: f64, threshold: f64) {
        each2_base(x, g, |x, g| {
            let bx = beta * x;
            g * if bx > threshold { 1.0 } else { sigmoid(bx) }
        })
    }
    fn v_mish_grad(x: &[f64], g: &mut [f64]) {
        each2_base(x, g, |x, g| {
            let t = softplus(x, 1.0, 20.0).tanh();
            g * (t + x * (1.0 - t * t) * sigmoid(x))
        })
    }
    fn v_erf_grad(x: &[f64], g: &mut [f64]) {
        let c = std::f64::consts::FRAC_2_SQRT_PI;
        each2_base(x, g, |x, g| g * ((-(x * x)).exp() * c))
    }
    fn v_tanh_grad(y: &[f64], g: &mut [f64]) {
        each2_base(y, g, |y, g| g * (1.0 - y * y))
    }
    fn v_sigmoid_grad(y: &[f64], g: &mut [f64]) {
        each2_base(y, g, |y, g| g * (y * (1.0 - y)))
    }
}
