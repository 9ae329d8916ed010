//! [`summary`]: a torchinfo-style table of a model (every sublayer's path,
//! type, output shape and parameter counts, then the totals), and
//! [`record_output`], the hook through which layers report their output
//! shapes to it.
//!
//! # How the output shapes are found
//! `summary` walks the model (the same traversal as `parameters()`), noting
//! each sublayer's path, type and address in memory, then runs one forward
//! pass on zeros of the given shape under [`no_grad`](crate::no_grad) with a
//! recorder switched on for this thread. Every built-in layer ends its
//! `forward` with [`record_output`], which notes the layer's address, type
//! and output shape while the recorder is on (and otherwise costs one
//! thread-local read). A [`Sequential`](super::Sequential) notes its own
//! output as its last element's. Rows are matched to records by address
//! and type.
//!
//! Covered: every layer of `forge::nn` and the blocks of `forge::models`,
//! every `Sequential` whose last element is covered, and the model itself
//! (its row always has the output shape of the forward pass). A derived or
//! hand-written sublayer shows `-` unless its `forward` calls
//! [`record_output`] (one line, see its example). A layer called more than
//! once in the pass shows its first call's shape; for a layer returning a
//! tuple (`Lstm`: `(output, (h_n, c_n))`) the shape is the first element's.

use super::forward::Forward;
use super::layer::Layer;
use super::visit::{TensorKind, TensorVisitor};
use crate::quant::Int8Weight;
use crate::tensor::{DType, Element, Float, Tensor};
use std::cell::{Cell, RefCell};
use std::fmt;

/// An output a layer can report to [`summary`]: a tensor (its shape), or a
/// tuple whose first element is one (recurrent layers return
/// `(output, state)`, attention `(output, weights)`).
///
/// ```
/// use forge::nn::OutputShape;
/// use forge::Tensor;
/// let out = (Tensor::<f32>::zeros(&[2, 3]), Tensor::<f32>::zeros(&[1]));
/// assert_eq!(out.output_shape(), [2, 3]);
/// ```
pub trait OutputShape {
    /// The shape reported for this output.
    fn output_shape(&self) -> &[usize];

    /// The values reported for this output, in `f64` and detached, for the
    /// layer-by-layer diff ([`forge::tools::diff`](crate::tools::diff));
    /// `None` (the default) when the output has none to report.
    ///
    /// ```
    /// use forge::nn::OutputShape;
    /// let out = forge::Tensor::<f32>::from_vec(vec![1.5, 2.0], &[2]);
    /// assert_eq!(out.output_values().unwrap().to_vec(), vec![1.5, 2.0]);
    /// ```
    fn output_values(&self) -> Option<Tensor<f64>> {
        None
    }
}

impl<T: Element> OutputShape for Tensor<T> {
    fn output_shape(&self) -> &[usize] {
        self.shape()
    }
    fn output_values(&self) -> Option<Tensor<f64>> {
        Some(self.cast::<f64>())
    }
}

impl<A: OutputShape, B> OutputShape for (A, B) {
    fn output_shape(&self) -> &[usize] {
        self.0.output_shape()
    }
    fn output_values(&self) -> Option<Tensor<f64>> {
        self.0.output_values()
    }
}

impl<A: OutputShape, B, C> OutputShape for (A, B, C) {
    fn output_shape(&self) -> &[usize] {
        self.0.output_shape()
    }
    fn output_values(&self) -> Option<Tensor<f64>> {
        self.0.output_values()
    }
}

/// One output noted while a [`summary`] runs.
struct Record {
    address: usize,
    type_name: &'static str,
    shape: Vec<usize>,
    /// The output's values, when [`capture_outputs`] asked for them.
    values: Option<Tensor<f64>>,
}

thread_local! {
    /// Whether a `summary` (or [`capture_outputs`]) is running its forward
    /// pass on this thread.
    static RECORDING: Cell<bool> = const { Cell::new(false) };
    /// Whether the records keep the outputs' values ([`capture_outputs`]).
    static KEEP_VALUES: Cell<bool> = const { Cell::new(false) };
    /// The outputs noted by that pass, in call order.
    static RECORDS: RefCell<Vec<Record>> = const { RefCell::new(Vec::new()) };
}

/// Whether a [`summary`] is running its forward pass on this thread: layers
/// then leave their state alone (a [`Buffer`](super::Buffer) keeps its
/// value, a [`Dropout`](super::Dropout) draws from a copy of its
/// generator), so that a summary does not change the model.
pub(crate) fn summary_running() -> bool {
    RECORDING.with(Cell::get)
}

