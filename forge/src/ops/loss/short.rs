//! The losses' short forms: each under PyTorch's `torch.nn.functional`
//! name, taking only the tensors and using PyTorch's defaults, equal to its
//! `_with` form given `Default::default()` options (one options struct per
//! loss, in `options.rs`).

use super::class::{nll_loss_with, NllLossOptions};
use super::likelihood::{gaussian_nll_loss_with, poisson_nll_loss_with};
use super::margin::{
    cosine_embedding_loss_with, margin_ranking_loss_with, multilabel_soft_margin_loss_with,
    triplet_margin_loss_with,
};
use super::pointwise::{
    binary_cross_entropy_with, binary_cross_entropy_with_logits_with, huber_loss_with, kl_div_with,
    l1_loss_with, mse_loss_with, smooth_l1_loss_with,
};
use crate::tensor::{Device, Float, Tensor};

/// `F.mse_loss(input, target)`: mean squared error, averaged, PyTorch's defaults ([`MseLossOptions`](super::MseLossOptions)'s
/// `Default`). Other options: [`mse_loss_with`](super::mse_loss_with).
///
/// # Panics
/// As [`mse_loss_with`](super::mse_loss_with).
///
/// ```
/// use forge::nn::functional::*;
/// use forge::Tensor;
/// let a = Tensor::<f32>::from_vec(vec![1.0, 2.0], &[2]);
/// let b = Tensor::<f32>::from_vec(vec![0.0, 4.0], &[2]);
/// assert_eq!(mse_loss(&a, &b).item(), 2.5);
/// ```
#[track_caller]
pub fn mse_loss<E: Float, D: Device>(input: &Tensor<E, D>, target: &Tensor<E, D>) -> Tensor<E, D> {
    mse_loss_with(input, target, Default::default())
}

/// `F.l1_loss(input, target)`: mean absolute error, averaged, PyTorch's defaults ([`L1LossOptions`](super::L1LossOptions)'s
/// `Default`). Other options: [`l1_loss_with`](super::l1_loss_with).
///
/// # Panics
/// As [`l1_loss_with`](super::l1_loss_with).
///
/// ```
/// use forge::nn::functional::*;
/// use forge::Tensor;
/// let a = Tensor::<f32>::from_vec(vec![1.0, 2.0], &[2]);
/// let b = Tensor::<f32>::from_vec(vec![0.0, 4.0], &[2]);
/// assert_eq!(l1_loss(&a, &b).item(), 1.5);
/// ```
#[track_caller]
pub fn l1_loss<E: Float, D: Device>(input: &Tensor<E, D>, target: &Tensor<E, D>) -> Tensor<E, D> {
    l1_loss_with(input, target, Default::default())
}

/// `F.smooth_l1_loss(input, target)`: the smooth L1 loss with beta 1, averaged, PyTorch's defaults ([`SmoothL1LossOptions`](super::SmoothL1LossOptions)'s
/// `Default`). Other options: [`smooth_l1_loss_with`](super::smooth_l1_loss_with).
///
/// # Panics
/// As [`smooth_l1_loss_with`](super::smooth_l1_loss_with).
///
/// ```
/// use forge::nn::functional::*;
/// use forge::Tensor;
/// let a = Tensor::<f64>::from_vec(vec![0.5, 3.0], &[2]);
/// assert_eq!(smooth_l1_loss(&a, &Tensor::zeros(&[2])).item(), (0.125 + 2.5) / 2.0);
/// ```
#[track_caller]
pub fn smooth_l1_loss<E: Float, D: Device>(
    input: &Tensor<E, D>,
    target: &Tensor<E, D>,
) -> Tensor<E, D> {
    smooth_l1_loss_with(input, target, Default::default())
}

