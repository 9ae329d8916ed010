//! [`Optimizer`]: the state, groups and stepping shared by every rule.

use super::group::ParamGroup;
use super::state::{ParamState, RuleState, MAX_STEP};
use crate::autograd::Gradients;
use crate::cpu::memory::{count_copy_on_write, Storage};
use crate::tensor::{Float, Tensor};
use crate::{ForgeError, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;
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

/// What every rule first does to a gradient, in PyTorch's order: negate
/// it when maximizing, then add the L2 weight decay `wd * p` (unless the
/// rule's decay is decoupled, as AdamW's is). The one place `maximize`
/// and L2 decay are written.
///
/// ```
/// use forge::optim::GradPrep;
/// let prep = GradPrep::new(true, 0.5);
/// assert_eq!(prep.apply(1.0f64, 2.0), -1.0 + 0.5 * 2.0);
/// assert_eq!(GradPrep::new(false, 0.0).apply(1.0f32, 2.0), 1.0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GradPrep<E> {
    negate: bool,
    l2: Option<E>,
}

impl<E: Float> GradPrep<E> {
    /// Negates when `maximize`; adds `weight_decay * p` when it is not 0.
    ///
    /// ```
    /// assert_eq!(forge::optim::GradPrep::new(false, 0.1).apply(0.0f64, 10.0), 1.0);
    /// ```
    pub fn new(maximize: bool, weight_decay: f64) -> Self {
        GradPrep {
            negate: maximize,
            l2: (weight_decay != 0.0).then(|| E::from_f64(weight_decay)),
        }
    }

    /// The gradient `g` of an element whose value is `p`, as the rule uses it.
    ///
    /// ```
    /// assert_eq!(forge::optim::GradPrep::new(true, 0.0).apply(3.0f32, 1.0), -3.0);
    /// ```
    #[inline(always)]
    pub fn apply(&self, g: E, p: E) -> E {
        let g = if self.negate { -g } else { g };
        match self.l2 {
            Some(wd) => g + wd * p,
            None => g,
        }
    }
}

/// One update of one parameter, as the shared loop hands it to a rule: the
/// rates, the step number, the gradient preparation, and the parameter's
/// values (updated in place) with its gradient.
///
/// ```
/// use forge::optim::{GradPrep, Hyper, Update};
/// let mut p = [1.0f64, 2.0];
/// let u = Update { hyper: Hyper { lr: 0.1, weight_decay: 0.0 }, step: 1, prep: GradPrep::new(false, 0.0), param: &mut p, grad: &[1.0, 1.0] };
/// assert_eq!(u.param.len(), u.grad.len());
/// ```
#[derive(Debug)]
pub struct Update<'a, E> {
    /// The learning rate and weight decay of this parameter.
    pub hyper: Hyper,
    /// The step being taken (1 on the first update of this parameter).
    pub step: u64,
    /// Maximize and L2 weight decay, to apply to each gradient element.
    pub prep: GradPrep<E>,
    /// The parameter's values, to update in place.
    pub param: &'a mut [E],
    /// The gradient, of the same length.
    pub grad: &'a [E],
}

