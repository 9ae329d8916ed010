//! The layer-by-layer diff against a reference run (PyTorch, through
//! `scripts/torch_layer_diff.py`, or another forge model): every layer's
//! output, the loss, every parameter's gradient and, optionally, the
//! parameters after one optimizer step, each with its max absolute and
//! relative error, and the first one over a tolerance marked. The way to
//! check a port: the first layer that disagrees is where to look.
//!
//! The reference file is a safetensors file of `f32`/`f64` tensors (and
//! `i64` inputs) named
//!
//! | key | holds |
//! |---|---|
//! | `state.<param>` | the weights both runs start from (a state dict) |
//! | `input.<name>` | the inputs (metadata `inputs`: their names in call order) |
//! | `out:<path>` | the output of the layer at `path` (`out:` is the model's own); a layer's second call is `<path>#1` |
//! | `loss` | the loss |
//! | `grad.<param>` | the gradient of the loss for each parameter |
//! | `step.<param>` | each parameter after one optimizer step (optional; metadata `optimizer` says which) |
//!
//! with metadata `format` = [`FORMAT`], `outputs` (a JSON list of the
//! output paths in call order) and free-form `model`, `perturbed`, ...
//!
//! forge's side sees a layer's output through
//! [`record_output`](crate::nn::record_output), which every layer of
//! `forge::nn` and block of `forge::models` calls: a hand-written layer
//! shows up once its `forward` ends with it. Paths are matched by name, so
//! the two models must name their layers alike (a PyTorch module's name
//! in `named_modules()`, forge's path in the state dict without the
//! parameter's last segment).

use crate::autograd::Gradients;
use crate::error::{ForgeError, Result};
use crate::io::{read_safetensors, write_safetensors, AnyTensor};
use crate::nn::{capture_outputs, Layer};
use crate::tensor::{Float, Tensor};
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// The `format` metadata value of a reference file.
///
/// ```
/// assert_eq!(forge::tools::diff::FORMAT, "forge-layer-diff-1");
/// ```
pub const FORMAT: &str = "forge-layer-diff-1";

/// A reference run: weights, inputs, every layer's output, the loss, the
/// gradients and optionally one optimizer step (see the [module
/// docs](self) for the file's layout).
///
/// ```
/// use forge::prelude::*;
/// use forge::tools::diff::Reference;
/// let mut rng = Rng::new(0);
/// let model = sequential![Linear::<f64>::new(3, 4, &mut rng), Tanh, Linear::new(4, 1, &mut rng)];
/// let x = Tensor::<f64>::ones(&[2, 3]);
/// let r = Reference::capture(&model, || model.forward(x.clone()).square().mean());
/// assert_eq!(r.output_paths(), ["0", "1", "2", ""]);
/// assert_eq!(r.state_dict::<f64>().len(), 4);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Reference {
    floats: BTreeMap<String, Tensor<f64>>,
    ints: BTreeMap<String, Tensor<i64>>,
    outputs: Vec<String>,
    metadata: BTreeMap<String, String>,
}

