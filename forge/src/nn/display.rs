//! Printing models as PyTorch's `print(model)` does (the structure and the
//! settings, never the weights). [`summary`](super::summary) (in
//! `nn/summary.rs`) is the torchinfo-style table.
//!
//! ```
//! use forge::f32::Linear;
//! use forge::prelude::*;
//! let mut rng = Rng::new(0);
//! let model = sequential![Linear::new(2, 4, &mut rng), Relu, Linear::new(4, 1, &mut rng)];
//! assert_eq!(
//!     model.to_string(),
//!     "Sequential(\n  (0): Linear(in_features=2, out_features=4, bias=true)\n  (1): ReLU()\n  (2): Linear(in_features=4, out_features=1, bias=true)\n)"
//! );
//! ```

use super::sequential::Sequential;
use super::{
    Activation, AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool1d, AdaptiveMaxPool2d,
    AvgPool1d, AvgPool2d, BatchNorm1d, BatchNorm2d, Conv1d, Conv2d, ConvTranspose2d, Dropout, Elu,
    Embedding, Flatten, Gelu, GeluTanh, GroupNorm, Gru, Lambda, LayerNorm, LeakyRelu, Linear,
    LogSoftmax, Lstm, MaxPool1d, MaxPool2d, Mish, MultiheadAttention, PositionalEncoding, Relu,
    Reshape, Rnn, RnnConfig, RnnNonlinearity, Sigmoid, Silu, Softmax, Softplus, Tanh,
    TransformerDecoder, TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer,
};
use crate::tensor::Float;
use std::fmt;

macro_rules! plain_display {
    ($($t:ident => $text:literal),* $(,)?) => {$(
        impl fmt::Display for $t {
            /// PyTorch's text: the name and the settings if any (`ReLU()`).
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str($text)
            }
        }
    )*};
}

plain_display! {
    Relu => "ReLU()", Tanh => "Tanh()", Sigmoid => "Sigmoid()", Gelu => "GELU()",
    Silu => "SiLU()", Mish => "Mish()", Flatten => "Flatten()",
    GeluTanh => "GELU(approximate='tanh')",
}

/// Layers printed as PyTorch's name and their settings, each
/// `name=field` (`LeakyReLU(negative_slope=0.01)`).
macro_rules! settings_display {
    ($($t:ident => $name:literal { $($key:literal: $field:ident),+ }),* $(,)?) => {$(
        impl fmt::Display for $t {
            /// PyTorch's text, e.g. `LeakyReLU(negative_slope=0.01)`.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let settings = [$(format!(concat!($key, "={}"), self.$field)),+];
                write!(f, concat!($name, "({})"), settings.join(", "))
            }
        }
    )*};
}

settings_display! {
    LeakyRelu => "LeakyReLU" { "negative_slope": slope },
    Elu => "ELU" { "alpha": alpha },
    Softplus => "Softplus" { "beta": beta, "threshold": threshold },
    Softmax => "Softmax" { "dim": axis },
    LogSoftmax => "LogSoftmax" { "dim": axis },
    Dropout => "Dropout" { "p": p },
}

impl<E: Float> fmt::Display for Linear<E> {
    /// `Linear(in_features=2, out_features=4, bias=true)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Linear(in_features={}, out_features={}, bias={})",
            self.in_features(),
            self.out_features(),
            self.bias.is_some()
        )
    }
}

impl<E: Float> fmt::Display for Conv2d<E> {
    /// `Conv2d(1, 6, kernel_size=(5, 5), stride=(1, 1), padding=(2, 2))`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = self.weight.shape();
        write!(
            f,
            "Conv2d({}, {}, kernel_size=({}, {}), stride=({}, {}), padding=({}, {})",
            w[1] * self.groups,
            w[0],
            w[2],
            w[3],
            self.stride[0],
            self.stride[1],
            self.padding[0],
            self.padding[1]
        )?;
        if self.dilation != [1, 1] {
            write!(f, ", dilation=({}, {})", self.dilation[0], self.dilation[1])?;
        }
        if self.groups != 1 {
            write!(f, ", groups={}", self.groups)?;
        }
        if self.bias.is_none() {
            f.write_str(", bias=false")?;
        }
        f.write_str(")")
    }
}

impl<E: Float> fmt::Display for Conv1d<E> {
    /// `Conv1d(3, 8, kernel_size=(3,), stride=(1,))`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = self.weight.shape();
        write!(
            f,
            "Conv1d({}, {}, kernel_size=({},), stride=({},), padding=({},)",
            w[1] * self.groups,
            w[0],
            w[2],
            self.stride,
            self.padding
        )?;
        if self.bias.is_none() {
            f.write_str(", bias=false")?;
        }
        f.write_str(")")
    }
}

