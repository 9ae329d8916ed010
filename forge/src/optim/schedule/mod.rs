//! Learning-rate schedules that drive an optimizer's rate, giving exactly
//! the rate PyTorch's `torch.optim.lr_scheduler` gives at each step.
//!
//! A schedule is a function of the step: [`LrScheduler::lr_at`]`(k)` is the
//! rate used by the `k`-th optimizer step (k = 0 for the first), which is
//! PyTorch's `optimizer.param_groups[0]['lr']` read just before its `k`-th
//! `optimizer.step()` when `scheduler.step()` is called after every
//! optimizer step. The `for_optimizer` constructors read the base rate from
//! the optimizer and set the step-0 rate on it, as PyTorch's constructors
//! do (`StepLr::for_optimizer(&mut opt, 30, 0.1)`); the `new` constructors
//! take the base rate and leave the optimizer alone, so the loop needs one
//! extra call before it:
//!
//! ```
//! use forge::optim::{LrScheduler, Sgd, StepLr};
//! let mut opt = Sgd::<f32>::new(0.1);
//! let mut sched = StepLr::new(0.1, 2, 0.5);
//! sched.apply(&mut opt); // rate for step 0
//! let mut seen = vec![];
//! for _ in 0..5 {
//!     seen.push(opt.lr()); // ... opt.step(...) here ...
//!     sched.step(&mut opt);
//! }
//! assert_eq!(seen, vec![0.1, 0.1, 0.05, 0.05, 0.025]);
//! ```
//!
//! Every schedule is plain data (serde); [`Schedule`] holds any of them
//! (for saving), [`Phase`] any that [`SequentialLr`] chains.

mod attach;
mod cosine;
mod noam;
mod onecycle;
mod sequential;
mod simple;

pub use cosine::CosineAnnealingLr;
pub use noam::NoamLr;
pub use onecycle::{Anneal, OneCycleLr};
pub use sequential::SequentialLr;
pub use simple::{ExponentialLr, LinearLr, MultiStepLr, StepLr};

use super::optimizer::{Optimizer, UpdateRule};
use super::state::MAX_STEP;
use crate::tensor::Float;
use crate::{ForgeError, Result};
use serde::{Deserialize, Serialize};

/// Something whose learning rate (and momentum) a schedule sets: every
/// [`Optimizer`].
///
/// ```
/// use forge::optim::{LrTarget, Sgd};
/// let mut opt = Sgd::<f32>::new(0.1);
/// LrTarget::set_lr(&mut opt, 0.2);
/// assert_eq!(opt.lr(), 0.2);
/// ```
pub trait LrTarget {
    /// The learning rate (the base rate `for_optimizer` constructors read).
    fn lr(&self) -> f64;
    /// Sets the learning rate.
    fn set_lr(&mut self, lr: f64);
    /// Sets the momentum (beta1 for Adam); returns whether there is one.
    fn set_momentum(&mut self, momentum: f64) -> bool;
}

impl<R: UpdateRule, E: Float> LrTarget for Optimizer<R, E> {
    fn lr(&self) -> f64 {
        Optimizer::lr(self)
    }
    fn set_lr(&mut self, lr: f64) {
        Optimizer::set_lr(self, lr);
    }
    fn set_momentum(&mut self, momentum: f64) -> bool {
        self.rule.set_momentum(momentum)
    }
}

/// A learning-rate schedule: a rate for every step, and a step counter.
///
/// ```
/// use forge::optim::{ExponentialLr, LrScheduler};
/// let s = ExponentialLr::new(1.0, 0.5);
/// assert_eq!(s.lr_at(3), 0.125);
/// ```
pub trait LrScheduler {
    /// The rate for optimizer step `step` (0 = the first).
    fn lr_at(&self, step: u64) -> f64;
    /// The momentum for step `step`, for schedules that cycle it.
    fn momentum_at(&self, _step: u64) -> Option<f64> {
        None
    }
    /// The step the schedule is at (how many times [`step`](Self::step)
    /// was called).
    fn current_step(&self) -> u64;
    /// Moves the schedule to `step` (for resuming).
    fn set_step(&mut self, step: u64);
    /// Checks the parameters (a schedule read from a file is checked
    /// before use).
    ///
    /// # Errors
    /// [`ForgeError::Invalid`] for out-of-range
    /// parameters.
    fn validate(&self) -> Result<()>;

    /// The rate at the current step.
    ///
    /// ```
    /// use forge::optim::{LrScheduler, StepLr};
    /// assert_eq!(StepLr::new(0.1, 3, 0.5).lr(), 0.1);
    /// ```
    fn lr(&self) -> f64 {
        self.lr_at(self.current_step())
    }

