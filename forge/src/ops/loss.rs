//! Classification losses on integer class targets: [`cross_entropy_with`] and
//! [`nll_loss`], with PyTorch's semantics (class dimension 1, K-dimensional
//! inputs `(N, C, d1, ...)`, per-class weights, `ignore_index`, label
//! smoothing). `cross_entropy_with` is one fused op (`cross_entropy.rs`)
//! unless its class weight is tracked; `nll_loss` and that case pick the
//! target classes with a one-hot mask built from the integer targets: a
//! constant, so every gradient (of any order) flows through ordinary tensor
//! ops.

use crate::tensor::{Device, Element, Float, Tensor};

/// How a loss reduces its per-element values: PyTorch's `reduction`
/// argument.
///
/// ```
/// use forge::nn::functional::{mse_loss, Reduction};
/// use forge::Tensor;
/// let a = Tensor::<f64>::from_vec(vec![1.0, 3.0], &[2]);
/// let b = Tensor::<f64>::zeros(&[2]);
/// assert_eq!(mse_loss(&a, &b, Reduction::Mean).item(), 5.0);
/// assert_eq!(mse_loss(&a, &b, Reduction::Sum).item(), 10.0);
/// assert_eq!(mse_loss(&a, &b, Reduction::None).to_vec(), vec![1.0, 9.0]);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reduction {
    /// The mean over the elements (weighted losses divide by the total weight).
    #[default]
    Mean,
    /// The sum over the elements.
    Sum,
    /// No reduction: one value per element (per sample for class losses).
    None,
}

/// Applies `reduction` to per-element losses (plain mean for `Mean`).
pub(crate) fn reduce<E: Float, D: Device>(
    loss: Tensor<E, D>,
    reduction: Reduction,
) -> Tensor<E, D> {
    match reduction {
        Reduction::Mean => loss.mean(),
        Reduction::Sum => loss.sum(),
        Reduction::None => loss,
    }
}

/// Options of [`nll_loss`], with PyTorch's defaults
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
/// use forge::nn::functional::CrossEntropyOptions;
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
    assert!(
        !shape.is_empty(),
        "{op}: input must have a class dimension, got shape {shape:?}"
    );
    let axis = if shape.len() == 1 { 0 } else { 1 };
    let mut expected = shape.to_vec();
    expected.remove(axis);
    assert!(
        target_shape == expected.as_slice(),
        "{op}: input shape {shape:?} needs targets of shape {expected:?}, got {target_shape:?}"
    );
    (axis, shape[axis])
}

/// Checks input/target shapes and builds the one-hot mask of the target
/// classes (zero rows for ignored targets). Returns the class axis, the
/// number of classes and the mask.
fn target_mask<E: Float, D: Device>(
    op: &str,
    input: &Tensor<E, D>,
    targets: &Tensor<i64, D>,
    ignore_index: i64,
) -> (usize, usize, Tensor<E, D>) {
    let shape = input.shape();
    let (axis, c) = class_axis(op, shape, targets.shape());
    let inner: usize = shape[axis + 1..].iter().product();
    let mut mask = crate::cpu::Storage::filled(input.numel(), E::zero());
    for (i, &t) in targets.as_slice().iter().enumerate() {
        if t == ignore_index {
            continue;
        }
        assert!(
            (0..c as i64).contains(&t),
            "{op}: target {t} is out of range for {c} classes (input shape {shape:?})"
        );
        let (n, d) = (i / inner, i % inner);
        mask[(n * c + t as usize) * inner + d] = E::one();
    }
    (axis, c, Tensor::from_storage(mask, shape))
}

/// `x * mask` with the entries where `mask` is 0 set to 0 first, so that a
/// `-inf` (log-)probability of a class other than the target contributes 0
/// (as PyTorch's gather does) instead of `-inf * 0 = NaN`. The gradient is
/// `mask` at the picked entries and 0 elsewhere, as for `x * mask`.
fn pick<E: Float, D: Device>(x: &Tensor<E, D>, mask: &Tensor<E, D>) -> Tensor<E, D> {
    let off: Vec<bool> = mask.as_slice().iter().map(|&m| m == E::zero()).collect();
    let off = Tensor::<bool, D>::from_vec(off, mask.shape());
    x.masked_fill(&off, 0.0).mul(mask)
}

