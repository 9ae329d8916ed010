//! Normalisation: [`batch_norm`] (`batch_norm.rs`), [`layer_norm`]
//! (`layer_norm.rs`) and [`group_norm`] (`group_norm.rs`), each a fused op
//! whose `create_graph` rule is written in differentiable tensor ops (mean,
//! centred second moment, `rsqrt`), so gradients of any order flow through
//! the statistics.
//!
//! The imports point one way: the three ops use `stats.rs` (what they
//! share), which uses none of them; this file only re-exports.

mod batch_norm;
mod group_norm;
mod layer_norm;
mod stats;

pub use batch_norm::batch_norm;
pub use group_norm::group_norm;
pub(crate) use layer_norm::add_layer_norm_in_place;
pub use layer_norm::layer_norm;
