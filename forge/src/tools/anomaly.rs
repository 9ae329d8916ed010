//! Anomaly detection: stop at the first op whose output, or whose backward
//! rule's gradient, holds a NaN or an infinity, and say which op it was,
//! where it was called, its input shapes and which inputs were already
//! non-finite (PyTorch's `torch.autograd.detect_anomaly`, which only
//! watches the backward pass).

use super::hooks;
use crate::autograd::{BackwardCtx, Node};
use crate::tensor::{Device, Element, Tensor};
use std::cell::Cell;
use std::fmt;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe, Location};
use std::sync::atomic::{AtomicBool, Ordering};

/// The process-wide switch ([`set_detect_anomaly`]).
static GLOBAL: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// How many [`detect_anomaly`] calls are running on this thread.
    static SCOPES: Cell<u32> = const { Cell::new(0) };
}

/// Whether anomaly detection is on for this thread.
pub(crate) fn enabled() -> bool {
    GLOBAL.load(Ordering::Relaxed) || SCOPES.with(|s| s.get() > 0)
}

/// Which pass found the non-finite value.
///
/// ```
/// let x = forge::Tensor::<f32>::from_vec(vec![-1.0], &[1]).requires_grad();
/// let err = forge::tools::detect_anomaly(|| x.sqrt()).unwrap_err();
/// assert_eq!(err.pass, forge::tools::Pass::Forward);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// The op's own output.
    Forward,
    /// A gradient returned by the op's backward rule.
    Backward,
}

/// Where an op was called.
///
/// ```
/// let site = forge::tools::CallSite { file: "src/main.rs", line: 3, column: 9, inside_forge: false };
/// assert_eq!(site.to_string(), "src/main.rs:3:9");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallSite {
    /// The source file (as `file!()` gives it).
    pub file: &'static str,
    /// The line, from 1.
    pub line: u32,
    /// The column, from 1.
    pub column: u32,
    /// True when the line is inside forge itself: the public op that was
    /// called does not pass its caller's location down (it lacks
    /// `#[track_caller]` somewhere between the entry point and the tape),
    /// or the op was called by another forge function (a layer's forward).
    pub inside_forge: bool,
}

impl CallSite {
    pub(crate) fn of(loc: &'static Location<'static>) -> Self {
        CallSite {
            file: loc.file(),
            line: loc.line(),
            column: loc.column(),
            inside_forge: is_forge_file(loc.file()),
        }
    }
}

impl fmt::Display for CallSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// Whether `file` is one of forge's own sources (same folder prefix as
/// this file, whatever path cargo compiled forge from).
pub(crate) fn is_forge_file(file: &str) -> bool {
    let here = file!();
    let root = here
        .strip_suffix("tools/anomaly.rs")
        .or_else(|| here.strip_suffix("tools\\anomaly.rs"))
        .unwrap_or(here);
    file.starts_with(root)
}

/// The first non-finite value found by anomaly detection, with what is
/// known of the op that made it. [`detect_anomaly`] returns it; with the
/// process-wide switch ([`set_detect_anomaly`]) and no enclosing
/// [`detect_anomaly`], the op panics with its [`Display`](fmt::Display)
/// text instead.
///
/// ```
/// use forge::Tensor;
/// let x = Tensor::<f32>::from_vec(vec![1.0, -1.0], &[2]).requires_grad();
/// let err = forge::tools::detect_anomaly(|| x.log()).unwrap_err();
/// assert_eq!(err.op, "log");
/// assert_eq!(err.index, 1);
/// assert!(err.value.is_nan());
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Anomaly {
    /// The op's name as recorded on the tape (`log`, `matmul`, ...).
    pub op: &'static str,
    /// Whether the op's output or a gradient of its backward rule was
    /// non-finite.
    pub pass: Pass,
    /// Where the op was called; `None` when unknown (a backward node
    /// recorded before forge kept call sites cannot occur, so this is
    /// `None` only for hand-built nodes without a site).
    pub site: Option<CallSite>,
    /// The shapes of the op's inputs, in order.
    pub input_shapes: Vec<Vec<usize>>,
    /// The inputs that already held a NaN or an infinity (indices into
    /// `input_shapes`): when this is not empty the op only passed on a
    /// value made elsewhere (a leaf, or an op that ran with detection off).
    pub nonfinite_inputs: Vec<usize>,
    /// Backward only: the input whose gradient was non-finite.
    pub grad_input: Option<usize>,
    /// Backward only: whether the gradient flowing into the op was itself
    /// non-finite.
    pub upstream_nonfinite: bool,
    /// The shape of the non-finite tensor (output or gradient).
    pub shape: Vec<usize>,
    /// The flat index of the first non-finite element.
    pub index: usize,
    /// That element (NaN or an infinity), as `f64`.
    pub value: f64,
}

