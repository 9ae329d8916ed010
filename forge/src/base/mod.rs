//! The leaf of forge's module graph: element types and shape arithmetic.
//!
//! Both `cpu` (the private kernels on plain slices) and [`crate::tensor`] import
//! from here, and this module imports nothing from the rest of forge, so the
//! arrows go one way: `tensor -> cpu -> base`. Everything here is re-exported
//! from [`crate::tensor`] under its usual path.
//!
//! ```
//! use forge::base::{numel, strides, Element};
//! assert_eq!(numel(&[2, 3]), 6);
//! assert_eq!(strides(&[2, 3]), vec![3, 1]);
//! assert_eq!(<f32 as Element>::DTYPE, forge::DType::F32);
//! ```

#[macro_use]
pub(crate) mod context;
mod element;
mod shape;

pub use element::{DType, Element, Float};
pub(crate) use shape::norm_axes;
pub use shape::{broadcast_shapes, norm_axis, numel, strides};
