//! Functional forms of the layers and the losses, as
//! `torch.nn.functional`: free functions on tensors with no parameters of
//! their own. The losses come in a short form with PyTorch's defaults
//! (`cross_entropy(&logits, &y)`, `nll`, `mse`, `l1`, `bce`,
//! `bce_with_logits`; averaged) and a long form taking the options
//! (`cross_entropy_with`, `nll_loss`, `mse_loss`, ...).
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
    binary_cross_entropy, binary_cross_entropy_with_logits, cosine_embedding_loss,
    cross_entropy_with, gaussian_nll_loss, huber_loss, kl_div, l1_loss, l1_penalty, l2_penalty,
    margin_ranking_loss, mse_loss, multilabel_soft_margin_loss, nll_loss, poisson_nll_loss,
    smooth_l1_loss, triplet_margin_loss, CrossEntropyOptions, KlDivReduction, NllLossOptions,
    Reduction,
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
/// use forge::prelude::*;
/// let lp = Tensor::<f64>::from_vec(vec![-1.0, -2.0, -3.0, -4.0], &[2, 2]);
/// let y = Tensor::<i64>::from_vec(vec![0, 1], &[2]);
/// assert_eq!(nll(&lp, &y).item(), 2.5);
/// ```
#[track_caller]
pub fn nll<E: Float, D: Device>(
    log_probs: &Tensor<E, D>,
    targets: &Tensor<i64, D>,
) -> Tensor<E, D> {
    nll_loss(log_probs, targets, NllLossOptions::default())
}

/// Mean squared error, averaged: PyTorch's `F.mse_loss(input, target)`.
/// Other reductions: [`mse_loss`].
///
/// # Panics
/// When the shapes differ.
///
/// ```
/// use forge::prelude::*;
/// let a = Tensor::<f32>::from_vec(vec![1.0, 2.0], &[2]);
/// let b = Tensor::<f32>::from_vec(vec![0.0, 4.0], &[2]);
/// assert_eq!(mse(&a, &b).item(), 2.5);
/// ```
#[track_caller]
pub fn mse<E: Float, D: Device>(input: &Tensor<E, D>, target: &Tensor<E, D>) -> Tensor<E, D> {
    mse_loss(input, target, Reduction::Mean)
}

/// Mean absolute error, averaged: PyTorch's `F.l1_loss(input, target)`.
/// Other reductions: [`l1_loss`].
///
/// # Panics
/// When the shapes differ.
///
/// ```
/// use forge::prelude::*;
/// let a = Tensor::<f32>::from_vec(vec![1.0, 2.0], &[2]);
/// let b = Tensor::<f32>::from_vec(vec![0.0, 4.0], &[2]);
/// assert_eq!(l1(&a, &b).item(), 1.5);
/// ```
#[track_caller]
pub fn l1<E: Float, D: Device>(input: &Tensor<E, D>, target: &Tensor<E, D>) -> Tensor<E, D> {
    l1_loss(input, target, Reduction::Mean)
}

/// Binary cross-entropy of probabilities `p` in `[0, 1]` against targets,
/// averaged: PyTorch's `F.binary_cross_entropy(p, y)`. Weights and other
/// reductions: [`binary_cross_entropy`].
///
/// # Panics
/// When the shapes differ or a probability is outside `[0, 1]`.
///
/// ```
/// use forge::prelude::*;
/// let p = Tensor::<f64>::from_vec(vec![0.5, 0.5], &[2]);
/// let y = Tensor::<f64>::from_vec(vec![1.0, 0.0], &[2]);
/// assert!((bce(&p, &y).item() - 2f64.ln()).abs() < 1e-15);
/// ```
#[track_caller]
pub fn bce<E: Float, D: Device>(p: &Tensor<E, D>, target: &Tensor<E, D>) -> Tensor<E, D> {
    binary_cross_entropy(p, target, None, Reduction::Mean)
}

/// Binary cross-entropy on logits, averaged: PyTorch's
/// `F.binary_cross_entropy_with_logits(x, y)`. Weights, `pos_weight` and
/// other reductions: [`binary_cross_entropy_with_logits`].
///
/// # Panics
/// When the shapes differ.
///
/// ```
/// use forge::prelude::*;
/// let x = Tensor::<f64>::zeros(&[2]);
/// let y = Tensor::<f64>::from_vec(vec![1.0, 0.0], &[2]);
/// assert!((bce_with_logits(&x, &y).item() - 2f64.ln()).abs() < 1e-15);
/// ```
#[track_caller]
pub fn bce_with_logits<E: Float, D: Device>(
    x: &Tensor<E, D>,
    target: &Tensor<E, D>,
) -> Tensor<E, D> {
    binary_cross_entropy_with_logits(x, target, None, None, Reduction::Mean)
}
