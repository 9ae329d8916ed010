//! What a profile holds: its events ([`Event`], [`Phase`]) and the
//! tables and Chrome trace made from them ([`Profile`], [`OpRow`],
//! [`LayerRow`]). The recording is in `profiler.rs`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::panic::Location;

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

/// What the profiler recorded: see [`profile`](super::profile).
///
/// ```
/// assert!(forge::tools::Profile::default().events().is_empty());
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Profile {
    pub(super) events: Vec<Event>,
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
