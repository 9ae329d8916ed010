//! Differentiable operations, one file per family. Each op is a kernel call
//! (from the crate's private `cpu` module) plus a backward rule written in tensor operations,
//! so that every rule is itself differentiable. See `README.md` beside this
//! file for the pattern to follow when adding an op.

pub(crate) mod attention;
pub(crate) mod attention_qkv;
mod binary;
mod compare;
mod concat;
mod conv;
pub(crate) mod dropout;
pub(crate) mod embedding;
mod grads;
mod index;
mod layout;
mod layout_int;
mod linear;
pub(crate) mod loss;
mod matmul;
pub(crate) mod norm;
mod plan;
mod pool;
mod reduce;
mod reduce_minmax;
mod reduce_stats;
pub(crate) mod rnn_cell;
mod shape;
mod softmax;
pub(crate) mod softmax_masked;
mod strided;
mod unary;

pub use binary::ScalarOperand;