macro_rules! pool2d_display {
    ($($t:ident),*) => {$(
        impl fmt::Display for $t {
            /// `MaxPool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))`.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let (k, s, p) = (self.kernel, self.stride, self.padding);
                write!(
                    f,
                    concat!(stringify!($t), "(kernel_size=({}, {}), stride=({}, {}), padding=({}, {}))"),
                    k[0], k[1], s[0], s[1], p[0], p[1]
                )
            }
        }
    )*};
}

pool2d_display!(MaxPool2d, AvgPool2d);

macro_rules! batch_norm_display {
    ($($t:ident),*) => {$(
        impl<E: Float> fmt::Display for $t<E> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let c = self.running_mean.get().numel();
                write!(f, concat!(stringify!($t), "({}, eps={}, momentum={}, affine={})"),
                    c,
                    self.eps,
                    self.momentum.map_or("None".to_string(), |m| m.to_string()),
                    self.weight.is_some())
            }
        }
    )*};
}

batch_norm_display!(BatchNorm1d, BatchNorm2d);

impl<E: Float> fmt::Display for LayerNorm<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "LayerNorm({:?}, eps={}, elementwise_affine={})",
            self.normalized_shape,
            self.eps,
            self.weight.is_some()
        )
    }
}

impl<E: Float> fmt::Display for GroupNorm<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "GroupNorm({}, {}, eps={}, affine={})",
            self.num_groups,
            self.num_channels,
            self.eps,
            self.weight.is_some()
        )
    }
}

impl<E: Float> fmt::Display for Embedding<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (n, d) = (self.num_embeddings(), self.embedding_dim());
        write!(f, "Embedding({n}, {d}")?;
        if let Some(p) = self.padding_idx {
            write!(f, ", padding_idx={p}")?;
        }
        f.write_str(")")
    }
}

/// Writes `item` indented by two spaces after its first line.
fn indented(f: &mut fmt::Formatter<'_>, item: &dyn fmt::Display) -> fmt::Result {
    let text = item.to_string();
    let mut lines = text.lines();
    if let Some(first) = lines.next() {
        f.write_str(first)?;
    }
    for line in lines {
        write!(f, "\n  {line}")?;
    }
    Ok(())
}

/// The elements of a [`Sequential`] printed one per line, `(i): layer`.
pub trait SeqDisplay {
    /// Writes the elements from index `index` on.
    ///
    /// # Errors
    /// As the formatter.
    fn fmt_from(&self, index: usize, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

impl SeqDisplay for () {
    fn fmt_from(&self, _: usize, _: &mut fmt::Formatter<'_>) -> fmt::Result {
        Ok(())
    }
}

impl<H: fmt::Display, T: SeqDisplay> SeqDisplay for (H, T) {
    fn fmt_from(&self, index: usize, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\n  ({index}): ")?;
        indented(f, &self.0)?;
        self.1.fmt_from(index + 1, f)
    }
}

impl<T: SeqDisplay> fmt::Display for Sequential<T> {
    /// PyTorch's layout: `Sequential(` then `  (i): layer` per line, nested
    /// sequentials indented.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Sequential(")?;
        self.0.fmt_from(0, f)?;
        f.write_str("\n)")
    }
}

/// PyTorch's layout for a module with children: `Name(`, the settings line
/// (when there is one), one `(label): child` line per child (a child's own
/// lines indented), then `)`.
pub(crate) fn nested(
    f: &mut fmt::Formatter<'_>,
    name: &str,
    settings: Option<String>,
    children: &[(&str, &dyn fmt::Display)],
) -> fmt::Result {
    write!(f, "{name}(")?;
    if let Some(s) = settings {
        write!(f, "\n  {s}")?;
    }
    for (label, child) in children {
        write!(f, "\n  ({label}): ")?;
        indented(f, *child)?;
    }
    f.write_str("\n)")
}

/// A list of layers printed as PyTorch prints a `ModuleList`: `(i): layer`
/// per element, and a run of equal elements as `(0-5): 6 x layer`.
pub(crate) struct ModuleList<'a, T>(pub(crate) &'a [T]);

/// A list of layers applied in order, printed as PyTorch prints an
/// `nn.Sequential` built from them (`Sequential(`, then as [`ModuleList`]).
pub(crate) struct SequentialList<'a, T>(pub(crate) &'a [T]);

/// `name(`, one `(i): item` line per element (a run of equal elements as
/// `(i-j): n x item`), then `)`.
fn write_list<T: fmt::Display>(f: &mut fmt::Formatter<'_>, name: &str, items: &[T]) -> fmt::Result {
    let texts: Vec<String> = items.iter().map(ToString::to_string).collect();
    write!(f, "{name}(")?;
    let mut i = 0;
    while i < texts.len() {
        let run = texts[i..].iter().take_while(|t| **t == texts[i]).count();
        if run == 1 {
            write!(f, "\n  ({i}): ")?;
        } else {
            write!(f, "\n  ({i}-{}): {run} x ", i + run - 1)?;
        }
        indented(f, &texts[i])?;
        i += run;
    }
    f.write_str("\n)")
}

