//! Adam (with AMSGrad and L2 weight decay) and AdamW (decoupled weight
//! decay): `torch.optim.Adam` and `torch.optim.AdamW`.

use super::optimizer::{Optimizer, Update, UpdateRule};
use super::state::{take_buffer, RuleState};
use crate::cpu::elementwise::update_chunks;
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

/// The state Adam and AdamW keep per parameter.
///
/// ```
/// use forge::optim::{Adam, AdamState};
/// use forge::{Gradients, Tensor};
/// let mut w = Tensor::<f64>::ones(&[1]).requires_grad();
/// let mut g = Gradients::new();
/// g.insert(&w, Tensor::full(&[1], 2.0));
/// let mut opt = Adam::new(0.1).amsgrad(true);
/// opt.step_params(vec![("w", &mut w)], &g).unwrap();
/// let s: &AdamState<f64> = opt.state("w").unwrap().rule_state();
/// assert!((s.exp_avg[0] - 0.2).abs() < 1e-15);
/// assert!(s.max_exp_avg_sq.is_some());
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct AdamState<E> {
    /// The first moment `m`.
    pub exp_avg: Vec<E>,
    /// The second moment `v`.
    pub exp_avg_sq: Vec<E>,
    /// The running maximum of `v` (AMSGrad only).
    pub max_exp_avg_sq: Option<Vec<E>>,
}

impl<E: Float> RuleState for AdamState<E> {
    type Elem = E;
    fn buffers(&self) -> Vec<(&'static str, &[E])> {
        let mut v = vec![
            ("exp_avg", self.exp_avg.as_slice()),
            ("exp_avg_sq", self.exp_avg_sq.as_slice()),
        ];
        if let Some(m) = &self.max_exp_avg_sq {
            v.push(("max_exp_avg_sq", m.as_slice()));
        }
        v
    }
}

/// Estimated single-thread cost of one element's update (a square root
/// and a division besides the moments), for the parallel threshold of
/// [`update_chunks`].
const NS_PER_ELEMENT: usize = 2;

impl AdamConfig {
    fn check(&self, name: &str) -> Result<()> {
        for (field, b) in [("beta1", self.beta1), ("beta2", self.beta2)] {
            if !(b.is_finite() && (0.0..1.0).contains(&b)) {
                return Err(ForgeError::invalid(
                    format!("{name}.{field}"),
                    format!("{name}: {field} = {b} must be in [0, 1)"),
                ));
            }
        }
        positive_eps(name, self.eps)
    }

    fn new_state<E: Float>(&self, n: usize) -> AdamState<E> {
        AdamState {
            exp_avg: vec![E::zero(); n],
            exp_avg_sq: vec![E::zero(); n],
            max_exp_avg_sq: self.amsgrad.then(|| vec![E::zero(); n]),
        }
    }

    fn state_of_buffers<E: Float>(&self, n: usize, mut b: Vec<(String, Vec<E>)>) -> AdamState<E> {
        AdamState {
            exp_avg: take_buffer(&mut b, "exp_avg").unwrap_or_else(|| vec![E::zero(); n]),
            exp_avg_sq: take_buffer(&mut b, "exp_avg_sq").unwrap_or_else(|| vec![E::zero(); n]),
            max_exp_avg_sq: take_buffer(&mut b, "max_exp_avg_sq")
                .or_else(|| self.amsgrad.then(|| vec![E::zero(); n])),
        }
    }

