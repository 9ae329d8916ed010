//! The activation of a feed-forward block ([`Activation`]), shared by the
//! transformer blocks and [`Linear::forward_activated`](super::Linear::forward_activated).

use crate::tensor::{Float, Tensor};

/// The feed-forward activation of a transformer block.
///
/// ```
/// assert_eq!(forge::nn::Activation::default(), forge::nn::Activation::Relu);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Activation {
    /// `max(x, 0)` (PyTorch's default).
    #[default]
    Relu,
    /// GELU, exact erf form.
    Gelu,
}

impl Activation {
    /// The activation applied to `x`.
    ///
    /// ```
    /// use forge::nn::Activation;
    /// let x = forge::Tensor::<f64>::from_vec(vec![-1.0, 2.0], &[2]);
    /// assert_eq!(Activation::Relu.apply(&x).to_vec(), vec![0.0, 2.0]);
    /// ```
    pub fn apply<E: Float>(self, x: &Tensor<E>) -> Tensor<E> {
        match self {
            Activation::Relu => x.relu(),
            Activation::Gelu => x.gelu(),
        }
    }
}