impl Reference {
    /// Reads a reference file.
    ///
    /// # Errors
    /// [`ForgeError::Io`] / [`ForgeError::Format`] when the file cannot be
    /// read or parsed; [`ForgeError::Invalid`] when its `format` is not
    /// [`FORMAT`], its `outputs` metadata is not a JSON list of strings
    /// naming stored outputs, or a tensor is neither floating-point nor
    /// `i64`.
    ///
    /// ```
    /// use forge::prelude::*;
    /// use forge::tools::diff::Reference;
    /// let model = Linear::<f32>::new(2, 2, &mut Rng::new(0));
    /// let r = Reference::capture(&model, || model.forward(Tensor::ones(&[1, 2])).sum());
    /// let path = std::env::temp_dir().join("forge-doc-reference.safetensors");
    /// r.save(&path).unwrap();
    /// let back = Reference::load(&path).unwrap();
    /// assert_eq!(back.output_paths(), [""]);
    /// assert!(Reference::load("no-such-file").is_err());
    /// ```
    pub fn load(path: impl AsRef<Path>) -> Result<Reference> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let data = read_safetensors(path)?;
        if data.metadata.get("format").map(String::as_str) != Some(FORMAT) {
            return Err(ForgeError::invalid(
                name,
                format!("Reference::load: metadata `format` is not {FORMAT:?}"),
            ));
        }
        let outputs: Vec<String> = data
            .metadata
            .get("outputs")
            .and_then(|s| serde_json::from_str(s).ok())
            .ok_or_else(|| {
                ForgeError::invalid(
                    &name,
                    "Reference::load: metadata `outputs` is not a JSON list of strings",
                )
            })?;
        let mut r = Reference {
            outputs,
            metadata: data.metadata.clone(),
            ..Reference::default()
        };
        for (key, t) in data.tensors {
            match t {
                AnyTensor::I64(t) => {
                    r.ints.insert(key, t);
                }
                AnyTensor::F16(_) | AnyTensor::BF16(_) | AnyTensor::F32(_) | AnyTensor::F64(_) => {
                    r.floats.insert(key, t.to_float::<f64>());
                }
                other => {
                    return Err(ForgeError::invalid(
                        &name,
                        format!(
                            "Reference::load: tensor {key} has dtype {:?}, not a float or i64",
                            other.dtype()
                        ),
                    ))
                }
            }
        }
        if let Some(p) = r
            .outputs
            .iter()
            .find(|p| !r.floats.contains_key(&out_key(p)))
        {
            return Err(ForgeError::invalid(
                &name,
                format!("Reference::load: output {p:?} is listed but not stored"),
            ));
        }
        Ok(r)
    }

    /// Runs `run` (a forward pass of `model` returning the loss) and
    /// records what a reference file holds: the weights, every layer's
    /// output, the loss and the gradients (no inputs, no step). A forge
    /// model as the reference: two precisions, two versions of a layer.
    ///
    /// # Panics
    /// When `run` returns more than one element.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let model = Linear::<f64>::new(2, 1, &mut Rng::new(0));
    /// let r = forge::tools::diff::Reference::capture(&model, || model.forward(Tensor::ones(&[3, 2])).sum());
    /// assert_eq!(r.tensor("grad.bias").unwrap().to_vec(), vec![3.0]);
    /// ```
    pub fn capture<E: Float, L: Layer<E> + ?Sized>(
        model: &L,
        run: impl FnOnce() -> Tensor<E>,
    ) -> Reference {
        let (loss, outputs) = capture_outputs(model, run);
        let grads = loss.backward();
        let mut r = Reference::default();
        r.metadata.insert("format".into(), FORMAT.into());
        r.metadata
            .insert("model".into(), std::any::type_name::<L>().into());
        for (name, t) in model.state_dict() {
            r.floats.insert(format!("state.{name}"), t.cast());
        }
        for (name, p) in model.named_parameters() {
            if let Some(g) = grads.get(&p) {
                r.floats.insert(format!("grad.{name}"), g.cast());
            }
        }
        r.floats.insert("loss".into(), loss.detach().cast());
        for (path, t) in outputs {
            r.floats.insert(out_key(&path), t);
            r.outputs.push(path);
        }
        r
    }

    /// Writes the reference in the file layout [`load`](Self::load) reads
    /// (all floats as `f64`), atomically.
    ///
    /// # Errors
    /// [`ForgeError::Io`] when the file cannot be written.
    ///
    /// ```
    /// let r = forge::tools::diff::Reference::default();
    /// r.save(std::env::temp_dir().join("forge-doc-empty-reference.safetensors")).unwrap();
    /// ```
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let mut tensors: BTreeMap<String, AnyTensor> = BTreeMap::new();
        for (k, t) in &self.floats {
            tensors.insert(k.clone(), t.clone().into());
        }
        for (k, t) in &self.ints {
            tensors.insert(k.clone(), t.clone().into());
        }
        let mut meta = self.metadata.clone();
        meta.insert("format".into(), FORMAT.into());
        meta.insert(
            "outputs".into(),
            serde_json::to_string(&self.outputs).unwrap_or_default(),
        );
        write_safetensors(path, &tensors, &meta)
    }

    /// The weights to start from (`state.*`), as a state dict for
    /// [`Layer::load_state_dict`].
    ///
    /// ```
    /// use forge::prelude::*;
    /// let a = Linear::<f32>::new(2, 2, &mut Rng::new(0));
    /// let r = forge::tools::diff::Reference::capture(&a, || a.forward(Tensor::ones(&[1, 2])).sum());
    /// let mut b = Linear::<f32>::new(2, 2, &mut Rng::new(1));
    /// b.load_state_dict(&r.state_dict()).unwrap();
    /// assert_eq!(b.weight.to_vec(), a.weight.to_vec());
    /// ```
    pub fn state_dict<E: Float>(&self) -> BTreeMap<String, Tensor<E>> {
        self.floats
            .iter()
            .filter_map(|(k, t)| Some((k.strip_prefix("state.")?.to_string(), t.cast())))
            .collect()
    }

    /// A float input (`input.<name>`) in element type `E`.
    ///
    /// # Errors
    /// [`ForgeError::Invalid`] when the file has no float input `name`.
    ///
    /// ```
    /// let r = forge::tools::diff::Reference::default();
    /// assert!(r.input::<f32>("x").is_err());
    /// ```
    pub fn input<E: Float>(&self, name: &str) -> Result<Tensor<E>> {
        self.floats
            .get(&format!("input.{name}"))
            .map(|t| t.cast())
            .ok_or_else(|| {
                ForgeError::invalid(name, "Reference::input: no float input by this name")
            })
    }

    /// An integer input (`input.<name>`, `i64`): token ids, class labels.
    ///
    /// # Errors
    /// [`ForgeError::Invalid`] when the file has no `i64` input `name`.
    ///
    /// ```
    /// let r = forge::tools::diff::Reference::default();
    /// assert!(r.input_ids("idx").is_err());
    /// ```
    pub fn input_ids(&self, name: &str) -> Result<Tensor<i64>> {
        self.ints
            .get(&format!("input.{name}"))
            .cloned()
            .ok_or_else(|| {
                ForgeError::invalid(name, "Reference::input_ids: no i64 input by this name")
            })
    }

    /// A stored float tensor by its full key (`loss`, `grad.fc1.weight`,
    /// `out:fc1`, ...).
    ///
    /// ```
    /// assert!(forge::tools::diff::Reference::default().tensor("loss").is_none());
    /// ```
    pub fn tensor(&self, key: &str) -> Option<&Tensor<f64>> {
        self.floats.get(key)
    }

    /// A metadata value (`model`, `optimizer`, `perturbed`, ...).
    ///
    /// ```
    /// use forge::prelude::*;
    /// let m = Linear::<f32>::new(1, 1, &mut Rng::new(0));
    /// let r = forge::tools::diff::Reference::capture(&m, || m.forward(Tensor::ones(&[1, 1])).sum());
    /// assert_eq!(r.meta("format"), Some(forge::tools::diff::FORMAT));
    /// ```
    pub fn meta(&self, key: &str) -> Option<&str> {
        self.metadata.get(key).map(String::as_str)
    }

    /// The paths of the recorded layer outputs, in call order (`""` is
    /// the model's own output).
    ///
    /// ```
    /// assert!(forge::tools::diff::Reference::default().output_paths().is_empty());
    /// ```
    pub fn output_paths(&self) -> &[String] {
        &self.outputs
    }

    /// Whether the file holds parameters after an optimizer step
    /// (`step.*`).
    ///
    /// ```
    /// assert!(!forge::tools::diff::Reference::default().has_step());
    /// ```
    pub fn has_step(&self) -> bool {
        self.floats.keys().any(|k| k.starts_with("step."))
    }
}

