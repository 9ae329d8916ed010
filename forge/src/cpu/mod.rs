//! CPU kernels on plain slices, private to the crate: what users need of
//! the threads and the memory pool is in [`crate::runtime`]. Nothing here
//! knows about tensors or the tape: the only forge module the kernels
//! import is [`crate::base`] (element types and shape arithmetic).
//!
//! Parallel kernels split their work into chunks whose boundaries depend only
//! on the problem size, never on the thread count, and each output element is
//! computed by exactly one chunk in a fixed order: results are bit-identical
//! for 1 and N threads.

pub(crate) mod amx;
pub(crate) mod bf16_round;
pub(crate) mod bgemm;
pub(crate) mod broadcast;
pub(crate) mod buffers;
pub(crate) mod class;
pub(crate) mod conv;
pub(crate) mod conv3d;
pub(crate) mod elementwise;
pub(crate) mod f16c;
pub(crate) mod gemm;
pub(crate) mod index;
pub(crate) mod memory;
pub(crate) mod pool;
pub(crate) mod pool3d;
pub(crate) mod qgemm;
pub(crate) mod reduce;
pub(crate) mod resample;
pub(crate) mod same_type;
pub(crate) mod scan;
pub(crate) mod softmax_rows;
pub(crate) mod strided;
pub(crate) mod sync;
pub(crate) mod threads;
pub(crate) mod vmath;

pub(crate) use memory::Storage;
#[cfg(test)]
pub(crate) use threads::set_num_threads;
pub(crate) use threads::{num_threads, parallel_for};
