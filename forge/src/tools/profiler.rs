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

use super::switch;
use crate::tensor::{Device, Element, Tensor};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::panic::Location;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// Forward or backward.
///
/// ```
/// let x = forge::Tensor::<f32>::ones(&[2]).requires_grad();
/// let (_, p) = forge::tools::profile(|| x.exp().sum().backward());
/// assert_eq!(p.events()[0].phase, forge::tools::Phase::Forward);
/// assert_eq!(p.events().last().unwrap().phase, forge::tools::Phase::Backward);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// An op computing its output.
    Forward,
    /// An op's backward rule.
    Backward,
}

/// One profiled event.
///
/// ```
/// let x = forge::Tensor::<f32>::ones(&[4]).requires_grad();
/// let (_, p) = forge::tools::profile(|| x.exp());
/// let e = &p.events()[0];
/// assert_eq!((e.op, e.flops, e.bytes), ("exp", Some(4), 32));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// The op's name on the tape.
    pub op: &'static str,
    /// Forward or backward.
    pub phase: Phase,
    /// Which thread ran it: 1 for the first thread seen in the process, 2
    /// for the next, ...
    pub thread: u64,
    /// Start, in nanoseconds since the process's first profiled event.
    pub start_ns: u64,
    /// Duration in nanoseconds.
    pub dur_ns: u64,
    /// Floating-point operations, when the op's shapes tell them
    /// (`matmul`, `linear`: `2 m n k`; elementwise ops: one per output
    /// element); `None` otherwise.
    pub flops: Option<u64>,
    /// Bytes of the op's inputs and outputs (forward), or of the output
    /// gradient, the inputs and the gradients returned (backward).
    pub bytes: u64,
    /// The line that called the op.
    pub site: Option<&'static Location<'static>>,
    /// The layer path the op ran under (`"2.0"`, `"encoder.act"`), `None`
    /// outside every layer; a backward rule has its forward op's.
    pub layer: Option<String>,
    /// Buffers the thread took from the memory pool during the event.
    pub pool_takes: u64,
    /// How many of those the pool had to get from the OS (none free in
    /// their size class).
    pub pool_fresh: u64,
    /// Parallel loops of the event that handed chunks to the executor's
    /// worker threads (0: it all ran on the calling thread).
    pub dispatches: u64,
    /// The executor's thread count when the event ran.
    pub threads: usize,
}

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

/// One row of [`Profile::rows`]: an op's totals.
///
/// ```
/// let x = forge::Tensor::<f32>::ones(&[4]).requires_grad();
/// let (_, p) = forge::tools::profile(|| x.exp().exp());
/// assert_eq!(p.rows()[0].forward_calls, 2);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct OpRow {
    /// The op's name.
    pub op: &'static str,
    /// Forward calls.
    pub forward_calls: u64,
    /// Time in the forward, ns.
    pub forward_ns: u64,
    /// Backward rule calls.
    pub backward_calls: u64,
    /// Time in the backward rules, ns.
    pub backward_ns: u64,
    /// FLOPs of the events that know theirs.
    pub flops: u64,
    /// Bytes read and written.
    pub bytes: u64,
    /// Buffers taken from the memory pool.
    pub pool_takes: u64,
    /// Parallel loops handed to the executor's worker threads.
    pub dispatches: u64,
}

impl OpRow {
    /// Forward plus backward time, ns.
    ///
    /// ```
    /// let r = forge::tools::OpRow {
    ///     op: "exp", forward_calls: 1, forward_ns: 5, backward_calls: 1, backward_ns: 7,
    ///     flops: 0, bytes: 0, pool_takes: 0, dispatches: 0,
    /// };
    /// assert_eq!(r.total_ns(), 12);
    /// ```
    pub fn total_ns(&self) -> u64 {
        self.forward_ns + self.backward_ns
    }
}

