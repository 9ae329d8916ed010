//! The nn tests: layers and their parity with PyTorch.
//! A module of the one suite binary (`tests/suite.rs`; CONTRIBUTING.md,
//! "The test layout"), its files modules named as the files.

mod nn_attention_parity;
mod nn_autocast;
mod nn_cells_instance_norm;
mod nn_conv_layers;
mod nn_conv_parity;
mod nn_embedding_parity;
mod nn_fuse_parity;
mod nn_layer;
mod nn_loss_names;
mod nn_loss_parity;
mod nn_lstm_inference;
mod nn_norm_layers;
mod nn_norm_parity;
mod nn_pool_parity;
mod nn_quant;
mod nn_quant_embedding;
mod nn_quant_fp8;
mod nn_quant_layers;
mod nn_rnn_parity;
mod nn_transformer;
