//! The Noam schedule of "Attention Is All You Need".

use super::{non_negative, positive_count, step_in_range, LrScheduler};
use crate::Result;
use serde::{Deserialize, Serialize};

/// The Noam schedule (Vaswani et al. 2017): linear warm-up, then decay with
/// the inverse square root of the step:
/// `scale * d_model^-0.5 * min(n^-0.5, n * warmup^-1.5)` with `n = k + 1`
/// (the paper counts steps from 1). The peak, at `n = warmup`, is
/// `scale / sqrt(d_model * warmup)`.
///
/// ```
/// use forge::optim::{LrScheduler, NoamLr};
/// let s = NoamLr::new(1.0, 512, 4000);
/// let peak = s.lr_at(3999);
/// assert!((peak - 1.0 / (512.0f64 * 4000.0).sqrt()).abs() < 1e-15);
/// assert!(s.lr_at(100) < peak && s.lr_at(10_000) < peak);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NoamLr {
    /// Multiplies the whole schedule (the paper's "factor").
    pub scale: f64,
    /// The model width.
    pub d_model: u64,
    /// Warm-up steps.
    pub warmup: u64,
    /// The current step.
    pub step: u64,
}

impl NoamLr {
    /// A Noam schedule.
    ///
    /// # Panics
    /// When `d_model` or `warmup` is 0.
    ///
    /// ```
    /// assert_eq!(forge::optim::NoamLr::new(2.0, 512, 4000).warmup, 4000);
    /// ```
    pub fn new(scale: f64, d_model: u64, warmup: u64) -> Self {
        assert!(
            d_model > 0 && warmup > 0,
            "NoamLr: d_model and warmup must be positive"
        );
        NoamLr {
            scale,
            d_model,
            warmup,
            step: 0,
        }
    }
}

impl LrScheduler for NoamLr {
    fn lr_at(&self, step: u64) -> f64 {
        let n = step as f64 + 1.0;
        let w = self.warmup.max(1) as f64;
        self.scale * (self.d_model.max(1) as f64).powf(-0.5) * n.powf(-0.5).min(n * w.powf(-1.5))
    }
    fn current_step(&self) -> u64 {
        self.step
    }
    fn set_step(&mut self, step: u64) {
        self.step = step;
    }
    fn validate(&self) -> Result<()> {
        non_negative("NoamLr: scale", self.scale)?;
        positive_count("NoamLr: d_model", self.d_model)?;
        positive_count("NoamLr: warmup", self.warmup)?;
        step_in_range("NoamLr: step", self.step)
    }
}
