//! Differentiable operations, one file per family. Each op is a kernel call
//! (from the crate's private `cpu` module) plus a backward rule written in tensor operations,
//! so that every rule is itself differentiable. See `README.md` beside this
//! file for the pattern to follow when adding an op.

mod activation_extra;
pub(crate) mod attention;
pub(crate) mod attention_heads;
pub(crate) mod attention_qkv;
pub(crate) mod bilinear;
mod binary;
mod compare;
mod concat;
mod conv;
mod conv3d;
pub(crate) mod conv_fp8;
pub(crate) mod conv_infer;
mod conv_transpose1d;
mod cumulative;
pub(crate) mod dropout;
mod einsum;
mod einsum_parse;
pub(crate) mod embedding;
pub(crate) mod embedding_bag;
mod grads;
mod index;
mod index_put;
pub(crate) mod interpolate;
mod layout;
mod layout_int;
mod linear;
pub(crate) mod loss;
mod masked_select;
mod matmul;
pub(crate) mod norm;
mod pad_mode;
mod pixel_shuffle;
mod plan;
mod pool;
mod pool3d;
mod rearrange;
mod reduce;
mod reduce_minmax;
mod reduce_stats;
pub(crate) mod rms_norm;
pub(crate) mod rnn_cell;
mod rounding;
mod scatter;
mod shape;
mod softmax;
pub(crate) mod softmax_masked;
mod sort;
mod strided;
mod unary;
mod unfold;
pub(crate) mod vector_norm;

pub use activation_extra::{SELU_ALPHA, SELU_SCALE};
pub use binary::ScalarOperand;
pub use interpolate::{Interpolate, InterpolateMode};
pub use pad_mode::PadMode;
pub use scatter::ScatterReduce;
pub use unfold::Unfold;
