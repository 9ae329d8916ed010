//! Negative log-likelihood losses of a distribution's parameters:
//! `poisson_nll_loss` and `gaussian_nll_loss`, with PyTorch's formulas and
//! defaults, composed of differentiable ops.

use super::options::{GaussianNllLossOptions, PoissonNllLossOptions};
use super::spec::reduce;
use crate::tensor::{Device, Float, Tensor};

/// `F.poisson_nll_loss(input, target, log_input, full, eps, reduction)`:
/// `exp(input) - target * input` when `log_input` (the input is the log
/// of the rate), `input - target * log(input + eps)` otherwise; `full` adds
/// Stirling's term `target log(target) - target + 0.5 log(2 pi target)`
/// where `target > 1`. Differentiable in `input` and `target`. PyTorch's
/// defaults: `log_input` true, `full` false, eps 1e-8, mean.
///
/// # Panics
/// When the shapes differ.
///
/// ```
/// use forge::nn::functional::*;
/// use forge::Tensor;
/// let x = Tensor::<f64>::zeros(&[2]);
/// let y = Tensor::<f64>::from_vec(vec![1.0, 3.0], &[2]);
/// let l = poisson_nll_loss_with(&x, &y, PoissonNllLossOptions { log_input: true, full: false, eps: 1e-8, reduction: Reduction::None });
/// assert_eq!(l.to_vec(), vec![1.0, 1.0]);
/// ```
#[track_caller]
pub fn poisson_nll_loss_with<E: Float, D: Device>(
    input: &Tensor<E, D>,
    target: &Tensor<E, D>,
    options: PoissonNllLossOptions,
) -> Tensor<E, D> {
    let PoissonNllLossOptions {
        log_input,
        full,
        eps,
        reduction,
    } = options;
    assert!(
        input.shape() == target.shape(),
        "poisson_nll_loss: input {:?} and target {:?} differ in shape",
        input.shape(),
        target.shape()
    );
    let mut l = if log_input {
        input.exp().sub(&target.mul(input))
    } else {
        input.sub(&target.mul(&input.add_scalar(E::from_f64(eps)).log()))
    };
    if full {
        let small = target.le_scalar(E::one());
        // Where target <= 1 the term is dropped; a safe argument there keeps
        // log(0) out of the tape.
        let safe = target.masked_fill(&small, 2.0);
        let two_pi = E::from_f64(2.0 * std::f64::consts::PI);
        let stirling = safe
            .mul(&safe.log())
            .sub(&safe)
            .add(&safe.mul_scalar(two_pi).log().mul_scalar(E::from_f64(0.5)));
        l = l.add(&stirling.masked_fill(&small, 0.0));
    }
    reduce(l, reduction)
}

/// `F.gaussian_nll_loss(input, target, var, full, eps, reduction)`:
/// `0.5 (log(var) + (input - target)^2 / var)` elementwise, plus
/// `0.5 log(2 pi)` when `full`. `var` has the input's shape, or that shape
/// without its last dimension, or with a last dimension of 1 (one variance
/// shared by the last dimension). As PyTorch, `var` is clamped to at least
/// `eps` in value only: the gradient passes to `var` unchanged. PyTorch's
/// defaults: `full` false, eps 1e-6, mean.
///
/// # Panics
/// When `input` and `target` differ in shape, `var` has none of the shapes
/// above, or a variance is negative.
///
/// ```
/// use forge::nn::functional::*;
/// use forge::Tensor;
/// let x = Tensor::<f64>::from_vec(vec![1.0, 2.0], &[1, 2]);
/// let y = Tensor::<f64>::from_vec(vec![1.0, 0.0], &[1, 2]);
/// let var = Tensor::<f64>::ones(&[1]);
/// let l = gaussian_nll_loss_with(&x, &y, &var, GaussianNllLossOptions { full: false, eps: 1e-6, reduction: Reduction::None });
/// assert_eq!(l.to_vec(), vec![0.0, 2.0]);
/// ```
#[track_caller]
pub fn gaussian_nll_loss_with<E: Float, D: Device>(
    input: &Tensor<E, D>,
    target: &Tensor<E, D>,
    var: &Tensor<E, D>,
    options: GaussianNllLossOptions,
) -> Tensor<E, D> {
    let GaussianNllLossOptions {
        full,
        eps,
        reduction,
    } = options;
    let (s, v) = (input.shape(), var.shape());
    let r = s.len();
    assert!(
        s == target.shape() && r >= 1,
        "gaussian_nll_loss: input {s:?} and target {:?} differ in shape",
        target.shape()
    );
    let var = if v == s {
        var.clone()
    } else if v == &s[..r - 1] {
        var.unsqueeze(-1)
    } else if v.len() == r && v[..r - 1] == s[..r - 1] && v[r - 1] == 1 {
        var.clone()
    } else {
        panic!("gaussian_nll_loss: var of shape {v:?} for input {s:?} (need the input's shape, without its last dimension, or with a last dimension of 1)")
    };
    assert!(
        var.as_slice().iter().all(|&x| x.to_f64() >= 0.0),
        "gaussian_nll_loss: var has a negative entry"
    );
    // Clamped in value, identity in gradient (PyTorch clamps under no_grad).
    let fixed = var.detach();
    let var = var.add(&fixed.clamp(Some(eps), None).sub(&fixed));
    let mut l = var
        .log()
        .add(&input.sub(target).square().div(&var))
        .mul_scalar(E::from_f64(0.5));
    if full {
        l = l.add_scalar(E::from_f64(0.5 * (2.0 * std::f64::consts::PI).ln()));
    }
    reduce(l, reduction)
}
