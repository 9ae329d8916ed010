//! The profiler: every op's forward and every backward rule, with calls,
//! time, FLOPs (where the op's shapes tell them) and bytes read and
//! written; a table grouped by op and a Chrome trace (Perfetto,
//! `chrome://tracing`) with one track per thread.
//!
//! Timing uses the two hooks the tools share. A backward rule is timed
//! from its start to its end (the ops it calls are part of it). A forward
//! op is timed from the end of the previous event on its thread (the
//! previous op or rule, or the start of profiling) to its own end, since
//! the tape sees an op only when it records its result: code of yours that
//! runs between two ops is counted in the second. Keep data loading out of
//! the profiled closure.
//!
//! Each event also carries the layer path it ran under (see
//! [`layer_scope`](super::layer_scope); a backward rule takes its forward
//! op's), the buffers its thread took from the memory pool in that time
//! (and how many of those were fresh from the OS), how many of its
//! parallel loops went to the executor's worker threads, and the executor's
//! thread count. [`Profile::layers`] sums the events by layer path: *self*
//! time is the ops run directly under a path, *total* adds its sublayers'.

use super::profile_data::{Event, Phase, Profile};
use super::switch;
use crate::tensor::{Device, Element, Tensor};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::panic::Location;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// Sessions receiving events: the calling thread's [`profile`] scope, or
/// the process-wide one ([`Profiler::start`]).
static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);
static GLOBAL_SESSION: AtomicU64 = AtomicU64::new(0);
static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

/// One session's events, and the layer path of every node its forward ops
/// recorded (by node id), for their backward rules.
#[derive(Default)]
struct Session {
    events: Vec<Event>,
    layers: HashMap<u64, Option<String>>,
}

fn sink() -> &'static Mutex<BTreeMap<u64, Session>> {
    static SINK: OnceLock<Mutex<BTreeMap<u64, Session>>> = OnceLock::new();
    SINK.get_or_init(|| Mutex::new(BTreeMap::new()))
}