impl<T: fmt::Display> fmt::Display for ModuleList<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_list(f, "ModuleList", self.0)
    }
}

impl<T: fmt::Display> fmt::Display for SequentialList<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_list(f, "Sequential", self.0)
    }
}

/// `input_size, hidden_size` and the settings that differ from PyTorch's
/// defaults, as `nn.RNN`/`nn.LSTM`/`nn.GRU` print them.
fn write_recurrent(
    f: &mut fmt::Formatter<'_>,
    name: &str,
    c: &RnnConfig,
    extra: &str,
) -> fmt::Result {
    write!(f, "{name}({}, {}", c.input_size, c.hidden_size)?;
    if c.num_layers != 1 {
        write!(f, ", num_layers={}", c.num_layers)?;
    }
    if !c.bias {
        f.write_str(", bias=false")?;
    }
    if c.batch_first {
        f.write_str(", batch_first=true")?;
    }
    if c.bidirectional {
        f.write_str(", bidirectional=true")?;
    }
    write!(f, "{extra})")
}

impl<E: Float> fmt::Display for Lstm<E> {
    /// `LSTM(10, 20, num_layers=2, batch_first=true)`: PyTorch's text
    /// (input and hidden size, then the settings that differ from the
    /// defaults).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_recurrent(f, "LSTM", self.config(), "")
    }
}

impl<E: Float> fmt::Display for Gru<E> {
    /// `GRU(10, 20, bidirectional=true)`, as [`Lstm`]'s.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_recurrent(f, "GRU", self.config(), "")
    }
}

impl<E: Float> fmt::Display for Rnn<E> {
    /// `RNN(10, 20)`, as [`Lstm`]'s, with `nonlinearity='relu'` when it is
    /// not tanh (PyTorch's text leaves the nonlinearity out).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let extra = match self.nonlinearity() {
            RnnNonlinearity::Tanh => "",
            RnnNonlinearity::Relu => ", nonlinearity='relu'",
        };
        write_recurrent(f, "RNN", self.config(), extra)
    }
}

impl<E: Float> fmt::Display for MultiheadAttention<E> {
    /// The settings on one line, then the output projection:
    /// `MultiheadAttention(\n  embed_dim=8, num_heads=2, dropout=0.1, batch_first=false\n  (out_proj): Linear(..)\n)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let settings = format!(
            "embed_dim={}, num_heads={}, dropout={}, batch_first={}",
            self.embed_dim(),
            self.num_heads,
            self.dropout.p,
            self.batch_first
        );
        nested(
            f,
            "MultiheadAttention",
            Some(settings),
            &[("out_proj", &self.out_proj)],
        )
    }
}

impl<E: Float> fmt::Display for PositionalEncoding<E> {
    /// `PositionalEncoding(\n  d_model=8, max_len=100, batch_first=false\n  (dropout): Dropout(p=0.1)\n)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pe = self.pe.shape();
        let settings = format!(
            "d_model={}, max_len={}, batch_first={}",
            pe[1], pe[0], self.batch_first
        );
        nested(
            f,
            "PositionalEncoding",
            Some(settings),
            &[("dropout", &self.dropout)],
        )
    }
}

impl fmt::Display for Activation {
    /// `relu` or `gelu`, as PyTorch's `activation` argument.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Activation::Relu => "relu",
            Activation::Gelu => "gelu",
        })
    }
}

/// A transformer block's settings line: `activation=relu, norm_first=false`.
fn block_settings(activation: Activation, norm_first: bool) -> Option<String> {
    Some(format!("activation={activation}, norm_first={norm_first}"))
}

impl<E: Float> fmt::Display for TransformerEncoderLayer<E> {
    /// PyTorch's children in its order, after a settings line
    /// (`activation=relu, norm_first=false`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        nested(
            f,
            "TransformerEncoderLayer",
            block_settings(self.activation, self.norm_first),
            &[
                ("self_attn", &self.self_attn),
                ("linear1", &self.linear1),
                ("dropout", &self.dropout),
                ("linear2", &self.linear2),
                ("norm1", &self.norm1),
                ("norm2", &self.norm2),
                ("dropout1", &self.dropout1),
                ("dropout2", &self.dropout2),
            ],
        )
    }
}