/// The key of a layer's output in a reference file.
fn out_key(path: &str) -> String {
    format!("out:{path}")
}

/// What a [`Row`] compares.
///
/// ```
/// use forge::tools::diff::Kind;
/// assert!(Kind::Output < Kind::Loss && Kind::Grad < Kind::Step);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// A layer's output.
    Output,
    /// The loss.
    Loss,
    /// A parameter's gradient.
    Grad,
    /// A parameter after the optimizer step.
    Step,
}

impl fmt::Display for Kind {
    /// `output`, `loss`, `grad` or `step`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Output => "output",
            Kind::Loss => "loss",
            Kind::Grad => "grad",
            Kind::Step => "step",
        })
    }
}

/// One compared tensor.
///
/// ```
/// use forge::tools::diff::{Kind, Row};
/// let r = Row { kind: Kind::Loss, path: String::new(), shape: vec![], max_abs: 1e-3, max_rel: 1e-3 };
/// assert!(r.is_over(1e-4) && !r.is_over(1e-2));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Output, loss, gradient or step.
    pub kind: Kind,
    /// The layer path (outputs, `""` for the model's output) or parameter
    /// path (gradients, steps).
    pub path: String,
    /// The reference's shape.
    pub shape: Vec<usize>,
    /// `max |forge - reference|` (infinite when the shapes differ).
    pub max_abs: f64,
    /// `max_abs / max |reference|`: the error relative to the tensor's
    /// scale (0 when both are 0; NaN values count as infinite error).
    pub max_rel: f64,
}