/// The layer path of the op being recorded on this thread: the one
/// function to re-point when the layer context moves.
fn layer_path() -> Option<String> {
    super::scope::current_path()
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

thread_local! {
    static SESSION: Cell<u64> = const { Cell::new(0) };
    static THREAD: Cell<u64> = const { Cell::new(0) };
    /// End of the previous event on this thread (ns since the epoch).
    static LAST: Cell<u64> = const { Cell::new(0) };
    /// The pool and dispatch counters at that moment.
    static LAST_COUNTS: Cell<Counts> = const { Cell::new(Counts { takes: 0, fresh: 0, dispatches: 0 }) };
    /// The layer path of the last forward op seen on this thread.
    static LAST_LAYER: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// This thread's running pool and dispatch counters.
#[derive(Clone, Copy)]
struct Counts {
    takes: u64,
    fresh: u64,
    dispatches: u64,
}

fn counts() -> Counts {
    let (takes, fresh) = crate::cpu::memory::thread_takes();
    Counts {
        takes,
        fresh,
        dispatches: crate::cpu::threads::pool_dispatches(),
    }
}

/// The counters' growth since the previous event on this thread (whose
/// snapshot becomes the current one).
fn counts_since_last() -> Counts {
    let now = counts();
    let last = LAST_COUNTS.with(|c| c.replace(now));
    Counts {
        takes: now.takes.saturating_sub(last.takes),
        fresh: now.fresh.saturating_sub(last.fresh),
        dispatches: now.dispatches.saturating_sub(last.dispatches),
    }
}

/// Marks the start of profiling on this thread.
fn reset_thread_marks() {
    LAST.with(|l| l.set(now_ns()));
    LAST_COUNTS.with(|c| c.set(counts()));
}

fn now_ns() -> u64 {
    epoch().elapsed().as_nanos() as u64
}

fn thread_index() -> u64 {
    THREAD.with(|t| {
        if t.get() == 0 {
            t.set(NEXT_THREAD.fetch_add(1, Ordering::Relaxed));
        }
        t.get()
    })
}

/// The session this thread's events go to, if any.
pub(crate) fn session() -> Option<u64> {
    let s = SESSION.with(Cell::get);
    let s = if s != 0 {
        s
    } else {
        GLOBAL_SESSION.load(Ordering::Relaxed)
    };
    (s != 0).then_some(s)
}

fn push(session: u64, e: Event) {
    let mut sink = sink().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(s) = sink.get_mut(&session) {
        s.events.push(e);
    }
}

/// Notes the layer of node `id`, the op last seen on this thread.
pub(crate) fn on_node(session: u64, id: u64) {
    let layer = LAST_LAYER.with(|l| l.borrow().clone());
    let mut sink = sink().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(s) = sink.get_mut(&session) {
        s.layers.insert(id, layer);
    }
}

fn bytes_of<E: Element, D: Device>(ts: &[Tensor<E, D>]) -> u64 {
    ts.iter()
        .map(|t| (t.numel() * std::mem::size_of::<E>()) as u64)
        .sum()
}

/// FLOPs of an op from its name and shapes, where known.
fn flops_of(op: &str, out: &[usize], inputs: &[&[usize]]) -> Option<u64> {
    let n: u64 = out.iter().product::<usize>() as u64;
    match op {
        // out [.., m, n] from a [.., m, k]: k multiply-adds per output.
        "matmul" | "matmul_t" | "linear" => {
            let k = *inputs.first()?.last()? as u64;
            Some(2 * n * k)
        }
        "add" | "sub" | "mul" | "div" | "neg" | "add_scalar" | "mul_scalar" | "relu" | "square"
        | "exp" | "log" | "tanh" | "sigmoid" | "sqrt" | "abs" => Some(n),
        _ => None,
    }
}

pub(crate) fn on_forward<E: Element, D: Device>(
    session: u64,
    name: &'static str,
    out: &Tensor<E, D>,
    inputs: &[Tensor<E, D>],
    origin: &'static Location<'static>,
) {
    let end = now_ns();
    let start = LAST.with(|l| l.replace(end)).min(end);
    let c = counts_since_last();
    let layer = layer_path();
    LAST_LAYER.with(|l| *l.borrow_mut() = layer.clone());
    let shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape()).collect();
    push(
        session,
        Event {
            op: name,
            phase: Phase::Forward,
            thread: thread_index(),
            start_ns: start,
            dur_ns: end - start,
            flops: flops_of(name, out.shape(), &shapes),
            bytes: bytes_of(inputs) + bytes_of(std::slice::from_ref(out)),
            site: Some(origin),
            layer,
            pool_takes: c.takes,
            pool_fresh: c.fresh,
            dispatches: c.dispatches,
            threads: crate::cpu::threads::num_threads(),
        },
    );
}

/// Times a backward rule; returns its result.
#[allow(clippy::too_many_arguments)]
pub(crate) fn on_backward<E: Element, D: Device>(
    session: u64,
    node: u64,
    name: &'static str,
    origin: Option<&'static Location<'static>>,
    inputs: &[Tensor<E, D>],
    grad: &Tensor<E, D>,
    rule: impl FnOnce() -> Vec<Option<Tensor<E, D>>>,
) -> Vec<Option<Tensor<E, D>>> {
    let start = now_ns();
    LAST_COUNTS.with(|c| c.set(counts()));
    let grads = rule();
    let end = now_ns();
    LAST.with(|l| l.set(end));
    let c = counts_since_last();
    let layer = {
        let sink = sink().lock().unwrap_or_else(|p| p.into_inner());
        sink.get(&session)
            .and_then(|s| s.layers.get(&node).cloned())
            .flatten()
    };
    let returned: u64 = grads
        .iter()
        .flatten()
        .map(|g| (g.numel() * std::mem::size_of::<E>()) as u64)
        .sum();
    let shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape()).collect();
    push(
        session,
        Event {
            op: name,
            phase: Phase::Backward,
            thread: thread_index(),
            start_ns: start,
            dur_ns: end - start,
            // A matmul's backward is two products of the forward's size.
            flops: flops_of(name, grad.shape(), &shapes).map(|f| 2 * f),
            bytes: bytes_of(inputs) + bytes_of(std::slice::from_ref(grad)) + returned,
            site: origin,
            layer,
            pool_takes: c.takes,
            pool_fresh: c.fresh,
            dispatches: c.dispatches,
            threads: crate::cpu::threads::num_threads(),
        },
    );
    grads
}