    /// The fused Adam pass; `decoupled` selects AdamW's weight decay.
    fn run<E: Float>(&self, decoupled: bool, u: Update<'_, E>, s: &mut AdamState<E>) {
        let Update {
            hyper: h,
            step,
            prep,
            param,
            grad,
        } = u;
        let t = step as f64;
        let bc1 = 1.0 - self.beta1.powf(t);
        let bc2_sqrt = (1.0 - self.beta2.powf(t)).sqrt();
        let step_size = E::from_f64(h.lr / bc1);
        let bc2_sqrt = E::from_f64(bc2_sqrt);
        let w1 = E::from_f64(1.0 - self.beta1);
        let b2 = E::from_f64(self.beta2);
        let w2 = E::from_f64(1.0 - self.beta2);
        let eps = E::from_f64(self.eps);
        let decay =
            (decoupled && h.weight_decay != 0.0).then(|| E::from_f64(1.0 - h.lr * h.weight_decay));
        let n = param.len();
        let m = &mut s.exp_avg[..n];
        let v = &mut s.exp_avg_sq[..n];
        let grad = &grad[..n];
        // The AMSGrad buffer appears when AMSGrad is turned on mid-run.
        let vmax = match (self.amsgrad, &mut s.max_exp_avg_sq) {
            (false, _) => None,
            (true, Some(vm)) => Some(&mut vm[..n]),
            (true, slot @ None) => Some(&mut slot.insert(vec![E::zero(); n])[..]),
        };
        let one = move |p: &mut E, g: E, m: &mut E, v: &mut E| -> E {
            if let Some(d) = decay {
                *p *= d;
            }
            let g = prep.apply(g, *p);
            let mi = *m;
            *m = mi + w1 * (g - mi);
            *v = b2 * *v + w2 * g * g;
            *v
        };
        match vmax {
            None => update_chunks([param, m, v], NS_PER_ELEMENT, move |off, [param, m, v]| {
                // Every slice re-cut to one length, so the loop has no
                // bounds checks and vectorises.
                let k = param.len();
                let (grad, m, v) = (&grad[off..off + k], &mut m[..k], &mut v[..k]);
                for i in 0..k {
                    let second = one(&mut param[i], grad[i], &mut m[i], &mut v[i]);
                    let denom = second.sqrt() / bc2_sqrt + eps;
                    param[i] -= step_size * (m[i] / denom);
                }
            }),
            Some(vm) => update_chunks(
                [param, m, v, vm],
                NS_PER_ELEMENT,
                move |off, [param, m, v, vm]| {
                    let k = param.len();
                    let (grad, m, v, vm) =
                        (&grad[off..off + k], &mut m[..k], &mut v[..k], &mut vm[..k]);
                    for i in 0..k {
                        let vi = one(&mut param[i], grad[i], &mut m[i], &mut v[i]);
                        // torch.maximum: NaN wins.
                        if !vm[i].is_nan() && (vi.is_nan() || vi > vm[i]) {
                            vm[i] = vi;
                        }
                        let denom = vm[i].sqrt() / bc2_sqrt + eps;
                        param[i] -= step_size * (m[i] / denom);
                    }
                },
            ),
        }
    }
}

/// `Err(Invalid)` unless eps is finite and > 0 (a zero eps turns a zero
/// gradient into 0 / 0), and at least 1e-30 so it stays positive in f32.
pub(crate) fn positive_eps(name: &str, eps: f64) -> Result<()> {
    if eps.is_finite() && eps >= 1e-30 {
        Ok(())
    } else {
        Err(ForgeError::invalid(format!("{name}.eps"), format!("{name}: eps = {eps} must be finite and >= 1e-30 (a zero eps turns a zero gradient into 0/0)"
        )))
    }
}

impl UpdateRule for AdamConfig {
    const NAME: &'static str = "Adam";
    const BUFFERS: &'static [&'static str] = &["exp_avg", "exp_avg_sq", "max_exp_avg_sq"];
    type State<E: Float> = AdamState<E>;
    fn validate(&self) -> Result<()> {
        self.check(Self::NAME)
    }
    fn maximize(&self) -> bool {
        self.maximize
    }
    fn settings(&self) -> Vec<(&'static str, f64)> {
        vec![("eps", self.eps)]
    }
    fn set_momentum(&mut self, momentum: f64) -> bool {
        self.beta1 = momentum;
        true
    }
    fn new_state<E: Float>(&self, n: usize) -> AdamState<E> {
        AdamConfig::new_state(self, n)
    }
    fn state_from_buffers<E: Float>(&self, n: usize, b: Vec<(String, Vec<E>)>) -> AdamState<E> {
        self.state_of_buffers(n, b)
    }
    fn update<E: Float>(&self, u: Update<'_, E>, s: &mut AdamState<E>) {
        self.run(false, u, s);
    }
}

impl UpdateRule for AdamWConfig {
    const NAME: &'static str = "AdamW";
    const BUFFERS: &'static [&'static str] = AdamConfig::BUFFERS;
    const DECOUPLED_WEIGHT_DECAY: bool = true;
    type State<E: Float> = AdamState<E>;
    fn validate(&self) -> Result<()> {
        self.0.check(Self::NAME)
    }
    fn maximize(&self) -> bool {
        self.0.maximize
    }
    fn settings(&self) -> Vec<(&'static str, f64)> {
        vec![("eps", self.0.eps)]
    }
    fn set_momentum(&mut self, momentum: f64) -> bool {
        self.0.beta1 = momentum;
        true
    }
    fn new_state<E: Float>(&self, n: usize) -> AdamState<E> {
        self.0.new_state(n)
    }
    fn state_from_buffers<E: Float>(&self, n: usize, b: Vec<(String, Vec<E>)>) -> AdamState<E> {
        self.0.state_of_buffers(n, b)
    }
    fn update<E: Float>(&self, u: Update<'_, E>, s: &mut AdamState<E>) {
        self.0.run(true, u, s);
    }
}
