//! The autograd tape: graph nodes, the backward pass, [`Gradients`],
//! [`no_grad`] and [`gradcheck`].
//!
//! Every tracked tensor owns a `Node` with an id from one process-wide
//! counter. A node's parents always have smaller ids than the node, so
//! visiting nodes in descending id order is a topological order; gradients
//! are accumulated in that fixed order, which makes them bit-identical from
//! run to run and for any thread count.

mod backward;
mod grad_mode;
mod gradcheck;
mod node;
#[cfg(test)]
mod tests;

pub use backward::Gradients;
pub use grad_mode::{is_grad_enabled, no_grad, NoGradGuard};
pub use gradcheck::{gradcheck, GradcheckReport};
pub use node::BackwardCtx;
pub(crate) use node::{BackwardFn, Node};
