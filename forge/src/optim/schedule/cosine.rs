//! `CosineAnnealingLR`.

use super::{non_negative, positive_count, step_in_range, LrScheduler};
use crate::Result;
use serde::{Deserialize, Serialize};

/// `torch.optim.lr_scheduler.CosineAnnealingLR`:
/// `eta_min + (base_lr - eta_min) (1 + cos(pi k / t_max)) / 2`. Past
/// `t_max` the cosine continues (the rate rises again), as in PyTorch.
///
/// ```
/// use forge::optim::{CosineAnnealingLr, LrScheduler};
/// let s = CosineAnnealingLr::new(1.0, 10, 0.0);
/// assert_eq!(s.lr_at(0), 1.0);
/// assert!((s.lr_at(5) - 0.5).abs() < 1e-15);
/// assert!(s.lr_at(10).abs() < 1e-15);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CosineAnnealingLr {
    /// The rate at step 0.
    pub base_lr: f64,
    /// Half period, in steps.
    pub t_max: u64,
    /// The lowest rate.
    pub eta_min: f64,
    /// The current step.
    pub step: u64,
}

impl CosineAnnealingLr {
    /// A cosine schedule.
    ///
    /// # Panics
    /// When `t_max` is 0.
    ///
    /// ```
    /// assert_eq!(forge::optim::CosineAnnealingLr::new(0.1, 20, 0.001).t_max, 20);
    /// ```
    pub fn new(base_lr: f64, t_max: u64, eta_min: f64) -> Self {
        assert!(t_max > 0, "CosineAnnealingLr: t_max must be positive");
        CosineAnnealingLr {
            base_lr,
            t_max,
            eta_min,
            step: 0,
        }
    }
}

impl LrScheduler for CosineAnnealingLr {
    fn lr_at(&self, step: u64) -> f64 {
        let c = (std::f64::consts::PI * step as f64 / self.t_max.max(1) as f64).cos();
        self.eta_min + (self.base_lr - self.eta_min) * (1.0 + c) / 2.0
    }
    fn current_step(&self) -> u64 {
        self.step
    }
    fn set_step(&mut self, step: u64) {
        self.step = step;
    }
    fn validate(&self) -> Result<()> {
        non_negative("CosineAnnealingLr: base_lr", self.base_lr)?;
        non_negative("CosineAnnealingLr: eta_min", self.eta_min)?;
        positive_count("CosineAnnealingLr: t_max", self.t_max)?;
        step_in_range("CosineAnnealingLr: step", self.step)
    }
}
