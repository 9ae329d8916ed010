//! One node of the tape.

use crate::tensor::{Device, Element, Tensor};
use std::panic::Location;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// What a backward rule receives: the gradient of the node's output, the
/// node's inputs, and whether the rule's own operations must be recorded
/// (for gradients of gradients).
pub struct BackwardCtx<'a, E: Element, D: Device> {
    /// The gradient flowing into the node's output (same shape as the output).
    pub grad: &'a Tensor<E, D>,
    /// The op's inputs, in the order they were given to [`Tensor::record`].
    pub inputs: &'a [Tensor<E, D>],
    /// True in [`Tensor::backward_with_graph`]: the rule may not use values
    /// that were computed without the tape (saved detached outputs), since
    /// the returned gradients must be differentiable again.
    pub create_graph: bool,
}

impl<E: Element, D: Device> BackwardCtx<'_, E, D> {
    /// Whether input `i` needs a gradient (it is tracked).
    pub fn needs(&self, i: usize) -> bool {
        self.inputs[i].is_tracked()
    }
}

/// A backward rule: returns one optional gradient per input.
pub(crate) type BackwardFn<E, D> =
    Box<dyn Fn(&BackwardCtx<'_, E, D>) -> Vec<Option<Tensor<E, D>>> + Send + Sync>;

/// A node of the tape. Leaves (tensors that require a gradient) have no
/// inputs and no rule.
pub struct Node<E: Element, D: Device> {
    pub(crate) id: u64,
    pub(crate) name: &'static str,
    pub(crate) inputs: Vec<Tensor<E, D>>,
    pub(crate) backward: Option<BackwardFn<E, D>>,
    /// Where the op was called: the user's line when every function from
    /// the public op down to [`Tensor::record`] is `#[track_caller]`,
    /// otherwise a line inside forge. `None` for leaves.
    pub(crate) origin: Option<&'static Location<'static>>,
}

impl<E: Element, D: Device> Node<E, D> {
    pub(crate) fn leaf() -> Self {
        Node {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            name: "leaf",
            inputs: Vec::new(),
            backward: None,
            origin: None,
        }
    }

    pub(crate) fn op(
        name: &'static str,
        inputs: Vec<Tensor<E, D>>,
        f: BackwardFn<E, D>,
        origin: &'static Location<'static>,
    ) -> Self {
        Node {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            name,
            inputs,
            backward: Some(f),
            origin: Some(origin),
        }
    }
}

impl<E: Element, D: Device> Drop for Node<E, D> {
    /// Frees long chains iteratively: a recursive drop of a graph with
    /// millions of nodes (a long RNN unroll) would overflow the stack.
    fn drop(&mut self) {
        let mut stack: Vec<Arc<Node<E, D>>> = Vec::new();
        for t in self.inputs.drain(..) {
            if let Some(n) = t.node {
                stack.push(n);
            }
        }
        while let Some(n) = stack.pop() {
            if let Ok(mut inner) = Arc::try_unwrap(n) {
                for t in inner.inputs.drain(..) {
                    if let Some(n) = t.node {
                        stack.push(n);
                    }
                }
            }
        }
    }
}
