//! The models test binary: GPT, the seq2seq transformer, the vision models,
//! half precision and the MNIST training. One binary per area (README, "Test
//! layout"): each file is a module, named as it was when it was a binary of
//! its own.

#[path = "../common/mod.rs"]
mod common;

mod mnist_training;
mod models_gpt_parity;
mod models_precision;
mod models_transformer;
mod models_vision;
