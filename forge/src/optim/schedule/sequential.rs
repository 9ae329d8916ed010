//! `SequentialLR`: schedules one after the other.

use super::{step_in_range, LrScheduler, Phase};
use crate::{ForgeError, Result};
use serde::{Deserialize, Serialize};

/// `torch.optim.lr_scheduler.SequentialLR`: schedule `i` runs from
/// milestone `i-1` (0 for the first) and is restarted from its own step 0
/// there, as PyTorch restarts it.
///
/// ```
/// use forge::optim::{CosineAnnealingLr, LinearLr, LrScheduler, SequentialLr};
/// // 5 warm-up steps from 0.01 to 0.1, then a cosine over 25 steps.
/// let s = SequentialLr::new(
///     vec![LinearLr::new(0.1, 0.1, 1.0, 5).into(), CosineAnnealingLr::new(0.1, 25, 0.0).into()],
///     &[5],
/// );
/// assert!((s.lr_at(0) - 0.01).abs() < 1e-15);
/// assert_eq!(s.lr_at(5), 0.1);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SequentialLr {
    /// The schedules, in order.
    pub schedules: Vec<Phase>,
    /// The steps at which the next schedule takes over (one fewer than
    /// schedules, increasing).
    pub milestones: Vec<u64>,
    /// The current step.
    pub step: u64,
}

impl SequentialLr {
    /// Chains `schedules`, switching at `milestones`.
    ///
    /// # Panics
    /// When there is not exactly one milestone fewer than schedules, or the
    /// milestones do not increase.
    ///
    /// ```
    /// use forge::optim::{ExponentialLr, SequentialLr, StepLr};
    /// let s = SequentialLr::new(vec![StepLr::new(0.1, 2, 0.5).into(), ExponentialLr::new(0.1, 0.9).into()], &[4]);
    /// assert_eq!(s.milestones, vec![4]);
    /// ```
    pub fn new(schedules: Vec<Phase>, milestones: &[u64]) -> Self {
        let s = SequentialLr {
            schedules,
            milestones: milestones.to_vec(),
            step: 0,
        };
        if let Err(e) = s.check_layout() {
            panic!("SequentialLr: {e}");
        }
        s
    }

    fn check_layout(&self) -> Result<()> {
        if self.schedules.is_empty() || self.milestones.len() + 1 != self.schedules.len() {
            return Err(ForgeError::invalid(
                "SequentialLr.milestones",
                format!(
                    "SequentialLr: {} schedules need {} milestones, got {}",
                    self.schedules.len(),
                    self.schedules.len().saturating_sub(1),
                    self.milestones.len()
                ),
            ));
        }
        if self.milestones.windows(2).any(|w| w[0] >= w[1]) {
            return Err(ForgeError::invalid(
                "SequentialLr.milestones",
                format!(
                    "SequentialLr: milestones must increase, got {:?}",
                    self.milestones
                ),
            ));
        }
        Ok(())
    }

    /// The schedule in force at `step` and the step it is at.
    fn locate(&self, step: u64) -> Option<(&Phase, u64)> {
        let i = self.milestones.iter().filter(|&&m| m <= step).count();
        let start = if i == 0 { 0 } else { self.milestones[i - 1] };
        self.schedules.get(i).map(|s| (s, step - start))
    }
}

impl LrScheduler for SequentialLr {
    fn lr_at(&self, step: u64) -> f64 {
        self.locate(step).map_or(f64::NAN, |(s, k)| s.lr_at(k))
    }
    fn momentum_at(&self, step: u64) -> Option<f64> {
        self.locate(step).and_then(|(s, k)| s.momentum_at(k))
    }
    fn current_step(&self) -> u64 {
        self.step
    }
    fn set_step(&mut self, step: u64) {
        self.step = step;
    }
    fn validate(&self) -> Result<()> {
        self.check_layout()?;
        step_in_range("SequentialLr: step", self.step)?;
        self.schedules.iter().try_for_each(|s| s.validate())
    }
}
