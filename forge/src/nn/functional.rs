//! Functional forms of the layers and the losses, as
//! `torch.nn.functional`: free functions on tensors with no parameters of
//! their own. Every loss follows `torch.nn.functional`'s name: a short
//! form under PyTorch's name with PyTorch's defaults (`cross_entropy(&logits,
//! &y)`, `nll_loss`, `mse_loss`, `l1_loss`, `binary_cross_entropy`, ...,
//! `ctc_loss`) and one `_with` form beside it taking the loss's options
//! struct, whose `Default` is PyTorch's defaults (`cross_entropy_with(&x, &y,
//! CrossEntropyOptions { label_smoothing: 0.1, ..Default::default() })`).
//! The earlier short names `nll`, `mse`, `l1`, `bce` and `bce_with_logits`
//! remain, deprecated.
//!
//! ```
//! use forge::nn::functional::{cross_entropy_with, CrossEntropyOptions};
//! use forge::Tensor;
//! let logits = Tensor::<f64>::from_vec(vec![2.0, 0.0, 0.0, 2.0], &[2, 2]).requires_grad();
//! let targets = Tensor::<i64>::from_vec(vec![0, 1], &[2]);
//! let loss = cross_entropy_with(&logits, &targets, CrossEntropyOptions::default());
//! let g = loss.backward();
//! assert_eq!(g.get(&logits).unwrap().shape(), &[2, 2]);
//! ```

pub use crate::nn::instance_norm::instance_norm;
pub use crate::ops::attention::scaled_dot_product_attention;
pub use crate::ops::attention_qkv::qkv_attention;
pub use crate::ops::bilinear::bilinear;
pub use crate::ops::dropout::dropout;
pub use crate::ops::embedding::embedding;
pub use crate::ops::embedding_bag::{embedding_bag, BagMode};
pub use crate::ops::interpolate::interpolate;
pub use crate::ops::loss::{
    binary_cross_entropy, binary_cross_entropy_with, binary_cross_entropy_with_logits,
    binary_cross_entropy_with_logits_with, cosine_embedding_loss, cosine_embedding_loss_with,
    cross_entropy_with, ctc_loss, ctc_loss_with, gaussian_nll_loss, gaussian_nll_loss_with,
    huber_loss, huber_loss_with, kl_div, kl_div_with, l1_loss, l1_loss_with, l1_penalty,
    l2_penalty, margin_ranking_loss, margin_ranking_loss_with, mse_loss, mse_loss_with,
    multilabel_soft_margin_loss, multilabel_soft_margin_loss_with, nll_loss, nll_loss_with,
    poisson_nll_loss, poisson_nll_loss_with, smooth_l1_loss, smooth_l1_loss_with,
    triplet_margin_loss, triplet_margin_loss_with, BinaryCrossEntropyOptions,
    BinaryCrossEntropyWithLogitsOptions, CosineEmbeddingLossOptions, CrossEntropyOptions,
    CtcLossOptions, GaussianNllLossOptions, HuberLossOptions, KlDivOptions, KlDivReduction,
    L1LossOptions, MarginRankingLossOptions, MseLossOptions, MultilabelSoftMarginLossOptions,
    NllLossOptions, PoissonNllLossOptions, Reduction, SmoothL1LossOptions,
    TripletMarginLossOptions,
};
pub use crate::ops::norm::{batch_norm, group_norm, layer_norm};
pub use crate::ops::rms_norm::rms_norm;
pub use crate::ops::rnn_cell::{gru_sequence, lstm_sequence};
pub use crate::ops::vector_norm::{cosine_similarity, normalize, pairwise_distance};

use crate::tensor::{Device, Float, Tensor};

/// Cross-entropy of `logits` (`[N, C]`, or `[N, C, d1, ...]`) against
/// class indices `targets` (`[N]`, or `[N, d1, ...]`), averaged: PyTorch's
/// `F.cross_entropy(logits, targets)` with its defaults. Class weights,
/// `ignore_index`, label smoothing and other reductions:
/// [`cross_entropy_with`].
///
/// # Panics
/// When the shapes do not fit or a target is out of range (the message
/// names both shapes, and the caller's line).
///
/// ```
/// use forge::prelude::*;
/// let logits = Tensor::<f64>::zeros(&[2, 4]);
/// let y = Tensor::<i64>::from_vec(vec![0, 3], &[2]);
/// assert!((cross_entropy(&logits, &y).item() - 4f64.ln()).abs() < 1e-15);
/// ```
#[track_caller]
pub fn cross_entropy<E: Float, D: Device>(
    logits: &Tensor<E, D>,
    targets: &Tensor<i64, D>,
) -> Tensor<E, D> {
    cross_entropy_with(logits, targets, CrossEntropyOptions::default())
}

