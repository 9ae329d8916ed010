//! The ops tests: tensor ops, fused kernels and their parity with PyTorch.
//! A module of the one suite binary (`tests/suite.rs`; CONTRIBUTING.md,
//! "The test layout"), its files modules named as the files.

mod ops_activation_norm;
mod ops_attention_masked;
mod ops_attention_qkv;
mod ops_binary_parity;
mod ops_compare;
mod ops_conv3d_pool3d;
mod ops_conv_t1d_bilinear;
mod ops_ctc_loss;
mod ops_einsum_pad;
mod ops_embedding_bag;
mod ops_fused_class_loss;
mod ops_fused_kernels;
mod ops_fused_norm_loss;
mod ops_index_write;
mod ops_layer_norm_blocks;
mod ops_layout_int;
mod ops_linear;
mod ops_margin_losses;
mod ops_matmul_parity;
mod ops_reduce_parity;
mod ops_resample_sort;
mod ops_rnn_cells;
mod ops_scan_round;
mod ops_shape_gradcheck;
mod ops_shape_parity;
mod ops_shape_semantics;
mod ops_softmax_parity;
mod ops_unary_parity;
