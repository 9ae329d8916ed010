//! Adam (with AMSGrad and L2 weight decay) and AdamW (decoupled weight
//! decay): `torch.optim.Adam` and `torch.optim.AdamW`.

use super::optimizer::{Hyper, Optimizer, UpdateRule};
use crate::tensor::Float;
use crate::{ForgeError, Result};
use serde::{Deserialize, Serialize};

/// The hyperparameters shared by Adam and AdamW.
///
/// Per element, with `g` the gradient and `t` the step:
/// `m = b1 m + (1-b1) g`, `v = b2 v + (1-b2) g^2`, with AMSGrad
/// `vmax = max(vmax, v)` used in place of `v`, then
/// `p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)` (eps *outside*
/// the square root, as PyTorch). Adam's weight decay is L2 (`g += wd p`
/// first); AdamW's is decoupled (`p *= 1 - lr wd` first).
///
/// ```
/// let c = forge::optim::AdamConfig::default();
/// assert_eq!((c.beta1, c.beta2, c.eps, c.amsgrad), (0.9, 0.999, 1e-8, false));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdamConfig {
    /// Decay of the first moment.
    pub beta1: f64,
    /// Decay of the second moment.
    pub beta2: f64,
    /// Added to the denominator, outside the square root.
    pub eps: f64,
    /// Use the running maximum of the second moment.
    pub amsgrad: bool,
    /// Maximize the objective instead of minimizing it.
    pub maximize: bool,
}

impl Default for AdamConfig {
    fn default() -> Self {
        AdamConfig {
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            amsgrad: false,
            maximize: false,
        }
    }
}

/// AdamW's rule: [`AdamConfig`] with decoupled weight decay.
///
/// ```
/// assert_eq!(forge::optim::AdamW::<f32>::new(1e-3).hyper_for("w").weight_decay, 0.01);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AdamWConfig(pub AdamConfig);

/// Adam: `Optimizer<AdamConfig, E>`; its weight decay is L2.
///
/// ```
/// use forge::optim::Adam;
/// use forge::{Gradients, Tensor};
/// let mut w = Tensor::<f64>::from_vec(vec![1.0], &[1]).requires_grad();
/// let mut g = Gradients::new();
/// g.insert(&w, Tensor::from_vec(vec![0.3], &[1]));
/// let mut opt = Adam::new(0.1).betas(0.9, 0.999).eps(1e-8).amsgrad(true);
/// opt.step_params(vec![("w", &mut w)], &g).unwrap();
/// assert!((w.item() - 0.9).abs() < 1e-6); // the first Adam step moves by ~lr
/// ```
pub type Adam<E = f32> = Optimizer<AdamConfig, E>;

/// AdamW: `Optimizer<AdamWConfig, E>`; its weight decay (default 0.01) is
/// decoupled: `p *= 1 - lr * wd` before the Adam update.
///
/// ```
/// use forge::optim::AdamW;
/// use forge::{Gradients, Tensor};
/// let mut w = Tensor::<f64>::from_vec(vec![1.0], &[1]).requires_grad();
/// let mut g = Gradients::new();
/// g.insert(&w, Tensor::from_vec(vec![0.0], &[1]));
/// let mut opt = AdamW::new(0.1).weight_decay(0.5);
/// opt.step_params(vec![("w", &mut w)], &g).unwrap();
/// assert!((w.item() - 0.95).abs() < 1e-12); // zero gradient: only the decay
/// ```
pub type AdamW<E = f32> = Optimizer<AdamWConfig, E>;

macro_rules! adam_builders {
    ($cfg:ty, $default_wd:expr, $alias:literal) => {
        impl<E: Float> Optimizer<$cfg, E> {
            #[doc = concat!("`", $alias, "` with rate `lr` and PyTorch's defaults (betas 0.9, 0.999; eps 1e-8).")]
            ///
            /// ```
            #[doc = concat!("assert_eq!(forge::optim::", $alias, "::<f32>::new(1e-3).lr(), 1e-3);")]
            /// ```
            pub fn new(lr: f64) -> Self {
                Self::with_rule(lr, <$cfg>::default()).weight_decay($default_wd)
            }

            /// Sets the moment decays.
            ///
            /// ```
            #[doc = concat!("let o = forge::optim::", $alias, "::<f32>::new(1e-3).betas(0.9, 0.95);")]
            /// assert_eq!(o.adam_config().beta2, 0.95);
            /// ```
            pub fn betas(mut self, beta1: f64, beta2: f64) -> Self {
                self.rule.cfg_mut().beta1 = beta1;
                self.rule.cfg_mut().beta2 = beta2;
                self
            }

            /// Sets eps (added outside the square root).
            ///
            /// ```
            #[doc = concat!("let o = forge::optim::", $alias, "::<f32>::new(1e-3).eps(1e-6);")]
            /// assert_eq!(o.adam_config().eps, 1e-6);
            /// ```
            pub fn eps(mut self, eps: f64) -> Self {
                self.rule.cfg_mut().eps = eps;
                self
            }

            /// Turns AMSGrad on or off.
            ///
            /// ```
            #[doc = concat!("let o = forge::optim::", $alias, "::<f32>::new(1e-3).amsgrad(true);")]
            /// assert!(o.adam_config().amsgrad);
            /// ```
            pub fn amsgrad(mut self, on: bool) -> Self {
                self.rule.cfg_mut().amsgrad = on;
                self
            }

            /// Maximizes instead of minimizing.
            ///
            /// ```
            #[doc = concat!("let o = forge::optim::", $alias, "::<f32>::new(1e-3).maximize(true);")]
            /// assert!(o.adam_config().maximize);
            /// ```
            pub fn maximize(mut self, on: bool) -> Self {
                self.rule.cfg_mut().maximize = on;
                self
            }

            /// The Adam hyperparameters.
            ///
            /// ```
            #[doc = concat!("assert_eq!(forge::optim::", $alias, "::<f32>::new(1e-3).adam_config().beta1, 0.9);")]
            /// ```
            pub fn adam_config(&self) -> &AdamConfig {
                self.rule.cfg()
            }
        }
    };
}