impl fmt::Display for Anomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.pass, self.grad_input) {
            (Pass::Forward, _) | (Pass::Backward, None) => write!(
                f,
                "anomaly: the {} of `{}` produced {} at index {} of a tensor of shape {:?}",
                if self.pass == Pass::Forward { "forward" } else { "backward" },
                self.op,
                self.value,
                self.index,
                self.shape
            )?,
            (Pass::Backward, Some(i)) => write!(
                f,
                "anomaly: the backward of `{}` produced {} at index {} of the gradient of input {i} (shape {:?})",
                self.op, self.value, self.index, self.shape
            )?,
        }
        match &self.site {
            Some(s) if s.inside_forge => write!(
                f,
                "; the op was called at {s} (inside forge: the caller's line was not passed down)"
            )?,
            Some(s) => write!(f, "; the op was called at {s}")?,
            None => write!(f, "; call site unknown")?,
        }
        write!(f, "; input shapes {:?}", self.input_shapes)?;
        if self.nonfinite_inputs.is_empty() {
            write!(f, "; every input was finite")?;
        } else {
            write!(
                f,
                "; inputs {:?} were already non-finite",
                self.nonfinite_inputs
            )?;
        }
        if self.upstream_nonfinite {
            write!(f, "; the gradient flowing into it was already non-finite")?;
        }
        Ok(())
    }
}

impl std::error::Error for Anomaly {}

/// The first NaN or infinity of `xs`: its index and value.
pub(crate) fn first_nonfinite<E: Element>(xs: &[E]) -> Option<(usize, f64)> {
    xs.iter()
        .map(|x| x.to_f64())
        .enumerate()
        .find(|(_, v)| !v.is_finite())
}

fn nonfinite_inputs<E: Element, D: Device>(inputs: &[Tensor<E, D>]) -> Vec<usize> {
    inputs
        .iter()
        .enumerate()
        .filter(|(_, t)| first_nonfinite(t.as_slice()).is_some())
        .map(|(i, _)| i)
        .collect()
}

/// Stops the computation with `a`: unwinds to the enclosing
/// [`detect_anomaly`] (without running the panic hook), or panics with the
/// report when only the process-wide switch is on.
fn raise(a: Anomaly) -> ! {
    if SCOPES.with(|s| s.get() > 0) {
        resume_unwind(Box::new(a))
    }
    panic!("{a}")
}

pub(crate) fn check_forward<E: Element, D: Device>(
    name: &'static str,
    out: &Tensor<E, D>,
    inputs: &[Tensor<E, D>],
    origin: &'static Location<'static>,
) {
    let Some((index, value)) = first_nonfinite(out.as_slice()) else {
        return;
    };
    raise(Anomaly {
        op: name,
        pass: Pass::Forward,
        site: Some(CallSite::of(origin)),
        input_shapes: inputs.iter().map(|t| t.shape().to_vec()).collect(),
        nonfinite_inputs: nonfinite_inputs(inputs),
        grad_input: None,
        upstream_nonfinite: false,
        shape: out.shape().to_vec(),
        index,
        value,
    })
}