impl Row {
    /// Whether the relative error exceeds `tolerance`.
    ///
    /// ```
    /// use forge::tools::diff::{Kind, Row};
    /// let r = Row { kind: Kind::Grad, path: "w".into(), shape: vec![1], max_abs: f64::INFINITY, max_rel: f64::INFINITY };
    /// assert!(r.is_over(1e9));
    /// ```
    pub fn is_over(&self, tolerance: f64) -> bool {
        self.max_rel.is_nan() || self.max_rel > tolerance
    }
}

/// The comparison's result: one [`Row`] per output (forward order), the
/// loss, one per gradient (in backward order: the last layer's first), and
/// one per stepped parameter once [`add_step`](Self::add_step) ran.
/// `Display` prints it as a table with the first row over the tolerance
/// marked.
///
/// ```
/// use forge::prelude::*;
/// use forge::tools::diff::{compare, Reference};
/// let mut rng = Rng::new(0);
/// let a = sequential![Linear::<f64>::new(3, 4, &mut rng), Tanh, Linear::new(4, 2, &mut rng)];
/// let x = Tensor::<f64>::ones(&[2, 3]);
/// let reference = Reference::capture(&a, || a.forward(x.clone()).square().mean());
/// // The "port": the same weights but one bias off by 1e-3.
/// let mut b = sequential![Linear::<f64>::new(3, 4, &mut rng), Tanh, Linear::new(4, 2, &mut rng)];
/// let mut weights = reference.state_dict();
/// let off = weights["2.bias"].add_scalar(1e-3);
/// weights.insert("2.bias".into(), off);
/// b.load_state_dict(&weights).unwrap();
/// let (report, _) = compare(&b, &reference, 1e-9, || b.forward(x.clone()).square().mean());
/// assert_eq!(report.first_over().unwrap().path, "2");
/// println!("{report}");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The compared tensors.
    pub rows: Vec<Row>,
    /// The relative error above which a row is marked.
    pub tolerance: f64,
    /// Outputs forge recorded that the reference lacks (layers the other
    /// model does not name alike).
    pub only_forge: Vec<String>,
    /// Outputs and gradients the reference holds that forge did not
    /// produce (a PyTorch activation module, an unused parameter).
    pub only_reference: Vec<String>,
}

