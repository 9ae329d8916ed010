//! The losses. Class losses on integer targets ([`cross_entropy_with`],
//! [`nll_loss`]: `class.rs`, one fused op in `class_fused.rs` with the
//! log-softmax kernels in `cross_entropy.rs`) and pointwise losses
//! ([`mse_loss`], [`l1_loss`], [`binary_cross_entropy`], ...:
//! `pointwise.rs`), margin and embedding losses (`margin.rs`) and the
//! Poisson / Gaussian likelihoods (`likelihood.rs`), composed of ops.
//!
//! The imports point one way: `spec.rs` ([`Reduction`] and the class-loss
//! constants) is the leaf every other loss file uses; `class.rs` uses
//! `class_fused.rs`, which uses `cross_entropy.rs`; this file only
//! re-exports.

mod class;
mod class_fused;
mod cross_entropy;
mod likelihood;
mod margin;
mod pointwise;
mod spec;

pub use class::{cross_entropy_with, nll_loss, CrossEntropyOptions, NllLossOptions};
pub use likelihood::{gaussian_nll_loss, poisson_nll_loss};
pub use margin::{
    cosine_embedding_loss, margin_ranking_loss, multilabel_soft_margin_loss, triplet_margin_loss,
};
pub use pointwise::{
    binary_cross_entropy, binary_cross_entropy_with_logits, huber_loss, kl_div, l1_loss,
    l1_penalty, l2_penalty, mse_loss, smooth_l1_loss, KlDivReduction,
};
pub use spec::Reduction;
