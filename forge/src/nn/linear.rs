//! [`Linear`]: `y = x W^T + b`.

use super::forward::Forward;
use super::summary::record_output;
use crate::error::{ForgeError, Result};
use crate::tensor::{Float, Rng, Tensor};
use forge_macros::Layer;

/// A fully connected layer, `y = x W^T + b`, with PyTorch's names and
/// layout so that PyTorch checkpoints load by name.
///
/// # Shapes
/// - `weight`: `[out_features, in_features]`
/// - `bias`: `[out_features]` (absent with [`Linear::new_no_bias`])
/// - input `[.., in_features]` (any number of leading dimensions, at least one)
/// - output `[.., out_features]`
///
/// ```
/// use forge::prelude::*;
/// let fc = Linear::<f32>::new(3, 2, &mut Rng::new(0));
/// let y = fc.forward(Tensor::ones(&[4, 5, 3]));
/// assert_eq!(y.shape(), &[4, 5, 2]);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct Linear<E: Float = f32> {
    /// `[out_features, in_features]`.
    pub weight: Tensor<E>,
    /// `[out_features]`, if the layer has a bias.
    pub bias: Option<Tensor<E>>,
}

impl<E: Float> Linear<E> {
    /// A trainable layer initialised as PyTorch does: weight and bias drawn
    /// from `U(-1/sqrt(in), 1/sqrt(in))` (kaiming-uniform with `a = sqrt(5)`).
    ///
    /// # Panics
    /// When `in_features` is zero.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let fc = Linear::<f64>::new(4, 3, &mut Rng::new(7));
    /// assert_eq!(fc.weight.shape(), &[3, 4]);
    /// assert!(fc.weight.to_vec().iter().all(|w| w.abs() <= 0.5));
    /// assert!(fc.weight.is_tracked());
    /// ```
    pub fn new(in_features: usize, out_features: usize, rng: &mut Rng) -> Self {
        let bound = Self::bound(in_features);
        let weight = Tensor::uniform(&[out_features, in_features], -bound, bound, rng);
        let bias = Tensor::uniform(&[out_features], -bound, bound, rng);
        Linear {
            weight: weight.requires_grad(),
            bias: Some(bias.requires_grad()),
        }
    }

    /// A trainable layer without bias, the weight initialised as in
    /// [`Linear::new`].
    ///
    /// # Panics
    /// When `in_features` is zero.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let fc = Linear::<f32>::new_no_bias(4, 3, &mut Rng::new(7));
    /// assert!(fc.bias.is_none());
    /// assert_eq!(fc.num_parameters(), 12);
    /// ```
    pub fn new_no_bias(in_features: usize, out_features: usize, rng: &mut Rng) -> Self {
        let bound = Self::bound(in_features);
        let weight = Tensor::uniform(&[out_features, in_features], -bound, bound, rng);
        Linear {
            weight: weight.requires_grad(),
            bias: None,
        }
    }

    fn bound(in_features: usize) -> f64 {
        shape_assert!(in_features > 0, "Linear: in_features must be at least 1");
        1.0 / (in_features as f64).sqrt()
    }

    /// A layer with the given weight `[out, in]` and optional bias `[out]`,
    /// used as given: they are trainable if they are tracked.
    ///
    /// # Errors
    /// [`ForgeError::Shape`] when the weight is not 2-D or the bias is not
    /// `[out]`.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let w = Tensor::<f32>::from_vec(vec![1.0, 2.0], &[1, 2]);
    /// let fc = Linear::from_weights(w, Some(Tensor::from_vec(vec![0.5], &[1]))).unwrap();
    /// let y = fc.forward(Tensor::from_vec(vec![1.0, 1.0], &[1, 2]));
    /// assert_eq!(y.to_vec(), vec![3.5]);
    /// assert!(Linear::from_weights(Tensor::<f32>::zeros(&[2]), None).is_err());
    /// ```
    pub fn from_weights(weight: Tensor<E>, bias: Option<Tensor<E>>) -> Result<Self> {
        if weight.rank() != 2 {
            return Err(ForgeError::Shape {
                name: "Linear.weight".into(),
                expected: vec![0, 0],
                found: weight.shape().to_vec(),
            });
        }
        if let Some(b) = &bias
            && b.shape() != [weight.shape()[0]]
        {
            return Err(ForgeError::Shape {
                name: "Linear.bias".into(),
                expected: vec![weight.shape()[0]],
                found: b.shape().to_vec(),
            });
        }
        Ok(Linear { weight, bias })
    }

    /// The input size (`weight.shape()[1]`).
    ///
    /// ```
    /// let fc = forge::nn::Linear::<f32>::new(3, 2, &mut forge::Rng::new(0));
    /// assert_eq!(fc.in_features(), 3);
    /// ```
    pub fn in_features(&self) -> usize {
        self.weight.shape()[1]
    }

    /// The output size (`weight.shape()[0]`).
    ///
    /// ```
    /// let fc = forge::nn::Linear::<f32>::new(3, 2, &mut forge::Rng::new(0));
    /// assert_eq!(fc.out_features(), 2);
    /// ```
    pub fn out_features(&self) -> usize {
        self.weight.shape()[0]
    }
}

impl<E: Float> Forward<Tensor<E>> for Linear<E> {
    type Output = Tensor<E>;

    /// `x W^T + b` over the last dimension of `x`.
    ///
    /// # Panics
    /// When `x` is 0-d or its last dimension is not `in_features`; the
    /// message names the layer and both shapes.
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let fan_in = self.in_features();
        shape_assert!(
            x.rank() >= 1 && x.shape()[x.rank() - 1] == fan_in,
            "Linear({fan_in} -> {}): expected input of shape [.., {fan_in}], got {:?}",
            self.out_features(),
            x.shape()
        );
        let y = x.linear(&self.weight, self.bias.as_ref());
        record_output(self, y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forward_matches_hand_computation() {
        let w = Tensor::<f64>::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
        let b = Tensor::from_vec(vec![0.5, -0.5], &[2]);
        let fc = Linear::from_weights(w, Some(b)).unwrap();
        let x = Tensor::from_vec(vec![1.0, 0.0, -1.0], &[3]);
        assert_eq!(fc.forward(x.clone()).to_vec(), vec![-1.5, -2.5]);
        assert_eq!(fc.forward(x.view(&[1, 1, 3])).shape(), &[1, 1, 2]);
    }

    #[test]
    #[should_panic(expected = "Linear(3 -> 2): expected input of shape [.., 3], got [4, 2]")]
    fn wrong_input_names_the_layer_and_shapes() {
        let fc = Linear::<f32>::new(3, 2, &mut Rng::new(0));
        fc.forward(Tensor::zeros(&[4, 2]));
    }

    #[test]
    fn init_follows_pytorch_bound() {
        let fc = Linear::<f64>::new(16, 64, &mut Rng::new(3));
        let bound = 0.25;
        let w = fc.weight.to_vec();
        assert!(w.iter().all(|v| v.abs() <= bound));
        // the draws fill the interval: both ends come within 5% of the bound
        let max = w.iter().cloned().fold(f64::MIN, f64::max);
        let min = w.iter().cloned().fold(f64::MAX, f64::min);
        assert!(max > 0.95 * bound && min < -0.95 * bound, "{min} {max}");
        let b = fc.bias.unwrap().to_vec();
        assert!(b.iter().all(|v| v.abs() <= bound));
    }
}
