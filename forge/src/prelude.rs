//! The names most programs need: `use forge::prelude::*;` covers a whole
//! training loop (tensors, layers, losses, optimizers, schedules, data,
//! checkpoints, metrics, `no_grad`, `set_num_threads`).
//!
//! A classifier trained from a dataset of tensors, with a schedule,
//! printed, evaluated and checkpointed, each line beside its PyTorch
//! counterpart (compiled here as a doc test):
//!
#![doc = include_str!("training_example.md")]

pub use crate::autograd::{no_grad, Gradients};
pub use crate::checkpoint::{LayerIo, TrainingCheckpoint};
pub use crate::data::{DataLoader, Dataset, InMemoryDataset, TensorDataset};
pub use crate::error::ForgeError;
pub use crate::metrics;
pub use crate::nn::functional::{
    binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy, l1_loss, mse_loss,
    nll_loss,
};
pub use crate::nn::{
    AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AvgPool1d,
    AvgPool2d, Conv1d, Conv2d, ConvTranspose2d, MaxPool1d, MaxPool2d,
};
pub use crate::nn::{
    BatchNorm1d, BatchNorm2d, Dropout, Embedding, GroupNorm, LayerNorm, MultiheadAttention,
    PositionalEncoding, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder,
    TransformerEncoderLayer,
};
pub use crate::nn::{
    Elu, Flatten, Forward, Gelu, GeluTanh, Gru, Lambda, Layer, LeakyRelu, Linear, LogSoftmax, Lstm,
    Mish, Relu, Reshape, Rnn, RnnConfig, Sequential, Sigmoid, Silu, Softmax, Softplus, Tanh,
};
pub use crate::optim::{
    clip_grad_norm, clip_grad_value, Adadelta, Adagrad, Adam, AdamW, CosineAnnealingLr,
    ExponentialLr, LinearLr, LrScheduler, MultiStepLr, OneCycleLr, ParamGroup, Persist, RmsProp,
    Schedule, SequentialLr, Sgd, StepLr,
};
pub use crate::runtime::set_num_threads;
pub use crate::tensor::{Cpu, DType, Device, Element, Float, Rng, Tensor};
pub use crate::{sequential, sequential_type};
