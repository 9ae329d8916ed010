//! Elementwise losses (regression, binary classification, KL divergence)
//! and parameter penalties, with PyTorch's semantics. Each is written in
//! differentiable tensor ops; piecewise formulas choose their branch with a
//! constant mask (its derivative is zero almost everywhere).

use super::options::{
    BinaryCrossEntropyOptions, BinaryCrossEntropyWithLogitsOptions, HuberLossOptions, KlDivOptions,
    KlDivReduction, L1LossOptions, MseLossOptions, SmoothL1LossOptions,
};
use super::spec::reduce;
use crate::tensor::{Device, Float, Tensor};

#[track_caller]
fn same_shape<E: Float, D: Device>(op: &str, input: &Tensor<E, D>, target: &Tensor<E, D>) {
    shape_assert!(
        input.shape() == target.shape(),
        "{op}: input shape {:?} and target shape {:?} differ",
        input.shape(),
        target.shape()
    );
}

/// 1 where `pred(x)` holds, 0 elsewhere; a constant (untracked) tensor.
#[track_caller]
fn mask<E: Float, D: Device>(x: &Tensor<E, D>, pred: impl Fn(E) -> bool + Sync) -> Tensor<E, D> {
    x.detach()
        .map(|v| if pred(v) { E::one() } else { E::zero() })
}

/// Mean squared error `(input - target)^2`, reduced.
///
/// # Panics
/// When the shapes differ (PyTorch would broadcast with a warning).
///
/// ```
/// use forge::nn::functional::*;
/// use forge::Tensor;
/// let a = Tensor::<f64>::from_vec(vec![1.0, 2.0], &[2]);
/// let b = Tensor::<f64>::from_vec(vec![0.0, 4.0], &[2]);
/// assert_eq!(mse_loss_with(&a, &b, MseLossOptions { reduction: Reduction::Mean }).item(), 2.5);
/// ```
#[track_caller]
pub fn mse_loss_with<E: Float, D: Device>(
    input: &Tensor<E, D>,
    target: &Tensor<E, D>,
    options: MseLossOptions,
) -> Tensor<E, D> {
    let MseLossOptions { reduction } = options;
    same_shape("mse_loss", input, target);
    reduce(input.sub(target).square(), reduction)
}

/// Mean absolute error `|input - target|`, reduced.
///
/// # Panics
/// When the shapes differ.
///
/// ```
/// use forge::nn::functional::*;
/// use forge::Tensor;
/// let a = Tensor::<f64>::from_vec(vec![1.0, 2.0], &[2]);
/// let b = Tensor::<f64>::from_vec(vec![0.0, 4.0], &[2]);
/// assert_eq!(l1_loss_with(&a, &b, L1LossOptions { reduction: Reduction::Sum }).item(), 3.0);
/// ```
#[track_caller]
pub fn l1_loss_with<E: Float, D: Device>(
    input: &Tensor<E, D>,
    target: &Tensor<E, D>,
    options: L1LossOptions,
) -> Tensor<E, D> {
    let L1LossOptions { reduction } = options;
    same_shape("l1_loss", input, target);
    reduce(input.sub(target).abs(), reduction)
}

/// `0.5 d^2 / beta` where `|d| < beta`, `|d| - 0.5 beta` elsewhere,
/// `d = input - target` (unreduced).
#[track_caller]
fn smooth_l1_raw<E: Float, D: Device>(
    input: &Tensor<E, D>,
    target: &Tensor<E, D>,
    beta: f64,
) -> Tensor<E, D> {
    let d = input.sub(target);
    if beta == 0.0 {
        return d.abs();
    }
    let b = E::from_f64(beta);
    let quad = mask(&d, |v| v.abs() < b);
    let inside = d.square().mul_scalar(E::from_f64(0.5 / beta));
    let outside = d.abs().sub_scalar(E::from_f64(0.5 * beta));
    inside
        .mul(&quad)
        .add(&outside.mul(&quad.rsub_scalar(E::one())))
}

/// Smooth L1 loss: `0.5 d^2 / beta` where `|d| < beta`, `|d| - 0.5 beta`
/// elsewhere (`d = input - target`; `beta = 0` is the L1 loss), reduced.
///
/// # Panics
/// When the shapes differ or `beta < 0`.
///
/// ```
/// use forge::nn::functional::*;
/// use forge::Tensor;
/// let a = Tensor::<f64>::from_vec(vec![0.5, 3.0], &[2]);
/// let b = Tensor::<f64>::zeros(&[2]);
/// assert_eq!(smooth_l1_loss_with(&a, &b, SmoothL1LossOptions { beta: 1.0, reduction: Reduction::None }).to_vec(), vec![0.125, 2.5]);
/// ```
#[track_caller]
pub fn smooth_l1_loss_with<E: Float, D: Device>(
    input: &Tensor<E, D>,
    target: &Tensor<E, D>,
    options: SmoothL1LossOptions,
) -> Tensor<E, D> {
    let SmoothL1LossOptions { beta, reduction } = options;
    same_shape("smooth_l1_loss", input, target);
    shape_assert!(beta >= 0.0, "smooth_l1_loss: beta {beta} is negative");
    reduce(smooth_l1_raw(input, target, beta), reduction)
}

