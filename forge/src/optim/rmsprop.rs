//! RMSprop (with momentum and the centered variant): `torch.optim.RMSprop`.

use super::adam::positive_eps;
use super::optimizer::{unit_interval, Optimizer, Update, UpdateRule};
use super::setters::rule_setters;
use super::state::{take_buffer, RuleState};
use crate::tensor::Float;
use crate::{ForgeError, Result};
use serde::{Deserialize, Serialize};

/// `torch.optim.RMSprop` (use it through [`RmsProp`]).
///
/// Per element: `g += wd p`; `sq = alpha sq + (1-alpha) g^2`;
/// `avg = sqrt(sq)`, or when centered `ga = alpha ga + (1-alpha) g` and
/// `avg = sqrt(sq - ga^2)`; `avg += eps`; with momentum
/// `buf = momentum buf + g / avg`, `p -= lr buf`, else `p -= lr g / avg`.
///
/// ```
/// let c = forge::optim::RmsPropConfig::default();
/// assert_eq!((c.alpha, c.eps, c.momentum, c.centered), (0.99, 1e-8, 0.0, false));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RmsPropConfig {
    /// Decay of the squared-gradient average.
    pub alpha: f64,
    /// Added to the denominator, outside the square root.
    pub eps: f64,
    /// Momentum factor (0 = none).
    pub momentum: f64,
    /// Normalize by the estimated variance instead of the second moment.
    pub centered: bool,
    /// Maximize the objective instead of minimizing it.
    pub maximize: bool,
}

impl Default for RmsPropConfig {
    fn default() -> Self {
        RmsPropConfig {
            alpha: 0.99,
            eps: 1e-8,
            momentum: 0.0,
            centered: false,
            maximize: false,
        }
    }
}

/// RMSprop: `Optimizer<RmsPropConfig, E>`.
///
/// ```
/// use forge::optim::RmsProp;
/// use forge::{Gradients, Tensor};
/// let mut w = Tensor::<f64>::from_vec(vec![1.0], &[1]).requires_grad();
/// let mut g = Gradients::new();
/// g.insert(&w, Tensor::from_vec(vec![1.0], &[1]));
/// let mut opt = RmsProp::new(0.01).alpha(0.99).momentum(0.9).centered(true);
/// opt.step_params(vec![("w", &mut w)], &g).unwrap();
/// assert!(w.item() < 1.0);
/// ```
pub type RmsProp<E = f32> = Optimizer<RmsPropConfig, E>;

impl<E: Float> Optimizer<RmsPropConfig, E> {
    /// RMSprop with rate `lr` and PyTorch's defaults.
    ///
    /// ```
    /// assert_eq!(forge::optim::RmsProp::<f32>::new(0.01).lr(), 0.01);
    /// ```
    pub fn new(lr: f64) -> Self {
        Self::with_rule(lr, RmsPropConfig::default())
    }

    rule_setters! {
        "RmsProp", "0.01";
        /// Sets alpha.
        alpha: f64 = "0.9";
        /// Sets eps.
        eps: f64 = "1e-6";
        /// Sets the momentum factor.
        momentum: f64 = "0.9";
        /// Turns the centered variant on or off.
        centered: bool = "true";
        /// Maximizes instead of minimizing.
        maximize: bool = "true";
    }
}

/// The state RMSprop keeps per parameter.
///
/// ```
/// use forge::optim::{RmsProp, RmsPropState};
/// use forge::{Gradients, Tensor};
/// let mut w = Tensor::<f64>::ones(&[1]).requires_grad();
/// let mut g = Gradients::new();
/// g.insert(&w, Tensor::full(&[1], 2.0));
/// let mut opt = RmsProp::new(0.01).centered(true);
/// opt.step_params(vec![("w", &mut w)], &g).unwrap();
/// let s: &RmsPropState<f64> = opt.state("w").unwrap().rule_state();
/// assert!((s.square_avg[0] - 0.04).abs() < 1e-15);
/// assert!(s.grad_avg.is_some() && s.momentum_buffer.is_none());
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct RmsPropState<E> {
    /// The running average of the squared gradient.
    pub square_avg: Vec<E>,
    /// The momentum buffer (momentum > 0 only).
    pub momentum_buffer: Option<Vec<E>>,
    /// The running average of the gradient (centered only).
    pub grad_avg: Option<Vec<E>>,
}

impl<E: Float> RuleState for RmsPropState<E> {
    type Elem = E;
    fn buffers(&self) -> Vec<(&'static str, &[E])> {
        let mut v = vec![("square_avg", self.square_avg.as_slice())];
        if let Some(b) = &self.momentum_buffer {
            v.push(("momentum_buffer", b.as_slice()));
        }
        if let Some(b) = &self.grad_avg {
            v.push(("grad_avg", b.as_slice()));
        }
        v
    }
}

