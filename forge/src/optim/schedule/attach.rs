//! Constructors that take the optimizer, as PyTorch's schedulers do: the
//! base rate is read from it and the step-0 rate is set on it at once, so
//! there is no rate to give twice and no `apply` to forget.
//!
//! ```
//! use forge::optim::{LrScheduler, Sgd, StepLr};
//! let mut opt = Sgd::<f32>::new(0.1);
//! let mut sched = StepLr::for_optimizer(&mut opt, 2, 0.5);
//! let mut seen = vec![];
//! for _ in 0..5 {
//!     seen.push(opt.lr()); // ... opt.step(&mut model, &grads) here ...
//!     sched.step(&mut opt);
//! }
//! assert_eq!(seen, vec![0.1, 0.1, 0.05, 0.05, 0.025]);
//! ```

use super::{
    CosineAnnealingLr, ExponentialLr, LinearLr, LrScheduler, LrTarget, MultiStepLr, NoamLr,
    OneCycleLr, Phase, SequentialLr, StepLr,
};

/// Sets the schedule's rate for its current step on `opt`; returns it.
fn attached<S: LrScheduler, O: LrTarget + ?Sized>(s: S, opt: &mut O) -> S {
    s.apply(opt);
    s
}

impl StepLr {
    /// PyTorch's `StepLR(optimizer, step_size, gamma)`: the base rate is
    /// the optimizer's, and the optimizer's rate is set for step 0.
    ///
    /// # Panics
    /// When `step_size` is 0.
    ///
    /// ```
    /// use forge::optim::{LrScheduler, Sgd, StepLr};
    /// let mut opt = Sgd::<f32>::new(0.2);
    /// let mut s = StepLr::for_optimizer(&mut opt, 1, 0.5);
    /// s.step(&mut opt);
    /// assert_eq!((s.base_lr, opt.lr()), (0.2, 0.1));
    /// ```
    pub fn for_optimizer<O: LrTarget + ?Sized>(opt: &mut O, step_size: u64, gamma: f64) -> Self {
        attached(StepLr::new(opt.lr(), step_size, gamma), opt)
    }
}

impl MultiStepLr {
    /// PyTorch's `MultiStepLR(optimizer, milestones, gamma)`, base rate
    /// read from the optimizer, step-0 rate set on it.
    ///
    /// ```
    /// use forge::optim::{LrScheduler, MultiStepLr, Sgd};
    /// let mut opt = Sgd::<f32>::new(1.0);
    /// let mut s = MultiStepLr::for_optimizer(&mut opt, &[1], 0.1);
    /// s.step(&mut opt);
    /// assert_eq!(opt.lr(), 0.1);
    /// ```
    pub fn for_optimizer<O: LrTarget + ?Sized>(
        opt: &mut O,
        milestones: &[u64],
        gamma: f64,
    ) -> Self {
        attached(MultiStepLr::new(opt.lr(), milestones, gamma), opt)
    }
}

impl ExponentialLr {
    /// PyTorch's `ExponentialLR(optimizer, gamma)`, base rate read from
    /// the optimizer, step-0 rate set on it.
    ///
    /// ```
    /// use forge::optim::{ExponentialLr, LrScheduler, Sgd};
    /// let mut opt = Sgd::<f32>::new(1.0);
    /// let mut s = ExponentialLr::for_optimizer(&mut opt, 0.5);
    /// s.step(&mut opt);
    /// assert_eq!(opt.lr(), 0.5);
    /// ```
    pub fn for_optimizer<O: LrTarget + ?Sized>(opt: &mut O, gamma: f64) -> Self {
        attached(ExponentialLr::new(opt.lr(), gamma), opt)
    }
}

impl CosineAnnealingLr {
    /// PyTorch's `CosineAnnealingLR(optimizer, T_max, eta_min)`, base rate
    /// read from the optimizer, step-0 rate set on it.
    ///
    /// # Panics
    /// When `t_max` is 0.
    ///
    /// ```
    /// use forge::optim::{CosineAnnealingLr, LrScheduler, Sgd};
    /// let mut opt = Sgd::<f32>::new(1.0);
    /// let mut s = CosineAnnealingLr::for_optimizer(&mut opt, 2, 0.0);
    /// s.step(&mut opt);
    /// assert!((opt.lr() - 0.5).abs() < 1e-15);
    /// ```
    pub fn for_optimizer<O: LrTarget + ?Sized>(opt: &mut O, t_max: u64, eta_min: f64) -> Self {
        attached(CosineAnnealingLr::new(opt.lr(), t_max, eta_min), opt)
    }
}