/// Access to the shared Adam hyperparameters of Adam and AdamW.
trait AdamLike {
    fn cfg(&self) -> &AdamConfig;
    fn cfg_mut(&mut self) -> &mut AdamConfig;
}

impl AdamLike for AdamConfig {
    fn cfg(&self) -> &AdamConfig {
        self
    }
    fn cfg_mut(&mut self) -> &mut AdamConfig {
        self
    }
}

impl AdamLike for AdamWConfig {
    fn cfg(&self) -> &AdamConfig {
        &self.0
    }
    fn cfg_mut(&mut self) -> &mut AdamConfig {
        &mut self.0
    }
}

adam_builders!(AdamConfig, 0.0, "Adam");
adam_builders!(AdamWConfig, 0.01, "AdamW");

impl AdamConfig {
    fn check(&self, name: &str) -> Result<()> {
        let ok = |b: f64| b.is_finite() && (0.0..1.0).contains(&b);
        if !ok(self.beta1) || !ok(self.beta2) {
            return Err(ForgeError::Invalid(format!(
                "{name}: betas must be in [0, 1), got ({}, {})",
                self.beta1, self.beta2
            )));
        }
        if !(self.eps.is_finite() && self.eps >= 0.0) {
            return Err(ForgeError::Invalid(format!(
                "{name}: eps must be >= 0, got {}",
                self.eps
            )));
        }
        Ok(())
    }

    fn buffer_list(&self) -> Vec<(&'static str, f64)> {
        let mut v = vec![("exp_avg", 0.0), ("exp_avg_sq", 0.0)];
        if self.amsgrad {
            v.push(("max_exp_avg_sq", 0.0));
        }
        v
    }

    /// The fused Adam pass; `decoupled` selects AdamW's weight decay.
    fn run<E: Float>(
        &self,
        h: &Hyper,
        decoupled: bool,
        step: u64,
        buffers: &mut [Vec<E>],
        p: &[E],
        g: &[E],
    ) -> Vec<E> {
        let t = step as f64;
        let bc1 = 1.0 - self.beta1.powf(t);
        let bc2_sqrt = (1.0 - self.beta2.powf(t)).sqrt();
        let step_size = E::from_f64(h.lr / bc1);
        let bc2_sqrt = E::from_f64(bc2_sqrt);
        let w1 = E::from_f64(1.0 - self.beta1);
        let b2 = E::from_f64(self.beta2);
        let w2 = E::from_f64(1.0 - self.beta2);
        let eps = E::from_f64(self.eps);
        let wd = E::from_f64(h.weight_decay);
        let decay = E::from_f64(1.0 - h.lr * h.weight_decay);
        let use_wd = h.weight_decay != 0.0;
        let (m, rest) = buffers.split_first_mut().expect("exp_avg buffer");
        let (v, rest) = rest.split_first_mut().expect("exp_avg_sq buffer");
        let mut vmax = rest.first_mut();
        let mut out = Vec::with_capacity(p.len());
        for i in 0..p.len() {
            let mut p = p[i];
            let mut g = if self.maximize { -g[i] } else { g[i] };
            if use_wd {
                if decoupled {
                    p *= decay;
                } else {
                    g += wd * p;
                }
            }
            let mi = m[i];
            m[i] = mi + w1 * (g - mi);
            v[i] = b2 * v[i] + w2 * g * g;
            let second = match vmax.as_deref_mut() {
                Some(vm) => {
                    // torch.maximum: NaN wins.
                    if !vm[i].is_nan() && (v[i].is_nan() || v[i] > vm[i]) {
                        vm[i] = v[i];
                    }
                    vm[i]
                }
                None => v[i],
            };
            let denom = second.sqrt() / bc2_sqrt + eps;
            out.push(p - step_size * (m[i] / denom));
        }
        out
    }
}

impl UpdateRule for AdamConfig {
    const NAME: &'static str = "Adam";
    fn buffers(&self) -> Vec<(&'static str, f64)> {
        self.buffer_list()
    }
    fn validate(&self) -> Result<()> {
        self.check(Self::NAME)
    }
    fn set_momentum(&mut self, momentum: f64) -> bool {
        self.beta1 = momentum;
        true
    }
    fn update<E: Float>(&self, h: &Hyper, step: u64, b: &mut [Vec<E>], p: &[E], g: &[E]) -> Vec<E> {
        self.run(h, false, step, b, p, g)
    }
}

impl UpdateRule for AdamWConfig {
    const NAME: &'static str = "AdamW";
    fn buffers(&self) -> Vec<(&'static str, f64)> {
        self.0.buffer_list()
    }
    fn validate(&self) -> Result<()> {
        self.0.check(Self::NAME)
    }
    fn set_momentum(&mut self, momentum: f64) -> bool {
        self.0.beta1 = momentum;
        true
    }
    fn update<E: Float>(&self, h: &Hyper, step: u64, b: &mut [Vec<E>], p: &[E], g: &[E]) -> Vec<E> {
        self.0.run(h, true, step, b, p, g)
    }
}