/// The address of a value, as the traversal and the records both key it.
fn address_of<L: ?Sized>(layer: &L) -> usize {
    (layer as *const L).cast::<()>() as usize
}

/// Returns `output` unchanged, and notes `layer`'s output shape when a
/// [`summary`] is running on this thread (otherwise it costs one
/// thread-local read). Every built-in layer ends its `forward` with it;
/// call it at the end of a hand-written layer's `forward` for that layer's
/// row in [`summary`] to show its output shape (without it the row shows
/// `-`; the model's own row always has it).
///
/// ```
/// use forge::nn::{record_output, summary};
/// use forge::prelude::*;
///
/// #[derive(Layer)]
/// struct Block {
///     fc: Linear,
/// }
/// impl Forward<Tensor> for Block {
///     type Output = Tensor;
///     fn forward(&self, x: Tensor) -> Tensor {
///         record_output(self, self.fc.forward(x).relu())
///     }
/// }
///
/// let mut rng = Rng::new(0);
/// let model = sequential![Block { fc: Linear::new(4, 3, &mut rng) }, Linear::new(3, 1, &mut rng)];
/// let s = summary(&model, &[2, 4]);
/// assert_eq!(s.rows[1].path, "0");
/// assert_eq!(s.rows[1].output_shape, Some(vec![2, 3]));
/// ```
pub fn record_output<L: ?Sized, Y: OutputShape>(layer: &L, output: Y) -> Y {
    if RECORDING.with(Cell::get) {
        let record = Record {
            address: address_of(layer),
            type_name: std::any::type_name::<L>(),
            shape: output.output_shape().to_vec(),
            values: if KEEP_VALUES.with(Cell::get) {
                output.output_values()
            } else {
                None
            },
        };
        RECORDS.with(|r| r.borrow_mut().push(record));
    }
    output
}

/// Where the records stand now, or `None` when no summary is running (for
/// [`record_last_as`]).
pub(crate) fn recording_mark() -> Option<usize> {
    if RECORDING.with(Cell::get) {
        Some(RECORDS.with(|r| r.borrow().len()))
    } else {
        None
    }
}