/// `F.huber_loss(input, target)`: the Huber loss with delta 1, averaged, PyTorch's defaults ([`HuberLossOptions`](super::HuberLossOptions)'s
/// `Default`). Other options: [`huber_loss_with`](super::huber_loss_with).
///
/// # Panics
/// As [`huber_loss_with`](super::huber_loss_with).
///
/// ```
/// use forge::nn::functional::*;
/// use forge::Tensor;
/// let a = Tensor::<f64>::from_vec(vec![0.5, 3.0], &[2]);
/// assert_eq!(huber_loss(&a, &Tensor::zeros(&[2])).item(), (0.125 + 2.5) / 2.0);
/// ```
#[track_caller]
pub fn huber_loss<E: Float, D: Device>(
    input: &Tensor<E, D>,
    target: &Tensor<E, D>,
) -> Tensor<E, D> {
    huber_loss_with(input, target, Default::default())
}

/// `F.binary_cross_entropy(input, target)`: binary cross-entropy of probabilities, unweighted, averaged, PyTorch's defaults ([`BinaryCrossEntropyOptions`](super::BinaryCrossEntropyOptions)'s
/// `Default`). Other options: [`binary_cross_entropy_with`](super::binary_cross_entropy_with).
///
/// # Panics
/// As [`binary_cross_entropy_with`](super::binary_cross_entropy_with).
///
/// ```
/// use forge::nn::functional::*;
/// use forge::Tensor;
/// let p = Tensor::<f64>::from_vec(vec![0.5, 0.5], &[2]);
/// let y = Tensor::<f64>::from_vec(vec![1.0, 0.0], &[2]);
/// assert!((binary_cross_entropy(&p, &y).item() - 2f64.ln()).abs() < 1e-15);
/// ```
#[track_caller]
pub fn binary_cross_entropy<E: Float, D: Device>(
    input: &Tensor<E, D>,
    target: &Tensor<E, D>,
) -> Tensor<E, D> {
    binary_cross_entropy_with(input, target, Default::default())
}

/// `F.binary_cross_entropy_with_logits(input, target)`: binary cross-entropy on logits, unweighted, averaged, PyTorch's defaults ([`BinaryCrossEntropyWithLogitsOptions`](super::BinaryCrossEntropyWithLogitsOptions)'s
/// `Default`). Other options: [`binary_cross_entropy_with_logits_with`](super::binary_cross_entropy_with_logits_with).
///
/// # Panics
/// As [`binary_cross_entropy_with_logits_with`](super::binary_cross_entropy_with_logits_with).
///
/// ```
/// use forge::nn::functional::*;
/// use forge::Tensor;
/// let x = Tensor::<f64>::zeros(&[2]);
/// let y = Tensor::<f64>::from_vec(vec![1.0, 0.0], &[2]);
/// assert!((binary_cross_entropy_with_logits(&x, &y).item() - 2f64.ln()).abs() < 1e-15);
/// ```
#[track_caller]
pub fn binary_cross_entropy_with_logits<E: Float, D: Device>(
    input: &Tensor<E, D>,
    target: &Tensor<E, D>,
) -> Tensor<E, D> {
    binary_cross_entropy_with_logits_with(input, target, Default::default())
}

/// `F.kl_div(input, target)`: the KL divergence of log-probabilities, averaged over every element (PyTorch's default `reduction='mean'`), PyTorch's defaults ([`KlDivOptions`](super::KlDivOptions)'s
/// `Default`). Other options: [`kl_div_with`](super::kl_div_with).
///
/// # Panics
/// As [`kl_div_with`](super::kl_div_with).
///
/// ```
/// use forge::nn::functional::*;
/// use forge::Tensor;
/// let p = Tensor::<f64>::from_vec(vec![0.5, 0.5], &[2]);
/// assert_eq!(kl_div(&p.log(), &p).item(), 0.0);
/// ```
#[track_caller]
pub fn kl_div<E: Float, D: Device>(input: &Tensor<E, D>, target: &Tensor<E, D>) -> Tensor<E, D> {
    kl_div_with(input, target, Default::default())
}

