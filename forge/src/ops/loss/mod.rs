//! The losses. Class losses on integer targets ([`cross_entropy_with`],
//! [`nll_loss_with`]: `class.rs`, one fused op in `class_fused.rs` with the
//! log-softmax kernels in `cross_entropy.rs`) and pointwise losses
//! ([`mse_loss`], [`l1_loss`], [`binary_cross_entropy`], ...:
//! `pointwise.rs`), margin and embedding losses (`margin.rs`) and the
//! Poisson / Gaussian likelihoods (`likelihood.rs`), composed of ops, and
//! the CTC loss (`ctc.rs`, its own forward-backward kernel).
//!
//! Names follow `torch.nn.functional`: each loss has a short form under
//! PyTorch's name with PyTorch's defaults (`mse_loss(&x, &y)`, `short.rs`)
//! and one `_with` form taking its options struct (`mse_loss_with(&x, &y,
//! MseLossOptions { .. })`, the structs in `options.rs`).
//!
//! The imports point one way: `spec.rs` ([`Reduction`] and the class-loss
//! constants) is the leaf every other loss file uses, `options.rs` the leaf
//! beside it; `class.rs` uses `class_fused.rs`, which uses
//! `cross_entropy.rs`; `short.rs` uses the files of the `_with` forms; this
//! file only re-exports.

mod class;
mod class_fused;
mod cross_entropy;
mod ctc;
mod likelihood;
mod margin;
mod options;
mod pointwise;
mod short;
mod spec;

pub use class::{cross_entropy_with, nll_loss_with, CrossEntropyOptions, NllLossOptions};
pub use ctc::{ctc_loss, ctc_loss_with, CtcLossOptions};
pub use likelihood::{gaussian_nll_loss_with, poisson_nll_loss_with};
pub use margin::{
    cosine_embedding_loss_with, margin_ranking_loss_with, multilabel_soft_margin_loss_with,
    triplet_margin_loss_with,
};
pub use options::{
    BinaryCrossEntropyOptions, BinaryCrossEntropyWithLogitsOptions, CosineEmbeddingLossOptions,
    GaussianNllLossOptions, HuberLossOptions, KlDivOptions, KlDivReduction, L1LossOptions,
    MarginRankingLossOptions, MseLossOptions, MultilabelSoftMarginLossOptions,
    PoissonNllLossOptions, SmoothL1LossOptions, TripletMarginLossOptions,
};
pub use pointwise::{
    binary_cross_entropy_with, binary_cross_entropy_with_logits_with, huber_loss_with, kl_div_with,
    l1_loss_with, l1_penalty, l2_penalty, mse_loss_with, smooth_l1_loss_with,
};
pub use short::{
    binary_cross_entropy, binary_cross_entropy_with_logits, cosine_embedding_loss,
    gaussian_nll_loss, huber_loss, kl_div, l1_loss, margin_ranking_loss, mse_loss,
    multilabel_soft_margin_loss, nll_loss, poisson_nll_loss, smooth_l1_loss, triplet_margin_loss,
};
pub use spec::Reduction;
