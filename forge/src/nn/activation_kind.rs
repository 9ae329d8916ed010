//! The activation of a feed-forward block ([`Activation`]), shared by the
//! transformer blocks, [`Linear::forward_activated`](super::Linear::forward_activated)
//! and [`Conv2d::forward_activated`](super::Conv2d::forward_activated).

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

    /// The activation over `f32` values in place, each element computed
    /// on its own exactly as [`apply`](Activation::apply) computes it (the
    /// epilogues of the fused layers).
    pub(crate) fn f32_in_place(self) -> fn(&mut [f32]) {
        match self {
            Activation::Relu => relu_f32,
            Activation::Gelu => crate::cpu::vmath::gelu::<f32>,
        }
    }
}

/// `max(x, 0)` in place, element by element as [`Tensor::relu`] computes it
/// (`x` where `x > 0`, else zero: a NaN becomes zero).
fn relu_f32(x: &mut [f32]) {
    for v in x.iter_mut() {
        *v = if *v > 0.0 { *v } else { 0.0 };
    }
}