/// `F.poisson_nll_loss(input, target)`: the Poisson negative log-likelihood of log-rates, averaged, PyTorch's defaults ([`PoissonNllLossOptions`](super::PoissonNllLossOptions)'s
/// `Default`). Other options: [`poisson_nll_loss_with`](super::poisson_nll_loss_with).
///
/// # Panics
/// As [`poisson_nll_loss_with`](super::poisson_nll_loss_with).
///
/// ```
/// use forge::nn::functional::*;
/// use forge::Tensor;
/// let x = Tensor::<f64>::zeros(&[2]);
/// let y = Tensor::<f64>::from_vec(vec![1.0, 3.0], &[2]);
/// assert_eq!(poisson_nll_loss(&x, &y).item(), 1.0);
/// ```
#[track_caller]
pub fn poisson_nll_loss<E: Float, D: Device>(
    input: &Tensor<E, D>,
    target: &Tensor<E, D>,
) -> Tensor<E, D> {
    poisson_nll_loss_with(input, target, Default::default())
}

/// `F.gaussian_nll_loss(input, target, var)`: the Gaussian negative log-likelihood without the constant, averaged, PyTorch's defaults ([`GaussianNllLossOptions`](super::GaussianNllLossOptions)'s
/// `Default`). Other options: [`gaussian_nll_loss_with`](super::gaussian_nll_loss_with).
///
/// # Panics
/// As [`gaussian_nll_loss_with`](super::gaussian_nll_loss_with).
///
/// ```
/// use forge::nn::functional::*;
/// use forge::Tensor;
/// let x = Tensor::<f64>::zeros(&[1, 2]);
/// let v = Tensor::<f64>::ones(&[1, 2]);
/// assert_eq!(gaussian_nll_loss(&x, &x, &v).item(), 0.0);
/// ```
#[track_caller]
pub fn gaussian_nll_loss<E: Float, D: Device>(
    input: &Tensor<E, D>,
    target: &Tensor<E, D>,
    var: &Tensor<E, D>,
) -> Tensor<E, D> {
    gaussian_nll_loss_with(input, target, var, Default::default())
}

/// `F.cosine_embedding_loss(x1, x2, y)`: the cosine embedding loss with margin 0, averaged, PyTorch's defaults ([`CosineEmbeddingLossOptions`](super::CosineEmbeddingLossOptions)'s
/// `Default`). Other options: [`cosine_embedding_loss_with`](super::cosine_embedding_loss_with).
///
/// # Panics
/// As [`cosine_embedding_loss_with`](super::cosine_embedding_loss_with).
///
/// ```
/// use forge::nn::functional::*;
/// use forge::Tensor;
/// let a = Tensor::<f64>::from_vec(vec![1.0, 0.0], &[1, 2]);
/// let y = Tensor::<f64>::ones(&[1]);
/// assert!(cosine_embedding_loss(&a, &a, &y).item().abs() < 1e-9);
/// ```
#[track_caller]
pub fn cosine_embedding_loss<E: Float, D: Device>(
    x1: &Tensor<E, D>,
    x2: &Tensor<E, D>,
    y: &Tensor<E, D>,
) -> Tensor<E, D> {
    cosine_embedding_loss_with(x1, x2, y, Default::default())
}

/// `F.margin_ranking_loss(x1, x2, y)`: the margin ranking loss with margin 0, averaged, PyTorch's defaults ([`MarginRankingLossOptions`](super::MarginRankingLossOptions)'s
/// `Default`). Other options: [`margin_ranking_loss_with`](super::margin_ranking_loss_with).
///
/// # Panics
/// As [`margin_ranking_loss_with`](super::margin_ranking_loss_with).
///
/// ```
/// use forge::nn::functional::*;
/// use forge::Tensor;
/// let a = Tensor::<f64>::from_vec(vec![1.0, 0.0], &[2]);
/// let b = Tensor::<f64>::from_vec(vec![0.0, 0.5], &[2]);
/// let y = Tensor::<f64>::ones(&[2]);
/// assert_eq!(margin_ranking_loss(&a, &b, &y).item(), 0.25);
/// ```
#[track_caller]
pub fn margin_ranking_loss<E: Float, D: Device>(
    x1: &Tensor<E, D>,
    x2: &Tensor<E, D>,
    y: &Tensor<E, D>,
) -> Tensor<E, D> {
    margin_ranking_loss_with(x1, x2, y, Default::default())
}