/// One row of [`Profile::layers`]: a layer path's totals.
///
/// ```
/// let r = forge::tools::LayerRow { path: "0".into(), self_calls: 2, self_ns: 10, total_calls: 3, total_ns: 15, pool_takes: 1 };
/// assert!(r.total_ns >= r.self_ns);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerRow {
    /// The layer path (`""`: outside every layer).
    pub path: String,
    /// Events run directly under this path (forward ops and backward
    /// rules).
    pub self_calls: u64,
    /// Their time, ns.
    pub self_ns: u64,
    /// Events under this path or a sublayer's.
    pub total_calls: u64,
    /// Their time, ns.
    pub total_ns: u64,
    /// Buffers taken from the memory pool by all of them.
    pub pool_takes: u64,
}

/// What the profiler recorded: see [`profile`].
///
/// ```
/// assert!(forge::tools::Profile::default().events().is_empty());
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Profile {
    events: Vec<Event>,
}

impl Profile {
    /// Every event, in the order recorded.
    ///
    /// ```
    /// let (_, p) = forge::tools::profile(|| ());
    /// assert!(p.events().is_empty());
    /// ```
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Adds another profile's events (several steps profiled one by one).
    ///
    /// ```
    /// let mut all = forge::tools::Profile::default();
    /// let (_, p) = forge::tools::profile(|| forge::Tensor::<f32>::ones(&[2]).requires_grad().exp());
    /// all.extend(p);
    /// assert_eq!(all.events().len(), 1);
    /// ```
    pub fn extend(&mut self, other: Profile) {
        self.events.extend(other.events);
    }

    /// How many times `op` ran in `phase`.
    ///
    /// ```
    /// let x = forge::Tensor::<f32>::ones(&[2]).requires_grad();
    /// let (_, p) = forge::tools::profile(|| x.exp().exp());
    /// assert_eq!(p.calls("exp", forge::tools::Phase::Forward), 2);
    /// ```
    pub fn calls(&self, op: &str, phase: Phase) -> u64 {
        self.events
            .iter()
            .filter(|e| e.op == op && e.phase == phase)
            .count() as u64
    }

    /// Totals per op, the most time first (ties by name).
    ///
    /// ```
    /// let x = forge::Tensor::<f32>::ones(&[2]).requires_grad();
    /// let (_, p) = forge::tools::profile(|| x.exp().sum().backward());
    /// let rows = p.rows();
    /// assert_eq!(rows.len(), 2);
    /// assert!(rows.iter().all(|r| r.forward_calls == 1 && r.backward_calls == 1));
    /// ```
    pub fn rows(&self) -> Vec<OpRow> {
        let mut by_op: BTreeMap<&'static str, OpRow> = BTreeMap::new();
        for e in &self.events {
            let r = by_op.entry(e.op).or_insert(OpRow {
                op: e.op,
                forward_calls: 0,
                forward_ns: 0,
                backward_calls: 0,
                backward_ns: 0,
                flops: 0,
                bytes: 0,
                pool_takes: 0,
                dispatches: 0,
            });
            match e.phase {
                Phase::Forward => {
                    r.forward_calls += 1;
                    r.forward_ns += e.dur_ns;
                }
                Phase::Backward => {
                    r.backward_calls += 1;
                    r.backward_ns += e.dur_ns;
                }
            }
            r.flops += e.flops.unwrap_or(0);
            r.bytes += e.bytes;
            r.pool_takes += e.pool_takes;
            r.dispatches += e.dispatches;
        }
        let mut rows: Vec<OpRow> = by_op.into_values().collect();
        rows.sort_by(|a, b| b.total_ns().cmp(&a.total_ns()).then(a.op.cmp(b.op)));
        rows
    }