impl Report {
    /// The first row over the tolerance: the first layer whose output
    /// differs, else the loss, else the gradient computed first that
    /// differs (a backward rule), else the first stepped parameter.
    ///
    /// ```
    /// let r = forge::tools::diff::Report { rows: vec![], tolerance: 1e-6, only_forge: vec![], only_reference: vec![] };
    /// assert!(r.first_over().is_none());
    /// ```
    pub fn first_over(&self) -> Option<&Row> {
        self.rows.iter().find(|r| r.is_over(self.tolerance))
    }

    /// Compares `model`'s parameters (after the caller's optimizer step)
    /// with the reference's `step.*` tensors, adding one row each.
    ///
    /// ```
    /// use forge::prelude::*;
    /// use forge::tools::diff::{compare, Reference};
    /// let m = Linear::<f64>::new(2, 1, &mut Rng::new(0));
    /// let r = Reference::capture(&m, || m.forward(Tensor::ones(&[1, 2])).sum());
    /// let (mut report, _) = compare(&m, &r, 1e-12, || m.forward(Tensor::ones(&[1, 2])).sum());
    /// report.add_step(&m, &r); // r has no step.*: nothing added
    /// assert!(report.first_over().is_none());
    /// ```
    pub fn add_step<E: Float, L: Layer<E> + ?Sized>(&mut self, model: &L, reference: &Reference) {
        for (name, p) in model.named_parameters() {
            let key = format!("step.{name}");
            if let Some(expected) = reference.tensor(&key) {
                self.rows
                    .push(row(Kind::Step, name, &p.detach().cast(), expected));
            }
        }
    }
}

/// `max |a - e|` and that over `max |e|`.
fn errors(actual: &Tensor<f64>, expected: &Tensor<f64>) -> (f64, f64) {
    if actual.shape() != expected.shape() {
        return (f64::INFINITY, f64::INFINITY);
    }
    let mut abs = 0.0f64;
    for (a, e) in actual.as_slice().iter().zip(expected.as_slice()) {
        let d = (a - e).abs();
        abs = if d.is_nan() {
            f64::INFINITY
        } else {
            abs.max(d)
        };
    }
    let scale = expected
        .as_slice()
        .iter()
        .fold(0.0f64, |m, x| m.max(x.abs()));
    let rel = if abs == 0.0 { 0.0 } else { abs / scale };
    (abs, rel)
}

fn row(kind: Kind, path: String, actual: &Tensor<f64>, expected: &Tensor<f64>) -> Row {
    let (max_abs, max_rel) = errors(actual, expected);
    Row {
        kind,
        path,
        shape: expected.shape().to_vec(),
        max_abs,
        max_rel,
    }
}

