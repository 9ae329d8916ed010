//! Differentiable operations, one file per family. Each op is a kernel call
//! (from [`crate::cpu`]) plus a backward rule written in tensor operations,
//! so that every rule is itself differentiable. See `README.md` beside this
//! file for the pattern to follow when adding an op.

mod binary;
mod matmul;
mod reduce;
mod reduce_minmax;
mod reduce_stats;
mod shape;
mod unary;

pub use binary::ScalarOperand;