/// Negative log-likelihood of log-probabilities against class indices,
/// averaged: PyTorch's `F.nll_loss(log_probs, targets)`. Options:
/// [`nll_loss`].
///
/// # Panics
/// As [`cross_entropy`].
///
/// ```
/// #![allow(deprecated)]
/// use forge::nn::functional::nll;
/// use forge::Tensor;
/// let lp = Tensor::<f64>::from_vec(vec![-1.0, -2.0, -3.0, -4.0], &[2, 2]);
/// let y = Tensor::<i64>::from_vec(vec![0, 1], &[2]);
/// assert_eq!(nll(&lp, &y).item(), 2.5);
/// ```
#[deprecated(note = "use `nll_loss`, PyTorch's name")]
#[track_caller]
pub fn nll<E: Float, D: Device>(
    log_probs: &Tensor<E, D>,
    targets: &Tensor<i64, D>,
) -> Tensor<E, D> {
    nll_loss_with(log_probs, targets, NllLossOptions::default())
}

/// Mean squared error, averaged: PyTorch's `F.mse_loss(input, target)`.
/// Other reductions: [`mse_loss`].
///
/// # Panics
/// When the shapes differ.
///
/// ```
/// #![allow(deprecated)]
/// use forge::nn::functional::mse;
/// use forge::Tensor;
/// let a = Tensor::<f32>::from_vec(vec![1.0, 2.0], &[2]);
/// let b = Tensor::<f32>::from_vec(vec![0.0, 4.0], &[2]);
/// assert_eq!(mse(&a, &b).item(), 2.5);
/// ```
#[deprecated(note = "use `mse_loss`, PyTorch's name")]
#[track_caller]
pub fn mse<E: Float, D: Device>(input: &Tensor<E, D>, target: &Tensor<E, D>) -> Tensor<E, D> {
    mse_loss_with(
        input,
        target,
        MseLossOptions {
            reduction: Reduction::Mean,
        },
    )
}

/// Mean absolute error, averaged: PyTorch's `F.l1_loss(input, target)`.
/// Other reductions: [`l1_loss`].
///
/// # Panics
/// When the shapes differ.
///
/// ```
/// #![allow(deprecated)]
/// use forge::nn::functional::l1;
/// use forge::Tensor;
/// let a = Tensor::<f32>::from_vec(vec![1.0, 2.0], &[2]);
/// let b = Tensor::<f32>::from_vec(vec![0.0, 4.0], &[2]);
/// assert_eq!(l1(&a, &b).item(), 1.5);
/// ```
#[deprecated(note = "use `l1_loss`, PyTorch's name")]
#[track_caller]
pub fn l1<E: Float, D: Device>(input: &Tensor<E, D>, target: &Tensor<E, D>) -> Tensor<E, D> {
    l1_loss_with(
        input,
        target,
        L1LossOptions {
            reduction: Reduction::Mean,
        },
    )
}

/// Binary cross-entropy of probabilities `p` in `[0, 1]` against targets,
/// averaged: PyTorch's `F.binary_cross_entropy(p, y)`. Weights and other
/// reductions: [`binary_cross_entropy`].
///
/// # Panics
/// When the shapes differ or a probability is outside `[0, 1]`.
///
/// ```
/// #![allow(deprecated)]
/// use forge::nn::functional::bce;
/// use forge::Tensor;
/// let p = Tensor::<f64>::from_vec(vec![0.5, 0.5], &[2]);
/// let y = Tensor::<f64>::from_vec(vec![1.0, 0.0], &[2]);
/// assert!((bce(&p, &y).item() - 2f64.ln()).abs() < 1e-15);
/// ```
#[deprecated(note = "use `binary_cross_entropy`, PyTorch's name")]
#[track_caller]
pub fn bce<E: Float, D: Device>(p: &Tensor<E, D>, target: &Tensor<E, D>) -> Tensor<E, D> {
    binary_cross_entropy_with(
        p,
        target,
        BinaryCrossEntropyOptions {
            weight: None,
            reduction: Reduction::Mean,
        },
    )
}

/// Binary cross-entropy on logits, averaged: PyTorch's
/// `F.binary_cross_entropy_with_logits(x, y)`. Weights, `pos_weight` and
/// other reductions: [`binary_cross_entropy_with_logits`].
///
/// # Panics
/// When the shapes differ.
///
/// ```
/// #![allow(deprecated)]
/// use forge::nn::functional::bce_with_logits;
/// use forge::Tensor;
/// let x = Tensor::<f64>::zeros(&[2]);
/// let y = Tensor::<f64>::from_vec(vec![1.0, 0.0], &[2]);
/// assert!((bce_with_logits(&x, &y).item() - 2f64.ln()).abs() < 1e-15);
/// ```
#[deprecated(note = "use `binary_cross_entropy_with_logits`, PyTorch's name")]
#[track_caller]
pub fn bce_with_logits<E: Float, D: Device>(
    x: &Tensor<E, D>,
    target: &Tensor<E, D>,
) -> Tensor<E, D> {
    binary_cross_entropy_with_logits_with(
        x,
        target,
        BinaryCrossEntropyWithLogitsOptions {
            weight: None,
            pos_weight: None,
            reduction: Reduction::Mean,
        },
    )
}
