//! [`Optimizer`]: the state, groups and stepping shared by every rule.

use super::group::ParamGroup;
use super::state::ParamState;
use crate::autograd::Gradients;
use crate::tensor::{Float, Tensor};
use crate::{ForgeError, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Debug;

/// The learning rate and weight decay that apply to one parameter, after
/// its [`ParamGroup`] is taken into account.
///
/// ```
/// let h = forge::optim::Sgd::<f32>::new(0.1).weight_decay(0.01).hyper_for("w");
/// assert_eq!((h.lr, h.weight_decay), (0.1, 0.01));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hyper {
    /// The learning rate.
    pub lr: f64,
    /// The weight decay (L2 or decoupled, as the rule defines it).
    pub weight_decay: f64,
}

/// The update rule of an optimizer (SGD, Adam, ...): its hyperparameters
/// besides the learning rate and weight decay, the buffers it keeps per
/// parameter, and one fused pass computing the new parameter values.
///
/// Implement it to add an optimizer; [`Optimizer<R, E>`] supplies state
/// keyed by path, parameter groups, stepping and files.
///
/// ```
/// use forge::optim::{Hyper, Optimizer, UpdateRule};
/// use forge::{Float, Result};
/// #[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
/// struct SignSgd;
/// impl UpdateRule for SignSgd {
///     const NAME: &'static str = "SignSgd";
///     fn buffers(&self) -> Vec<(&'static str, f64)> { vec![] }
///     fn validate(&self) -> Result<()> { Ok(()) }
///     fn update<E: Float>(&self, h: &Hyper, _step: u64, _b: &mut [Vec<E>], p: &[E], g: &[E]) -> Vec<E> {
///         let lr = E::from_f64(h.lr);
///         p.iter().zip(g).map(|(&p, &g)| p - lr * g.signum()).collect()
///     }
/// }
/// let opt: Optimizer<SignSgd, f64> = Optimizer::with_rule(0.1, SignSgd);
/// assert_eq!(opt.lr(), 0.1);
/// ```
pub trait UpdateRule: Clone + Debug + Serialize + DeserializeOwned {
    /// The optimizer's name, written into files.
    const NAME: &'static str;
    /// The buffers kept per parameter (PyTorch's state keys) and the value
    /// each starts with.
    fn buffers(&self) -> Vec<(&'static str, f64)>;
    /// Checks the hyperparameters (an error is [`ForgeError::Invalid`]).
    fn validate(&self) -> Result<()>;
    /// Sets the momentum (SGD, RMSprop) or beta1 (Adam), for schedules
    /// that cycle it; returns whether the rule has one.
    fn set_momentum(&mut self, _momentum: f64) -> bool {
        false
    }
    /// The new values of a parameter `p` with gradient `g`, at `step`
    /// (1 on the first update), updating `buffers` (in the order of
    /// [`buffers`](Self::buffers)) in place.
    fn update<E: Float>(
        &self,
        h: &Hyper,
        step: u64,
        buffers: &mut [Vec<E>],
        p: &[E],
        g: &[E],
    ) -> Vec<E>;
}

/// Where an optimizer finds a parameter's gradient: [`Gradients`] (by
/// tensor) or a map from path to gradient.
///
/// ```
/// use forge::optim::GradSource;
/// use std::collections::BTreeMap;
/// let w = forge::Tensor::<f32>::ones(&[1]);
/// let mut m = BTreeMap::new();
/// m.insert("w".to_string(), forge::Tensor::<f32>::ones(&[1]));
/// assert!(m.grad_of("w", &w).is_some());
/// ```
pub trait GradSource<E: Float> {
    /// The gradient of the parameter `param` at `path`, if it has one.
    fn grad_of(&self, path: &str, param: &Tensor<E>) -> Option<&Tensor<E>>;
}

impl<E: Float> GradSource<E> for Gradients<E> {
    fn grad_of(&self, _path: &str, param: &Tensor<E>) -> Option<&Tensor<E>> {
        self.get(param)
    }
}

impl<E: Float> GradSource<E> for BTreeMap<String, Tensor<E>> {
    fn grad_of(&self, path: &str, _param: &Tensor<E>) -> Option<&Tensor<E>> {
        self.get(path)
    }
}

/// An optimizer: an [`UpdateRule`] with its learning rate, weight decay,
/// parameter groups and per-parameter state keyed by tensor path.
///
/// Use the aliases [`Sgd`](crate::optim::Sgd), [`Adam`](crate::optim::Adam),
/// [`AdamW`](crate::optim::AdamW), [`Adagrad`](crate::optim::Adagrad),
/// [`Adadelta`](crate::optim::Adadelta) and [`RmsProp`](crate::optim::RmsProp).
/// The optimizer never holds the model: each step is given the parameters
/// (by path) and their gradients.
///
/// State is created on a parameter's first update from its shape and checked
/// on every later one: a parameter whose shape changed is a
/// [`ForgeError::State`] naming the path and both shapes. A parameter without
/// a gradient is skipped and its state left as it is, as in PyTorch.
///
/// ```
/// use forge::optim::{Optimizer, Sgd};
/// use forge::Tensor;
/// let mut w = Tensor::<f64>::from_vec(vec![1.0, 2.0], &[2]).requires_grad();
/// let loss = (&w * &w).sum();
/// let grads = loss.backward();
/// let mut opt = Sgd::new(0.1);
/// opt.step_params(vec![("w", &mut w)], &grads).unwrap();
/// assert_eq!(w.to_vec(), vec![0.8, 1.6]);
/// assert!(w.is_tracked());
/// ```
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(bound(
    serialize = "R: Serialize, E: Serialize",
    deserialize = "R: DeserializeOwned, E: DeserializeOwned"
))]
pub struct Optimizer<R, E = f32> {
    pub(crate) lr: f64,
    pub(crate) weight_decay: f64,
    pub(crate) rule: R,
    pub(crate) groups: Vec<ParamGroup>,
    pub(crate) state: BTreeMap<String, ParamState<E>>,
}

