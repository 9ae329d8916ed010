//! Adadelta: `torch.optim.Adadelta`.

use super::adam::positive_eps;
use super::optimizer::{unit_interval, Optimizer, Update, UpdateRule};
use super::setters::rule_setters;
use super::state::{take_buffer, RuleState};
use crate::tensor::Float;
use crate::Result;
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

    rule_setters! {
        "Adadelta", "1.0";
        /// Sets rho.
        rho: f64 = "0.95";
        /// Sets eps.
        eps: f64 = "1e-8";
        /// Maximizes instead of minimizing.
        maximize: bool = "true";
    }
}

/// The state Adadelta keeps per parameter.
///
/// ```
/// use forge::optim::{Adadelta, AdadeltaState};
/// use forge::{Gradients, Tensor};
/// let mut w = Tensor::<f64>::ones(&[1]).requires_grad();
/// let mut g = Gradients::new();
/// g.insert(&w, Tensor::full(&[1], 1.0));
/// let mut opt = Adadelta::new(1.0);
/// opt.step_params(vec![("w", &mut w)], &g).unwrap();
/// let s: &AdadeltaState<f64> = opt.state("w").unwrap().rule_state();
/// assert!((s.square_avg[0] - 0.1).abs() < 1e-15);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct AdadeltaState<E> {
    /// The running average of the squared gradient.
    pub square_avg: Vec<E>,
    /// The running average of the squared update.
    pub acc_delta: Vec<E>,
}

impl<E: Float> RuleState for AdadeltaState<E> {
    type Elem = E;
    fn buffers(&self) -> Vec<(&'static str, &[E])> {
        vec![
            ("square_avg", self.square_avg.as_slice()),
            ("acc_delta", self.acc_delta.as_slice()),
        ]
    }
}

impl UpdateRule for AdadeltaConfig {
    const NAME: &'static str = "Adadelta";
    const BUFFERS: &'static [&'static str] = &["square_avg", "acc_delta"];
    type State<E: Float> = AdadeltaState<E>;

    fn validate(&self) -> Result<()> {
        unit_interval(Self::NAME, "rho", self.rho)?;
        positive_eps(Self::NAME, self.eps)
    }

    fn maximize(&self) -> bool {
        self.maximize
    }

    fn settings(&self) -> Vec<(&'static str, f64)> {
        vec![("eps", self.eps)]
    }

    fn new_state<E: Float>(&self, n: usize) -> AdadeltaState<E> {
        AdadeltaState {
            square_avg: vec![E::zero(); n],
            acc_delta: vec![E::zero(); n],
        }
    }

    fn state_from_buffers<E: Float>(
        &self,
        n: usize,
        mut b: Vec<(String, Vec<E>)>,
    ) -> AdadeltaState<E> {
        AdadeltaState {
            square_avg: take_buffer(&mut b, "square_avg").unwrap_or_else(|| vec![E::zero(); n]),
            acc_delta: take_buffer(&mut b, "acc_delta").unwrap_or_else(|| vec![E::zero(); n]),
        }
    }

    fn update<E: Float>(&self, u: Update<'_, E>, s: &mut AdadeltaState<E>) {
        let Update {
            hyper,
            prep,
            param,
            grad,
            ..
        } = u;
        let lr = E::from_f64(hyper.lr);
        let rho = E::from_f64(self.rho);
        let w = E::from_f64(1.0 - self.rho);
        let eps = E::from_f64(self.eps);
        let n = param.len();
        let (grad, sq, acc) = (&grad[..n], &mut s.square_avg[..n], &mut s.acc_delta[..n]);
        for i in 0..n {
            let g = prep.apply(grad[i], param[i]);
            sq[i] = rho * sq[i] + w * g * g;
            let std = (sq[i] + eps).sqrt();
            let d = (acc[i] + eps).sqrt() / std * g;
            acc[i] = rho * acc[i] + w * d * d;
            param[i] -= lr * d;
        }
    }
}