/// The update rule of an optimizer (SGD, Adam, ...): its hyperparameters
/// besides the learning rate and weight decay, the typed state it keeps per
/// parameter, and one fused in-place pass over a parameter and its state.
///
/// Implement it to add an optimizer; [`Optimizer<R, E>`] supplies the
/// parameter loop, state keyed by path, parameter groups, `maximize` and
/// L2 weight decay ([`GradPrep`]), stepping and files.
///
/// ```
/// use forge::optim::{NoState, Optimizer, Update, UpdateRule};
/// use forge::{Float, Result};
/// #[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
/// struct SignSgd;
/// impl UpdateRule for SignSgd {
///     const NAME: &'static str = "SignSgd";
///     const BUFFERS: &'static [&'static str] = &[];
///     type State<E: Float> = NoState<E>;
///     fn validate(&self) -> Result<()> { Ok(()) }
///     fn maximize(&self) -> bool { false }
///     fn new_state<E: Float>(&self, _n: usize) -> NoState<E> { NoState::default() }
///     fn state_from_buffers<E: Float>(&self, _n: usize, _b: Vec<(String, Vec<E>)>) -> NoState<E> {
///         NoState::default()
///     }
///     fn update<E: Float>(&self, u: Update<'_, E>, _s: &mut NoState<E>) {
///         let lr = E::from_f64(u.hyper.lr);
///         for (p, &g) in u.param.iter_mut().zip(u.grad) {
///             *p = *p - lr * u.prep.apply(g, *p).signum();
///         }
///     }
/// }
/// let opt: Optimizer<SignSgd, f64> = Optimizer::with_rule(0.1, SignSgd);
/// assert_eq!(opt.lr(), 0.1);
/// ```
pub trait UpdateRule: Clone + Debug + Serialize + DeserializeOwned {
    /// The optimizer's name, written into files.
    const NAME: &'static str;
    /// Every buffer name the rule can keep (PyTorch's state keys), in order.
    const BUFFERS: &'static [&'static str];
    /// Whether the weight decay is applied by the rule to the parameter
    /// (AdamW) instead of being added to the gradient as L2.
    const DECOUPLED_WEIGHT_DECAY: bool = false;
    /// The state kept per parameter.
    type State<E: Float>: RuleState<Elem = E>;
    /// Checks the hyperparameters (an error is [`ForgeError::Invalid`]
    /// naming the field and the value).
    ///
    /// # Errors
    /// [`ForgeError::Invalid`] for a value out of range.
    fn validate(&self) -> Result<()>;
    /// Whether to maximize the objective instead of minimizing it.
    fn maximize(&self) -> bool;
    /// The numeric settings by name, each checked to stay finite in the
    /// element type (a setting of 1e39 is finite in f64, infinite in f32).
    fn settings(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
    /// Sets the momentum (SGD, RMSprop) or beta1 (Adam), for schedules
    /// that cycle it; returns whether the rule has one.
    fn set_momentum(&mut self, _momentum: f64) -> bool {
        false
    }
    /// Fresh state for a parameter of `numel` elements.
    fn new_state<E: Float>(&self, numel: usize) -> Self::State<E>;
    /// State from named buffers (a file, [`Optimizer::set_state`]): every
    /// name is one of [`BUFFERS`](Self::BUFFERS), given once, with `numel`
    /// values; a buffer the rule needs but `buffers` lacks starts at its
    /// initial value.
    fn state_from_buffers<E: Float>(
        &self,
        numel: usize,
        buffers: Vec<(String, Vec<E>)>,
    ) -> Self::State<E>;
    /// One fused pass: updates `u.param` and `state` in place, reading
    /// each gradient element through `u.prep`.
    fn update<E: Float>(&self, u: Update<'_, E>, state: &mut Self::State<E>);
}

/// The state of a rule that keeps no buffers.
///
/// ```
/// use forge::optim::{NoState, RuleState};
/// assert!(NoState::<f32>::default().buffers().is_empty());
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NoState<E>(std::marker::PhantomData<E>);

impl<E: Float> RuleState for NoState<E> {
    type Elem = E;
    fn buffers(&self) -> Vec<(&'static str, &[E])> {
        Vec::new()
    }
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
#[derive(Clone, Debug)]
pub struct Optimizer<R: UpdateRule, E: Float = f32> {
    pub(crate) lr: f64,
    pub(crate) weight_decay: f64,
    pub(crate) rule: R,
    pub(crate) groups: Vec<ParamGroup>,
    pub(crate) state: BTreeMap<String, ParamState<R::State<E>>>,
    /// Refuse a step whose gradients hold a NaN or an infinity (not saved:
    /// a run-time check, like PyTorch's `error_if_nonfinite`).
    pub(crate) error_if_nonfinite: bool,
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
            error_if_nonfinite: false,
        }
    }

    /// With `on`, a step whose gradients hold a NaN or an infinity is
    /// refused with [`ForgeError::NonFinite`] naming the parameter, and no
    /// parameter or state changes (the option of PyTorch's
    /// `clip_grad_norm_`, here on every optimizer). Off by default, as in
    /// PyTorch, where such a step silently writes NaN into the weights.
    ///
    /// ```
    /// use forge::optim::Sgd;
    /// use forge::{ForgeError, Tensor};
    /// let mut w = Tensor::<f32>::ones(&[2]).requires_grad();
    /// let grads = w.log().neg().log().sum().backward(); // log(-0) = -inf: gradient inf
    /// let mut opt = Sgd::new(0.1).error_if_nonfinite(true);
    /// let err = opt.step_params(vec![("w", &mut w)], &grads).unwrap_err();
    /// assert!(matches!(&err, ForgeError::NonFinite { name, .. } if name == "gradient of w"));
    /// assert_eq!(w.to_vec(), vec![1.0, 1.0]);
    /// ```
    pub fn error_if_nonfinite(mut self, on: bool) -> Self {
        self.error_if_nonfinite = on;
        self
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
    pub fn state(&self, path: &str) -> Option<&ParamState<R::State<E>>> {
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
                return Err(ForgeError::state(
                    format!("param_groups.{i}"),
                    format!(
                        "{}: parameter group {i} was built with a closure (ParamGroup::matching), \
                     which a file cannot store; rebuild the optimizer in code and call \
                     `restore(path)` to take the saved state",
                        R::NAME
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Finite non-negative rates and decays, and the rule's own ranges.
    fn validate_ranges(&self) -> Result<()> {
        let name = R::NAME;
        non_negative(name, "lr", self.lr)?;
        non_negative(name, "weight_decay", self.weight_decay)?;
        let fits = |what: String, v: f64| {
            if E::from_f64(v).is_finite() {
                Ok(())
            } else {
                Err(ForgeError::invalid(
                    format!("{name}.{what}"),
                    format!(
                        "{name}: {what} = {v} overflows {}",
                        std::any::type_name::<E>()
                    ),
                ))
            }
        };
        fits("lr".into(), self.lr)?;
        fits("weight_decay".into(), self.weight_decay)?;
        fits("lr * weight_decay".into(), self.lr * self.weight_decay)?;
        for (i, g) in self.groups.iter().enumerate() {
            non_negative(name, &format!("groups[{i}].lr_scale"), g.lr_scale)?;
            fits(format!("lr * groups[{i}].lr_scale"), self.lr * g.lr_scale)?;
            if let Some(wd) = g.weight_decay {
                non_negative(name, &format!("groups[{i}].weight_decay"), wd)?;
                fits(format!("groups[{i}].weight_decay"), wd)?;
            }
            let wd = g.weight_decay.unwrap_or(self.weight_decay);
            fits(
                format!("lr * groups[{i}].lr_scale * weight_decay"),
                self.lr * g.lr_scale * wd,
            )?;
        }
        self.rule.validate()?;
        for (field, v) in self.rule.settings() {
            fits(field.to_string(), v)?;
        }
        Ok(())
    }

    /// Checks an optimizer decoded from a file or assembled from parts:
    /// settings in range, every state consistent with its shape.
    pub(crate) fn check_loaded(&self) -> Result<()> {
        self.validate_ranges()?;
        for (path, s) in &self.state {
            s.validate(path)?;
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
        if self.error_if_nonfinite
            && let Some((i, v)) = crate::tools::first_nonfinite(g.as_slice())
        {
            return Err(ForgeError::NonFinite {
                name: format!("gradient of {path}"),
                detail: format!("{v} at index {i} of shape {:?}", g.shape()),
            });
        }
        if let Some(s) = self.state.get(path) {
            if s.shape != param.shape() {
                return Err(ForgeError::state(
                    path.to_string(),
                    format!(
                        "optimizer state was created for shape {:?}, the parameter has shape {:?}",
                        s.shape,
                        param.shape()
                    ),
                ));
            }
            if s.step >= MAX_STEP {
                return Err(ForgeError::state(
                    path.to_string(),
                    format!(
                        "step = {} cannot advance (the limit is {})",
                        s.step,
                        MAX_STEP - 1
                    ),
                ));
            }
        }
        Ok(true)
    }

    /// Updates one checked parameter: in place when this handle holds the
    /// only reference to the values (the usual case once the loss and its
    /// graph are dropped), else into a new buffer.
    pub(crate) fn update_param(
        &mut self,
        path: &str,
        param: &mut Tensor<E>,
        grad: &Tensor<E>,
    ) -> Result<()> {
        let hyper = self.hyper_for(path);
        let n = param.numel();
        if !self.state.contains_key(path) {
            let fresh = ParamState {
                step: 0,
                shape: param.shape().to_vec(),
                buffers: self.rule.new_state(n),
            };
            self.state.insert(path.to_string(), fresh);
        }
        let state = self.state.get_mut(path).expect("state inserted above");
        let step = state
            .step
            .checked_add(1)
            .filter(|&s| s < MAX_STEP)
            .ok_or_else(|| {
                ForgeError::state(
                    path.to_string(),
                    format!("step = {} cannot advance", state.step),
                )
            })?;
        state.step = step;
        let decay = if R::DECOUPLED_WEIGHT_DECAY {
            0.0
        } else {
            hyper.weight_decay
        };
        let prep = GradPrep::new(self.rule.maximize(), decay);
        let rule = &self.rule;
        let grad = grad.as_slice();
        let run = |values: &mut [E], bufs: &mut R::State<E>| {
            rule.update(
                Update {
                    hyper,
                    step,
                    prep,
                    param: values,
                    grad,
                },
                bufs,
            );
        };
        match param.values_mut() {
            Some(values) => {
                run(values, &mut state.buffers);
                // A parameter that was an op's output becomes a leaf, as
                // when it is replaced by a new tensor.
                if param.node.as_ref().is_some_and(|n| n.backward.is_some()) {
                    *param = param.detach().requires_grad();
                }
            }
            None => {
                // Shared values (the graph or another handle holds them):
                // update a copy in a pooled buffer, and count it.
                count_copy_on_write(n * std::mem::size_of::<E>());
                let mut values = Storage::from_slice(param.as_slice());
                run(&mut values, &mut state.buffers);
                let t = Tensor::from_storage(values, param.shape());
                *param = if param.is_tracked() {
                    t.requires_grad()
                } else {
                    t
                };
            }
        }
        Ok(())
    }

    /// One optimization step over parameters given by path, with their
    /// gradients looked up in `grads` ([`Gradients`] or a path map).
    ///
    /// Everything is checked before anything changes, so on error no
    /// parameter and no state has been modified. A parameter whose values
    /// no other tensor shares is updated in place (its tape id is kept);
    /// otherwise it becomes a new tensor. A tracked parameter stays a
    /// tracked leaf.
    ///
    /// # Errors
    /// [`ForgeError::State`] when a parameter's shape differs from the one
    /// its state was created for, or its step counter cannot advance;
    /// [`ForgeError::Shape`] when a gradient's shape differs from its
    /// parameter's; [`ForgeError::Invalid`] for out-of-range
    /// hyperparameters; [`ForgeError::NonFinite`] when a gradient holds
    /// a NaN or an infinity and [`error_if_nonfinite`](Self::error_if_nonfinite)
    /// is on.
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
        for (path, p) in &params {
            self.check_param(path.as_ref(), p, grads.grad_of(path.as_ref(), p))?;
        }
        for (path, p) in params {
            if let Some(g) = grads.grad_of(path.as_ref(), p).cloned() {
                self.update_param(path.as_ref(), p, &g)?;
            }
        }
        Ok(())
    }
}

/// `Err(Invalid)` naming the optimizer, the field and the value unless `v`
/// is finite and `>= 0`.
pub(crate) fn non_negative(name: &str, field: &str, v: f64) -> Result<()> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(ForgeError::invalid(
            format!("{name}.{field}"),
            format!("{name}: {field} = {v} must be finite and >= 0"),
        ))
    }
}

/// `Err(Invalid)` naming the optimizer, the field and the value unless `v`
/// is in `[0, 1]`.
pub(crate) fn unit_interval(name: &str, field: &str, v: f64) -> Result<()> {
    if (0.0..=1.0).contains(&v) {
        Ok(())
    } else {
        Err(ForgeError::invalid(
            format!("{name}.{field}"),
            format!("{name}: {field} = {v} must be in [0, 1]"),
        ))
    }
}