/// Huber loss: `0.5 d^2` where `|d| < delta`, `delta (|d| - 0.5 delta)`
/// elsewhere; equal to `delta * smooth_l1_loss(beta = delta)`.
///
/// # Panics
/// When the shapes differ or `delta <= 0`.
///
/// ```
/// use forge::nn::functional::*;
/// use forge::Tensor;
/// let a = Tensor::<f64>::from_vec(vec![0.5, 3.0], &[2]);
/// let b = Tensor::<f64>::zeros(&[2]);
/// assert_eq!(huber_loss_with(&a, &b, HuberLossOptions { delta: 2.0, reduction: Reduction::None }).to_vec(), vec![0.125, 4.0]);
/// ```
#[track_caller]
pub fn huber_loss_with<E: Float, D: Device>(
    input: &Tensor<E, D>,
    target: &Tensor<E, D>,
    options: HuberLossOptions,
) -> Tensor<E, D> {
    let HuberLossOptions { delta, reduction } = options;
    same_shape("huber_loss", input, target);
    shape_assert!(delta > 0.0, "huber_loss: delta {delta} is not positive");
    let l = smooth_l1_raw(input, target, delta).mul_scalar(E::from_f64(delta));
    reduce(l, reduction)
}

/// Binary cross-entropy on probabilities `input` in `[0, 1]`:
/// `-w (t log x + (1 - t) log(1 - x))`, each log clamped at `-100` as in
/// PyTorch; `weight` broadcasts against the input.
///
/// # Panics
/// When the shapes differ, the weight does not broadcast, or an input is
/// outside `[0, 1]`.
///
/// ```
/// use forge::nn::functional::*;
/// use forge::Tensor;
/// let p = Tensor::<f64>::from_vec(vec![0.5, 1.0], &[2]);
/// let t = Tensor::<f64>::from_vec(vec![1.0, 0.0], &[2]);
/// let l = binary_cross_entropy_with(&p, &t, BinaryCrossEntropyOptions { weight: None, reduction: Reduction::None }).to_vec();
/// assert!((l[0] - 2f64.ln()).abs() < 1e-15);
/// assert_eq!(l[1], 100.0);
/// ```
#[track_caller]
pub fn binary_cross_entropy_with<E: Float, D: Device>(
    input: &Tensor<E, D>,
    target: &Tensor<E, D>,
    options: BinaryCrossEntropyOptions<E, D>,
) -> Tensor<E, D> {
    let reduction = options.reduction;
    let weight = options.weight.as_ref();
    same_shape("binary_cross_entropy", input, target);
    shape_assert!(
        input
            .as_slice()
            .iter()
            .all(|&x| x >= E::zero() && x <= E::one()),
        "binary_cross_entropy: every input must be in [0, 1] (input shape {:?})",
        input.shape()
    );
    let log_p = input.log().clamp(Some(-100.0), None);
    let log_q = input.rsub_scalar(E::one()).log().clamp(Some(-100.0), None);
    let l = target
        .mul(&log_p)
        .add(&target.rsub_scalar(E::one()).mul(&log_q))
        .neg();
    let l = match weight {
        Some(w) => l.mul(w),
        None => l,
    };
    reduce(l, reduction)
}

