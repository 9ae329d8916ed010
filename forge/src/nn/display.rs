//! Printing models as PyTorch's `print(model)` does (the structure and the
//! settings, never the weights), and [`summary`]: a torchinfo-style table
//! of every sublayer with its parameter count, the output shape and the
//! totals.
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

use super::forward::Forward;
use super::layer::Layer;
use super::sequential::Sequential;
use super::visit::{TensorKind, TensorVisitor};
use super::{
    AvgPool2d, BatchNorm1d, BatchNorm2d, Conv1d, Conv2d, Dropout, Elu, Embedding, Flatten, Gelu,
    GeluTanh, GroupNorm, LayerNorm, LeakyRelu, Linear, LogSoftmax, MaxPool2d, Mish, Relu, Sigmoid,
    Silu, Softmax, Softplus, Tanh,
};
use crate::tensor::{Float, Tensor};
use std::fmt;

macro_rules! plain_display {
    ($($t:ident => $name:literal),* $(,)?) => {$(
        impl fmt::Display for $t {
            /// PyTorch's name and no settings (`ReLU()`).
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(concat!($name, "()"))
            }
        }
    )*};
}

plain_display! {
    Relu => "ReLU", Tanh => "Tanh", Sigmoid => "Sigmoid", Gelu => "GELU",
    Silu => "SiLU", Mish => "Mish",
}

impl fmt::Display for GeluTanh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("GELU(approximate='tanh')")
    }
}

impl fmt::Display for LeakyRelu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LeakyReLU(negative_slope={})", self.slope)
    }
}

impl fmt::Display for Elu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ELU(alpha={})", self.alpha)
    }
}

impl fmt::Display for Softplus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Softplus(beta={}, threshold={})",
            self.beta, self.threshold
        )
    }
}

impl fmt::Display for Softmax {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Softmax(dim={})", self.axis)
    }
}

impl fmt::Display for LogSoftmax {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LogSoftmax(dim={})", self.axis)
    }
}

impl fmt::Display for Flatten {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Flatten()")
    }
}

impl fmt::Display for Dropout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Dropout(p={})", self.p)
    }
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

impl fmt::Display for MaxPool2d {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "MaxPool2d(kernel_size=({}, {}), stride=({}, {}), padding=({}, {}))",
            self.kernel[0],
            self.kernel[1],
            self.stride[0],
            self.stride[1],
            self.padding[0],
            self.padding[1]
        )
    }
}

impl fmt::Display for AvgPool2d {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "AvgPool2d(kernel_size=({}, {}), stride=({}, {}), padding=({}, {}))",
            self.kernel[0],
            self.kernel[1],
            self.stride[0],
            self.stride[1],
            self.padding[0],
            self.padding[1]
        )
    }
}

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
        let w = self.weight.shape();
        write!(f, "Embedding({}, {}", w[0], w[1])?;
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

/// One row of a [`Summary`]: a sublayer (or the model itself, path `""`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SummaryRow {
    /// The sublayer's path (`encoder.0`), `""` for the model.
    pub path: String,
    /// Its type, without module path or generics (`Linear`).
    pub type_name: String,
    /// Trainable elements under it.
    pub trainable: usize,
    /// Frozen or untracked elements under it.
    pub frozen: usize,
}

/// What [`summary`] returns: a row per sublayer, the output shape for the
/// given input, and totals. `Display` prints it as a table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// Every sublayer in traversal order, the model first.
    pub rows: Vec<SummaryRow>,
    /// The input shape given.
    pub input_shape: Vec<usize>,
    /// The model's output shape for that input.
    pub output_shape: Vec<usize>,
    /// Trainable elements in all.
    pub trainable: usize,
    /// Frozen (and untracked) elements in all.
    pub frozen: usize,
    /// Bytes of all stored tensors.
    pub bytes: usize,
}

/// The last path segment of a type name without generics.
fn short_name(full: &str) -> String {
    let base = full.split('<').next().unwrap_or(full);
    base.rsplit("::").next().unwrap_or(base).to_string()
}

