//! [`RmsNorm`]: root-mean-square normalisation (PyTorch's `nn.RMSNorm`).

use super::forward::Forward;
use super::summary::record_output;
use crate::ops::rms_norm::rms_norm;
use crate::tensor::{Float, Tensor};
use forge_macros::Layer;

/// `x / sqrt(mean(x^2) + eps) * weight` over the trailing
/// `normalized_shape` (PyTorch's `nn.RMSNorm(normalized_shape, eps,
/// elementwise_affine)`; `eps = None` is the element type's machine
/// epsilon).
///
/// # Shapes
/// Input `[.., *normalized_shape]`; the output has the same shape.
///
/// # Panics
/// When the input's shape does not end with `normalized_shape`.
///
/// ```
/// use forge::prelude::*;
/// let norm = forge::nn::RmsNorm::<f64>::new(&[2]);
/// let y = norm.forward(Tensor::from_vec(vec![3.0, -3.0], &[1, 2]));
/// assert!((y.to_vec()[0] - 1.0).abs() < 1e-12);
/// assert_eq!(norm.parameters().len(), 1);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct RmsNorm<E: Float = f32> {
    /// Scale (initialised to 1), if `elementwise_affine`.
    pub weight: Option<Tensor<E>>,
    /// The trailing shape normalised over.
    #[skip]
    pub normalized_shape: Vec<usize>,
    /// Added to the mean square (`None`: machine epsilon).
    #[skip]
    pub eps: Option<f64>,
}

impl<E: Float> RmsNorm<E> {
    /// A layer over `normalized_shape` with PyTorch's defaults: a trainable
    /// weight of ones and `eps = None`.
    ///
    /// ```
    /// let n = forge::nn::RmsNorm::<f32>::new(&[3, 4]);
    /// assert_eq!(n.weight.as_ref().unwrap().shape(), &[3, 4]);
    /// ```
    pub fn new(normalized_shape: &[usize]) -> Self {
        RmsNorm {
            weight: Some(Tensor::ones(normalized_shape).requires_grad()),
            normalized_shape: normalized_shape.to_vec(),
            eps: None,
        }
    }

    /// The same layer without the weight (`elementwise_affine=False`).
    ///
    /// ```
    /// let n = forge::nn::RmsNorm::<f32>::new(&[4]).without_affine();
    /// assert!(n.weight.is_none());
    /// ```
    pub fn without_affine(mut self) -> Self {
        self.weight = None;
        self
    }

    /// The same layer with a fixed `eps`.
    ///
    /// ```
    /// let n = forge::nn::RmsNorm::<f32>::new(&[4]).with_eps(1e-6);
    /// assert_eq!(n.eps, Some(1e-6));
    /// ```
    pub fn with_eps(mut self, eps: f64) -> Self {
        self.eps = Some(eps);
        self
    }
}

impl<E: Float> Forward<Tensor<E>> for RmsNorm<E> {
    type Output = Tensor<E>;
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        record_output(
            self,
            rms_norm(&x, &self.normalized_shape, self.weight.as_ref(), self.eps),
        )
    }
}