/// Binary cross-entropy on logits, in the stable form
/// `(1 - t) x - (1 + (pw - 1) t) log_sigmoid(x)` (no overflow for large
/// `|x|`); `pos_weight` (broadcast along the last dimension, one entry per
/// class) weighs the positive term, `weight` the whole loss.
///
/// # Panics
/// When the shapes differ or a weight does not broadcast.
///
/// ```
/// use forge::nn::functional::*;
/// use forge::Tensor;
/// let x = Tensor::<f64>::from_vec(vec![0.0, 1000.0, -1000.0], &[3]);
/// let t = Tensor::<f64>::from_vec(vec![1.0, 1.0, 1.0], &[3]);
/// let l = binary_cross_entropy_with_logits_with(&x, &t, BinaryCrossEntropyWithLogitsOptions { weight: None, pos_weight: None, reduction: Reduction::None }).to_vec();
/// assert!((l[0] - 2f64.ln()).abs() < 1e-15);
/// assert_eq!(l[1..], [0.0, 1000.0]);
/// ```
#[track_caller]
pub fn binary_cross_entropy_with_logits_with<E: Float, D: Device>(
    input: &Tensor<E, D>,
    target: &Tensor<E, D>,
    options: BinaryCrossEntropyWithLogitsOptions<E, D>,
) -> Tensor<E, D> {
    let reduction = options.reduction;
    let (weight, pos_weight) = (options.weight.as_ref(), options.pos_weight.as_ref());
    same_shape("binary_cross_entropy_with_logits", input, target);
    let neg = target.rsub_scalar(E::one()).mul(input);
    let ls = input.log_sigmoid();
    let pos = match pos_weight {
        Some(pw) => pw
            .sub_scalar(E::one())
            .mul(target)
            .add_scalar(E::one())
            .mul(&ls),
        None => ls,
    };
    let l = neg.sub(&pos);
    let l = match weight {
        Some(w) => l.mul(w),
        None => l,
    };
    reduce(l, reduction)
}

/// Kullback-Leibler divergence with `input` = log-probabilities:
/// pointwise `t (log t - input)` (0 where `t = 0`), or with `log_target`
/// (target given as log-probabilities) `exp(t) (t - input)`; reduced. As in
/// PyTorch, a zero target against a `-inf` input gives NaN.
///
/// # Panics
/// When the shapes differ, or for `BatchMean` on a 0-d input.
///
/// ```
/// use forge::nn::functional::*;
/// use forge::Tensor;
/// let p = Tensor::<f64>::from_vec(vec![0.5, 0.5, 0.25, 0.75], &[2, 2]);
/// let l = kl_div_with(&p.log(), &p, KlDivOptions { reduction: KlDivReduction::BatchMean, log_target: false });
/// assert_eq!(l.item(), 0.0);
/// ```
#[track_caller]
pub fn kl_div_with<E: Float, D: Device>(
    input: &Tensor<E, D>,
    target: &Tensor<E, D>,
    options: KlDivOptions,
) -> Tensor<E, D> {
    let KlDivOptions {
        reduction,
        log_target,
    } = options;
    same_shape("kl_div", input, target);
    let l = if log_target {
        target.exp().mul(&target.sub(input))
    } else {
        // t log t with 0 log 0 = 0 (PyTorch's xlogy): log(t + [t == 0]).
        let zero = mask(target, |v| v == E::zero());
        target.mul(&target.add(&zero).log().sub(input))
    };
    match reduction {
        KlDivReduction::Mean => l.mean(),
        KlDivReduction::Sum => l.sum(),
        KlDivReduction::None => l,
        KlDivReduction::BatchMean => {
            shape_assert!(
                input.rank() > 0,
                "kl_div: batchmean needs a batch dimension, input shape {:?}",
                input.shape()
            );
            l.sum().div_scalar(E::from_f64(input.shape()[0] as f64))
        }
    }
}

/// The L1 penalty `sum_p sum |p|` over a list of parameters, as a 0-d
/// tensor (0 for an empty list). Add `lambda * l1_penalty(..)` to a loss.
///
/// ```
/// use forge::nn::functional::l1_penalty;
/// use forge::Tensor;
/// let a = Tensor::<f64>::from_vec(vec![1.0, -2.0], &[2]);
/// let b = Tensor::<f64>::from_vec(vec![-3.0], &[1]);
/// assert_eq!(l1_penalty([&a, &b]).item(), 6.0);
/// ```
#[track_caller]
pub fn l1_penalty<'a, E: Float, D: Device>(
    params: impl IntoIterator<Item = &'a Tensor<E, D>>,
) -> Tensor<E, D> {
    params
        .into_iter()
        .fold(Tensor::scalar_in(E::zero()), |acc, p| {
            acc.add(&p.abs().sum())
        })
}

/// The L2 penalty `sum_p sum p^2` (the squared norm, without a `1/2`) over
/// a list of parameters, as a 0-d tensor. Its gradient is `2 p`.
///
/// ```
/// use forge::nn::functional::l2_penalty;
/// use forge::Tensor;
/// let a = Tensor::<f64>::from_vec(vec![1.0, -2.0], &[2]);
/// let b = Tensor::<f64>::from_vec(vec![-3.0], &[1]);
/// assert_eq!(l2_penalty([&a, &b]).item(), 14.0);
/// ```
#[track_caller]
pub fn l2_penalty<'a, E: Float, D: Device>(
    params: impl IntoIterator<Item = &'a Tensor<E, D>>,
) -> Tensor<E, D> {
    params
        .into_iter()
        .fold(Tensor::scalar_in(E::zero()), |acc, p| {
            acc.add(&p.square().sum())
        })
}
