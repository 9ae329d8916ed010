//! Stochastic gradient descent with momentum, dampening and Nesterov
//! momentum: `torch.optim.SGD`.

use super::optimizer::{unit_interval, Optimizer, Update, UpdateRule};
use super::setters::rule_setters;
use super::state::{take_buffer, RuleState};
use crate::cpu::elementwise::update_chunks;
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

    rule_setters! {
        "Sgd", "0.1";
        /// Sets the momentum factor.
        momentum: f64 = "0.9";
        /// Sets the dampening.
        dampening: f64 = "0.1";
        /// Turns Nesterov momentum on or off.
        nesterov: bool = "true";
        /// Maximizes instead of minimizing.
        maximize: bool = "true";
    }
}

/// The state SGD keeps per parameter: the momentum buffer, created on the
/// first step with momentum (as a copy of the gradient, as PyTorch does).
///
/// ```
/// use forge::optim::{Sgd, SgdState};
/// use forge::{Gradients, Tensor};
/// let mut w = Tensor::<f64>::ones(&[1]).requires_grad();
/// let mut g = Gradients::new();
/// g.insert(&w, Tensor::full(&[1], 2.0));
/// let mut opt = Sgd::new(0.1).momentum(0.9);
/// opt.step_params(vec![("w", &mut w)], &g).unwrap();
/// let s: &SgdState<f64> = opt.state("w").unwrap().rule_state();
/// assert_eq!(s.momentum_buffer, Some(vec![2.0]));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct SgdState<E> {
    /// The momentum buffer, once a step with momentum was taken.
    pub momentum_buffer: Option<Vec<E>>,
}

impl<E: Float> RuleState for SgdState<E> {
    type Elem = E;
    fn buffers(&self) -> Vec<(&'static str, &[E])> {
        match &self.momentum_buffer {
            Some(b) => vec![("momentum_buffer", b.as_slice())],
            None => vec![],
        }
    }
}

/// Estimated single-thread cost of one element's update (it streams the
/// parameter, gradient and momentum), for the parallel threshold of
/// [`update_chunks`].
const NS_PER_ELEMENT: usize = 1;

impl UpdateRule for SgdConfig {
    const NAME: &'static str = "Sgd";
    const BUFFERS: &'static [&'static str] = &["momentum_buffer"];
    type State<E: Float> = SgdState<E>;

    fn validate(&self) -> Result<()> {
        // Above 1 either factor makes the momentum buffer grow
        // geometrically: no run means it.
        unit_interval(Self::NAME, "momentum", self.momentum)?;
        unit_interval(Self::NAME, "dampening", self.dampening)?;
        if self.nesterov && (self.momentum <= 0.0 || self.dampening != 0.0) {
            return Err(ForgeError::invalid("Sgd.nesterov", format!(
                "Sgd: Nesterov momentum requires a momentum and zero dampening, got momentum = {} and dampening = {}",
                self.momentum, self.dampening
            )));
        }
        Ok(())
    }

    fn maximize(&self) -> bool {
        self.maximize
    }

    fn settings(&self) -> Vec<(&'static str, f64)> {
        vec![("momentum", self.momentum), ("dampening", self.dampening)]
    }

    fn set_momentum(&mut self, momentum: f64) -> bool {
        self.momentum = momentum;
        true
    }

    fn new_state<E: Float>(&self, _n: usize) -> SgdState<E> {
        SgdState {
            momentum_buffer: None,
        }
    }

    fn state_from_buffers<E: Float>(&self, _n: usize, mut b: Vec<(String, Vec<E>)>) -> SgdState<E> {
        SgdState {
            momentum_buffer: take_buffer(&mut b, "momentum_buffer"),
        }
    }

    fn update<E: Float>(&self, u: Update<'_, E>, s: &mut SgdState<E>) {
        let Update {
            hyper,
            prep,
            param,
            grad,
            ..
        } = u;
        let lr = E::from_f64(hyper.lr);
        let n = param.len();
        let grad = &grad[..n];
        if self.momentum == 0.0 {
            update_chunks([param], NS_PER_ELEMENT, move |off, [param]| {
                let grad = &grad[off..off + param.len()];
                for (p, &g) in param.iter_mut().zip(grad) {
                    *p = *p - lr * prep.apply(g, *p);
                }
            });
            return;
        }
        let mom = E::from_f64(self.momentum);
        let damp = E::one() - E::from_f64(self.dampening);
        let nesterov = self.nesterov;
        let direction = move |g: E, b: E| if nesterov { g + mom * b } else { b };
        match &mut s.momentum_buffer {
            Some(buf) => {
                update_chunks(
                    [param, &mut buf[..n]],
                    NS_PER_ELEMENT,
                    move |off, [param, buf]| {
                        let grad = &grad[off..off + param.len()];
                        for ((p, &g), b) in param.iter_mut().zip(grad).zip(buf) {
                            let g = prep.apply(g, *p);
                            *b = mom * *b + damp * g;
                            *p -= lr * direction(g, *b);
                        }
                    },
                );
            }
            slot @ None => {
                // PyTorch's first step with momentum: the buffer is the gradient.
                let mut buf = Vec::with_capacity(n);
                for (p, &g) in param.iter_mut().zip(grad) {
                    let g = prep.apply(g, *p);
                    buf.push(g);
                    *p -= lr * direction(g, g);
                }
                *slot = Some(buf);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::optim::{Adam, Sgd};
    use crate::{Gradients, Tensor};

    /// Three steps of SGD with momentum and of Adam with AMSGrad on a
    /// parameter large enough to be updated in parallel chunks: the same
    /// bits at 1 and 2 threads, and the 2-thread run does use the pool.
    #[test]
    fn large_updates_split_over_threads_with_the_same_bits() {
        let _threads = crate::cpu::threads::lock_thread_count();
        let n = 100_003;
        let w0: Vec<f32> = (0..n)
            .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
            .collect();
        let g: Vec<f32> = (0..n)
            .map(|i| ((i * 104_729) % 997) as f32 / 300.0 - 1.6)
            .collect();
        let run = |threads: usize| {
            crate::cpu::set_num_threads(threads);
            let before = crate::cpu::threads::pool_dispatches();
            let mut a = Tensor::<f32>::from_vec(w0.clone(), &[n]).requires_grad();
            let mut b = Tensor::<f32>::from_vec(w0.clone(), &[n]).requires_grad();
            let mut sgd = Sgd::<f32>::new(0.1).momentum(0.9).weight_decay(0.01);
            let mut adam = Adam::<f32>::new(0.01).amsgrad(true);
            for _ in 0..3 {
                let mut grads = Gradients::new();
                grads.insert(&a, Tensor::from_vec(g.clone(), &[n]));
                sgd.step_params([("w", &mut a)], &grads).unwrap();
                let mut grads = Gradients::new();
                grads.insert(&b, Tensor::from_vec(g.clone(), &[n]));
                adam.step_params([("w", &mut b)], &grads).unwrap();
            }
            let used_pool = crate::cpu::threads::pool_dispatches() > before;
            let bits = |t: &Tensor<f32>| t.to_vec().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            (bits(&a), bits(&b), used_pool)
        };
        let one = run(1);
        let two = run(2);
        assert!(!one.2 && two.2, "2 threads should split these updates");
        assert!(one.0 == two.0, "SGD: 1 and 2 threads differ");
        assert!(one.1 == two.1, "Adam: 1 and 2 threads differ");
    }
}
