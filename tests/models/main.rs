//! The models tests: GPT, the seq2seq transformer, the vision models, half
//! precision and the MNIST training.
//! A module of the one suite binary (`tests/suite.rs`; CONTRIBUTING.md,
//! "The test layout"), its files modules named as the files.

mod hub_bert_fused;
mod hub_cli;
mod hub_embed;
mod hub_minilm;
mod hub_parity;
mod mnist_training;
mod models_gpt_parity;
mod models_precision;
mod models_quant;
mod models_quant_accuracy;
mod models_quant_fp8;
mod models_transformer;
mod models_vision;
