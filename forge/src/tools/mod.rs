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

pub(crate) use anomaly::first_nonfinite;

pub use anomaly::{
    detect_anomaly, is_anomaly_enabled, set_detect_anomaly, Anomaly, CallSite, Pass,
};
pub use custom::{apply_op, BackwardArgs, CustomOp, ForwardCtx};
pub use func::{grad, hessian, hvp, jacobian, jvp, per_sample_grads, vjp};
pub use graph::{to_dot, Graph, GraphNode, NodeKind};
pub use profiler::{profile, Event, OpRow, Phase, Profile, Profiler};

/// The guide's chapters on these tools, compiled as doc tests.
#[cfg(doctest)]
pub mod chapters {
    /// `docs/src/tools-anomaly.md`.
    #[doc = include_str!("../../../docs/src/tools-anomaly.md")]
    pub struct Anomaly;
    /// `docs/src/tools-graph.md`.
    #[doc = include_str!("../../../docs/src/tools-graph.md")]
    pub struct Graph;
    /// `docs/src/tools-custom-ops.md`.
    #[doc = include_str!("../../../docs/src/tools-custom-ops.md")]
    pub struct CustomOps;
    /// `docs/src/tools-transforms.md`.
    #[doc = include_str!("../../../docs/src/tools-transforms.md")]
    pub struct Transforms;
    /// `docs/src/tools-profiler.md`.
    #[doc = include_str!("../../../docs/src/tools-profiler.md")]
    pub struct Profiler;
}
