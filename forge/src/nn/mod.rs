//! Layers: the [`Layer`] traversal (written by `#[derive(Layer)]`),
//! [`Forward`], the typed [`Sequential`], and the layer catalogue
//! ([`Linear`], the convolutions [`Conv1d`] / [`Conv2d`] / [`ConvTranspose2d`],
//! the pooling layers, normalisation ([`BatchNorm2d`], [`LayerNorm`], ...),
//! [`Embedding`], [`Dropout`], attention ([`MultiheadAttention`], transformer
//! blocks), activations, [`Softmax`], [`Flatten`], [`Reshape`], [`Lambda`],
//! the recurrent [`Rnn`] / [`Lstm`] / [`Gru`], [`init`] and [`functional`]
//! forms, losses included).
//!
//! A model is a Rust type. The derive writes the code that walks its
//! tensors; parameters, freezing, state dicts, train/eval mode and
//! optimizers are built on that walk. An example with every kind of field:
//!
#![doc = include_str!("example.md")]

mod activation;
mod activation_extra;
mod activation_kind;
mod attention;
mod bilinear;
mod buffer;
mod builder;
mod cells;
mod conv;
mod conv_bn_act;
pub(crate) use conv_bn_act::conv_bn_act;
mod conv2d_fp8;
mod conv2d_int8;
mod conv3d;
mod conv_transpose;
mod conv_transpose1d;
mod display;
pub(crate) use display::{nested, ModuleList, SequentialList};
mod dropout;
mod embedding;
mod embedding_bag;
mod forward;
#[cfg(test)]
mod fp8_packing_tests;
pub mod functional;
mod fuse;
mod gru;
pub mod init;
mod instance_norm;
mod layer;
mod linear;
mod lstm;
mod norm;
mod pad;
mod pool;
mod pool3d;
mod rms_norm;
mod rnn;
mod rnn_config;
mod rnn_elman;
mod rnn_fp8;
mod sequential;
mod shape_extra;
mod shape_layers;
mod summary;
mod transformer;
mod upsample;
mod visit;

pub use activation::{
    Elu, Gelu, GeluTanh, LeakyRelu, LogSoftmax, Mish, Relu, Sigmoid, Silu, Softmax, Softplus, Tanh,
};
pub use activation_extra::{
    Celu, Glu, Hardsigmoid, Hardswish, Hardtanh, LogSigmoid, PRelu, Relu6, Selu, Softsign,
};
pub use activation_kind::Activation;
pub use attention::{MultiheadAttention, PositionalEncoding};
pub use bilinear::Bilinear;
pub use buffer::Buffer;
pub use cells::{GruCell, LstmCell, RnnCell};
pub use conv::{Conv1d, Conv2d, IntoPair};
pub use conv3d::{Conv3d, IntoTriple};
pub use conv_transpose::ConvTranspose2d;
pub use conv_transpose1d::ConvTranspose1d;
pub use display::SeqDisplay;
pub use dropout::Dropout;
pub use embedding::Embedding;
pub use embedding_bag::EmbeddingBag;
pub use forward::Forward;
pub use fuse::{fuse_conv_bn_eval, fuse_linear_bn_eval};
pub use gru::Gru;
pub use instance_norm::{InstanceNorm1d, InstanceNorm2d};
pub use layer::{enter_layer, enter_layer_mut, Layer};
pub use linear::Linear;
pub use lstm::Lstm;
pub use norm::{BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm};
pub use pad::{
    CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d, ConstantPad3d,
    ReflectionPad1d, ReflectionPad2d, ReflectionPad3d, ReplicationPad1d, ReplicationPad2d,
    ReplicationPad3d, ZeroPad1d, ZeroPad2d, ZeroPad3d,
};
pub use pool::{
    AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AvgPool1d,
    AvgPool2d, MaxPool1d, MaxPool2d,
};
pub use pool3d::{AdaptiveAvgPool3d, AdaptiveMaxPool3d, AvgPool3d, MaxPool3d};
pub use rms_norm::RmsNorm;
pub use rnn::CellWeights;
pub use rnn_config::RnnConfig;
pub use rnn_elman::{Rnn, RnnNonlinearity};
pub use sequential::{SeqChain, SeqForward, SeqVisit, Sequential};
pub use shape_extra::{Identity, PixelShuffle, PixelUnshuffle, Unflatten};
pub use shape_layers::{Flatten, Lambda, Reshape};
pub(crate) use summary::{capture_outputs, summary_running};
pub use summary::{record_output, summary, OutputShape, Summary, SummaryRow};
pub use transformer::{
    DecoderMasks, EncoderMasks, TransformerConfig, TransformerDecoder, TransformerDecoderLayer,
    TransformerEncoder, TransformerEncoderLayer,
};
pub use upsample::Upsample;
pub use visit::{
    join_path, AsFrozen, Scoped, TensorKind, TensorVisitor, TensorVisitorMut, Visit, Visitable,
};

#[doc(hidden)]
pub use visit::__private;

/// `#[derive(Layer)]`: see [`forge_macros::Layer`](macro@forge_macros::Layer).
pub use forge_macros::Layer;
