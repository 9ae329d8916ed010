//! `OneCycleLR`, with momentum cycling.

use super::{non_negative, positive_count, step_in_range, LrScheduler};
use crate::{ForgeError, Result};
use serde::{Deserialize, Serialize};

/// How [`OneCycleLr`] moves between two values.
///
/// ```
/// assert_eq!(forge::optim::Anneal::Linear.interpolate(0.0, 1.0, 0.25), 0.25);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Anneal {
    /// Half a cosine: `end + (start - end) (1 + cos(pi t)) / 2`.
    Cos,
    /// A straight line: `start + (end - start) t`.
    Linear,
}

impl Anneal {
    /// The value a fraction `t` of the way from `start` to `end`.
    ///
    /// ```
    /// use forge::optim::Anneal;
    /// assert_eq!(Anneal::Cos.interpolate(2.0, 1.0, 0.0), 2.0);
    /// assert_eq!(Anneal::Cos.interpolate(2.0, 1.0, 1.0), 1.0);
    /// ```
    pub fn interpolate(self, start: f64, end: f64, t: f64) -> f64 {
        match self {
            Anneal::Cos => end + (start - end) / 2.0 * ((std::f64::consts::PI * t).cos() + 1.0),
            Anneal::Linear => (end - start) * t + start,
        }
    }
}

/// `torch.optim.lr_scheduler.OneCycleLR`: from `max_lr / div_factor` up to
/// `max_lr` over the first `pct_start` of `total_steps`, then down to
/// `initial / final_div_factor`; the momentum (beta1 for Adam) moves the
/// opposite way between `max_momentum` and `base_momentum` when
/// `cycle_momentum` is on. With `three_phase`, the rate comes back to the
/// initial value symmetrically before the final annealing. Past
/// `total_steps` (where PyTorch raises an error) the rate stays at the
/// rate of step `total_steps`. Other settings are public fields:
/// `OneCycleLr { pct_start: 0.25, ..OneCycleLr::new(0.1, 100) }`.
///
/// ```
/// use forge::optim::{LrScheduler, OneCycleLr};
/// let s = OneCycleLr::new(0.1, 30);
/// assert!((s.lr_at(0) - 0.004).abs() < 1e-15); // max_lr / 25
/// assert_eq!(s.lr_at(8), 0.1);                  // the peak
/// assert_eq!(s.momentum_at(8), Some(0.85));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OneCycleLr {
    /// The peak rate.
    pub max_lr: f64,
    /// The length of the cycle in steps.
    pub total_steps: u64,
    /// The fraction of the cycle spent increasing the rate.
    pub pct_start: f64,
    /// The shape of each phase.
    pub anneal: Anneal,
    /// Whether to cycle the momentum.
    pub cycle_momentum: bool,
    /// The momentum at the peak rate.
    pub base_momentum: f64,
    /// The momentum at the ends.
    pub max_momentum: f64,
    /// `initial rate = max_lr / div_factor`.
    pub div_factor: f64,
    /// `final rate = initial rate / final_div_factor`.
    pub final_div_factor: f64,
    /// Use the three-phase variant.
    pub three_phase: bool,
    /// The current step.
    pub step: u64,
}

impl OneCycleLr {
    /// A one-cycle schedule with PyTorch's defaults (pct_start 0.3, cos,
    /// momentum 0.85..0.95, div_factor 25, final_div_factor 1e4).
    ///
    /// # Panics
    /// When `total_steps` is 0.
    ///
    /// ```
    /// assert_eq!(forge::optim::OneCycleLr::new(0.1, 100).div_factor, 25.0);
    /// ```
    pub fn new(max_lr: f64, total_steps: u64) -> Self {
        assert!(total_steps > 0, "OneCycleLr: total_steps must be positive");
        OneCycleLr {
            max_lr,
            total_steps,
            pct_start: 0.3,
            anneal: Anneal::Cos,
            cycle_momentum: true,
            base_momentum: 0.85,
            max_momentum: 0.95,
            div_factor: 25.0,
            final_div_factor: 1e4,
            three_phase: false,
            step: 0,
        }
    }

