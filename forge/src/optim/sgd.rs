//! Stochastic gradient descent with momentum, dampening and Nesterov
//! momentum: `torch.optim.SGD`.

use super::optimizer::{Hyper, Optimizer, UpdateRule};
use crate::tensor::Float;
use crate::{ForgeError, Result};
use serde::{Deserialize, Serialize};

/// `torch.optim.SGD` (use it through [`Sgd`]).
///
/// Per element, with `g` the gradient:
/// `g = -g` if maximizing; `g += wd * p`; with momentum, `buf = g` on the
/// first step and `buf = momentum * buf + (1 - dampening) * g` after, then
/// `g = g + momentum * buf` (Nesterov) or `g = buf`; finally `p -= lr * g`.
///
/// ```
/// use forge::optim::SgdConfig;
/// let c = SgdConfig::default();
/// assert_eq!((c.momentum, c.dampening, c.nesterov, c.maximize), (0.0, 0.0, false, false));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SgdConfig {
    /// Momentum factor (0 = none).
    pub momentum: f64,
    /// Dampening of the gradient added to the momentum buffer.
    pub dampening: f64,
    /// Nesterov momentum (needs momentum > 0 and dampening 0).
    pub nesterov: bool,
    /// Maximize the objective instead of minimizing it.
    pub maximize: bool,
}

/// SGD: `Optimizer<SgdConfig, E>`.
///
/// ```
/// use forge::optim::Sgd;
/// use forge::{Gradients, Tensor};
/// let mut w = Tensor::<f64>::from_vec(vec![1.0], &[1]).requires_grad();
/// let mut g = Gradients::new();
/// g.insert(&w, Tensor::from_vec(vec![2.0], &[1]));
/// let mut opt = Sgd::new(0.1).momentum(0.9).nesterov(true);
/// opt.step_params(vec![("w", &mut w)], &g).unwrap();
/// // buf = g = 2; g + 0.9 buf = 3.8; w = 1 - 0.38
/// assert!((w.item() - 0.62).abs() < 1e-12);
/// ```
pub type Sgd<E = f32> = Optimizer<SgdConfig, E>;

impl<E: Float> Optimizer<SgdConfig, E> {
    /// Plain SGD with rate `lr` (PyTorch's defaults for everything else).
    ///
    /// ```
    /// assert_eq!(forge::optim::Sgd::<f32>::new(0.01).lr(), 0.01);
    /// ```
    pub fn new(lr: f64) -> Self {
        Self::with_rule(lr, SgdConfig::default())
    }

    /// Sets the momentum factor.
    ///
    /// ```
    /// assert_eq!(forge::optim::Sgd::<f32>::new(0.1).momentum(0.9).rule().momentum, 0.9);
    /// ```
    pub fn momentum(mut self, momentum: f64) -> Self {
        self.rule.momentum = momentum;
        self
    }

    /// Sets the dampening.
    ///
    /// ```
    /// assert_eq!(forge::optim::Sgd::<f32>::new(0.1).dampening(0.1).rule().dampening, 0.1);
    /// ```
    pub fn dampening(mut self, dampening: f64) -> Self {
        self.rule.dampening = dampening;
        self
    }

    /// Turns Nesterov momentum on or off.
    ///
    /// ```
    /// assert!(forge::optim::Sgd::<f32>::new(0.1).momentum(0.9).nesterov(true).rule().nesterov);
    /// ```
    pub fn nesterov(mut self, on: bool) -> Self {
        self.rule.nesterov = on;
        self
    }

    /// Maximizes instead of minimizing.
    ///
    /// ```
    /// assert!(forge::optim::Sgd::<f32>::new(0.1).maximize(true).rule().maximize);
    /// ```
    pub fn maximize(mut self, on: bool) -> Self {
        self.rule.maximize = on;
        self
    }
}

impl UpdateRule for SgdConfig {
    const NAME: &'static str = "Sgd";

    fn buffers(&self) -> Vec<(&'static str, f64)> {
        if self.momentum != 0.0 {
            vec![("momentum_buffer", 0.0)]
        } else {
            vec![]
        }
    }

    fn validate(&self) -> Result<()> {
        if !(self.momentum.is_finite() && self.momentum >= 0.0) {
            return Err(ForgeError::Invalid(format!(
                "Sgd: momentum must be >= 0, got {}",
                self.momentum
            )));
        }
        if !self.dampening.is_finite() {
            return Err(ForgeError::Invalid(format!(
                "Sgd: dampening must be finite, got {}",
                self.dampening
            )));
        }
        if self.nesterov && (self.momentum <= 0.0 || self.dampening != 0.0) {
            return Err(ForgeError::Invalid(
                "Sgd: Nesterov momentum requires a momentum and zero dampening".into(),
            ));
        }
        Ok(())
    }

    fn set_momentum(&mut self, momentum: f64) -> bool {
        self.momentum = momentum;
        true
    }

    fn update<E: Float>(
        &self,
        h: &Hyper,
        step: u64,
        buffers: &mut [Vec<E>],
        p: &[E],
        g: &[E],
    ) -> Vec<E> {
        let lr = E::from_f64(h.lr);
        let wd = E::from_f64(h.weight_decay);
        let use_wd = h.weight_decay != 0.0;
        let mom = E::from_f64(self.momentum);
        let damp = E::one() - E::from_f64(self.dampening);
        let first = step == 1;
        let mut out = Vec::with_capacity(p.len());
        match buffers.first_mut() {
            None => {
                for (&p, &g) in p.iter().zip(g) {
                    let mut g = if self.maximize { -g } else { g };
                    if use_wd {
                        g += wd * p;
                    }
                    out.push(p - lr * g);
                }
            }
            Some(buf) => {
                for ((&p, &g), b) in p.iter().zip(g).zip(buf.iter_mut()) {
                    let mut g = if self.maximize { -g } else { g };
                    if use_wd {
                        g += wd * p;
                    }
                    *b = if first { g } else { mom * *b + damp * g };
                    let d = if self.nesterov { g + mom * *b } else { *b };
                    out.push(p - lr * d);
                }
            }
        }
        out
    }
}
