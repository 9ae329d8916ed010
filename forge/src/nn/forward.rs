//! [`Forward`]: applying a layer to an input.

/// Applies a layer to an input of type `Input`. A layer may implement it for
/// several input types, and `Output` may be anything (a tuple of tensors, a
/// tensor and a state, ...).
///
/// ```
/// use forge::prelude::*;
///
/// /// Returns its input and the input doubled.
/// struct Fork;
/// impl Forward<Tensor> for Fork {
///     type Output = (Tensor, Tensor);
///     fn forward(&self, x: Tensor) -> (Tensor, Tensor) {
///         (x.clone(), x.mul_scalar(2.0))
///     }
/// }
///
/// let (a, b) = Fork.forward(Tensor::ones(&[2]));
/// assert_eq!((a.to_vec(), b.to_vec()), (vec![1.0; 2], vec![2.0; 2]));
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot take `{Input}` as its input",
    label = "`{Self}` does not implement `Forward<{Input}>`",
    note = "check the element type and the shape of what is passed (a `Tensor<f64>` is not a `Tensor<f32>`)"
)]
pub trait Forward<Input> {
    /// What the layer returns.
    type Output;
    /// Computes the layer's output.
    ///
    /// Declared `#[track_caller]`, so every implementation (derived or
    /// hand-written) reports a shape panic at the line that called
    /// `forward`, not inside the layer.
    #[track_caller]
    fn forward(&self, x: Input) -> Self::Output;
}

impl<I, L: Forward<I> + ?Sized> Forward<I> for Box<L> {
    type Output = L::Output;
    fn forward(&self, x: I) -> L::Output {
        (**self).forward(x)
    }
}

impl<I, L: Forward<I> + ?Sized> Forward<I> for &L {
    type Output = L::Output;
    fn forward(&self, x: I) -> L::Output {
        (**self).forward(x)
    }
}