    /// `(end step, start lr, end lr, start momentum, end momentum)` of each
    /// phase, as PyTorch builds them (end steps are floats).
    fn phases(&self) -> Vec<(f64, f64, f64, f64, f64)> {
        let initial = self.max_lr / self.div_factor;
        let min_lr = initial / self.final_div_factor;
        let total = self.total_steps as f64;
        let up_end = self.pct_start * total - 1.0;
        let (lo_m, hi_m) = (self.base_momentum, self.max_momentum);
        if self.three_phase {
            vec![
                (up_end, initial, self.max_lr, hi_m, lo_m),
                (
                    2.0 * self.pct_start * total - 2.0,
                    self.max_lr,
                    initial,
                    lo_m,
                    hi_m,
                ),
                (total - 1.0, initial, min_lr, hi_m, hi_m),
            ]
        } else {
            vec![
                (up_end, initial, self.max_lr, hi_m, lo_m),
                (total - 1.0, self.max_lr, min_lr, lo_m, hi_m),
            ]
        }
    }

    /// The rate and momentum at `step` (PyTorch's `get_lr`).
    fn at(&self, step: u64) -> (f64, f64) {
        let k = step.min(self.total_steps) as f64;
        let phases = self.phases();
        let mut start = 0.0;
        for (i, &(end, lr0, lr1, m0, m1)) in phases.iter().enumerate() {
            if k <= end || i == phases.len() - 1 {
                let t = (k - start) / (end - start);
                return (
                    self.anneal.interpolate(lr0, lr1, t),
                    self.anneal.interpolate(m0, m1, t),
                );
            }
            start = end;
        }
        (f64::NAN, f64::NAN)
    }
}

impl LrScheduler for OneCycleLr {
    fn lr_at(&self, step: u64) -> f64 {
        self.at(step).0
    }
    fn momentum_at(&self, step: u64) -> Option<f64> {
        self.cycle_momentum.then(|| self.at(step).1)
    }
    fn current_step(&self) -> u64 {
        self.step
    }
    fn set_step(&mut self, step: u64) {
        self.step = step;
    }
    fn validate(&self) -> Result<()> {
        non_negative("OneCycleLr: max_lr", self.max_lr)?;
        non_negative("OneCycleLr: base_momentum", self.base_momentum)?;
        non_negative("OneCycleLr: max_momentum", self.max_momentum)?;
        positive_count("OneCycleLr: total_steps", self.total_steps)?;
        step_in_range("OneCycleLr: step", self.step)?;
        if !(self.pct_start > 0.0 && self.pct_start < 1.0) {
            return Err(ForgeError::invalid(
                "OneCycleLr.pct_start",
                format!(
                    "OneCycleLr: pct_start = {} must be in (0, 1)",
                    self.pct_start
                ),
            ));
        }
        for (what, v) in [
            ("div_factor", self.div_factor),
            ("final_div_factor", self.final_div_factor),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(ForgeError::invalid(
                    format!("OneCycleLr.{what}"),
                    format!("OneCycleLr: {what} = {v} must be finite and > 0"),
                ));
            }
        }
        // Each phase must last: PyTorch divides by its length (and raises
        // ZeroDivisionError where this would give a NaN rate).
        let mut start = 0.0;
        for (i, (end, ..)) in self.phases().into_iter().enumerate() {
            if end <= start || end.is_nan() {
                return Err(ForgeError::invalid(
                    "OneCycleLr.total_steps",
                    format!(
                        "OneCycleLr: phase {i} ends at step {end}, not after its start {start} \
                     (total_steps = {}, pct_start = {}): too few steps for the phases",
                        self.total_steps, self.pct_start
                    ),
                ));
            }
            start = end;
        }
        Ok(())
    }
}