impl<R: UpdateRule, E: Float> Optimizer<R, E> {
    /// An optimizer with rate `lr`, no weight decay and the given rule.
    ///
    /// ```
    /// use forge::optim::{Optimizer, SgdConfig};
    /// let opt: Optimizer<SgdConfig, f32> = Optimizer::with_rule(0.1, SgdConfig::default());
    /// assert_eq!(opt.lr(), 0.1);
    /// ```
    pub fn with_rule(lr: f64, rule: R) -> Self {
        Optimizer {
            lr,
            weight_decay: 0.0,
            rule,
            groups: Vec::new(),
            state: BTreeMap::new(),
        }
    }

    /// Sets the weight decay for every parameter that no group overrides
    /// (L2, added to the gradient, except for AdamW whose decay is
    /// decoupled).
    ///
    /// ```
    /// let opt = forge::optim::Sgd::<f32>::new(0.1).weight_decay(1e-4);
    /// assert_eq!(opt.hyper_for("w").weight_decay, 1e-4);
    /// ```
    pub fn weight_decay(mut self, wd: f64) -> Self {
        self.weight_decay = wd;
        self
    }

    /// Adds a parameter group (per-path options). Groups are tried in the
    /// order added; the first that matches a path wins.
    ///
    /// ```
    /// use forge::optim::{ParamGroup, Sgd};
    /// let opt = Sgd::<f32>::new(0.1)
    ///     .weight_decay(0.01)
    ///     .with_group(ParamGroup::suffix("bias").weight_decay(0.0));
    /// assert_eq!(opt.hyper_for("fc.bias").weight_decay, 0.0);
    /// ```
    pub fn with_group(mut self, group: ParamGroup) -> Self {
        self.groups.push(group);
        self
    }

    /// The groups, in the order they are tried.
    ///
    /// ```
    /// let opt = forge::optim::Sgd::<f32>::new(0.1).with_group(forge::optim::ParamGroup::suffix("bias"));
    /// assert_eq!(opt.groups().len(), 1);
    /// ```
    pub fn groups(&self) -> &[ParamGroup] {
        &self.groups
    }

    /// The rule and its hyperparameters.
    ///
    /// ```
    /// let opt = forge::optim::Sgd::<f32>::new(0.1).momentum(0.9);
    /// assert_eq!(opt.rule().momentum, 0.9);
    /// ```
    pub fn rule(&self) -> &R {
        &self.rule
    }

    /// Mutable access to the rule's hyperparameters.
    ///
    /// ```
    /// let mut opt = forge::optim::Sgd::<f32>::new(0.1);
    /// opt.rule_mut().momentum = 0.5;
    /// assert_eq!(opt.rule().momentum, 0.5);
    /// ```
    pub fn rule_mut(&mut self) -> &mut R {
        &mut self.rule
    }