/// Notes, for `layer`, the shape recorded since `mark` by the value at
/// `last` of type `last_type` (a `Sequential`'s last element: its output is
/// the `Sequential`'s). Nothing when that element recorded nothing.
pub(crate) fn record_last_as<L: ?Sized>(layer: &L, mark: usize, last: (usize, &'static str)) {
    RECORDS.with(|r| {
        let mut records = r.borrow_mut();
        let found = records[mark.min(records.len())..]
            .iter()
            .rev()
            .find(|rec| (rec.address, rec.type_name) == last)
            .map(|rec| (rec.shape.clone(), rec.values.clone()));
        if let Some((shape, values)) = found {
            records.push(Record {
                address: address_of(layer),
                type_name: std::any::type_name::<L>(),
                shape,
                values,
            });
        }
    });
}

/// The recorder switched on for one forward pass; off (and emptied) again
/// on drop, also when the pass panics.
struct Recording;

impl Recording {
    fn start() -> Recording {
        RECORDS.with(|r| r.borrow_mut().clear());
        RECORDING.with(|c| c.set(true));
        Recording
    }

    fn take(&self) -> Vec<Record> {
        RECORDS.with(|r| std::mem::take(&mut *r.borrow_mut()))
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        RECORDING.with(|c| c.set(false));
        KEEP_VALUES.with(|c| c.set(false));
        RECORDS.with(|r| r.borrow_mut().clear());
    }
}

/// Every sublayer's (and the model's, path `""`) path, address and full
/// type name, in traversal order.
fn layer_keys<E: Float, L: Layer<E> + ?Sized>(model: &L) -> Vec<(String, usize, &'static str)> {
    struct Keys<E> {
        keys: Vec<(String, usize, &'static str)>,
        _e: std::marker::PhantomData<E>,
    }
    impl<E: Float> TensorVisitor<E> for Keys<E> {
        fn visit(&mut self, _: &str, _: &Tensor<E>, _: TensorKind) {}
        fn visit_layer(&mut self, path: &str, type_name: &'static str) {
            self.visit_layer_at(path, type_name, 0)
        }
        fn visit_layer_at(&mut self, path: &str, type_name: &'static str, address: usize) {
            self.keys.push((path.to_string(), address, type_name));
        }
    }
    let mut v = Keys {
        keys: vec![(String::new(), address_of(model), std::any::type_name::<L>())],
        _e: std::marker::PhantomData,
    };
    model.visit_tensors(&mut v);
    v.keys
}

/// Runs `f` (a forward pass of `model`, and whatever else) with the
/// recorder on, keeping the values of every output reported through
/// [`record_output`]; returns `f`'s value and, in call order, each output
/// of a layer of `model` under its path (`""` for the model itself; a
/// layer's second call is `path#1`, its third `path#2`, ...). Outputs of
/// layers that are not part of `model` (made inside a `forward`) are left
/// out.
pub(crate) fn capture_outputs<E: Float, L: Layer<E> + ?Sized, R>(
    model: &L,
    f: impl FnOnce() -> R,
) -> (R, Vec<(String, Tensor<f64>)>) {
    let keys = layer_keys(model);
    let recording = Recording::start();
    KEEP_VALUES.with(|c| c.set(true));
    let r = f();
    let records = recording.take();
    drop(recording);
    // The n-th record of a key goes to the (n mod k)-th of the k layers
    // with that key (zero-sized layers of one type may share an address),
    // as call n / k of it.
    let mut seen = std::collections::HashMap::<(usize, &'static str), usize>::new();
    let mut out = Vec::new();
    for rec in records {
        let key = (rec.address, rec.type_name);
        let paths: Vec<&str> = keys
            .iter()
            .filter(|(_, a, t)| (*a, *t) == key)
            .map(|(p, _, _)| p.as_str())
            .collect();
        let (Some(values), false) = (rec.values, paths.is_empty()) else {
            continue;
        };
        let n = seen.entry(key).or_insert(0);
        let (path, call) = (paths[*n % paths.len()], *n / paths.len());
        *n += 1;
        let name = if call == 0 {
            path.to_string()
        } else {
            format!("{path}#{call}")
        };
        out.push((name, values));
    }
    (r, out)
}

/// The key (address, full type name) under which `value` records its
/// output: what `Sequential` looks up for its last element.
pub(crate) fn key_of<T>(value: &T) -> (usize, &'static str) {
    (address_of(value), std::any::type_name::<T>())
}

/// One row of a [`Summary`]: a sublayer (or the model itself, path `""`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SummaryRow {
    /// The sublayer's path (`encoder.0`), `""` for the model.
    pub path: String,
    /// Its type, without module path or generics (`Linear`).
    pub type_name: String,
    /// Its output shape in the forward pass, `None` when it reported none
    /// (a derived sublayer whose `forward` does not call
    /// [`record_output`], or a layer the pass did not run).
    pub output_shape: Option<Vec<usize>>,
    /// Trainable elements under it.
    pub trainable: usize,
    /// Frozen or untracked elements under it (buffers not included).
    pub frozen: usize,
    /// Elements of the [`Buffer`](super::Buffer)s under it (batch norm's
    /// running statistics): state, not parameters.
    pub buffers: usize,
    /// Bytes its tensors hold in memory (buffers included; an int8 weight
    /// counts its packed bytes, see [`crate::quant::resident_bytes`]).
    pub bytes: usize,
    /// The storage types under it, `+`-separated in order of appearance
    /// (`float32`, or `int8+float32` for a quantized layer and its f32
    /// bias and scales); empty when it holds no tensor.
    pub dtypes: String,
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
    /// Frozen (and untracked) elements in all, buffers not included.
    pub frozen: usize,
    /// Elements of all [`Buffer`](super::Buffer)s (not counted as
    /// parameters, as PyTorch's `parameters()` leaves buffers out).
    pub buffers: usize,
    /// Bytes of all stored tensors (buffers included).
    pub bytes: usize,
}

/// The last path segment of a type name without generics.
fn short_name(full: &str) -> String {
    let base = full.split('<').next().unwrap_or(full);
    base.rsplit("::").next().unwrap_or(base).to_string()
}

/// A torchinfo-style summary: every sublayer's path, type, output shape and
/// parameter count (trainable and frozen), buffer elements, bytes and
/// storage types (an int8 layer shows `int8+float32`), the output
/// shape for an input of `input_shape` (one forward pass on zeros, under
/// `no_grad`, in the model's current mode), and the totals in elements and
/// bytes.
///
/// The model is left as it was: during the pass [`Buffer`](super::Buffer)s
/// keep their values (a batch norm in training mode normalises with the
/// batch's statistics but does not move its running ones) and dropout
/// draws from a copy of its generator.
///
/// Rows with an output shape: every layer of `forge::nn`, the blocks of
/// `forge::models`, every `Sequential` whose last element has one, and the
/// model itself. A derived or hand-written sublayer shows `-` unless its
/// `forward` calls [`record_output`]; rows are matched to the outputs
/// recorded during the pass by address and type, and a layer called more
/// than once shows its first call's shape.
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
/// assert_eq!(s.rows[1].output_shape, Some(vec![64, 32]));
/// assert_eq!((s.rows[1].bytes, s.rows[1].dtypes.as_str()), ((784 * 32 + 32) * 4, "float32"));
/// println!("{s}");
/// ```
#[track_caller]
pub fn summary<E, L>(model: &L, input_shape: &[usize]) -> Summary
where
    E: Float,
    L: Layer<E> + Forward<Tensor<E>, Output = Tensor<E>>,
{
    /// Rows (with each sublayer's address and full type name) and totals.
    struct Rows<E> {
        rows: Vec<(SummaryRow, usize, &'static str)>,
        /// Trainable, frozen and buffer elements, bytes.
        totals: (usize, usize, usize, usize),
        /// The model row's bytes and storage types.
        model_types: (usize, Vec<DType>),
        _e: std::marker::PhantomData<E>,
    }
    /// Which count a tensor adds to.
    #[derive(Clone, Copy, PartialEq)]
    enum Count {
        Trainable,
        Frozen,
        Buffer,
    }
    impl<E: Float> Rows<E> {
        fn add(&mut self, path: &str, n: usize, count: Count) {
            self.add_stored(path, n, count, n * std::mem::size_of::<E>(), E::DTYPE);
        }
        fn add_stored(&mut self, path: &str, n: usize, count: Count, bytes: usize, dtype: DType) {
            for (row, _, _) in self.rows.iter_mut() {
                let inside = !row.path.is_empty()
                    && path
                        .strip_prefix(row.path.as_str())
                        .is_some_and(|r| r.starts_with('.'));
                if inside {
                    match count {
                        Count::Trainable => row.trainable += n,
                        Count::Frozen => row.frozen += n,
                        Count::Buffer => row.buffers += n,
                    }
                    add_dtype(row, bytes, dtype);
                }
            }
            match count {
                Count::Trainable => self.totals.0 += n,
                Count::Frozen => self.totals.1 += n,
                Count::Buffer => self.totals.2 += n,
            }
            self.totals.3 += bytes;
            self.model_types.0 += bytes;
            if !self.model_types.1.contains(&dtype) {
                self.model_types.1.push(dtype);
            }
        }
    }
    impl<E: Float> TensorVisitor<E> for Rows<E> {
        fn visit(&mut self, path: &str, t: &Tensor<E>, kind: TensorKind) {
            let trainable = kind == TensorKind::Weight && t.is_tracked();
            let count = if trainable {
                Count::Trainable
            } else {
                Count::Frozen
            };
            self.add(path, t.numel(), count);
        }
        fn visit_buffer(&mut self, path: &str, t: &Tensor<E>) {
            self.add(path, t.numel(), Count::Buffer);
        }
        fn visit_int8(&mut self, path: &str, weight: &Int8Weight) {
            let n = weight.shape().iter().product();
            self.add_stored(path, n, Count::Frozen, weight.bytes(), DType::I8);
        }
        fn visit_fp8(&mut self, path: &str, weight: &crate::quant::Fp8Weight) {
            let [n, k] = weight.shape();
            let dtype = match weight.format() {
                crate::quant::Fp8Format::E4M3 => DType::F8E4M3,
                crate::quant::Fp8Format::E5M2 => DType::F8E5M2,
            };
            // the bytes and the per-row scales the kernel reads; the
            // scales as given are their own row
            let scales = weight.scales().len();
            self.add_stored(
                path,
                n * k,
                Count::Frozen,
                weight.bytes() - 4 * scales,
                dtype,
            );
            self.add_stored(
                &format!("{path}_scale"),
                scales,
                Count::Frozen,
                4 * scales,
                DType::F32,
            );
        }
        fn visit_layer(&mut self, path: &str, type_name: &'static str) {
            self.visit_layer_at(path, type_name, 0)
        }
        fn visit_layer_at(&mut self, path: &str, type_name: &'static str, address: usize) {
            let row = SummaryRow {
                path: path.to_string(),
                type_name: short_name(type_name),
                output_shape: None,
                trainable: 0,
                frozen: 0,
                buffers: 0,
                bytes: 0,
                dtypes: String::new(),
            };
            self.rows.push((row, address, type_name));
        }
    }
    let model_row = SummaryRow {
        path: String::new(),
        type_name: short_name(std::any::type_name::<L>()),
        output_shape: None,
        trainable: 0,
        frozen: 0,
        buffers: 0,
        bytes: 0,
        dtypes: String::new(),
    };
    let mut v = Rows {
        rows: vec![(model_row, address_of(model), std::any::type_name::<L>())],
        totals: (0, 0, 0, 0),
        model_types: (0, Vec::new()),
        _e: std::marker::PhantomData,
    };
    model.visit_tensors(&mut v);
    let (trainable, frozen, buffers, bytes) = v.totals;
    let model_dtypes = v
        .model_types
        .1
        .iter()
        .map(|d| d.torch_name())
        .collect::<Vec<_>>()
        .join("+");
    let recording = Recording::start();
    let output = crate::autograd::no_grad(|| model.forward(Tensor::zeros(input_shape)));
    let records = recording.take();
    drop(recording);
    // The i-th row with a given (address, type) takes the i-th record with
    // it, or the first when the layer ran more often than it has rows (a
    // layer called several times). Rows share a key only when zero-sized
    // layers of one type sit at one address; they run in traversal order.
    let mut taken = std::collections::HashMap::<(usize, &'static str), usize>::new();
    let mut rows = Vec::with_capacity(v.rows.len());
    for (mut row, address, type_name) in v.rows {
        let key = (address, type_name);
        let same: Vec<&Record> = records
            .iter()
            .filter(|r| (r.address, r.type_name) == key)
            .collect();
        let count = taken.entry(key).or_insert(0);
        let n_rows = *count;
        *count += 1;
        row.output_shape = same.get(n_rows).or(same.first()).map(|r| r.shape.clone());
        rows.push(row);
    }
    rows[0].trainable = trainable;
    rows[0].frozen = frozen;
    rows[0].buffers = buffers;
    rows[0].bytes = bytes;
    rows[0].dtypes = model_dtypes;
    rows[0].output_shape = Some(output.shape().to_vec());
    Summary {
        rows,
        input_shape: input_shape.to_vec(),
        output_shape: output.shape().to_vec(),
        trainable,
        frozen,
        buffers,
        bytes,
    }
}

/// Adds `bytes` of `dtype` to a row.
fn add_dtype(row: &mut SummaryRow, bytes: usize, dtype: DType) {
    row.bytes += bytes;
    let name = dtype.torch_name();
    if !row.dtypes.split('+').any(|d| d == name) {
        if !row.dtypes.is_empty() {
            row.dtypes.push('+');
        }
        row.dtypes.push_str(name);
    }
}

/// `[5, 16]`, or `-` for none.
fn shape_text(shape: &Option<Vec<usize>>) -> String {
    shape.as_ref().map_or("-".to_string(), |s| format!("{s:?}"))
}

impl fmt::Display for Summary {
    /// A table: layer (path and type), output shape, trainable and frozen
    /// parameters, buffer elements, then the input and output shapes and
    /// the totals.
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
        let shape_width = self
            .rows
            .iter()
            .map(|r| shape_text(&r.output_shape).len())
            .max()
            .unwrap_or(0)
            .max("Output shape".len());
        let dtype_width = self
            .rows
            .iter()
            .map(|r| r.dtypes.len())
            .max()
            .unwrap_or(0)
            .max("Dtype".len());
        let rule = "-".repeat(width + shape_width + dtype_width + 58);
        writeln!(f, "{rule}")?;
        writeln!(
            f,
            "{:<width$}  {:<shape_width$} {:>13} {:>13} {:>13}  {:<dtype_width$} {:>11}",
            "Layer", "Output shape", "Trainable", "Frozen", "Buffers", "Dtype", "Bytes"
        )?;
        writeln!(f, "{rule}")?;
        for r in &self.rows {
            writeln!(
                f,
                "{:<width$}  {:<shape_width$} {:>13} {:>13} {:>13}  {:<dtype_width$} {:>11}",
                name(r),
                shape_text(&r.output_shape),
                r.trainable,
                r.frozen,
                r.buffers,
                r.dtypes,
                r.bytes
            )?;
        }
        writeln!(f, "{rule}")?;
        writeln!(f, "Input shape: {:?}", self.input_shape)?;
        writeln!(f, "Output shape: {:?}", self.output_shape)?;
        writeln!(f, "Trainable params: {}", self.trainable)?;
        writeln!(f, "Frozen params: {}", self.frozen)?;
        writeln!(f, "Total params: {}", self.trainable + self.frozen)?;
        writeln!(f, "Buffers: {}", self.buffers)?;
        if self.bytes >= 1_000_000 {
            write!(f, "Params size: {:.2} MB", self.bytes as f64 / 1e6)
        } else {
            write!(f, "Params size: {:.2} KB", self.bytes as f64 / 1e3)
        }
    }
}