/// Opens a session receiving events; returns its id.
fn open() -> u64 {
    let id = NEXT_SESSION.fetch_add(1, Ordering::Relaxed);
    sink()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(id, Session::default());
    switch::acquire();
    id
}

/// Closes a session; returns its events in the order recorded.
fn close(id: u64) -> Profile {
    switch::release();
    let events = sink()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&id)
        .map(|s| s.events)
        .unwrap_or_default();
    Profile { events }
}

/// Runs `f` with the profiler on for this thread and returns its value
/// and the [`Profile`]: every op `f` runs and every backward rule it
/// runs, in order.
///
/// ```
/// use forge::Tensor;
/// let w = Tensor::<f32>::ones(&[64, 64]).requires_grad();
/// let (_, prof) = forge::tools::profile(|| w.matmul(&w).relu().sum().backward());
/// assert_eq!(prof.calls("matmul", forge::tools::Phase::Forward), 1);
/// assert_eq!(prof.calls("matmul", forge::tools::Phase::Backward), 1);
/// println!("{}", prof.table());
/// ```
pub fn profile<R>(f: impl FnOnce() -> R) -> (R, Profile) {
    struct Restore(u64, u64);
    impl Drop for Restore {
        fn drop(&mut self) {
            SESSION.with(|s| s.set(self.1));
            // The session's events are dropped if f panicked.
            if std::thread::panicking() {
                let _ = close(self.0);
            }
        }
    }
    let id = open();
    let prev = SESSION.with(|s| s.replace(id));
    reset_thread_marks();
    let guard = Restore(id, prev);
    let r = f();
    drop(guard);
    (r, close(id))
}

/// The process-wide profiler: every thread's ops, until [`stop`](Self::stop)
/// (threads inside a [`profile`] call report to that call instead).
///
/// ```
/// use forge::tools::Profiler;
/// let p = Profiler::start();
/// let x = forge::Tensor::<f64>::ones(&[3]).requires_grad();
/// let _ = x.exp().sum();
/// let prof = p.stop();
/// assert!(prof.events().iter().any(|e| e.op == "exp"));
/// ```
pub struct Profiler {
    id: u64,
}

impl Profiler {
    /// Starts recording every thread's ops.
    ///
    /// # Panics
    /// When a process-wide profiler is already running.
    ///
    /// ```
    /// let p = forge::tools::Profiler::start();
    /// p.stop();
    /// ```
    pub fn start() -> Profiler {
        let id = open();
        let was = GLOBAL_SESSION.compare_exchange(0, id, Ordering::Relaxed, Ordering::Relaxed);
        if was.is_err() {
            let _ = close(id);
            panic!("Profiler::start: a process-wide profiler is already running");
        }
        reset_thread_marks();
        Profiler { id }
    }

    /// Stops recording and returns what was recorded.
    ///
    /// ```
    /// let prof = forge::tools::Profiler::start().stop();
    /// assert!(prof.events().iter().all(|e| e.dur_ns < u64::MAX));
    /// ```
    pub fn stop(self) -> Profile {
        GLOBAL_SESSION.store(0, Ordering::Relaxed);
        let id = self.id;
        std::mem::forget(self);
        close(id)
    }
}

impl Drop for Profiler {
    fn drop(&mut self) {
        GLOBAL_SESSION.store(0, Ordering::Relaxed);
        let _ = close(self.id);
    }
}
