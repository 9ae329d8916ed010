//! The nn test binary: layers and their parity with PyTorch. One binary per
//! area (README, "Test layout"): each file is a module, named as it was
//! when it was a binary of its own.

#[path = "../common/mod.rs"]
mod common;
#[path = "../second_order/mod.rs"]
mod second_order;

mod nn_attention_parity;
mod nn_conv_layers;
mod nn_conv_parity;
mod nn_embedding_parity;
mod nn_layer;
mod nn_loss_parity;
mod nn_lstm_inference;
mod nn_norm_layers;
mod nn_norm_parity;
mod nn_pool_parity;
mod nn_rnn_parity;
mod nn_transformer;
