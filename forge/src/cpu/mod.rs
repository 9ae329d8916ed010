//! CPU kernels on plain slices. Nothing here knows about tensors or the tape:
//! the only forge module the kernels import is [`crate::base`] (element
//! types and shape arithmetic).
//!
//! Parallel kernels split their work into chunks whose boundaries depend only
//! on the problem size, never on the thread count, and each output element is
//! computed by exactly one chunk in a fixed order: results are bit-identical
//! for 1 and N threads.

pub mod broadcast;
pub mod conv_small;
pub mod elementwise;
pub mod gemm;
pub mod im2col;
pub mod index;
pub mod memory;
pub mod pool;
pub mod reduce;
pub mod resample;
pub mod scan;
pub mod strided;
pub mod threads;
pub mod vmath;

pub use memory::{trim, Storage};
pub use threads::{num_threads, parallel_for, set_num_threads};
