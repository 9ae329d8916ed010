//! Adagrad: `torch.optim.Adagrad`.

use super::adam::positive_eps;
use super::optimizer::{Optimizer, Update, UpdateRule};
use super::setters::rule_setters;
use super::state::{take_buffer, RuleState};
use crate::tensor::Float;
use crate::{ForgeError, Result};
use serde::{Deserialize, Serialize};

/// `torch.optim.Adagrad` (use it through [`Adagrad`]).
///
/// Per element: `g += wd p`; `clr = lr / (1 + (t-1) lr_decay)`;
/// `sum += g^2`; `p -= clr g / (sqrt(sum) + eps)`, with `sum` starting at
/// `initial_accumulator_value`.
///
/// ```
/// let c = forge::optim::AdagradConfig::default();
/// assert_eq!((c.lr_decay, c.initial_accumulator_value, c.eps), (0.0, 0.0, 1e-10));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdagradConfig {
    /// Learning-rate decay per step.
    pub lr_decay: f64,
    /// The value the squared-gradient sum starts from.
    pub initial_accumulator_value: f64,
    /// Added to the denominator.
    pub eps: f64,
    /// Maximize the objective instead of minimizing it.
    pub maximize: bool,
}

impl Default for AdagradConfig {
    fn default() -> Self {
        AdagradConfig {
            lr_decay: 0.0,
            initial_accumulator_value: 0.0,
            eps: 1e-10,
            maximize: false,
        }
    }
}

/// Adagrad: `Optimizer<AdagradConfig, E>`.
///
/// ```
/// use forge::optim::Adagrad;
/// use forge::{Gradients, Tensor};
/// let mut w = Tensor::<f64>::from_vec(vec![1.0], &[1]).requires_grad();
/// let mut g = Gradients::new();
/// g.insert(&w, Tensor::from_vec(vec![2.0], &[1]));
/// let mut opt = Adagrad::new(0.1).lr_decay(0.0).initial_accumulator_value(0.0);
/// opt.step_params(vec![("w", &mut w)], &g).unwrap();
/// assert!((w.item() - 0.9).abs() < 1e-9); // 1 - 0.1 * 2 / sqrt(4)
/// ```
pub type Adagrad<E = f32> = Optimizer<AdagradConfig, E>;

impl<E: Float> Optimizer<AdagradConfig, E> {
    /// Adagrad with rate `lr` and PyTorch's defaults.
    ///
    /// ```
    /// assert_eq!(forge::optim::Adagrad::<f32>::new(0.01).lr(), 0.01);
    /// ```
    pub fn new(lr: f64) -> Self {
        Self::with_rule(lr, AdagradConfig::default())
    }

    rule_setters! {
        "Adagrad", "0.1";
        /// Sets the learning-rate decay.
        lr_decay: f64 = "0.01";
        /// Sets the initial value of the squared-gradient sum.
        initial_accumulator_value: f64 = "0.1";
        /// Sets eps.
        eps: f64 = "1e-8";
        /// Maximizes instead of minimizing.
        maximize: bool = "true";
    }
}

/// The state Adagrad keeps per parameter.
///
/// ```
/// use forge::optim::{Adagrad, AdagradState};
/// use forge::{Gradients, Tensor};
/// let mut w = Tensor::<f64>::ones(&[1]).requires_grad();
/// let mut g = Gradients::new();
/// g.insert(&w, Tensor::full(&[1], 2.0));
/// let mut opt = Adagrad::new(0.1).initial_accumulator_value(1.0);
/// opt.step_params(vec![("w", &mut w)], &g).unwrap();
/// let s: &AdagradState<f64> = opt.state("w").unwrap().rule_state();
/// assert_eq!(s.sum, vec![5.0]);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct AdagradState<E> {
    /// The sum of squared gradients (from `initial_accumulator_value`).
    pub sum: Vec<E>,
}

impl<E: Float> RuleState for AdagradState<E> {
    type Elem = E;
    fn buffers(&self) -> Vec<(&'static str, &[E])> {
        vec![("sum", self.sum.as_slice())]
    }
}

impl UpdateRule for AdagradConfig {
    const NAME: &'static str = "Adagrad";
    const BUFFERS: &'static [&'static str] = &["sum"];
    type State<E: Float> = AdagradState<E>;

    fn validate(&self) -> Result<()> {
        for (what, v) in [
            ("lr_decay", self.lr_decay),
            ("initial_accumulator_value", self.initial_accumulator_value),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(ForgeError::invalid(
                    format!("Adagrad.{what}"),
                    format!("Adagrad: {what} = {v} must be finite and >= 0"),
                ));
            }
        }
        positive_eps(Self::NAME, self.eps)
    }

    fn maximize(&self) -> bool {
        self.maximize
    }

    fn settings(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("initial_accumulator_value", self.initial_accumulator_value),
            ("eps", self.eps),
        ]
    }

    fn new_state<E: Float>(&self, n: usize) -> AdagradState<E> {
        AdagradState {
            sum: vec![E::from_f64(self.initial_accumulator_value); n],
        }
    }

    fn state_from_buffers<E: Float>(
        &self,
        n: usize,
        mut b: Vec<(String, Vec<E>)>,
    ) -> AdagradState<E> {
        match take_buffer(&mut b, "sum") {
            Some(sum) => AdagradState { sum },
            None => self.new_state(n),
        }
    }

    fn update<E: Float>(&self, u: Update<'_, E>, s: &mut AdagradState<E>) {
        let Update {
            hyper,
            step,
            prep,
            param,
            grad,
        } = u;
        let clr = E::from_f64(hyper.lr / (1.0 + (step as f64 - 1.0) * self.lr_decay));
        let eps = E::from_f64(self.eps);
        let n = param.len();
        for ((p, &g), sum) in param.iter_mut().zip(&grad[..n]).zip(&mut s.sum[..n]) {
            let g = prep.apply(g, *p);
            *sum += g * g;
            *p -= clr * (g / (sum.sqrt() + eps));
        }
    }
}
