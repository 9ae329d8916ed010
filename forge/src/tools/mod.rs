//! Tools for looking inside a computation: anomaly detection (the first
//! op whose output or gradient is not finite), graph export, custom
//! differentiable ops, functional transforms, the profiler and the
//! layer-by-layer [`diff`] against a reference run (PyTorch).
//!
//! The tools that watch ops run through one hook in
//! [`Tensor::record`](crate::Tensor::record) and one around every backward
//! rule; when no tool is on, each hook costs one relaxed atomic load.

mod anomaly;
mod custom;
pub mod diff;
mod func;
mod graph;
pub(crate) mod hooks;
mod profile_data;
mod profiler;
pub(crate) mod scope;
mod switch;

pub(crate) use anomaly::first_nonfinite;

pub use anomaly::{
    detect_anomaly, is_anomaly_enabled, set_detect_anomaly, Anomaly, CallSite, Pass,
};
pub use custom::{apply_op, BackwardArgs, CustomOp, ForwardCtx};
pub use func::{grad, hessian, hvp, jacobian, jvp, per_sample_grads, vjp};
pub use graph::{to_dot, Graph, GraphNode, NodeKind};
pub use profile_data::{Event, LayerRow, OpRow, Phase, Profile};
pub use profiler::{profile, Profiler};
pub use scope::layer_scope;