/// A torchinfo-style summary: every sublayer's path, type and parameter
/// count (trainable and frozen), the output shape for an input of
/// `input_shape` (one forward pass on zeros, under `no_grad`, in the
/// model's current mode), and the totals in elements and bytes.
///
/// # Panics
/// When the model cannot take an input of that shape (the forward pass's
/// own message).
///
/// ```
/// use forge::f32::Linear;
/// use forge::prelude::*;
/// use forge::nn::summary;
/// let mut rng = Rng::new(0);
/// let model = sequential![Linear::new(784, 32, &mut rng), Relu, Linear::new(32, 10, &mut rng)];
/// let s = summary(&model, &[64, 784]);
/// assert_eq!(s.output_shape, [64, 10]);
/// assert_eq!(s.trainable, 784 * 32 + 32 + 32 * 10 + 10);
/// assert_eq!(s.bytes, s.trainable * 4);
/// assert_eq!(s.rows[1].path, "0");
/// assert_eq!(s.rows[1].type_name, "Linear");
/// println!("{s}");
/// ```
#[track_caller]
pub fn summary<E, L>(model: &L, input_shape: &[usize]) -> Summary
where
    E: Float,
    L: Layer<E> + Forward<Tensor<E>, Output = Tensor<E>>,
{
    struct Rows<'a, E> {
        rows: &'a mut Vec<SummaryRow>,
        totals: (usize, usize, usize),
        _e: std::marker::PhantomData<E>,
    }
    impl<E: Float> TensorVisitor<E> for Rows<'_, E> {
        fn visit(&mut self, path: &str, t: &Tensor<E>, kind: TensorKind) {
            let trainable = kind == TensorKind::Weight && t.is_tracked();
            let n = t.numel();
            for row in self.rows.iter_mut() {
                let inside = row.path.is_empty()
                    || path
                        .strip_prefix(row.path.as_str())
                        .is_some_and(|r| r.starts_with('.'));
                if inside && !row.path.is_empty() {
                    if trainable {
                        row.trainable += n;
                    } else {
                        row.frozen += n;
                    }
                }
            }
            if trainable {
                self.totals.0 += n;
            } else {
                self.totals.1 += n;
            }
            self.totals.2 += n * std::mem::size_of::<E>();
        }
        fn visit_layer(&mut self, path: &str, type_name: &'static str) {
            self.rows.push(SummaryRow {
                path: path.to_string(),
                type_name: short_name(type_name),
                trainable: 0,
                frozen: 0,
            });
        }
    }
    let mut rows = vec![SummaryRow {
        path: String::new(),
        type_name: short_name(std::any::type_name::<L>()),
        trainable: 0,
        frozen: 0,
    }];
    let mut v = Rows {
        rows: &mut rows,
        totals: (0, 0, 0),
        _e: std::marker::PhantomData,
    };
    model.visit_tensors(&mut v);
    let (trainable, frozen, bytes) = v.totals;
    rows[0].trainable = trainable;
    rows[0].frozen = frozen;
    let output = crate::autograd::no_grad(|| model.forward(Tensor::zeros(input_shape)));
    Summary {
        rows,
        input_shape: input_shape.to_vec(),
        output_shape: output.shape().to_vec(),
        trainable,
        frozen,
        bytes,
    }
}

impl fmt::Display for Summary {
    /// A table: layer (path and type), trainable and frozen parameters,
    /// then the input and output shapes and the totals.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = |r: &SummaryRow| {
            if r.path.is_empty() {
                r.type_name.clone()
            } else {
                let depth = r.path.matches('.').count() + 1;
                format!("{}{} ({})", "  ".repeat(depth), r.path, r.type_name)
            }
        };
        let width = self
            .rows
            .iter()
            .map(|r| name(r).len())
            .max()
            .unwrap_or(5)
            .max(5);
        let rule = "-".repeat(width + 28);
        writeln!(f, "{rule}")?;
        writeln!(
            f,
            "{:<width$} {:>13} {:>13}",
            "Layer", "Trainable", "Frozen"
        )?;
        writeln!(f, "{rule}")?;
        for r in &self.rows {
            writeln!(
                f,
                "{:<width$} {:>13} {:>13}",
                name(r),
                r.trainable,
                r.frozen
            )?;
        }
        writeln!(f, "{rule}")?;
        writeln!(f, "Input shape: {:?}", self.input_shape)?;
        writeln!(f, "Output shape: {:?}", self.output_shape)?;
        writeln!(f, "Trainable params: {}", self.trainable)?;
        writeln!(f, "Frozen params: {}", self.frozen)?;
        writeln!(f, "Total params: {}", self.trainable + self.frozen)?;
        if self.bytes >= 1_000_000 {
            write!(f, "Params size: {:.2} MB", self.bytes as f64 / 1e6)
        } else {
            write!(f, "Params size: {:.2} KB", self.bytes as f64 / 1e3)
        }
    }
}