    /// The learning rate (of parameters outside any scaled group).
    ///
    /// ```
    /// assert_eq!(forge::optim::Adam::<f32>::new(3e-4).lr(), 3e-4);
    /// ```
    pub fn lr(&self) -> f64 {
        self.lr
    }

    /// Sets the learning rate; groups keep their scale relative to it.
    ///
    /// ```
    /// let mut opt = forge::optim::Adam::<f32>::new(3e-4);
    /// opt.set_lr(1e-4);
    /// assert_eq!(opt.lr(), 1e-4);
    /// ```
    pub fn set_lr(&mut self, lr: f64) {
        self.lr = lr;
    }

    /// Forgets all per-parameter state (moments, step counts), keeping the
    /// hyperparameters and groups: the next step starts afresh.
    ///
    /// ```
    /// # use forge::optim::Adam;
    /// # use forge::{Gradients, Tensor};
    /// # let mut w = Tensor::<f32>::ones(&[1]).requires_grad();
    /// # let mut g = Gradients::new();
    /// # g.insert(&w, Tensor::ones(&[1]));
    /// let mut opt = Adam::new(1e-3);
    /// opt.step_params(vec![("w", &mut w)], &g).unwrap();
    /// opt.reset();
    /// assert!(opt.state("w").is_none());
    /// ```
    pub fn reset(&mut self) {
        self.state.clear();
    }

    /// The state of the parameter at `path`, if it has been updated.
    ///
    /// ```
    /// assert!(forge::optim::Adam::<f32>::new(1e-3).state("w").is_none());
    /// ```
    pub fn state(&self, path: &str) -> Option<&ParamState<E>> {
        self.state.get(path)
    }

    /// Every path with state, in sorted order.
    ///
    /// ```
    /// assert_eq!(forge::optim::Adam::<f32>::new(1e-3).state_paths().count(), 0);
    /// ```
    pub fn state_paths(&self) -> impl Iterator<Item = &str> {
        self.state.keys().map(String::as_str)
    }

    /// The learning rate and weight decay for the parameter at `path`.
    ///
    /// ```
    /// use forge::optim::{ParamGroup, Sgd};
    /// let opt = Sgd::<f32>::new(0.1).with_group(ParamGroup::prefix("enc.").lr_scale(0.5));
    /// assert_eq!(opt.hyper_for("enc.w").lr, 0.05);
    /// assert_eq!(opt.hyper_for("dec.w").lr, 0.1);
    /// ```
    pub fn hyper_for(&self, path: &str) -> Hyper {
        match self.groups.iter().find(|g| g.matcher.matches(path)) {
            Some(g) => Hyper {
                lr: self.lr * g.lr_scale,
                weight_decay: g.weight_decay.unwrap_or(self.weight_decay),
            },
            None => Hyper {
                lr: self.lr,
                weight_decay: self.weight_decay,
            },
        }
    }

    /// Checks the settings before a step: the ranges, and no group matcher
    /// lost in a file round trip.
    pub(crate) fn validate_settings(&self) -> Result<()> {
        self.validate_ranges()?;
        for (i, g) in self.groups.iter().enumerate() {
            if g.matcher.is_unbound() {
                return Err(ForgeError::State(format!(
                    "{}: parameter group {i} was built with a closure (ParamGroup::matching), \
                     which a file cannot store; rebuild the optimizer in code and call \
                     `restore(path)` to take the saved state",
                    R::NAME
                )));
            }
        }
        Ok(())
    }

    /// Finite non-negative rates and decays, and the rule's own ranges.
    fn validate_ranges(&self) -> Result<()> {
        let bad = |what: &str, v: f64| {
            Err(ForgeError::Invalid(format!(
                "{}: {what} must be finite and >= 0, got {v}",
                R::NAME
            )))
        };
        if !(self.lr.is_finite() && self.lr >= 0.0) {
            return bad("lr", self.lr);
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return bad("weight_decay", self.weight_decay);
        }
        for g in &self.groups {
            if !(g.lr_scale.is_finite() && g.lr_scale >= 0.0) {
                return bad("group lr_scale", g.lr_scale);
            }
            if let Some(wd) = g.weight_decay {
                if !(wd.is_finite() && wd >= 0.0) {
                    return bad("group weight_decay", wd);
                }
            }
        }
        self.rule.validate()
    }

