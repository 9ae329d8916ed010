//! `StepLR`, `MultiStepLR`, `ExponentialLR` and `LinearLR`.

use super::{non_negative, positive_count, step_in_range, LrScheduler};
use crate::{ForgeError, Result};
use serde::{Deserialize, Serialize};

/// `torch.optim.lr_scheduler.StepLR`: `base_lr * gamma^(floor(k / step_size))`.
///
/// ```
/// use forge::optim::{LrScheduler, StepLr};
/// let s = StepLr::new(0.1, 7, 0.5);
/// assert_eq!((s.lr_at(6), s.lr_at(7)), (0.1, 0.05));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepLr {
    /// The initial rate.
    pub base_lr: f64,
    /// Steps between decays.
    pub step_size: u64,
    /// Decay factor.
    pub gamma: f64,
    /// The current step.
    pub step: u64,
}

impl StepLr {
    /// A step schedule.
    ///
    /// # Panics
    /// When `step_size` is 0.
    ///
    /// ```
    /// assert_eq!(forge::optim::StepLr::new(0.1, 7, 0.5).step_size, 7);
    /// ```
    pub fn new(base_lr: f64, step_size: u64, gamma: f64) -> Self {
        assert!(step_size > 0, "StepLr: step_size must be positive");
        StepLr {
            base_lr,
            step_size,
            gamma,
            step: 0,
        }
    }
}

impl LrScheduler for StepLr {
    fn lr_at(&self, step: u64) -> f64 {
        let n = step / self.step_size.max(1);
        self.base_lr * self.gamma.powi(n.min(i32::MAX as u64) as i32)
    }
    fn current_step(&self) -> u64 {
        self.step
    }
    fn set_step(&mut self, step: u64) {
        self.step = step;
    }
    fn validate(&self) -> Result<()> {
        non_negative("StepLr: base_lr", self.base_lr)?;
        non_negative("StepLr: gamma", self.gamma)?;
        positive_count("StepLr: step_size", self.step_size)?;
        step_in_range("StepLr: step", self.step)
    }
}

/// `torch.optim.lr_scheduler.MultiStepLR`: `base_lr * gamma^(number of
/// milestones <= k)`.
///
/// ```
/// use forge::optim::{LrScheduler, MultiStepLr};
/// let s = MultiStepLr::new(1.0, &[2, 4], 0.5);
/// assert_eq!((s.lr_at(1), s.lr_at(2), s.lr_at(4)), (1.0, 0.5, 0.25));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MultiStepLr {
    /// The initial rate.
    pub base_lr: f64,
    /// Steps at which the rate is multiplied by `gamma` (a repeated
    /// milestone decays once per occurrence, as in PyTorch).
    pub milestones: Vec<u64>,
    /// Decay factor.
    pub gamma: f64,
    /// The current step.
    pub step: u64,
}

impl MultiStepLr {
    /// A multi-step schedule.
    ///
    /// ```
    /// assert_eq!(forge::optim::MultiStepLr::new(0.1, &[5, 12], 0.3).milestones, vec![5, 12]);
    /// ```
    pub fn new(base_lr: f64, milestones: &[u64], gamma: f64) -> Self {
        let mut milestones = milestones.to_vec();
        milestones.sort_unstable();
        MultiStepLr {
            base_lr,
            milestones,
            gamma,
            step: 0,
        }
    }
}

impl LrScheduler for MultiStepLr {
    fn lr_at(&self, step: u64) -> f64 {
        let n = self.milestones.iter().filter(|&&m| m <= step).count();
        self.base_lr * self.gamma.powi(n.min(i32::MAX as usize) as i32)
    }
    fn current_step(&self) -> u64 {
        self.step
    }
    fn set_step(&mut self, step: u64) {
        self.step = step;
    }
    fn validate(&self) -> Result<()> {
        non_negative("MultiStepLr: base_lr", self.base_lr)?;
        non_negative("MultiStepLr: gamma", self.gamma)?;
        step_in_range("MultiStepLr: step", self.step)
    }
}