/// A `(C,)` weight viewed to broadcast along the class axis of `shape`.
fn class_weight<E: Float, D: Device>(
    op: &str,
    w: &Tensor<E, D>,
    shape: &[usize],
    axis: usize,
) -> Tensor<E, D> {
    assert!(
        w.shape() == [shape[axis]],
        "{op}: weight of shape {:?} does not match {} classes (input shape {shape:?})",
        w.shape(),
        shape[axis]
    );
    let mut view = vec![1usize; shape.len()];
    view[axis] = shape[axis];
    w.view(&view)
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
/// use forge::nn::functional::{nll_loss, NllLossOptions};
/// use forge::Tensor;
/// let logp = Tensor::<f64>::from_vec(vec![-0.5, -1.0, -2.0, -0.1], &[2, 2]);
/// let t = Tensor::<i64>::from_vec(vec![1, 0], &[2]);
/// let l = nll_loss(&logp, &t, NllLossOptions::default());
/// assert_eq!(l.item(), 1.5);
/// ```
pub fn nll_loss<E: Float, D: Device>(
    input: &Tensor<E, D>,
    targets: &Tensor<i64, D>,
    options: NllLossOptions<E, D>,
) -> Tensor<E, D> {
    let (axis, _, mask) = target_mask("nll_loss", input, targets, options.ignore_index);
    let mask = match &options.weight {
        Some(w) => mask.mul(&class_weight("nll_loss", w, input.shape(), axis)),
        None => mask,
    };
    let per = pick(input, &mask).sum_dim(&[axis as isize], false).neg();
    match options.reduction {
        Reduction::Mean => per.sum().div(&mask.sum()),
        Reduction::Sum => per.sum(),
        Reduction::None => per,
    }
}

/// Cross-entropy between `logits` (classes on dimension 1; shapes as in
/// [`nll_loss`]) and integer class `targets`: `nll_loss(log_softmax(logits))`,
/// with PyTorch's label smoothing `(1 - ls) * nll + ls / C * sum_c(-w_c log p_c)`
/// (the smoothing term is reduced like the nll term: its mean divides by
/// the same summed target weights).
///
/// One fused op for every shape (a pass forward, a pass backward; see
/// `ops/cross_entropy.rs`) unless the weight is tracked, which takes
/// composed tensor ops so that the weight gets a gradient.
///
/// # Panics
/// As [`nll_loss`], and when `label_smoothing` is outside `[0, 1]`.
///
/// ```
/// use forge::nn::functional::{cross_entropy_with, CrossEntropyOptions};
/// use forge::Tensor;
/// let logits = Tensor::<f64>::zeros(&[3, 4]);
/// let t = Tensor::<i64>::from_vec(vec![0, 3, -100], &[3]);
/// let l = cross_entropy_with(&logits, &t, CrossEntropyOptions::default());
/// assert!((l.item() - 4f64.ln()).abs() < 1e-15);
/// ```
pub fn cross_entropy_with<E: Float, D: Device>(
    logits: &Tensor<E, D>,
    targets: &Tensor<i64, D>,
    options: CrossEntropyOptions<E, D>,
) -> Tensor<E, D> {
    let ls = options.label_smoothing;
    assert!(
        (0.0..=1.0).contains(&ls),
        "cross_entropy: label_smoothing {ls} is outside [0, 1]"
    );
    if options.weight.as_ref().is_none_or(|w| !w.is_tracked()) {
        let ac = class_axis("cross_entropy", logits.shape(), targets.shape());
        return super::cross_entropy::cross_entropy_fused(logits, targets, ac, &options);
    }
    // A tracked weight: composed ops, so its gradient flows.
    let (axis, c, mask) = target_mask("cross_entropy", logits, targets, options.ignore_index);
    let lp = logits.log_softmax(axis as isize);
    let weight = options
        .weight
        .as_ref()
        .map(|w| class_weight("cross_entropy", w, logits.shape(), axis));
    let wmask = match &weight {
        Some(w) => mask.mul(w),
        None => mask.clone(),
    };
    let ax = [axis as isize];
    let nll = pick(&lp, &wmask).sum_dim(&ax, false).neg();
    let reduce_like_nll = |per: Tensor<E, D>| match options.reduction {
        Reduction::Mean => per.sum().div(&wmask.sum()),
        Reduction::Sum => per.sum(),
        Reduction::None => per,
    };
    if ls == 0.0 {
        return reduce_like_nll(nll);
    }
    // Not ignored: the mask summed over classes is 1 for those targets.
    let valid = mask.sum_dim(&ax, false);
    let weighted = match &weight {
        Some(w) => lp.mul(w),
        None => lp,
    };
    let smooth = weighted.sum_dim(&ax, false).neg().mul(&valid);
    let nll = reduce_like_nll(nll);
    let smooth = reduce_like_nll(smooth);
    nll.mul_scalar(E::from_f64(1.0 - ls))
        .add(&smooth.mul_scalar(E::from_f64(ls / c as f64)))
}
