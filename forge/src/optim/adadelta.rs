//! Adadelta: `torch.optim.Adadelta`.

use super::optimizer::{Hyper, Optimizer, UpdateRule};
use crate::tensor::Float;
use crate::{ForgeError, Result};
use serde::{Deserialize, Serialize};

/// `torch.optim.Adadelta` (use it through [`Adadelta`]).
///
/// Per element: `g += wd p`; `sq = rho sq + (1-rho) g^2`;
/// `d = sqrt(acc + eps) / sqrt(sq + eps) * g`; `acc = rho acc + (1-rho) d^2`;
/// `p -= lr d`.
///
/// ```
/// let c = forge::optim::AdadeltaConfig::default();
/// assert_eq!((c.rho, c.eps), (0.9, 1e-6));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdadeltaConfig {
    /// Decay of the running averages.
    pub rho: f64,
    /// Added inside both square roots.
    pub eps: f64,
    /// Maximize the objective instead of minimizing it.
    pub maximize: bool,
}

impl Default for AdadeltaConfig {
    fn default() -> Self {
        AdadeltaConfig {
            rho: 0.9,
            eps: 1e-6,
            maximize: false,
        }
    }
}

/// Adadelta: `Optimizer<AdadeltaConfig, E>` (PyTorch's default rate is 1).
///
/// ```
/// use forge::optim::Adadelta;
/// use forge::{Gradients, Tensor};
/// let mut w = Tensor::<f64>::from_vec(vec![1.0], &[1]).requires_grad();
/// let mut g = Gradients::new();
/// g.insert(&w, Tensor::from_vec(vec![1.0], &[1]));
/// let mut opt = Adadelta::new(1.0).rho(0.9).eps(1e-6);
/// opt.step_params(vec![("w", &mut w)], &g).unwrap();
/// assert!(w.item() < 1.0);
/// ```
pub type Adadelta<E = f32> = Optimizer<AdadeltaConfig, E>;

impl<E: Float> Optimizer<AdadeltaConfig, E> {
    /// Adadelta with rate `lr` and PyTorch's defaults.
    ///
    /// ```
    /// assert_eq!(forge::optim::Adadelta::<f32>::new(1.0).lr(), 1.0);
    /// ```
    pub fn new(lr: f64) -> Self {
        Self::with_rule(lr, AdadeltaConfig::default())
    }

    /// Sets rho.
    ///
    /// ```
    /// assert_eq!(forge::optim::Adadelta::<f32>::new(1.0).rho(0.95).rule().rho, 0.95);
    /// ```
    pub fn rho(mut self, rho: f64) -> Self {
        self.rule.rho = rho;
        self
    }

    /// Sets eps.
    ///
    /// ```
    /// assert_eq!(forge::optim::Adadelta::<f32>::new(1.0).eps(1e-8).rule().eps, 1e-8);
    /// ```
    pub fn eps(mut self, eps: f64) -> Self {
        self.rule.eps = eps;
        self
    }

    /// Maximizes instead of minimizing.
    ///
    /// ```
    /// assert!(forge::optim::Adadelta::<f32>::new(1.0).maximize(true).rule().maximize);
    /// ```
    pub fn maximize(mut self, on: bool) -> Self {
        self.rule.maximize = on;
        self
    }
}

impl UpdateRule for AdadeltaConfig {
    const NAME: &'static str = "Adadelta";

    fn buffers(&self) -> Vec<(&'static str, f64)> {
        vec![("square_avg", 0.0), ("acc_delta", 0.0)]
    }

    fn validate(&self) -> Result<()> {
        if !(self.rho.is_finite() && (0.0..=1.0).contains(&self.rho)) {
            return Err(ForgeError::Invalid(format!(
                "Adadelta: rho must be in [0, 1], got {}",
                self.rho
            )));
        }
        if !(self.eps.is_finite() && self.eps >= 0.0) {
            return Err(ForgeError::Invalid(format!(
                "Adadelta: eps must be >= 0, got {}",
                self.eps
            )));
        }
        Ok(())
    }

    fn update<E: Float>(
        &self,
        h: &Hyper,
        _step: u64,
        b: &mut [Vec<E>],
        p: &[E],
        g: &[E],
    ) -> Vec<E> {
        let lr = E::from_f64(h.lr);
        let wd = E::from_f64(h.weight_decay);
        let use_wd = h.weight_decay != 0.0;
        let rho = E::from_f64(self.rho);
        let w = E::from_f64(1.0 - self.rho);
        let eps = E::from_f64(self.eps);
        let (sq, rest) = b.split_first_mut().expect("square_avg buffer");
        let acc = &mut rest[0];
        let mut out = Vec::with_capacity(p.len());
        for i in 0..p.len() {
            let mut g = if self.maximize { -g[i] } else { g[i] };
            if use_wd {
                g += wd * p[i];
            }
            sq[i] = rho * sq[i] + w * g * g;
            let std = (sq[i] + eps).sqrt();
            let d = (acc[i] + eps).sqrt() / std * g;
            acc[i] = rho * acc[i] + w * d * d;
            out.push(p[i] - lr * d);
        }
        out
    }
}
