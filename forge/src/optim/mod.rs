//! Optimizers, learning-rate schedules and gradient clipping.
//!
//! - [`Sgd`], [`Adam`], [`AdamW`], [`Adagrad`], [`Adadelta`], [`RmsProp`]:
//!   PyTorch's update rules, each one fused pass over a parameter's values
//!   (f32 or f64) that updates the parameter and its state in place, checked
//!   against PyTorch's numbers (`tests/optim/optim_parity.rs`). They are all
//!   [`Optimizer<R, E>`] with a different [`UpdateRule`] `R`; the optimizer
//!   owns what they share (the parameter loop, state by path, `maximize`
//!   and L2 weight decay through [`GradPrep`], groups, files).
//! - State is kept per parameter, keyed by tensor path (`fc1.weight`),
//!   created on the first step and checked by shape on every step
//!   ([`ParamState`]), holding the rule's typed buffers ([`AdamState`],
//!   [`SgdState`], ...), reused from step to step: a steady loop allocates
//!   no optimizer memory.
//! - [`ParamGroup`]: per-path options (no weight decay on biases, a smaller
//!   rate for an encoder), PyTorch's parameter groups.
//! - [`schedule`]: [`StepLr`], [`MultiStepLr`], [`ExponentialLr`],
//!   [`CosineAnnealingLr`], [`LinearLr`], [`SequentialLr`], [`OneCycleLr`],
//!   [`NoamLr`].
//! - [`clip_grad_norm`] (and [`clip_grad_norm_with`] for other norms,
//!   [`try_clip_grad_norm`] with `error_if_nonfinite`) and
//!   [`clip_grad_value`].
//!
//! ```
//! use forge::optim::{AdamW, ParamGroup};
//! use forge::Tensor;
//! let mut w = Tensor::<f64>::from_vec(vec![1.0, -1.0], &[2]).requires_grad();
//! let mut b = Tensor::<f64>::from_vec(vec![0.5], &[1]).requires_grad();
//! let mut opt = AdamW::new(1e-2).with_group(ParamGroup::suffix("b").weight_decay(0.0));
//! for _ in 0..3 {
//!     let loss = ((&w * &w).sum() + (&b * &b).sum()).sum();
//!     let grads = loss.backward();
//!     opt.step_params(vec![("w", &mut w), ("b", &mut b)], &grads).unwrap();
//! }
//! assert_eq!(opt.state("w").unwrap().step(), 3);
//! assert!(w.as_slice()[0] < 1.0 && b.item() < 0.5);
//! ```

mod adadelta;
mod adagrad;
mod adam;
mod clip;
mod group;
mod model;
mod optimizer;
mod persist;
mod rmsprop;
pub mod schedule;
mod set_state;
mod setters;
mod sgd;
mod state;

pub use adadelta::{Adadelta, AdadeltaConfig, AdadeltaState};
pub use adagrad::{Adagrad, AdagradConfig, AdagradState};
pub use adam::{Adam, AdamConfig, AdamState, AdamW, AdamWConfig};
pub use clip::{clip_grad_norm, clip_grad_norm_with, clip_grad_value, try_clip_grad_norm};
pub use group::{ParamGroup, PathFn, PathMatch};
pub use optimizer::{GradPrep, GradSource, Hyper, NoState, Optimizer, Update, UpdateRule};
pub use persist::{Persist, StoredOptimizer, StoredParam, FORMAT_VERSION, MAGIC};
pub use rmsprop::{RmsProp, RmsPropConfig, RmsPropState};
pub use schedule::{
    Anneal, CosineAnnealingLr, ExponentialLr, LinearLr, LrScheduler, LrTarget, MultiStepLr, NoamLr,
    OneCycleLr, Phase, Schedule, SequentialLr, StepLr,
};
pub use sgd::{Sgd, SgdConfig, SgdState};
pub use state::{take_buffer, ParamState, RuleState};