    /// A text table of [`rows`](Self::rows): calls and milliseconds forward
    /// and backward, share of the total, GFLOP/s where FLOPs are known,
    /// MB moved, buffers taken from the pool, parallel loops sent to the
    /// worker threads.
    ///
    /// ```
    /// let x = forge::Tensor::<f32>::ones(&[2]).requires_grad();
    /// let (_, p) = forge::tools::profile(|| x.exp().sum().backward());
    /// assert_eq!(p.table().lines().count(), 4); // header, rule, exp, sum
    /// ```
    pub fn table(&self) -> String {
        let rows = self.rows();
        let all: u64 = rows.iter().map(OpRow::total_ns).sum::<u64>().max(1);
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<28} {:>7} {:>10} {:>7} {:>10} {:>10} {:>6} {:>9} {:>9} {:>7} {:>6}",
            "op",
            "fwd",
            "fwd ms",
            "bwd",
            "bwd ms",
            "total ms",
            "%",
            "GFLOP/s",
            "MB",
            "buffers",
            "par"
        );
        let _ = writeln!(s, "{}", "-".repeat(119));
        for r in &rows {
            let gflops = if r.flops > 0 && r.total_ns() > 0 {
                format!("{:.2}", r.flops as f64 / r.total_ns() as f64)
            } else {
                "-".into()
            };
            let _ = writeln!(
                s,
                "{:<28} {:>7} {:>10.3} {:>7} {:>10.3} {:>10.3} {:>6.1} {:>9} {:>9.2} {:>7} {:>6}",
                r.op,
                r.forward_calls,
                r.forward_ns as f64 / 1e6,
                r.backward_calls,
                r.backward_ns as f64 / 1e6,
                r.total_ns() as f64 / 1e6,
                100.0 * r.total_ns() as f64 / all as f64,
                gflops,
                r.bytes as f64 / 1e6,
                r.pool_takes,
                r.dispatches
            );
        }
        s
    }

    /// Totals per layer path, the most total time first (ties by path):
    /// every path an event ran under, and each of its prefixes (`"1"` for
    /// an event under `"1.0"`). Events outside every layer are under `""`.
    ///
    /// ```
    /// use forge::prelude::*;
    /// use forge::tools::{layer_scope, profile};
    /// let x = Tensor::<f32>::ones(&[4]).requires_grad();
    /// let (_, p) = profile(|| {
    ///     layer_scope("block", || {
    ///         let h = x.exp();
    ///         layer_scope("act", || h.tanh())
    ///     })
    ///     .sum()
    /// });
    /// let rows = p.layers();
    /// let block = rows.iter().find(|r| r.path == "block").unwrap();
    /// let act = rows.iter().find(|r| r.path == "block.act").unwrap();
    /// assert_eq!((block.self_calls, block.total_calls, act.self_calls), (1, 2, 1));
    /// assert_eq!(block.total_ns, block.self_ns + act.total_ns);
    /// ```
    pub fn layers(&self) -> Vec<LayerRow> {
        let mut by_path: BTreeMap<String, LayerRow> = BTreeMap::new();
        let empty = |path: &str| LayerRow {
            path: path.to_string(),
            self_calls: 0,
            self_ns: 0,
            total_calls: 0,
            total_ns: 0,
            pool_takes: 0,
        };
        for e in &self.events {
            let path = e.layer.as_deref().unwrap_or("");
            let own = by_path
                .entry(path.to_string())
                .or_insert_with(|| empty(path));
            own.self_calls += 1;
            own.self_ns += e.dur_ns;
            // The path itself and every prefix ending at a `.`.
            let mut prefixes: Vec<&str> =
                path.match_indices('.').map(|(i, _)| &path[..i]).collect();
            prefixes.push(path);
            for pre in prefixes {
                let r = by_path.entry(pre.to_string()).or_insert_with(|| empty(pre));
                r.total_calls += 1;
                r.total_ns += e.dur_ns;
                r.pool_takes += e.pool_takes;
            }
        }
        let mut rows: Vec<LayerRow> = by_path.into_values().collect();
        rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.path.cmp(&b.path)));
        rows
    }

    /// A text table of [`layers`](Self::layers) in path order (each
    /// layer above its sublayers, indented by depth): events and
    /// milliseconds of its own and in all, share of the whole, buffers
    /// taken from the pool.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let mut rng = Rng::new(0);
    /// let model = sequential![Linear::<f32>::new(4, 8, &mut rng), Relu, Linear::new(8, 1, &mut rng)];
    /// let (_, p) = forge::tools::profile(|| model.forward(Tensor::ones(&[2, 4])).sum().backward());
    /// let t = p.layer_table();
    /// assert!(t.lines().any(|l| l.trim_start().starts_with("0 ")), "{t}");
    /// println!("{t}");
    /// ```
    pub fn layer_table(&self) -> String {
        let mut rows = self.layers();
        rows.sort_by(|a, b| a.path.cmp(&b.path));
        let all: u64 = self.events.iter().map(|e| e.dur_ns).sum::<u64>().max(1);
        let label = |p: &str| {
            if p.is_empty() {
                "(outside layers)".to_string()
            } else {
                format!("{}{p}", "  ".repeat(p.matches('.').count()))
            }
        };
        let width = rows
            .iter()
            .map(|r| label(&r.path).len())
            .max()
            .unwrap_or(5)
            .max(5);
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<width$} {:>7} {:>10} {:>7} {:>10} {:>6} {:>8}",
            "layer", "self", "self ms", "total", "total ms", "%", "buffers"
        );
        let _ = writeln!(s, "{}", "-".repeat(width + 54));
        for r in &rows {
            let _ = writeln!(
                s,
                "{:<width$} {:>7} {:>10.3} {:>7} {:>10.3} {:>6.1} {:>8}",
                label(&r.path),
                r.self_calls,
                r.self_ns as f64 / 1e6,
                r.total_calls,
                r.total_ns as f64 / 1e6,
                100.0 * r.total_ns as f64 / all as f64,
                r.pool_takes
            );
        }
        s
    }

    /// The events in the Chrome trace format (JSON, for Perfetto or
    /// `chrome://tracing`): one complete event (`"ph": "X"`) per op or
    /// rule, one track per thread.
    ///
    /// ```
    /// let x = forge::Tensor::<f32>::ones(&[2]).requires_grad();
    /// let (_, p) = forge::tools::profile(|| x.exp());
    /// assert!(p.chrome_trace().contains("\"name\":\"exp\""));
    /// ```
    pub fn chrome_trace(&self) -> String {
        let mut events: Vec<serde_json::Value> = Vec::with_capacity(self.events.len() + 4);
        let mut threads: Vec<u64> = self.events.iter().map(|e| e.thread).collect();
        threads.sort_unstable();
        threads.dedup();
        for t in threads {
            events.push(serde_json::json!({
                "name": "thread_name", "ph": "M", "pid": 1, "tid": t,
                "args": { "name": format!("forge thread {t}") }
            }));
        }
        for e in &self.events {
            let mut args = serde_json::Map::new();
            args.insert("bytes".into(), e.bytes.into());
            args.insert("pool_takes".into(), e.pool_takes.into());
            args.insert("pool_fresh".into(), e.pool_fresh.into());
            args.insert("dispatches".into(), e.dispatches.into());
            args.insert("threads".into(), e.threads.into());
            if let Some(layer) = &e.layer {
                args.insert("layer".into(), layer.clone().into());
            }
            if let Some(f) = e.flops {
                args.insert("flops".into(), f.into());
            }
            if let Some(site) = e.site {
                args.insert(
                    "site".into(),
                    format!("{}:{}", site.file(), site.line()).into(),
                );
            }
            events.push(serde_json::json!({
                "name": e.op,
                "cat": match e.phase { Phase::Forward => "forward", Phase::Backward => "backward" },
                "ph": "X",
                "pid": 1,
                "tid": e.thread,
                "ts": e.start_ns as f64 / 1e3,
                "dur": e.dur_ns as f64 / 1e3,
                "args": args,
            }));
        }
        serde_json::json!({ "traceEvents": events, "displayTimeUnit": "ms" }).to_string()
    }

    /// Writes [`chrome_trace`](Self::chrome_trace) to `path` (atomically).
    ///
    /// # Errors
    /// [`ForgeError::Io`](crate::ForgeError::Io) when the file cannot be written.
    ///
    /// ```
    /// let (_, p) = forge::tools::profile(|| ());
    /// let path = std::env::temp_dir().join("forge-doc-trace.json");
    /// p.write_chrome_trace(&path).unwrap();
    /// ```
    pub fn write_chrome_trace(&self, path: impl AsRef<std::path::Path>) -> crate::Result<()> {
        crate::io::atomic_write(path, self.chrome_trace().as_bytes())
    }
}
