//! The ops test binary: tensor ops, fused kernels and their parity with
//! PyTorch. One binary per area (README, "Test layout"): each file is a
//! module, named as it was when it was a binary of its own.

#[path = "../common/mod.rs"]
mod common;
#[path = "../composed_loss/mod.rs"]
mod composed_loss;
#[path = "../second_order/mod.rs"]
mod second_order;

mod ops_attention_masked;
mod ops_attention_qkv;
mod ops_binary_parity;
mod ops_compare;
mod ops_fused_class_loss;
mod ops_fused_kernels;
mod ops_fused_norm_loss;
mod ops_layer_norm_blocks;
mod ops_layout_int;
mod ops_linear;
mod ops_matmul_parity;
mod ops_reduce_parity;
mod ops_rnn_cells;
mod ops_shape_gradcheck;
mod ops_shape_parity;
mod ops_shape_semantics;
mod ops_softmax_parity;
mod ops_unary_parity;