impl<E: Float> fmt::Display for TransformerDecoderLayer<E> {
    /// As [`TransformerEncoderLayer`]'s, with the cross-attention and the
    /// third norm and dropout.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        nested(
            f,
            "TransformerDecoderLayer",
            block_settings(self.activation, self.norm_first),
            &[
                ("self_attn", &self.self_attn),
                ("multihead_attn", &self.multihead_attn),
                ("linear1", &self.linear1),
                ("dropout", &self.dropout),
                ("linear2", &self.linear2),
                ("norm1", &self.norm1),
                ("norm2", &self.norm2),
                ("norm3", &self.norm3),
                ("dropout1", &self.dropout1),
                ("dropout2", &self.dropout2),
                ("dropout3", &self.dropout3),
            ],
        )
    }
}

/// A stack's children: its layers as a `ModuleList`, then the final norm
/// when there is one.
fn write_stack<L: fmt::Display, E: Float>(
    f: &mut fmt::Formatter<'_>,
    name: &str,
    layers: &[L],
    norm: Option<&LayerNorm<E>>,
) -> fmt::Result {
    let list = ModuleList(layers);
    match norm {
        Some(n) => nested(f, name, None, &[("layers", &list), ("norm", n)]),
        None => nested(f, name, None, &[("layers", &list)]),
    }
}

impl<E: Float> fmt::Display for TransformerEncoder<E> {
    /// `TransformerEncoder(\n  (layers): ModuleList(\n    (0-5): 6 x TransformerEncoderLayer(..)\n  )\n  (norm): LayerNorm(..)\n)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_stack(f, "TransformerEncoder", &self.layers, self.norm.as_ref())
    }
}

impl<E: Float> fmt::Display for TransformerDecoder<E> {
    /// As [`TransformerEncoder`]'s.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_stack(f, "TransformerDecoder", &self.layers, self.norm.as_ref())
    }
}

/// How an adaptive pool's `output_size` prints: `(3, 2)` in 2-d, `4` in 1-d.
trait SizeText {
    fn text(&self) -> String;
}

impl SizeText for usize {
    fn text(&self) -> String {
        self.to_string()
    }
}

impl SizeText for [usize; 2] {
    fn text(&self) -> String {
        format!("({}, {})", self[0], self[1])
    }
}

macro_rules! adaptive_pool_display {
    ($($t:ident),*) => {$(
        impl fmt::Display for $t {
            /// PyTorch's text: `AdaptiveAvgPool2d(output_size=(1, 1))`,
            /// `AdaptiveMaxPool1d(output_size=4)`.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($t), "(output_size={})"), self.output_size.text())
            }
        }
    )*};
}

adaptive_pool_display!(
    AdaptiveAvgPool2d,
    AdaptiveMaxPool2d,
    AdaptiveAvgPool1d,
    AdaptiveMaxPool1d
);

impl fmt::Display for MaxPool1d {
    /// `MaxPool1d(kernel_size=2, stride=2, padding=0)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "MaxPool1d(kernel_size={}, stride={}, padding={})",
            self.kernel, self.stride, self.padding
        )
    }
}

impl fmt::Display for AvgPool1d {
    /// `AvgPool1d(kernel_size=(2,), stride=(2,), padding=(0,))`, with
    /// `count_include_pad=false` when set so.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "AvgPool1d(kernel_size=({},), stride=({},), padding=({},)",
            self.kernel, self.stride, self.padding
        )?;
        if !self.count_include_pad {
            f.write_str(", count_include_pad=false")?;
        }
        f.write_str(")")
    }
}

impl<E: Float> fmt::Display for ConvTranspose2d<E> {
    /// `ConvTranspose2d(16, 33, kernel_size=(3, 5), stride=(2, 1), padding=(4, 2))`,
    /// then the settings that differ from the defaults.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = self.weight.shape();
        write!(
            f,
            "ConvTranspose2d({}, {}, kernel_size=({}, {}), stride=({}, {}), padding=({}, {})",
            w[0],
            w[1] * self.groups,
            w[2],
            w[3],
            self.stride[0],
            self.stride[1],
            self.padding[0],
            self.padding[1]
        )?;
        if self.output_padding != [0, 0] {
            let [a, b] = self.output_padding;
            write!(f, ", output_padding=({a}, {b})")?;
        }
        if self.dilation != [1, 1] {
            write!(f, ", dilation=({}, {})", self.dilation[0], self.dilation[1])?;
        }
        if self.groups != 1 {
            write!(f, ", groups={}", self.groups)?;
        }
        if self.bias.is_none() {
            f.write_str(", bias=false")?;
        }
        f.write_str(")")
    }
}

impl fmt::Display for Reshape {
    /// `Reshape(shape=[2, -1])`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Reshape(shape={:?})", self.0)
    }
}

impl<I, O> fmt::Display for Lambda<I, O> {
    /// `Lambda()` (the closure cannot be printed).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Lambda()")
    }
}
