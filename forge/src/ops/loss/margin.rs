//! Margin and embedding losses with PyTorch's formulas and defaults:
//! `cosine_embedding_loss`, `margin_ranking_loss`, `triplet_margin_loss`
//! and `multilabel_soft_margin_loss`. Each is composed of differentiable
//! ops, so gradients of every order come from theirs.

use super::options::{
    CosineEmbeddingLossOptions, MarginRankingLossOptions, MultilabelSoftMarginLossOptions,
    TripletMarginLossOptions,
};
use super::spec::reduce;
use crate::ops::vector_norm::pairwise_distance;
use crate::tensor::{Device, Float, Tensor};

/// `F.cosine_embedding_loss(x1, x2, y, margin, reduction)`: per pair (rows
/// of `[N, D]` inputs, or one `[D]` pair), `1 - cos` where `y = 1` and
/// `max(0, cos - margin)` where `y = -1` (0 for any other label), with
/// `cos = x1.x2 / sqrt((|x1|^2 + 1e-12) (|x2|^2 + 1e-12))` as PyTorch
/// computes it. `y` has shape `[N]` (or `[]`). PyTorch's defaults: margin
/// 0, mean.
///
/// # Panics
/// When `x1` and `x2` differ in shape, are not 1-d or 2-d, or `y` does not
/// have one label per pair.
///
/// ```
/// use forge::nn::functional::*;
/// use forge::Tensor;
/// let a = Tensor::<f64>::from_vec(vec![1.0, 0.0, 1.0, 0.0], &[2, 2]);
/// let b = Tensor::<f64>::from_vec(vec![1.0, 0.0, 0.0, 1.0], &[2, 2]);
/// let y = Tensor::<f64>::from_vec(vec![1.0, -1.0], &[2]);
/// let l = cosine_embedding_loss_with(&a, &b, &y, CosineEmbeddingLossOptions { margin: 0.0, reduction: Reduction::None });
/// assert!(l.to_vec().iter().all(|v| v.abs() < 1e-9));
/// ```
#[track_caller]
pub fn cosine_embedding_loss_with<E: Float, D: Device>(
    x1: &Tensor<E, D>,
    x2: &Tensor<E, D>,
    y: &Tensor<E, D>,
    options: CosineEmbeddingLossOptions,
) -> Tensor<E, D> {
    let CosineEmbeddingLossOptions { margin, reduction } = options;
    let r = x1.rank();
    assert!(
        x1.shape() == x2.shape() && (r == 1 || r == 2) && y.shape() == &x1.shape()[..r - 1],
        "cosine_embedding_loss: inputs {:?} and {:?} with target {:?} (need [N, D], [N, D], [N] or [D], [D], [])",
        x1.shape(),
        x2.shape(),
        y.shape()
    );
    let dim = [r as isize - 1];
    let eps = E::from_f64(1e-12);
    let prod = x1.mul(x2).sum_dim(&dim, false);
    let m1 = x1.square().sum_dim(&dim, false).add_scalar(eps);
    let m2 = x2.square().sum_dim(&dim, false).add_scalar(eps);
    let cos = prod.div(&m1.mul(&m2).sqrt());
    let labels = y.detach();
    let is = |v: f64| labels.map(move |t| if t.to_f64() == v { E::one() } else { E::zero() });
    let pos = cos.rsub_scalar(E::one()).mul(&is(1.0));
    let neg = cos.sub_scalar(E::from_f64(margin)).relu().mul(&is(-1.0));
    reduce(pos.add(&neg), reduction)
}

/// `F.margin_ranking_loss(x1, x2, y, margin, reduction)`:
/// `max(0, -y (x1 - x2) + margin)` elementwise (`y` is 1 where `x1` should
/// rank higher, -1 where `x2` should). Differentiable in `x1`, `x2` and
/// `y`. PyTorch's defaults: margin 0, mean.
///
/// # Panics
/// When the three shapes differ.
///
/// ```
/// use forge::nn::functional::*;
/// use forge::Tensor;
/// let a = Tensor::<f64>::from_vec(vec![1.0, 0.0], &[2]);
/// let b = Tensor::<f64>::from_vec(vec![0.0, 0.5], &[2]);
/// let y = Tensor::<f64>::from_vec(vec![1.0, 1.0], &[2]);
/// assert_eq!(margin_ranking_loss_with(&a, &b, &y, MarginRankingLossOptions { margin: 0.1, reduction: Reduction::None }).to_vec(), vec![0.0, 0.6]);
/// ```
#[track_caller]
pub fn margin_ranking_loss_with<E: Float, D: Device>(
    x1: &Tensor<E, D>,
    x2: &Tensor<E, D>,
    y: &Tensor<E, D>,
    options: MarginRankingLossOptions,
) -> Tensor<E, D> {
    let MarginRankingLossOptions { margin, reduction } = options;
    assert!(
        x1.shape() == x2.shape() && x1.shape() == y.shape(),
        "margin_ranking_loss: inputs {:?} and {:?} and target {:?} differ in shape",
        x1.shape(),
        x2.shape(),
        y.shape()
    );
    let l = y
        .neg()
        .mul(&x1.sub(x2))
        .add_scalar(E::from_f64(margin))
        .relu();
    reduce(l, reduction)
}