/// `torch.optim.lr_scheduler.ExponentialLR`: `base_lr * gamma^k`.
///
/// ```
/// use forge::optim::{ExponentialLr, LrScheduler};
/// assert_eq!(ExponentialLr::new(0.1, 0.5).lr_at(2), 0.025);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExponentialLr {
    /// The initial rate.
    pub base_lr: f64,
    /// Decay factor per step.
    pub gamma: f64,
    /// The current step.
    pub step: u64,
}

impl ExponentialLr {
    /// An exponential schedule.
    ///
    /// ```
    /// assert_eq!(forge::optim::ExponentialLr::new(0.1, 0.9).gamma, 0.9);
    /// ```
    pub fn new(base_lr: f64, gamma: f64) -> Self {
        ExponentialLr {
            base_lr,
            gamma,
            step: 0,
        }
    }
}

impl LrScheduler for ExponentialLr {
    fn lr_at(&self, step: u64) -> f64 {
        self.base_lr * self.gamma.powf(step as f64)
    }
    fn current_step(&self) -> u64 {
        self.step
    }
    fn set_step(&mut self, step: u64) {
        self.step = step;
    }
    fn validate(&self) -> Result<()> {
        non_negative("ExponentialLr: base_lr", self.base_lr)?;
        non_negative("ExponentialLr: gamma", self.gamma)?;
        step_in_range("ExponentialLr: step", self.step)
    }
}

/// `torch.optim.lr_scheduler.LinearLR` (warm-up): the factor goes linearly
/// from `start_factor` to `end_factor` over `total_iters` steps, then stays:
/// `base_lr * (start + (end - start) * min(k, total) / total)`.
///
/// ```
/// use forge::optim::{LinearLr, LrScheduler};
/// let s = LinearLr::new(1.0, 0.5, 1.0, 2);
/// assert_eq!((s.lr_at(0), s.lr_at(1), s.lr_at(9)), (0.5, 0.75, 1.0));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinearLr {
    /// The rate the factors multiply.
    pub base_lr: f64,
    /// The factor at step 0.
    pub start_factor: f64,
    /// The factor from step `total_iters` on.
    pub end_factor: f64,
    /// Length of the ramp.
    pub total_iters: u64,
    /// The current step.
    pub step: u64,
}

impl LinearLr {
    /// A linear ramp.
    ///
    /// # Panics
    /// When `total_iters` is 0.
    ///
    /// ```
    /// assert_eq!(forge::optim::LinearLr::new(0.1, 0.1, 1.0, 5).total_iters, 5);
    /// ```
    pub fn new(base_lr: f64, start_factor: f64, end_factor: f64, total_iters: u64) -> Self {
        assert!(total_iters > 0, "LinearLr: total_iters must be positive");
        LinearLr {
            base_lr,
            start_factor,
            end_factor,
            total_iters,
            step: 0,
        }
    }
}

impl LrScheduler for LinearLr {
    fn lr_at(&self, step: u64) -> f64 {
        let total = self.total_iters.max(1);
        let f = self.start_factor
            + (self.end_factor - self.start_factor) * step.min(total) as f64 / total as f64;
        self.base_lr * f
    }
    fn current_step(&self) -> u64 {
        self.step
    }
    fn set_step(&mut self, step: u64) {
        self.step = step;
    }
    fn validate(&self) -> Result<()> {
        non_negative("LinearLr: base_lr", self.base_lr)?;
        // PyTorch's ranges: start in (0, 1], end in [0, 1].
        if !(self.start_factor > 0.0 && self.start_factor <= 1.0) {
            return Err(ForgeError::invalid(
                "LinearLr.start_factor",
                format!(
                    "LinearLr: start_factor = {} must be in (0, 1]",
                    self.start_factor
                ),
            ));
        }
        if !(self.end_factor >= 0.0 && self.end_factor <= 1.0) {
            return Err(ForgeError::invalid(
                "LinearLr.end_factor",
                format!(
                    "LinearLr: end_factor = {} must be in [0, 1]",
                    self.end_factor
                ),
            ));
        }
        positive_count("LinearLr: total_iters", self.total_iters)?;
        step_in_range("LinearLr: step", self.step)
    }
}