impl LinearLr {
    /// PyTorch's `LinearLR(optimizer, start_factor, end_factor,
    /// total_iters)`, base rate read from the optimizer; the optimizer's
    /// rate becomes `base * start_factor` at once.
    ///
    /// ```
    /// use forge::optim::{LinearLr, Sgd};
    /// let mut opt = Sgd::<f32>::new(0.1);
    /// let _warmup = LinearLr::for_optimizer(&mut opt, 0.1, 1.0, 5);
    /// assert!((opt.lr() - 0.01).abs() < 1e-15);
    /// ```
    pub fn for_optimizer<O: LrTarget + ?Sized>(
        opt: &mut O,
        start_factor: f64,
        end_factor: f64,
        total_iters: u64,
    ) -> Self {
        attached(
            LinearLr::new(opt.lr(), start_factor, end_factor, total_iters),
            opt,
        )
    }
}

impl OneCycleLr {
    /// PyTorch's `OneCycleLR(optimizer, max_lr, total_steps)` with its
    /// defaults; the optimizer's rate (and momentum) are set for step 0.
    /// After changing an option field, call
    /// [`apply`](LrScheduler::apply) again.
    ///
    /// # Panics
    /// When `total_steps` is 0.
    ///
    /// ```
    /// use forge::optim::{OneCycleLr, Sgd};
    /// let mut opt = Sgd::<f32>::new(0.5).momentum(0.9);
    /// let _s = OneCycleLr::for_optimizer(&mut opt, 0.1, 100);
    /// assert!((opt.lr() - 0.1 / 25.0).abs() < 1e-15);
    /// ```
    pub fn for_optimizer<O: LrTarget + ?Sized>(opt: &mut O, max_lr: f64, total_steps: u64) -> Self {
        attached(OneCycleLr::new(max_lr, total_steps), opt)
    }
}

impl NoamLr {
    /// The Noam schedule scaled by the optimizer's rate (the paper's
    /// factor), the step-0 rate set on it.
    ///
    /// # Panics
    /// When `d_model` or `warmup` is 0.
    ///
    /// ```
    /// use forge::optim::{NoamLr, Sgd};
    /// let mut opt = Sgd::<f32>::new(2.0);
    /// let s = NoamLr::for_optimizer(&mut opt, 512, 4000);
    /// assert_eq!(s.scale, 2.0);
    /// assert!(opt.lr() < 2.0);
    /// ```
    pub fn for_optimizer<O: LrTarget + ?Sized>(opt: &mut O, d_model: u64, warmup: u64) -> Self {
        attached(NoamLr::new(opt.lr(), d_model, warmup), opt)
    }
}

impl SequentialLr {
    /// PyTorch's `SequentialLR(optimizer, schedulers, milestones)`: the
    /// optimizer's rate is set for step 0 (the phases carry their own base
    /// rates; build them with `new`).
    ///
    /// # Panics
    /// As [`SequentialLr::new`].
    ///
    /// ```
    /// use forge::optim::{ExponentialLr, LinearLr, SequentialLr, Sgd};
    /// let mut opt = Sgd::<f32>::new(0.1);
    /// let warmup = LinearLr::new(0.1, 0.5, 1.0, 2).into();
    /// let decay = ExponentialLr::new(0.1, 0.9).into();
    /// let _s = SequentialLr::for_optimizer(&mut opt, vec![warmup, decay], &[2]);
    /// assert!((opt.lr() - 0.05).abs() < 1e-15);
    /// ```
    pub fn for_optimizer<O: LrTarget + ?Sized>(
        opt: &mut O,
        schedules: Vec<Phase>,
        milestones: &[u64],
    ) -> Self {
        attached(SequentialLr::new(schedules, milestones), opt)
    }
}
