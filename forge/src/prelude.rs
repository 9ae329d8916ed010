//! The names most programs need: `use forge::prelude::*;` covers a whole
//! training loop (tensors, layers, losses, optimizers, schedules, data,
//! checkpoints, metrics, `no_grad`, `set_num_threads`).
//!
//! ```
//! use forge::prelude::*;
//! set_num_threads(1);
//! let mut rng = Rng::new(0);
//! let x = Tensor::<f32>::from_fn(&[64, 2], |i| ((i * 7) % 11) as f32 / 11.0);
//! let y = Tensor::<i64>::from_fn(&[64], |i| (i % 2) as i64);
//! let data = TensorDataset::new((x, y)).unwrap();
//! let loader = DataLoader::new(&data, 16).shuffle(0);
//! let mut model = sequential![Linear::new(2, 8, &mut rng), Relu, Linear::new(8, 2, &mut rng)];
//! let mut opt = Adam::new(1e-2);
//! let mut sched = StepLr::for_optimizer(&mut opt, 10, 0.5);
//! for _epoch in 0..2 {
//!     for (xb, yb) in loader.iter() {
//!         let loss = cross_entropy(&model.forward(xb), &yb);
//!         let mut grads = loss.backward();
//!         clip_grad_norm(&mut grads, 1.0);
//!         opt.step(&mut model, &grads).unwrap();
//!         sched.step(&mut opt);
//!     }
//! }
//! let (xs, ys) = data.tensors().clone();
//! let acc = no_grad(|| metrics::accuracy(&model.forward(xs), &ys));
//! assert!((0.0..=1.0).contains(&acc));
//! ```

pub use crate::autograd::{no_grad, Gradients};
pub use crate::checkpoint::{LayerIo, TrainingCheckpoint};
pub use crate::cpu::set_num_threads;
pub use crate::data::{DataLoader, Dataset, InMemoryDataset, TensorDataset};
pub use crate::error::ForgeError;
pub use crate::metrics;
pub use crate::nn::functional::{bce, bce_with_logits, cross_entropy, l1, mse, nll};
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
pub use crate::tensor::{Cpu, DType, Device, Element, Float, Rng, Tensor};
pub use crate::{sequential, sequential_type};
