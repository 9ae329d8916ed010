//! # forge
//!
//! A deep-learning library: tensors with reverse-mode automatic
//! differentiation (gradients of gradients included), CPU kernels, layers
//! whose parameter traversal is derived by a macro, optimizers, checkpoints
//! and reference models.
//!
//! ```
//! use forge::Tensor;
//! let w = Tensor::<f64>::from_vec(vec![0.5, -1.0], &[2]).requires_grad();
//! let x = Tensor::<f64>::from_vec(vec![2.0, 3.0], &[2]);
//! let loss = (&w * &x).sum().square();
//! let grads = loss.backward();
//! // d/dw (w.x)^2 = 2 (w.x) x = 2 * (-2) * x
//! assert_eq!(grads.get(&w).unwrap().to_vec(), vec![-8.0, -12.0]);
//! ```

#![warn(missing_docs)]

// Lets the derive macro's `::forge::...` paths resolve inside this crate.
extern crate self as forge;

// First: its shape_assert!/shape_panic! macros are used by the modules below.
#[macro_use]
pub mod base;
pub mod autocast;
pub mod autograd;
pub mod checkpoint;
pub(crate) mod cpu;
pub mod data;
pub mod distributed;
pub mod error;
pub mod f32;
pub mod hub;
pub mod io;
pub mod metrics;
pub mod models;
pub mod nn;
pub mod ops;
pub mod optim;
pub mod prelude;
pub mod quant;
pub mod runtime;
pub mod tensor;
pub mod tools;

/// The repository README's Rust blocks, compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// The user guide's Rust blocks (`docs/src/*.md`), compiled as doc tests.
#[cfg(doctest)]
pub mod guide;

pub use autocast::autocast;
pub use autograd::{gradcheck, is_grad_enabled, no_grad, Gradients, NoGradGuard};
pub use error::{ForgeError, Result};
/// The `half` crate, whose `f16` and `bf16` are forge element types.
pub use half;
pub use nn::{Forward, Layer};
// What the runtime is and holds, at the crate root: `forge::describe()`.
pub use runtime::describe;
pub use tensor::{Cpu, DType, Device, Element, Float, Rng, Tensor};
// The tools most reached for, at the crate root: `forge::profile(|| ...)`,
// `forge::detect_anomaly(|| ...)`.
pub use tools::{detect_anomaly, profile};