/// Runs `run` (a forward pass of `model` returning the loss, the model
/// loaded with [`Reference::state_dict`] and given the reference's
/// inputs), backward from the loss, and compares every layer's output, the
/// loss and every gradient with `reference`. Returns the [`Report`] and the
/// gradients (for an optimizer step, then [`Report::add_step`]).
///
/// `tolerance` bounds the relative error `max |forge - reference| / max
/// |reference|` of each tensor: around 1e-5 for a port run in `f32` against
/// PyTorch in `f32` (rounding in different summation orders grows with
/// depth), around 1e-10 in `f64`.
///
/// # Panics
/// When `run` returns more than one element.
///
/// ```
/// use forge::prelude::*;
/// use forge::tools::diff::{compare, Kind, Reference};
/// let m = Linear::<f64>::new(2, 3, &mut Rng::new(0));
/// let r = Reference::capture(&m, || m.forward(Tensor::ones(&[1, 2])).sum());
/// let (report, grads) = compare(&m, &r, 1e-12, || m.forward(Tensor::ones(&[1, 2])).sum());
/// assert!(report.first_over().is_none());
/// let kinds: Vec<Kind> = report.rows.iter().map(|r| r.kind).collect();
/// assert_eq!(kinds, [Kind::Output, Kind::Loss, Kind::Grad, Kind::Grad]);
/// assert_eq!(grads.len(), 2);
/// ```
pub fn compare<E: Float, L: Layer<E> + ?Sized>(
    model: &L,
    reference: &Reference,
    tolerance: f64,
    run: impl FnOnce() -> Tensor<E>,
) -> (Report, Gradients<E>) {
    let (loss, outputs) = capture_outputs(model, run);
    let grads = loss.backward();
    let mut report = Report {
        rows: Vec::new(),
        tolerance,
        only_forge: Vec::new(),
        only_reference: Vec::new(),
    };
    let mut seen = std::collections::BTreeSet::new();
    for (path, actual) in outputs {
        match reference.tensor(&out_key(&path)) {
            Some(expected) => report
                .rows
                .push(row(Kind::Output, path.clone(), &actual, expected)),
            None => report.only_forge.push(path.clone()),
        }
        seen.insert(path);
    }
    report.only_reference.extend(
        reference
            .outputs
            .iter()
            .filter(|p| !seen.contains(*p))
            .cloned(),
    );
    if let Some(expected) = reference.tensor("loss") {
        report.rows.push(row(
            Kind::Loss,
            String::new(),
            &loss.detach().cast(),
            expected,
        ));
    }
    let params = model.named_parameters();
    for (name, p) in params.iter().rev() {
        let key = format!("grad.{name}");
        match (reference.tensor(&key), grads.get(p)) {
            (Some(expected), Some(g)) => {
                report
                    .rows
                    .push(row(Kind::Grad, name.clone(), &g.cast(), expected))
            }
            (Some(expected), None) => report.rows.push(row(
                Kind::Grad,
                name.clone(),
                &Tensor::zeros(p.shape()),
                expected,
            )),
            (None, _) => {}
        }
    }
    let names: std::collections::BTreeSet<&str> = params.iter().map(|(n, _)| n.as_str()).collect();
    report.only_reference.extend(
        reference
            .floats
            .keys()
            .filter_map(|k| k.strip_prefix("grad."))
            .filter(|n| !names.contains(n))
            .map(|n| format!("grad.{n}")),
    );
    (report, grads)
}

impl fmt::Display for Report {
    /// A table: kind, path, shape, max abs and max rel error, the first
    /// row over the tolerance marked `<-- first over tolerance`, then the
    /// unmatched names.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let label = |r: &Row| {
            if r.path.is_empty() {
                "(model)".to_string()
            } else {
                r.path.clone()
            }
        };
        let width = self
            .rows
            .iter()
            .map(|r| label(r).len())
            .max()
            .unwrap_or(4)
            .max(4);
        writeln!(
            f,
            "{:<6}  {:<width$}  {:<18} {:>10} {:>10}",
            "kind", "path", "shape", "max abs", "max rel"
        )?;
        writeln!(f, "{}", "-".repeat(width + 51))?;
        let first = self.first_over().map(|r| r as *const Row);
        for r in &self.rows {
            let mark = if first == Some(r as *const Row) {
                "  <-- first over tolerance"
            } else if r.is_over(self.tolerance) {
                "  *"
            } else {
                ""
            };
            writeln!(
                f,
                "{:<6}  {:<width$}  {:<18} {:>10.3e} {:>10.3e}{mark}",
                r.kind.to_string(),
                label(r),
                format!("{:?}", r.shape),
                r.max_abs,
                r.max_rel
            )?;
        }
        let over = self
            .rows
            .iter()
            .filter(|r| r.is_over(self.tolerance))
            .count();
        write!(
            f,
            "{over} of {} over the relative tolerance {:e}",
            self.rows.len(),
            self.tolerance
        )?;
        if let Some(r) = self.first_over() {
            write!(f, "; first: {} {}", r.kind, label(r))?;
        }
        if !self.only_forge.is_empty() {
            write!(f, "\nonly in forge: {}", self.only_forge.join(", "))?;
        }
        if !self.only_reference.is_empty() {
            write!(
                f,
                "\nonly in the reference: {}",
                self.only_reference.join(", ")
            )?;
        }
        Ok(())
    }
}
