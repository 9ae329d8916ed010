//! Tools for looking inside a computation: anomaly detection (the first
//! op whose output or gradient is not finite), graph export, custom
//! differentiable ops, functional transforms and the profiler.
//!
//! The tools that watch ops run through one hook in
//! [`Tensor::record`](crate::Tensor::record) and one around every backward
//! rule; when no tool is on, each hook costs one relaxed atomic load.

mod anomaly;
mod custom;
mod func;
mod graph;
pub(crate) mod hooks;
mod profiler;
mod switch;

pub(crate) use anomaly::first_nonfinite;

pub use anomaly::{
    detect_anomaly, is_anomaly_enabled, set_detect_anomaly, Anomaly, CallSite, Pass,
};
pub use custom::{apply_op, BackwardArgs, CustomOp, ForwardCtx};
pub use func::{grad, hessian, hvp, jacobian, jvp, per_sample_grads, vjp};
pub use graph::{to_dot, Graph, GraphNode, NodeKind};
pub use profiler::{profile, Event, OpRow, Phase, Profile, Profiler};