    /// Checks an optimizer decoded from a file: settings in range, every
    /// state's buffers of its shape's size and known to the rule.
    pub(crate) fn check_loaded(&self) -> Result<()> {
        self.validate_ranges()?;
        let wanted = self.rule.buffers();
        for (path, s) in &self.state {
            s.validate(path)?;
            s.check_buffers(path, &wanted)?;
        }
        Ok(())
    }

    /// Checks one parameter against its gradient and its state without
    /// changing anything. Returns whether it has a gradient.
    pub(crate) fn check_param(
        &self,
        path: &str,
        param: &Tensor<E>,
        grad: Option<&Tensor<E>>,
    ) -> Result<bool> {
        let Some(g) = grad else { return Ok(false) };
        if g.shape() != param.shape() {
            return Err(ForgeError::Shape {
                name: format!("gradient of {path}"),
                expected: param.shape().to_vec(),
                found: g.shape().to_vec(),
            });
        }
        if let Some(s) = self.state.get(path) {
            if s.shape != param.shape() {
                return Err(ForgeError::State(format!(
                    "{path}: optimizer state was created for shape {:?}, the parameter has shape {:?}",
                    s.shape,
                    param.shape()
                )));
            }
            s.validate(path)?;
            let wanted = self.rule.buffers();
            s.check_buffers(path, &wanted)?;
        }
        Ok(true)
    }

    /// Updates one checked parameter.
    pub(crate) fn update_param(
        &mut self,
        path: &str,
        param: &mut Tensor<E>,
        grad: &Tensor<E>,
    ) -> Result<()> {
        let h = self.hyper_for(path);
        let wanted = self.rule.buffers();
        let state = self
            .state
            .entry(path.to_string())
            .or_insert_with(|| ParamState::new(param.shape(), &wanted));
        state.conform(path, &wanted)?;
        state.step += 1;
        let mut bufs: Vec<Vec<E>> = state
            .buffers
            .iter_mut()
            .map(|(_, v)| std::mem::take(v))
            .collect();
        let new = self
            .rule
            .update(&h, state.step, &mut bufs, param.as_slice(), grad.as_slice());
        for ((_, slot), v) in state.buffers.iter_mut().zip(bufs) {
            *slot = v;
        }
        let t = Tensor::from_vec(new, param.shape());
        *param = if param.is_tracked() {
            t.requires_grad()
        } else {
            t
        };
        Ok(())
    }

    /// One optimization step over parameters given by path, with their
    /// gradients looked up in `grads` ([`Gradients`] or a path map).
    ///
    /// Everything is checked before anything changes, so on error no
    /// parameter and no state has been modified. Updated parameters are
    /// new tensors; a tracked parameter stays a tracked leaf.
    ///
    /// # Errors
    /// [`ForgeError::State`] when a parameter's shape differs from the one
    /// its state was created for; [`ForgeError::Shape`] when a gradient's
    /// shape differs from its parameter's; [`ForgeError::Invalid`] for
    /// out-of-range hyperparameters.
    ///
    /// ```
    /// use forge::optim::Adam;
    /// use forge::Tensor;
    /// let mut w = Tensor::<f64>::from_vec(vec![1.0], &[1]).requires_grad();
    /// let mut b = Tensor::<f64>::from_vec(vec![0.0], &[1]).requires_grad();
    /// let grads = (&w * 3.0).sum().backward(); // b has no gradient
    /// let mut opt = Adam::new(0.1);
    /// opt.step_params(vec![("w", &mut w), ("b", &mut b)], &grads).unwrap();
    /// assert!((w.item() - 0.9).abs() < 1e-6);
    /// assert_eq!(b.item(), 0.0);
    /// assert!(opt.state("b").is_none());
    /// ```
    pub fn step_params<'a, S, I, G>(&mut self, params: I, grads: &G) -> Result<()>
    where
        S: AsRef<str>,
        I: IntoIterator<Item = (S, &'a mut Tensor<E>)>,
        G: GradSource<E> + ?Sized,
    {
        self.validate_settings()?;
        let params: Vec<(S, &'a mut Tensor<E>)> = params.into_iter().collect();
        let mut todo = Vec::with_capacity(params.len());
        for (path, p) in &params {
            let g = grads.grad_of(path.as_ref(), p);
            todo.push(self.check_param(path.as_ref(), p, g)?);
        }
        for ((path, p), has) in params.into_iter().zip(todo) {
            if has {
                let g = grads
                    .grad_of(path.as_ref(), p)
                    .expect("gradient present at check time")
                    .clone();
                self.update_param(path.as_ref(), p, &g)?;
            }
        }
        Ok(())
    }
}
