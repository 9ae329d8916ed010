//! The output of an int8 or fp8 layer in a recording context: recorded on
//! the tape like any op, with a backward that panics naming the layer, so
//! that a backward pass reaching it fails loudly instead of silently
//! leaving the layers before it without gradients.

use crate::tensor::{Float, Tensor};

/// `y` recorded as the output of op `op` with `inputs` (the float tensors
/// it was computed from: the layer's input, its biases, its initial
/// states); a backward pass that reaches it panics with "`layer` is
/// inference only". Under `no_grad`, or when no input is tracked, `y` is
/// returned as it is.
#[track_caller]
pub(crate) fn inference_only<E: Float>(
    y: Tensor<E>,
    inputs: Vec<Tensor<E>>,
    op: &'static str,
    layer: String,
) -> Tensor<E> {
    y.record(op, inputs, move |_| {
        panic!(
            "{layer} is inference only: backward through it is not supported (run it \
             under no_grad, or keep the layer in f32 to train)"
        )
    })
}
