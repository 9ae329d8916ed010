//! Classification losses on integer class targets: [`cross_entropy_with`] and
//! [`nll_loss_with`], with PyTorch's semantics (class dimension 1, K-dimensional
//! inputs `(N, C, d1, ...)`, per-class weights, `ignore_index`, label
//! smoothing). Both are one fused op (`class_fused.rs`, with the log-softmax
//! kernels in `cross_entropy.rs`): a pass forward, a pass backward, the
//! weight's gradient too when it is tracked.

use super::class_fused::class_loss_fused;
use super::spec::{Kind, Options, Reduction};
use crate::tensor::{Device, Element, Float, Tensor};

/// Options of [`nll_loss_with`], with PyTorch's defaults
/// (`weight = None, ignore_index = -100, reduction = Mean`).
///
/// ```
/// let o = forge::nn::functional::NllLossOptions::<f32>::default();
/// assert_eq!(o.ignore_index, -100);
/// ```
#[derive(Clone, Debug)]
pub struct NllLossOptions<E: Element = f32, D: Device = crate::Cpu> {
    /// Per-class weights, shape `(C,)`.
    pub weight: Option<Tensor<E, D>>,
    /// Targets equal to this contribute nothing (and are not counted by the mean).
    pub ignore_index: i64,
    /// Mean (divided by the summed weights of the non-ignored targets), sum or none.
    pub reduction: Reduction,
}

impl<E: Element, D: Device> Default for NllLossOptions<E, D> {
    #[track_caller]
    fn default() -> Self {
        NllLossOptions {
            weight: None,
            ignore_index: -100,
            reduction: Reduction::Mean,
        }
    }
}

/// Options of [`cross_entropy_with`], with PyTorch's defaults
/// (`weight = None, ignore_index = -100, label_smoothing = 0, reduction = Mean`).
///
/// ```
/// use forge::nn::functional::*;
/// let o = CrossEntropyOptions::<f32> { label_smoothing: 0.1, ..Default::default() };
/// assert_eq!(o.ignore_index, -100);
/// ```
#[derive(Clone, Debug)]
pub struct CrossEntropyOptions<E: Element = f32, D: Device = crate::Cpu> {
    /// Per-class weights, shape `(C,)`.
    pub weight: Option<Tensor<E, D>>,
    /// Targets equal to this contribute nothing (and are not counted by the mean).
    pub ignore_index: i64,
    /// `ls` in `(1 - ls) * nll + ls * mean_c(-log p_c)`, in `[0, 1]`.
    pub label_smoothing: f64,
    /// Mean (divided by the summed weights of the non-ignored targets), sum or none.
    pub reduction: Reduction,
}

impl<E: Element, D: Device> Default for CrossEntropyOptions<E, D> {
    #[track_caller]
    fn default() -> Self {
        CrossEntropyOptions {
            weight: None,
            ignore_index: -100,
            label_smoothing: 0.0,
            reduction: Reduction::Mean,
        }
    }
}

/// The class axis (1, or 0 for `(C,)` input) and the number of classes of
/// an input of shape `shape`, checking that the targets have the input's
/// shape without that axis.
fn class_axis(op: &str, shape: &[usize], target_shape: &[usize]) -> (usize, usize) {
    shape_assert!(
        !shape.is_empty(),
        "{op}: input must have a class dimension, got shape {shape:?}"
    );
    let axis = if shape.len() == 1 { 0 } else { 1 };
    let mut expected = shape.to_vec();
    expected.remove(axis);
    shape_assert!(
        target_shape == expected.as_slice(),
        "{op}: input shape {shape:?} needs targets of shape {expected:?}, got {target_shape:?}"
    );
    (axis, shape[axis])
}

/// The negative log-likelihood loss on log-probabilities `input` of shape
/// `(N, C)`, `(N, C, d1, ...)` or `(C,)`, with integer class `targets` of
/// shape `(N,)`, `(N, d1, ...)` or `()`: `-w[t_i] * input[i, t_i]`, reduced.
/// The mean divides by `sum_i w[t_i]` over non-ignored targets (their count
/// without weights); with every target ignored it is NaN, as in PyTorch.
///
/// # Panics
/// When the target shape does not match the input shape without its class
/// dimension, a target is out of range (and not `ignore_index`), or the
/// weight does not have one entry per class.
///
/// ```
/// use forge::nn::functional::*;
/// use forge::Tensor;
/// let logp = Tensor::<f64>::from_vec(vec![-0.5, -1.0, -2.0, -0.1], &[2, 2]);
/// let t = Tensor::<i64>::from_vec(vec![1, 0], &[2]);
/// let l = nll_loss_with(&logp, &t, NllLossOptions::default());
/// assert_eq!(l.item(), 1.5);
/// ```
#[track_caller]
pub fn nll_loss_with<E: Float, D: Device>(
    input: &Tensor<E, D>,
    targets: &Tensor<i64, D>,
    options: NllLossOptions<E, D>,
) -> Tensor<E, D> {
    let ac = class_axis("nll_loss", input.shape(), targets.shape());
    let options = Options {
        weight: options.weight.as_ref(),
        ignore_index: options.ignore_index,
        label_smoothing: 0.0,
        reduction: options.reduction,
    };
    class_loss_fused(Kind::Nll, input, targets, ac, options)
}

/// Cross-entropy between `logits` (classes on dimension 1; shapes as in
/// [`nll_loss_with`]) and integer class `targets`: `nll_loss(log_softmax(logits))`,
/// with PyTorch's label smoothing `(1 - ls) * nll + ls / C * sum_c(-w_c log p_c)`
/// (the smoothing term is reduced like the nll term: its mean divides by
/// the same summed target weights).
///
/// One fused op for every shape and weight (a pass forward, a pass
/// backward; see `ops/loss_class.rs`). A tracked weight gets the gradient
/// of this loss (the mean's divisor `sum_i w[t_i]` included), which
/// PyTorch refuses to compute.
///
/// # Panics
/// As [`nll_loss_with`], and when `label_smoothing` is outside `[0, 1]`.
///
/// ```
/// use forge::nn::functional::*;
/// use forge::Tensor;
/// let logits = Tensor::<f64>::zeros(&[3, 4]);
/// let t = Tensor::<i64>::from_vec(vec![0, 3, -100], &[3]);
/// let l = cross_entropy_with(&logits, &t, CrossEntropyOptions::default());
/// assert!((l.item() - 4f64.ln()).abs() < 1e-15);
/// ```
#[track_caller]
pub fn cross_entropy_with<E: Float, D: Device>(
    logits: &Tensor<E, D>,
    targets: &Tensor<i64, D>,
    options: CrossEntropyOptions<E, D>,
) -> Tensor<E, D> {
    let ls = options.label_smoothing;
    shape_assert!(
        (0.0..=1.0).contains(&ls),
        "cross_entropy: label_smoothing {ls} is outside [0, 1]"
    );
    let ac = class_axis("cross_entropy", logits.shape(), targets.shape());
    let options = Options {
        weight: options.weight.as_ref(),
        ignore_index: options.ignore_index,
        label_smoothing: ls,
        reduction: options.reduction,
    };
    class_loss_fused(Kind::CrossEntropy, logits, targets, ac, options)
}