pub(crate) fn check_backward<E: Element, D: Device>(
    node: &Node<E, D>,
    ctx: &BackwardCtx<'_, E, D>,
    grads: &[Option<Tensor<E, D>>],
) {
    for (i, g) in grads.iter().enumerate() {
        let Some(g) = g else { continue };
        let Some((index, value)) = first_nonfinite(g.as_slice()) else {
            continue;
        };
        raise(Anomaly {
            op: node.name,
            pass: Pass::Backward,
            site: node.origin.map(CallSite::of),
            input_shapes: node.inputs.iter().map(|t| t.shape().to_vec()).collect(),
            nonfinite_inputs: nonfinite_inputs(&node.inputs),
            grad_input: Some(i),
            upstream_nonfinite: first_nonfinite(ctx.grad.as_slice()).is_some(),
            shape: g.shape().to_vec(),
            index,
            value,
        })
    }
}

/// Counts one [`detect_anomaly`] scope on this thread until dropped.
struct Scope;

impl Scope {
    fn enter() -> Self {
        SCOPES.with(|s| s.set(s.get() + 1));
        hooks::acquire();
        Scope
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        hooks::release();
        SCOPES.with(|s| s.set(s.get() - 1));
    }
}

/// Runs `f` with anomaly detection on for this thread: every op's output
/// and every backward rule's gradients are checked, and the first NaN or
/// infinity stops `f` and comes back as an [`Anomaly`] naming the op, the
/// line that called it, its input shapes and which inputs were already
/// non-finite.
///
/// Checking reads every value an op makes, so a step runs slower; with
/// detection off, each op pays one relaxed atomic load.
///
/// # Errors
/// The first [`Anomaly`] (boxed: it is large). Tensors made inside `f` before it are dropped
/// as the stack unwinds; other panics inside `f` are passed on unchanged.
///
/// ```
/// use forge::Tensor;
/// use forge::tools::{detect_anomaly, Pass};
/// let w = Tensor::<f64>::from_vec(vec![0.5, 0.0], &[2]).requires_grad();
/// // sqrt(0) is fine forward, but its gradient 1 / (2 sqrt(0)) is infinite.
/// let err = detect_anomaly(|| w.sqrt().sum().backward()).map(drop).unwrap_err();
/// assert_eq!((err.op, err.pass), ("sqrt", Pass::Backward));
/// assert!(err.site.unwrap().file.ends_with(".rs"));
/// let ok = detect_anomaly(|| (&w * 2.0).sum().item()).unwrap();
/// assert_eq!(ok, 1.0);
/// ```
pub fn detect_anomaly<R>(f: impl FnOnce() -> R) -> Result<R, Box<Anomaly>> {
    let _scope = Scope::enter();
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => Ok(r),
        Err(payload) => match payload.downcast::<Anomaly>() {
            Ok(a) => Err(a),
            Err(other) => resume_unwind(other),
        },
    }
}

/// Turns anomaly detection on or off for the whole process (every thread),
/// as `torch.autograd.set_detect_anomaly`; for a whole training run. An op
/// that finds a non-finite value panics with the [`Anomaly`] text, unless
/// a [`detect_anomaly`] call encloses it (which then returns it).
///
/// Not run here: the switch is process-wide, and doc tests share a
/// process.
///
/// ```no_run
/// use forge::tools::{is_anomaly_enabled, set_detect_anomaly};
/// set_detect_anomaly(true);
/// assert!(is_anomaly_enabled());
/// set_detect_anomaly(false);
/// ```
pub fn set_detect_anomaly(on: bool) {
    let was = GLOBAL.swap(on, Ordering::Relaxed);
    match (was, on) {
        (false, true) => hooks::acquire(),
        (true, false) => hooks::release(),
        _ => {}
    }
}

/// Whether anomaly detection is on for this thread (process-wide switch
/// or an enclosing [`detect_anomaly`]).
///
/// ```
/// assert!(forge::tools::detect_anomaly(forge::tools::is_anomaly_enabled).unwrap());
/// ```
pub fn is_anomaly_enabled() -> bool {
    enabled()
}
