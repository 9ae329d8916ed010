//! The two hook points the tools share: one in [`Tensor::record`] (every
//! op's forward) and one around every backward rule.
//!
//! [`active`] (from `switch.rs`) is a single relaxed load of a process-wide
//! counter of tools switched on anywhere; only when it is non-zero do the
//! hooks look at the thread's own settings.

pub(crate) use super::switch::active;
use super::{anomaly, profiler};
use crate::tensor::node::{BackwardCtx, BackwardFn, Node};
use crate::tensor::{Device, Element, Tensor};
use std::cell::Cell;
use std::panic::Location;

thread_local! {
    /// Depth of backward rules running on this thread: ops a rule calls
    /// are part of that rule, not forward ops of the user's.
    static IN_RULE: Cell<u32> = const { Cell::new(0) };
}

/// Whether a backward rule is running on this thread.
pub(crate) fn in_rule() -> bool {
    IN_RULE.with(|d| d.get() > 0)
}

/// Called by [`Tensor::record`] for every op's result, before the node is
/// made.
pub(crate) fn forward<E: Element, D: Device>(
    name: &'static str,
    out: &Tensor<E, D>,
    inputs: &[Tensor<E, D>],
    origin: &'static Location<'static>,
) {
    if in_rule() {
        return;
    }
    if anomaly::enabled() {
        anomaly::check_forward(name, out, inputs, origin);
    }
    if let Some(s) = profiler::session() {
        profiler::on_forward(s, name, out, inputs, origin);
    }
}

/// Called by [`Tensor::record`] once the node of the op just seen by
/// [`forward`] exists (the profiler credits its backward rule to the same
/// layer).
pub(crate) fn node_made(id: u64) {
    if in_rule() {
        return;
    }
    if let Some(s) = profiler::session() {
        profiler::on_node(s, id);
    }
}

/// Runs one node's backward rule on behalf of the reverse pass.
pub(crate) fn backward<E: Element, D: Device>(
    node: &Node<E, D>,
    ctx: &BackwardCtx<'_, E, D>,
    rule: &BackwardFn<E, D>,
) -> Vec<Option<Tensor<E, D>>> {
    let grads = {
        let _rule = RuleGuard::enter();
        match profiler::session() {
            Some(s) => profiler::on_backward(
                s,
                node.id,
                node.name,
                node.origin,
                &node.inputs,
                ctx.grad,
                || rule(ctx),
            ),
            None => rule(ctx),
        }
    };
    if anomaly::enabled() {
        anomaly::check_backward(node, ctx, &grads);
    }
    grads
}

/// Marks a backward rule as running on this thread until dropped.
struct RuleGuard;

impl RuleGuard {
    fn enter() -> Self {
        IN_RULE.with(|d| d.set(d.get() + 1));
        RuleGuard
    }
}

impl Drop for RuleGuard {
    fn drop(&mut self) {
        IN_RULE.with(|d| d.set(d.get() - 1));
    }
}