/// `F.triplet_margin_loss(anchor, positive, negative)`: the triplet margin loss with margin 1, p 2, eps 1e-6, no swap, averaged, PyTorch's defaults ([`TripletMarginLossOptions`](super::TripletMarginLossOptions)'s
/// `Default`). Other options: [`triplet_margin_loss_with`](super::triplet_margin_loss_with).
///
/// # Panics
/// As [`triplet_margin_loss_with`](super::triplet_margin_loss_with).
///
/// ```
/// use forge::nn::functional::*;
/// use forge::Tensor;
/// let a = Tensor::<f64>::zeros(&[1, 2]);
/// let far = Tensor::<f64>::from_vec(vec![3.0, 4.0], &[1, 2]);
/// assert_eq!(triplet_margin_loss(&a, &a, &far).item(), 0.0);
/// ```
#[track_caller]
pub fn triplet_margin_loss<E: Float, D: Device>(
    anchor: &Tensor<E, D>,
    positive: &Tensor<E, D>,
    negative: &Tensor<E, D>,
) -> Tensor<E, D> {
    triplet_margin_loss_with(anchor, positive, negative, Default::default())
}

/// `F.multilabel_soft_margin_loss(input, target)`: the multi-label soft margin loss, unweighted, averaged, PyTorch's defaults ([`MultilabelSoftMarginLossOptions`](super::MultilabelSoftMarginLossOptions)'s
/// `Default`). Other options: [`multilabel_soft_margin_loss_with`](super::multilabel_soft_margin_loss_with).
///
/// # Panics
/// As [`multilabel_soft_margin_loss_with`](super::multilabel_soft_margin_loss_with).
///
/// ```
/// use forge::nn::functional::*;
/// use forge::Tensor;
/// let x = Tensor::<f64>::zeros(&[1, 2]);
/// let y = Tensor::<f64>::from_vec(vec![1.0, 0.0], &[1, 2]);
/// assert!((multilabel_soft_margin_loss(&x, &y).item() - 2f64.ln()).abs() < 1e-12);
/// ```
#[track_caller]
pub fn multilabel_soft_margin_loss<E: Float, D: Device>(
    input: &Tensor<E, D>,
    target: &Tensor<E, D>,
) -> Tensor<E, D> {
    multilabel_soft_margin_loss_with(input, target, Default::default())
}

/// `F.nll_loss(input, target)`: the negative log-likelihood of
/// log-probabilities against class indices, unweighted, averaged, no
/// ignored class other than -100 ([`NllLossOptions`]'s `Default`). Other
/// options: [`nll_loss_with`](super::nll_loss_with).
///
/// # Panics
/// As [`nll_loss_with`](super::nll_loss_with).
///
/// ```
/// use forge::nn::functional::*;
/// use forge::Tensor;
/// let lp = Tensor::<f64>::from_vec(vec![-1.0, -2.0, -3.0, -4.0], &[2, 2]);
/// let y = Tensor::<i64>::from_vec(vec![0, 1], &[2]);
/// assert_eq!(nll_loss(&lp, &y).item(), 2.5);
/// ```
#[track_caller]
pub fn nll_loss<E: Float, D: Device>(
    input: &Tensor<E, D>,
    target: &Tensor<i64, D>,
) -> Tensor<E, D> {
    nll_loss_with(input, target, NllLossOptions::default())
}
