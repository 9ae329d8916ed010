//! The names most programs need: `use forge::prelude::*;`.
//!
//! ```
//! use forge::prelude::*;
//! let mut rng = Rng::new(0);
//! let model = sequential![Linear::<f32>::new(2, 4, &mut rng), Relu, Linear::new(4, 1, &mut rng)];
//! let y = no_grad(|| model.forward(Tensor::zeros(&[3, 2])));
//! assert_eq!(y.shape(), &[3, 1]);
//! ```

pub use crate::autograd::{no_grad, Gradients};
pub use crate::checkpoint::LayerIo;
pub use crate::error::ForgeError;
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
pub use crate::optim::{LrScheduler, Persist};
pub use crate::tensor::{Cpu, Device, Element, Float, Rng, Tensor};
pub use crate::{sequential, sequential_type};