    /// Sets the optimizer's rate (and momentum, if cycled) for the
    /// current step.
    ///
    /// ```
    /// use forge::optim::{LinearLr, LrScheduler, Sgd};
    /// let mut opt = Sgd::<f32>::new(0.1);
    /// LinearLr::new(0.1, 0.1, 1.0, 5).apply(&mut opt);
    /// assert!((opt.lr() - 0.01).abs() < 1e-15);
    /// ```
    fn apply<O: LrTarget + ?Sized>(&self, opt: &mut O) {
        let k = self.current_step();
        opt.set_lr(self.lr_at(k));
        if let Some(m) = self.momentum_at(k) {
            opt.set_momentum(m);
        }
    }

    /// Advances one step and sets the optimizer's rate for it: call once
    /// after every optimizer step.
    ///
    /// ```
    /// use forge::optim::{LrScheduler, MultiStepLr, Sgd};
    /// let mut opt = Sgd::<f32>::new(1.0);
    /// let mut s = MultiStepLr::new(1.0, &[1], 0.1);
    /// s.step(&mut opt);
    /// assert_eq!(opt.lr(), 0.1);
    /// ```
    fn step<O: LrTarget + ?Sized>(&mut self, opt: &mut O) {
        // Saturating: a counter set by hand to u64::MAX stays there rather
        // than panicking (files are refused long before, see `validate`).
        self.set_step(self.current_step().saturating_add(1));
        self.apply(opt);
    }
}

/// Declares an enum over schedule types with its `LrScheduler` impl and
/// `From` conversions.
macro_rules! schedule_enum {
    ($(#[$doc:meta])* $name:ident { $($v:ident($t:ident)),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        pub enum $name {
            $(
                #[doc = concat!("[`", stringify!($t), "`].")]
                $v($t),
            )*
        }

        impl LrScheduler for $name {
            fn lr_at(&self, step: u64) -> f64 {
                match self { $($name::$v(s) => s.lr_at(step),)* }
            }
            fn momentum_at(&self, step: u64) -> Option<f64> {
                match self { $($name::$v(s) => s.momentum_at(step),)* }
            }
            fn current_step(&self) -> u64 {
                match self { $($name::$v(s) => s.current_step(),)* }
            }
            fn set_step(&mut self, step: u64) {
                match self { $($name::$v(s) => s.set_step(step),)* }
            }
            fn validate(&self) -> Result<()> {
                match self { $($name::$v(s) => s.validate(),)* }
            }
        }

        $(
            impl From<$t> for $name {
                fn from(s: $t) -> $name {
                    $name::$v(s)
                }
            }
        )*
    };
}

schedule_enum! {
    /// Any schedule, as one serializable type: what a training checkpoint
    /// stores, and what [`Persist`](crate::optim::Persist) saves.
    ///
    /// ```
    /// use forge::optim::{LrScheduler, Schedule, StepLr};
    /// let s: Schedule = StepLr::new(0.1, 1, 0.5).into();
    /// assert_eq!(s.lr_at(1), 0.05);
    /// ```
    Schedule {
        Step(StepLr),
        MultiStep(MultiStepLr),
        Exponential(ExponentialLr),
        CosineAnnealing(CosineAnnealingLr),
        Linear(LinearLr),
        Sequential(SequentialLr),
        OneCycle(OneCycleLr),
        Noam(NoamLr),
    }
}

schedule_enum! {
    /// A schedule that [`SequentialLr`] can chain: any schedule but another
    /// `SequentialLr` (so that a file never describes an arbitrarily deep
    /// value).
    ///
    /// ```
    /// use forge::optim::{LrScheduler, Phase, StepLr};
    /// let s: Phase = StepLr::new(0.1, 1, 0.5).into();
    /// assert_eq!(s.lr_at(2), 0.025);
    /// ```
    Phase {
        Step(StepLr),
        MultiStep(MultiStepLr),
        Exponential(ExponentialLr),
        CosineAnnealing(CosineAnnealingLr),
        Linear(LinearLr),
        OneCycle(OneCycleLr),
        Noam(NoamLr),
    }
}

/// `Err(Invalid)` naming the field and the value unless `v` is finite
/// and `>= 0`.
pub(crate) fn non_negative(what: &str, v: f64) -> Result<()> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(ForgeError::invalid(
            what,
            format!("{what} = {v} must be finite and >= 0"),
        ))
    }
}

/// `Err(Invalid)` naming the field unless a count is at least 1.
pub(crate) fn positive_count(what: &str, v: u64) -> Result<()> {
    if v > 0 {
        Ok(())
    } else {
        Err(ForgeError::invalid(
            what,
            format!("{what} = 0 must be at least 1"),
        ))
    }
}

/// `Err(State)` unless a schedule's step counter is below 2^53, so that it
/// can advance without overflow and converts to `f64` exactly.
pub(crate) fn step_in_range(what: &str, step: u64) -> Result<()> {
    if step < MAX_STEP {
        Ok(())
    } else {
        Err(ForgeError::state(
            what,
            format!(
                "step = {step} is beyond the largest step count forge takes ({})",
                MAX_STEP - 1
            ),
        ))
    }
}
