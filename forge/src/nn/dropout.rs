//! [`Dropout`]: inverted dropout in training, the identity in evaluation.

use super::forward::Forward;
use crate::tensor::{Float, Rng, Tensor};
use forge_macros::Layer;
use std::sync::Mutex;

/// Zeroes each element with probability `p` in training and scales the
/// rest by `1 / (1 - p)`; the identity in evaluation (PyTorch's
/// `nn.Dropout`). Masks come from the layer's own generator, seeded at
/// construction, so a model built from the same seed drops the same
/// elements on every run.
///
/// # Shapes
/// Any input shape; the output has the same shape.
///
/// ```
/// use forge::prelude::*;
/// let mut d = forge::nn::Dropout::new(0.5, 7);
/// let x = Tensor::<f32>::ones(&[100]);
/// let y = d.forward(x.clone());
/// assert!(y.to_vec().iter().any(|&v| v == 0.0));
/// // A layer without tensors does not fix its element type: name it.
/// Layer::<f32>::eval(&mut d);
/// assert_eq!(d.forward(x.clone()).to_vec(), x.to_vec());
/// ```
#[derive(Layer, Debug)]
pub struct Dropout {
    /// The probability of zeroing an element, in `[0, 1]`.
    #[skip]
    pub p: f64,
    /// Training mode (drop) or evaluation mode (identity).
    #[training]
    pub training: bool,
    #[skip]
    rng: Mutex<Rng>,
}

impl Dropout {
    /// A dropout layer with probability `p` and a generator seeded by `seed`.
    ///
    /// # Panics
    /// When `p` is outside `[0, 1]`.
    ///
    /// ```
    /// assert_eq!(forge::nn::Dropout::new(0.1, 0).p, 0.1);
    /// ```
    pub fn new(p: f64, seed: u64) -> Self {
        assert!(
            (0.0..=1.0).contains(&p),
            "Dropout: probability {p} is outside [0, 1]"
        );
        Dropout {
            p,
            training: true,
            rng: Mutex::new(Rng::new(seed)),
        }
    }

    /// A dropout layer seeded from `rng` (one draw), so that a model built
    /// from one generator is reproducible.
    ///
    /// ```
    /// let d = forge::nn::Dropout::from_rng(0.2, &mut forge::Rng::new(3));
    /// assert!(d.training);
    /// ```
    pub fn from_rng(p: f64, rng: &mut Rng) -> Self {
        Dropout::new(p, rng.next_u64())
    }
}

impl Clone for Dropout {
    /// A copy with the same probability, mode and generator state.
    fn clone(&self) -> Self {
        Dropout {
            p: self.p,
            training: self.training,
            rng: Mutex::new(self.rng.lock().unwrap_or_else(|e| e.into_inner()).clone()),
        }
    }
}

impl<E: Float> Forward<Tensor<E>> for Dropout {
    type Output = Tensor<E>;
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        if !self.training || self.p == 0.0 {
            return x;
        }
        let mut rng = self.rng.lock().unwrap_or_else(|e| e.into_inner());
        x.dropout(self.p, true, &mut rng)
    }
}