/// The buffer in `slot`, created with zeros when the option needing it
/// was turned on after the state was made; `None` when `on` is false.
fn lazy_zeros<E: Float>(on: bool, slot: &mut Option<Vec<E>>, n: usize) -> Option<&mut [E]> {
    if !on {
        return None;
    }
    Some(&mut slot.get_or_insert_with(|| vec![E::zero(); n])[..n])
}

impl UpdateRule for RmsPropConfig {
    const NAME: &'static str = "RmsProp";
    const BUFFERS: &'static [&'static str] = &["square_avg", "momentum_buffer", "grad_avg"];
    type State<E: Float> = RmsPropState<E>;

    fn validate(&self) -> Result<()> {
        unit_interval(Self::NAME, "alpha", self.alpha)?;
        // alpha = 1 never updates the average (every step divides by eps);
        // centered with alpha = 0 has a variance of exactly 0, likewise,
        // and so has, in f32, any alpha for which 1 - alpha rounds to 1
        // (alpha <= 2^-25): from a zero state the averages are exactly g^2
        // and g. Refused in f64 too, where the variance would be ~alpha g^2.
        if self.alpha == 1.0 || (self.centered && (1.0 - self.alpha) as f32 == 1.0) {
            return Err(ForgeError::invalid(
                "RmsProp.alpha",
                format!(
                    "RmsProp: alpha = {} with centered = {} leaves the variance estimate at 0 \
                     (every step would divide by eps); use 0 < alpha < 1, above 2^-25 when centered",
                    self.alpha, self.centered
                ),
            ));
        }
        unit_interval(Self::NAME, "momentum", self.momentum)?;
        positive_eps(Self::NAME, self.eps)
    }

    fn maximize(&self) -> bool {
        self.maximize
    }

    fn settings(&self) -> Vec<(&'static str, f64)> {
        vec![("eps", self.eps)]
    }

    fn set_momentum(&mut self, momentum: f64) -> bool {
        self.momentum = momentum;
        true
    }

    fn new_state<E: Float>(&self, n: usize) -> RmsPropState<E> {
        RmsPropState {
            square_avg: vec![E::zero(); n],
            momentum_buffer: (self.momentum > 0.0).then(|| vec![E::zero(); n]),
            grad_avg: self.centered.then(|| vec![E::zero(); n]),
        }
    }

    fn state_from_buffers<E: Float>(
        &self,
        n: usize,
        mut b: Vec<(String, Vec<E>)>,
    ) -> RmsPropState<E> {
        let fresh = self.new_state(n);
        RmsPropState {
            square_avg: take_buffer(&mut b, "square_avg").unwrap_or(fresh.square_avg),
            momentum_buffer: take_buffer(&mut b, "momentum_buffer").or(fresh.momentum_buffer),
            grad_avg: take_buffer(&mut b, "grad_avg").or(fresh.grad_avg),
        }
    }

    fn update<E: Float>(&self, u: Update<'_, E>, s: &mut RmsPropState<E>) {
        let Update {
            hyper,
            prep,
            param,
            grad,
            ..
        } = u;
        let lr = E::from_f64(hyper.lr);
        let alpha = E::from_f64(self.alpha);
        let w = E::from_f64(1.0 - self.alpha);
        let eps = E::from_f64(self.eps);
        let mom = E::from_f64(self.momentum);
        let n = param.len();
        let grad = &grad[..n];
        let sq = &mut s.square_avg[..n];
        let mut buf = lazy_zeros(self.momentum > 0.0, &mut s.momentum_buffer, n);
        let mut ga = lazy_zeros(self.centered, &mut s.grad_avg, n);
        for i in 0..n {
            let g = prep.apply(grad[i], param[i]);
            sq[i] = alpha * sq[i] + w * g * g;
            let avg = match ga.as_deref_mut() {
                Some(ga) => {
                    let gi = ga[i];
                    ga[i] = gi + w * (g - gi);
                    // Rounding can leave the variance a hair below 0, where
                    // PyTorch's sqrt gives NaN; 0 is the value it stands for.
                    let var = sq[i] - ga[i] * ga[i];
                    if var < E::zero() {
                        E::zero()
                    } else {
                        var.sqrt()
                    }
                }
                None => sq[i].sqrt(),
            } + eps;
            match buf.as_deref_mut() {
                Some(m) => {
                    m[i] = mom * m[i] + g / avg;
                    param[i] -= lr * m[i];
                }
                None => param[i] -= lr * (g / avg),
            }
        }
    }
}
