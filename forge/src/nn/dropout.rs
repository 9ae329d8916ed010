//! [`Dropout`]: inverted dropout in training, the identity in evaluation.

use super::forward::Forward;
use super::layer::{enter_layer, enter_layer_mut};
use super::summary::record_output;
use super::visit::{TensorVisitor, TensorVisitorMut, Visit, Visitable};
use super::Layer;
use crate::tensor::{Float, Rng, Tensor};
use std::sync::Mutex;

/// Zeroes each element with probability `p` in training and scales the
/// rest by `1 / (1 - p)`; the identity in evaluation (PyTorch's
/// `nn.Dropout`). Masks come from the layer's own generator, seeded at
/// construction, so a model built from the same seed drops the same
/// elements on every run. The generator is reported to the traversal
/// ([`Layer::rng_states`]) under the layer's path plus `rng`, so a training
/// checkpoint saves it and a resumed run drops what the uninterrupted one
/// would have.
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
#[derive(Debug)]
pub struct Dropout {
    /// The probability of zeroing an element, in `[0, 1]`.
    pub p: f64,
    /// Training mode (drop) or evaluation mode (identity).
    pub training: bool,
    rng: Mutex<Rng>,
}

// Written by hand rather than derived: the derive knows tensors and
// `#[training]` flags, and this layer also reports its generator.
impl<E: Float> Layer<E> for Dropout {
    fn visit_tensors(&self, v: &mut dyn TensorVisitor<E>) {
        v.visit_mode("training", self.training);
        v.visit_rng("rng", &self.rng.lock().unwrap_or_else(|e| e.into_inner()));
    }
    fn visit_tensors_mut(&mut self, v: &mut dyn TensorVisitorMut<E>) {
        v.visit_mode("training", &mut self.training);
        v.visit_rng("rng", self.rng.get_mut().unwrap_or_else(|e| e.into_inner()));
    }
}

impl<E: Float> Visit<E> for Dropout {
    fn visit(&self, name: &str, v: &mut dyn TensorVisitor<E>) {
        enter_layer(self, name, v)
    }
    fn visit_mut(&mut self, name: &str, v: &mut dyn TensorVisitorMut<E>) {
        enter_layer_mut(self, name, v)
    }
}

#[diagnostic::do_not_recommend]
impl Visitable for Dropout {}

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
        shape_assert!(
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
            return record_output(self, x);
        }
        let mut rng = self.rng.lock().unwrap_or_else(|e| e.into_inner());
        record_output(self, x.dropout(self.p, true, &mut rng))
    }
}