/// `F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
/// reduction)`: `max(d(a, p) - d(a, n) + margin, 0)` per triplet, with
/// `d` the [`pairwise_distance`] (`p`-norm of the difference plus `eps`);
/// `swap` takes `min(d(a, n), d(p, n))` as the negative distance.
/// PyTorch's defaults: margin 1, p 2, eps 1e-6, no swap, mean.
///
/// # Panics
/// When the three shapes differ.
///
/// ```
/// use forge::nn::functional::*;
/// use forge::Tensor;
/// let a = Tensor::<f64>::from_vec(vec![0.0, 0.0], &[1, 2]);
/// let p = Tensor::<f64>::from_vec(vec![3.0, 4.0], &[1, 2]);
/// let n = Tensor::<f64>::from_vec(vec![0.0, 1.0], &[1, 2]);
/// let l = triplet_margin_loss_with(&a, &p, &n, TripletMarginLossOptions { margin: 1.0, p: 2.0, eps: 0.0, swap: false, reduction: Reduction::Mean });
/// assert!((l.item() - 5.0).abs() < 1e-12);
/// ```
#[allow(clippy::too_many_arguments)]
#[track_caller]
pub fn triplet_margin_loss_with<E: Float, D: Device>(
    anchor: &Tensor<E, D>,
    positive: &Tensor<E, D>,
    negative: &Tensor<E, D>,
    options: TripletMarginLossOptions,
) -> Tensor<E, D> {
    let TripletMarginLossOptions {
        margin,
        p,
        eps,
        swap,
        reduction,
    } = options;
    assert!(
        anchor.shape() == positive.shape() && anchor.shape() == negative.shape(),
        "triplet_margin_loss: anchor {:?}, positive {:?} and negative {:?} differ in shape",
        anchor.shape(),
        positive.shape(),
        negative.shape()
    );
    let d_pos = pairwise_distance(anchor, positive, p, eps, false);
    let mut d_neg = pairwise_distance(anchor, negative, p, eps, false);
    if swap {
        d_neg = d_neg.minimum(&pairwise_distance(positive, negative, p, eps, false));
    }
    reduce(
        d_pos.sub(&d_neg).add_scalar(E::from_f64(margin)).relu(),
        reduction,
    )
}

/// `F.multilabel_soft_margin_loss(input, target, weight, reduction)`: per
/// sample, the mean over the classes (last dimension) of
/// `-(y log sigmoid(x) + (1 - y) log sigmoid(-x))`, each class scaled by
/// `weight` when given. PyTorch's defaults: no weight, mean.
///
/// # Panics
/// When `input` and `target` differ in shape, or `weight` does not
/// broadcast against them.
///
/// ```
/// use forge::nn::functional::*;
/// use forge::Tensor;
/// let x = Tensor::<f64>::zeros(&[1, 2]);
/// let y = Tensor::<f64>::from_vec(vec![1.0, 0.0], &[1, 2]);
/// let l = multilabel_soft_margin_loss_with(&x, &y, MultilabelSoftMarginLossOptions { weight: None, reduction: Reduction::Mean });
/// assert!((l.item() - 2f64.ln()).abs() < 1e-12);
/// ```
#[track_caller]
pub fn multilabel_soft_margin_loss_with<E: Float, D: Device>(
    input: &Tensor<E, D>,
    target: &Tensor<E, D>,
    options: MultilabelSoftMarginLossOptions<E, D>,
) -> Tensor<E, D> {
    let reduction = options.reduction;
    let weight = options.weight.as_ref();
    assert!(
        input.shape() == target.shape() && input.rank() >= 1,
        "multilabel_soft_margin_loss: input {:?} and target {:?} differ in shape",
        input.shape(),
        target.shape()
    );
    let pos = target.mul(&input.log_sigmoid());
    let neg = target.rsub_scalar(E::one()).mul(&input.neg().log_sigmoid());
    let mut l = pos.add(&neg).neg();
    if let Some(w) = weight {
        l = l.mul(w);
    }
    let c = input.shape()[input.rank() - 1];
    let per_sample = l.sum_dim(&[-1], false).div_scalar(E::from_f64(c as f64));
    reduce(per_sample, reduction)
}
