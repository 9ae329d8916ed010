//! RMSprop (with momentum and the centered variant): `torch.optim.RMSprop`.

use super::optimizer::{Hyper, Optimizer, UpdateRule};
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

    /// Sets alpha.
    ///
    /// ```
    /// assert_eq!(forge::optim::RmsProp::<f32>::new(0.01).alpha(0.9).rule().alpha, 0.9);
    /// ```
    pub fn alpha(mut self, alpha: f64) -> Self {
        self.rule.alpha = alpha;
        self
    }

    /// Sets eps.
    ///
    /// ```
    /// assert_eq!(forge::optim::RmsProp::<f32>::new(0.01).eps(1e-6).rule().eps, 1e-6);
    /// ```
    pub fn eps(mut self, eps: f64) -> Self {
        self.rule.eps = eps;
        self
    }

    /// Sets the momentum factor.
    ///
    /// ```
    /// assert_eq!(forge::optim::RmsProp::<f32>::new(0.01).momentum(0.9).rule().momentum, 0.9);
    /// ```
    pub fn momentum(mut self, m: f64) -> Self {
        self.rule.momentum = m;
        self
    }

    /// Turns the centered variant on or off.
    ///
    /// ```
    /// assert!(forge::optim::RmsProp::<f32>::new(0.01).centered(true).rule().centered);
    /// ```
    pub fn centered(mut self, on: bool) -> Self {
        self.rule.centered = on;
        self
    }

    /// Maximizes instead of minimizing.
    ///
    /// ```
    /// assert!(forge::optim::RmsProp::<f32>::new(0.01).maximize(true).rule().maximize);
    /// ```
    pub fn maximize(mut self, on: bool) -> Self {
        self.rule.maximize = on;
        self
    }
}

impl UpdateRule for RmsPropConfig {
    const NAME: &'static str = "RmsProp";

    fn buffers(&self) -> Vec<(&'static str, f64)> {
        let mut v = vec![("square_avg", 0.0)];
        if self.momentum > 0.0 {
            v.push(("momentum_buffer", 0.0));
        }
        if self.centered {
            v.push(("grad_avg", 0.0));
        }
        v
    }

    fn validate(&self) -> Result<()> {
        for (what, v) in [
            ("alpha", self.alpha),
            ("eps", self.eps),
            ("momentum", self.momentum),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(ForgeError::Invalid(format!(
                    "RmsProp: {what} must be finite and >= 0, got {v}"
                )));
            }
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
        _step: u64,
        b: &mut [Vec<E>],
        p: &[E],
        g: &[E],
    ) -> Vec<E> {
        let lr = E::from_f64(h.lr);
        let wd = E::from_f64(h.weight_decay);
        let use_wd = h.weight_decay != 0.0;
        let alpha = E::from_f64(self.alpha);
        let w = E::from_f64(1.0 - self.alpha);
        let eps = E::from_f64(self.eps);
        let mom = E::from_f64(self.momentum);
        let (sq, mut rest) = b.split_first_mut().expect("square_avg buffer");
        let mut buf = None;
        if self.momentum > 0.0 {
            let (m, r) = rest.split_first_mut().expect("momentum_buffer");
            buf = Some(m);
            rest = r;
        }
        let mut ga = rest.first_mut();
        let mut out = Vec::with_capacity(p.len());
        for i in 0..p.len() {
            let mut g = if self.maximize { -g[i] } else { g[i] };
            if use_wd {
                g += wd * p[i];
            }
            sq[i] = alpha * sq[i] + w * g * g;
            let avg = match ga.as_deref_mut() {
                Some(ga) => {
                    let gi = ga[i];
                    ga[i] = gi + w * (g - gi);
                    (sq[i] - ga[i] * ga[i]).sqrt()
                }
                None => sq[i].sqrt(),
            } + eps;
            match buf.as_deref_mut() {
                Some(m) => {
                    m[i] = mom * m[i] + g / avg;
                    out.push(p[i] - lr * m[i]);
                }
                None => out.push(p[i] - lr * (g / avg)),
            }
        }
        out
    }
}
