//! Layers without tensors that reshape or apply a closure: [`Flatten`],
//! [`Reshape`], [`Lambda`].

use super::forward::Forward;
use super::summary::record_output;
use crate::tensor::{Float, Tensor};
use forge_macros::Layer;
use std::fmt;
use std::sync::Arc;

/// Flattens every dimension but the first: `[n, a, b, …]` becomes
/// `[n, a*b*…]` (PyTorch's `nn.Flatten()`).
///
/// # Shapes
/// Input of rank >= 1; output `[n, rest]`.
///
/// # Panics
/// On a 0-d input.
///
/// ```
/// use forge::prelude::*;
/// let y = Flatten.forward(Tensor::<f32>::zeros(&[2, 3, 4]));
/// assert_eq!(y.shape(), &[2, 12]);
/// ```
#[derive(Layer, Clone, Copy, Debug, Default, PartialEq)]
pub struct Flatten;

impl<E: Float> Forward<Tensor<E>> for Flatten {
    type Output = Tensor<E>;
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        shape_assert!(
            x.rank() >= 1,
            "Flatten: expected an input of rank >= 1, got a 0-d tensor"
        );
        let n = x.shape()[0];
        let rest: usize = x.shape()[1..].iter().product();
        record_output(self, x.view(&[n, rest]))
    }
}

/// Reshapes its input to a fixed shape, where one entry may be `-1`
/// (inferred), as [`Tensor::reshape`].
///
/// # Panics
/// When the input's element count does not fit the shape (the message
/// names both shapes).
///
/// ```
/// use forge::prelude::*;
/// let y = Reshape(vec![-1, 2]).forward(Tensor::<f32>::zeros(&[3, 4]));
/// assert_eq!(y.shape(), &[6, 2]);
/// ```
#[derive(Layer, Clone, Debug, PartialEq)]
pub struct Reshape(#[skip] pub Vec<isize>);

impl<E: Float> Forward<Tensor<E>> for Reshape {
    type Output = Tensor<E>;
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        record_output(self, x.reshape(&self.0))
    }
}

/// A layer that applies a closure: glue in a [`Sequential`](super::Sequential)
/// (a residual add, a scaling, a tuple split). It holds no tensors; a
/// closure that captures tensors keeps them out of the state dict.
///
/// `Lambda<I, O>` maps `I` to `O`; both default to `Tensor<f32>`, so a
/// field of a derived struct can be typed plainly `Lambda`.
///
/// ```
/// use forge::prelude::*;
/// let double = Lambda::new(|x: Tensor| x.mul_scalar(2.0));
/// let model = sequential![double, Relu];
/// assert_eq!(model.forward(Tensor::ones(&[2])).to_vec(), vec![2.0, 2.0]);
/// ```
#[derive(Layer)]
pub struct Lambda<I = Tensor, O = I> {
    #[skip]
    f: Arc<dyn Fn(I) -> O + Send + Sync>,
}

impl<I, O> Lambda<I, O> {
    /// Wraps `f`.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let split = Lambda::new(|x: Tensor<f64>| (x.clone(), x));
    /// let (a, b) = split.forward(Tensor::zeros(&[1]));
    /// assert_eq!(a.shape(), b.shape());
    /// ```
    pub fn new(f: impl Fn(I) -> O + Send + Sync + 'static) -> Self {
        Lambda { f: Arc::new(f) }
    }
}

impl<I, O> Clone for Lambda<I, O> {
    fn clone(&self) -> Self {
        Lambda { f: self.f.clone() }
    }
}

impl<I, O> fmt::Debug for Lambda<I, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Lambda<{}, {}>",
            std::any::type_name::<I>(),
            std::any::type_name::<O>()
        )
    }
}

impl<I, O> Forward<I> for Lambda<I, O> {
    type Output = O;
    fn forward(&self, x: I) -> O {
        (self.f)(x)
    }
}
