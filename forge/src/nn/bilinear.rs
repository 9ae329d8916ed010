//! [`Bilinear`]: `torch.nn.Bilinear`, the layer form of
//! [`bilinear`](crate::nn::functional::bilinear).

use super::forward::Forward;
use super::summary::record_output;
use crate::ops::bilinear::bilinear;
use crate::tensor::{Float, Rng, Tensor};
use forge_macros::Layer;

/// `y = x1^T A x2 + b` per output feature (`torch.nn.Bilinear`).
///
/// # Shapes
/// - `weight`: `[out_features, in1_features, in2_features]`
/// - `bias`: `[out_features]`
/// - inputs `[.., in1_features]` and `[.., in2_features]` (same leading
///   dimensions); output `[.., out_features]`
///
/// PyTorch initialises weight and bias from `U(-b, b)`,
/// `b = 1/sqrt(in1_features)`.
///
/// ```
/// use forge::prelude::*;
/// let layer = forge::nn::Bilinear::<f32>::new(3, 4, 5, &mut Rng::new(0));
/// let y = layer.forward((Tensor::ones(&[2, 3]), Tensor::ones(&[2, 4])));
/// assert_eq!(y.shape(), &[2, 5]);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct Bilinear<E: Float = f32> {
    /// `[out_features, in1_features, in2_features]`.
    pub weight: Tensor<E>,
    /// `[out_features]`, if the layer has a bias.
    pub bias: Option<Tensor<E>>,
}

impl<E: Float> Bilinear<E> {
    /// A trainable layer with a bias, initialised as PyTorch does.
    ///
    /// # Panics
    /// When a size is zero.
    ///
    /// ```
    /// let l = forge::nn::Bilinear::<f64>::new(4, 2, 3, &mut forge::Rng::new(0));
    /// assert_eq!(l.weight.shape(), &[3, 4, 2]);
    /// assert!(l.weight.to_vec().iter().all(|w| w.abs() <= 0.5)); // 1/sqrt(4)
    /// ```
    pub fn new(
        in1_features: usize,
        in2_features: usize,
        out_features: usize,
        rng: &mut Rng,
    ) -> Self {
        assert!(
            in1_features > 0 && in2_features > 0 && out_features > 0,
            "Bilinear: sizes ({in1_features}, {in2_features}, {out_features}) must be positive"
        );
        let b = 1.0 / (in1_features as f64).sqrt();
        let weight = Tensor::uniform(&[out_features, in1_features, in2_features], -b, b, rng)
            .requires_grad();
        let bias = Tensor::uniform(&[out_features], -b, b, rng).requires_grad();
        Bilinear {
            weight,
            bias: Some(bias),
        }
    }

    /// Removes the bias.
    ///
    /// ```
    /// let l = forge::nn::Bilinear::<f32>::new(2, 2, 2, &mut forge::Rng::new(0)).no_bias();
    /// assert!(l.bias.is_none());
    /// ```
    pub fn no_bias(mut self) -> Self {
        self.bias = None;
        self
    }
}

impl<E: Float> Forward<(Tensor<E>, Tensor<E>)> for Bilinear<E> {
    type Output = Tensor<E>;

    /// The bilinear form of the pair `(x1, x2)`.
    ///
    /// # Panics
    /// As [`bilinear`](crate::nn::functional::bilinear).
    fn forward(&self, (x1, x2): (Tensor<E>, Tensor<E>)) -> Tensor<E> {
        record_output(self, bilinear(&x1, &x2, &self.weight, self.bias.as_ref()))
    }
}
