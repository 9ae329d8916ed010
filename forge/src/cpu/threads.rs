//! The thread count and a parallel-for over fixed chunks, run on persistent
//! [`rayon`] thread pools.
//!
//! # Threading model
//!
//! * One pool of worker threads per requested thread count `n` is built the
//!   first time a kernel runs with that count, and kept for the life of the
//!   process: no thread is spawned per op. A pool for `n` threads has `n - 1`
//!   workers; the calling thread is the `n`-th and takes chunks too.
//! * [`set_num_threads`] (or `FORGE_NUM_THREADS`, read once) may change the
//!   count at any time; the next [`parallel_for`] uses the pool for the new
//!   count.
//! * With one thread, or one chunk, [`parallel_for`] is a plain loop on the
//!   calling thread: no pool, no atomics, no allocation. Kernels only split
//!   work above a size threshold, so small ops never touch the pool.
//! * A worker that finishes its chunks stays awake for a short while
//!   (200 µs, spinning, with a `sched_yield` every 20 µs) and joins the next
//!   `parallel_for` by itself, so back-to-back ops do not pay a thread
//!   wake-up each; only a worker that has gone back to sleep is woken.
//! * A `parallel_for` called from inside another one (a kernel within a
//!   parallel chunk) runs inline, so nested kernels never oversubscribe;
//!   one called from a half of a [`join`] is shared with the other half's
//!   thread once that half is done.
//! * Chunk `i` always does the same work, whatever the thread count, and
//!   each output element is written by exactly one chunk: results are
//!   bit-identical for 1 and N threads.

use crate::cpu::class::{pin_thread, Class};
use crate::cpu::memory::freelists::{self, settle_region, PoolRef};
use crate::cpu::memory::reserve::Region;
use rayon::{ThreadPool, ThreadPoolBuilder};
use std::any::Any;
use std::cell::Cell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

mod join;
#[cfg(all(test, loom))]
mod loom_tests;
mod spans;
pub use join::join;
use join::HALF;
use spans::Spans;

static THREADS: AtomicUsize = AtomicUsize::new(0);

/// Thread counts up to this get a cached pool; larger requests are clamped.
const MAX_THREADS: usize = 256;

static POOLS: [OnceLock<Arc<Pool>>; MAX_THREADS + 1] = [const { OnceLock::new() }; MAX_THREADS + 1];

/// A persistent pool: its rayon threads, and the hand-off through which a
/// worker that has just finished its chunks picks up the next
/// `parallel_for` without going to sleep (see [`LINGER`]). The process
/// keeps one per thread count for callers outside every executor; an
/// executor owns one of its own ([`Pool::new`]).
pub(crate) struct Pool {
    threads: ThreadPool,
    /// The latest task, for lingering workers to join.
    current: Mutex<Option<Arc<Task>>>,
    /// The epoch of `current`: bumped each time a task is posted.
    epoch: AtomicU64,
    /// Workers lingering: between two tasks, awake, watching `epoch`.
    lingering: AtomicUsize,
}

thread_local! {
    /// True while this thread runs chunks of a `parallel_for`.
    static IN_PARALLEL: Cell<bool> = const { Cell::new(false) };
}

/// The number of threads forge's kernels use. Defaults to the machine's
/// available parallelism, or `FORGE_NUM_THREADS` when set. Public as
/// `forge::runtime::num_threads`, whose example covers it.
pub fn num_threads() -> usize {
    if let Some(s) = local_settings() {
        return s.threads;
    }
    process_threads()
}

/// The process's thread count (see [`num_threads`]), whatever executor
/// the calling thread runs a call of.
pub fn process_threads() -> usize {
    match THREADS.load(Ordering::Relaxed) {
        0 => {
            let n = std::env::var("FORGE_NUM_THREADS")
                .ok()
                .and_then(|s| s.parse::<usize>().ok())
                .filter(|&n| n > 0)
                .unwrap_or_else(|| {
                    std::thread::available_parallelism()
                        .map(|n| n.get())
                        .unwrap_or(1)
                })
                .min(MAX_THREADS);
            THREADS.store(n, Ordering::Relaxed);
            n
        }
        n => n,
    }
}

/// Sets the number of threads forge's kernels use (clamped to `1..=256`).
/// Results do not depend on it, only speed does. It takes effect at the
/// next kernel; the first kernel run with a new count starts that count's
/// worker threads, which then stay for the life of the process. Public as
/// `forge::runtime::set_num_threads`, whose example covers it.
pub fn set_num_threads(n: usize) {
    THREADS.store(n.clamp(1, MAX_THREADS), Ordering::Relaxed);
}

/// The process's persistent pool for `threads` threads (`threads - 1`
/// workers), for callers outside every executor.
fn pool(threads: usize) -> &'static Arc<Pool> {
    POOLS[threads].get_or_init(|| Arc::new(Pool::new(threads, "forge", None)))
}

/// What an executor pins for the threads that run its calls: its thread
/// count and, optionally, the CPU class its kernels may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Settings {
    /// Threads taking part in a parallel loop (the caller included).
    pub threads: usize,
    /// The widest kernels allowed (`None`: the process's choice).
    pub class: Option<Class>,
}

/// An executor as the calling thread sees it while it runs one of the
/// executor's calls: its settings and its pool (none with one thread).
#[derive(Clone)]
pub(crate) struct Local {
    pub settings: Settings,
    pub pool: Option<Arc<Pool>>,
}

thread_local! {
    /// The executor whose call this thread runs (`None`: the process's
    /// settings). On an executor's worker threads: its settings, no pool.
    static LOCAL: std::cell::RefCell<Option<Local>> = const { std::cell::RefCell::new(None) };
}

/// The settings of the executor this thread runs a call of, if any.
pub(crate) fn local_settings() -> Option<Settings> {
    LOCAL.with(|l| l.borrow().as_ref().map(|l| l.settings))
}

/// Runs `f` with `local` as this thread's executor (`None`: the
/// process's settings), restoring the previous one afterwards (also when
/// `f` panics).
pub(crate) fn with_local<R>(local: Option<Local>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Local>, Option<Class>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let prev = self.0.take();
            LOCAL.with(|l| *l.borrow_mut() = prev);
            pin_thread(self.1);
        }
    }
    let class = pin_thread(local.as_ref().and_then(|l| l.settings.class));
    let _restore = Restore(
        LOCAL.with(|l| std::mem::replace(&mut *l.borrow_mut(), local)),
        class,
    );
    f()
}

impl Pool {
    /// A pool for `threads` threads: `threads - 1` rayon workers named
    /// `{name}-{threads}-{i}`, each running with `settings` as its thread's
    /// executor settings when given.
    pub(crate) fn new(threads: usize, name: &'static str, settings: Option<Settings>) -> Self {
        Pool {
            threads: ThreadPoolBuilder::new()
                .num_threads(threads.max(2) - 1)
                .thread_name(move |i| format!("{name}-{threads}-{i}"))
                .start_handler(move |_| {
                    if let Some(settings) = settings {
                        pin_thread(settings.class);
                        LOCAL.with(|l| {
                            *l.borrow_mut() = Some(Local {
                                settings,
                                pool: None,
                            })
                        });
                    }
                })
                .build()
                .expect("forge: cannot start the worker threads"),
            current: Mutex::new(None),
            epoch: AtomicU64::new(0),
            lingering: AtomicUsize::new(0),
        }
    }
}

/// How long a worker stays awake after its last chunk, watching for the
/// next `parallel_for` (first spinning, then yielding the core to any
/// other runnable thread between looks); also how long a caller waits so
/// for the chunks the workers claimed before it sleeps.
///
/// A worker that has gone to sleep starts its share of the next op
/// 17-33 µs late (a futex wake-up across cores, `bench --only dispatch`),
/// and a training step runs hundreds of parallel ops separated by short
/// serial stretches (ResNet-18 b16: about 560 per step, most gaps well
/// under 100 µs), so each op lost that much of its second thread. A
/// lingering worker joins within about a microsecond instead. While it
/// waits it spins and yields its core every [`YIELD_EVERY`], so on a
/// machine with other work the core goes to that work; past `LINGER` it
/// returns to rayon and sleeps.
const LINGER: Duration = Duration::from_micros(200);

/// How often a waiting thread (a lingering worker, or a caller waiting
/// for the workers' last chunks) gives its core away with `sched_yield`;
/// between two yields it spins.
///
/// Yielding on every look, as this pool first did, made a lingering worker
/// miss most hand-offs in the benchmark machine's slow periods (a 2-vCPU
/// virtual machine): `bench --only dispatch` had the caller run both
/// chunks of a 30 µs task 397 times in 400 even with the worker lingering,
/// against 1 in 400 when the worker spins. A pure spin, though, takes the
/// core from other processes for the whole linger: with a compiler
/// running beside it, ResNet-18's 2-thread step went from 88 to 144 ms.
/// One yield every 20 µs keeps both: where nothing else is runnable the
/// yield returns at once and the thread spins on; where something is, it
/// runs, and the spinner takes at most 20 µs of its core at a time.
const YIELD_EVERY: Duration = Duration::from_micros(20);

/// Waits one look of a spin-then-yield loop that started `waited` ago and
/// last yielded at `yielded` (both measured from the loop's start).
fn wait_a_little(waited: Duration, yielded: &mut Duration) {
    if cfg!(loom) {
        // The model checker's threads share one OS thread: every look
        // yields to them (`cpu::sync::spin_hint`).
        crate::cpu::sync::spin_hint();
    } else if waited >= *yielded + YIELD_EVERY {
        *yielded = waited;
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

impl Pool {
    /// Publishes a new task for lingering workers; returns it with the
    /// number of workers that were lingering when it was posted (they will
    /// join it, so that many fewer need a wake-up).
    fn post(&self, make: impl FnOnce(u64) -> Task) -> (Arc<Task>, usize) {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let epoch = self.epoch.load(Ordering::Relaxed) + 1;
        let task = Arc::new(make(epoch));
        *current = Some(Arc::clone(&task));
        self.epoch.store(epoch, Ordering::SeqCst);
        drop(current);
        // SeqCst with the worker's side (see `linger`): a worker counted
        // here sees the new epoch before it stops lingering.
        (task, self.lingering.load(Ordering::SeqCst))
    }

    /// A worker's life in the pool after rayon hands it `task`: run its
    /// chunks, then linger and join each task posted meanwhile, until none
    /// comes for [`LINGER`].
    fn work(&self, task: Arc<Task>) {
        // Worker `i` of the pool owns span `i + 1` of every task (the
        // caller owns span 0).
        let me = rayon::current_thread_index().map(|i| i + 1);
        let mut seen = task.epoch;
        task.run(me, true);
        drop(task);
        while let Some(next) = self.linger(seen) {
            seen = next.epoch;
            next.run(me, true);
        }
    }

    /// Waits, awake, for a task newer than epoch `seen`; `None` after
    /// [`LINGER`] without one.
    fn linger(&self, seen: u64) -> Option<Arc<Task>> {
        self.lingering.fetch_add(1, Ordering::SeqCst);
        let start = Instant::now();
        let mut yielded = Duration::ZERO;
        let mut fresh = false;
        loop {
            if self.epoch.load(Ordering::SeqCst) != seen {
                fresh = true;
                break;
            }
            let waited = start.elapsed();
            if waited >= LINGER {
                break;
            }
            wait_a_little(waited, &mut yielded);
        }
        self.lingering.fetch_sub(1, Ordering::SeqCst);
        // A caller that counted this worker as lingering bumped the epoch
        // before it read the count, so the epoch read after the decrement
        // sees its task: no posted task is left without the worker it
        // counted on.
        if fresh || self.epoch.load(Ordering::SeqCst) != seen {
            self.current
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
        } else {
            None
        }
    }
}

/// Marks the current thread as running parallel chunks until dropped.
struct InParallel(bool);

impl InParallel {
    fn enter() -> Self {
        InParallel(IN_PARALLEL.with(|c| c.replace(true)))
    }
}

impl Drop for InParallel {
    fn drop(&mut self) {
        IN_PARALLEL.with(|c| c.set(self.0));
    }
}

/// Held by the unit tests that set the thread count and depend on it, so
/// that tests running in parallel do not change it under each other.
#[cfg(test)]
pub(crate) fn lock_thread_count() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Estimated single-thread time, in nanoseconds, below which
/// [`parallel_for_cost`] runs an op on the calling thread.
///
/// Handing chunks to a worker that has gone to sleep costs the caller a
/// system call (about 2 µs) and the worker 10-25 µs before it starts (a
/// futex wake-up across cores, measured on the 2-core benchmark machine
/// with `examples/bench --only dispatch`); a worker still lingering from
/// the previous op (see [`LINGER`]) joins within about a microsecond. The
/// caller claims chunks itself meanwhile, so a late worker costs an op
/// little more than the system call. 15 µs, down from 40: at 2 threads,
/// GPT at batch 1 (64 tokens, 128 wide) took 0.97 ms a step instead of
/// 1.21 and ResNet-18 at batch 1 0.79 instead of 0.86, its products of
/// 15-40 µs now shared; the training rows moved by no more than their
/// one-thread noise (2026-12-06, model-167 machine, alternating builds,
/// others stopped).
pub const PARALLEL_MIN_NS: usize = 15_000;

thread_local! {
    /// `parallel_for` calls from this thread that handed chunks to workers.
    static DISPATCHES: Cell<u64> = const { Cell::new(0) };
}

/// How many [`parallel_for`] (or [`parallel_for_cost`]) calls made from the
/// calling thread handed chunks to worker threads; calls that ran inline
/// (one thread, one chunk, a nested call, work below
/// [`PARALLEL_MIN_NS`]) do not count. Per thread, so a test can check that
/// a small op does not wake the pool.
pub fn pool_dispatches() -> u64 {
    DISPATCHES.with(Cell::get)
}

/// Whether an op whose whole single-thread cost is about `cost_ns`
/// nanoseconds, and which hands work to the pool `handoffs` times (a
/// packed gemm: twice, once to pack its right operand and once to
/// multiply), is worth splitting: at least [`PARALLEL_MIN_NS`] of work per
/// hand-off. Decided on the whole op, so an op made of several parallel
/// loops does not split each loop on its own estimate.
///
/// GPT batch-1 inference (4 layers, width 128, 64 tokens) split its MLP
/// products (`64 x 128 x 512` and back, 42 µs estimated each, just past
/// the threshold) into two hand-offs each, and ran slower on 2 threads
/// than on 1 (0.80 against 0.76 ms, issue 41); on a loaded machine the
/// worker thread took 1.2% of the samples of a 2-thread run (perf), the
/// caller doing nearly all the chunks after waking it.
pub(crate) fn worth_splitting(cost_ns: usize, handoffs: usize) -> bool {
    cost_ns >= PARALLEL_MIN_NS * handoffs.max(1)
}

/// [`parallel_for`] for an op whose whole single-thread cost is about
/// `cost_ns` nanoseconds: below [`PARALLEL_MIN_NS`] every chunk runs on the
/// calling thread, in order, and no worker is woken. The chunks are the
/// same either way, so the result does not depend on the decision.
///
/// Estimate the cost from the op's size and its work per element, e.g.
/// elements / 2 for a cheap elementwise op, multiply-adds / 64 for a gemm.
pub fn parallel_for_cost(chunks: usize, cost_ns: usize, f: impl Fn(usize) + Sync) {
    if cost_ns < PARALLEL_MIN_NS {
        (0..chunks).for_each(f);
    } else {
        parallel_for(chunks, f);
    }
}

/// One `parallel_for`'s chunks, shared by the caller and the workers that
/// join it. The workers (and the pool's `current` slot) hold it through an
/// `Arc`, so it outlives a late worker; `f` itself is only called for a
/// claimed chunk, and the caller does not return until every claimed chunk
/// is done (after which no chunk is left to claim).
struct Task {
    /// The chunks not yet claimed, one contiguous span per thread (see
    /// [`spans`]).
    spans: Spans,
    /// Chunks finished, by anyone; each thread adds its count once, when
    /// it finds nothing left to claim (`cpu::sync`: model-checked under
    /// `cfg(loom)`).
    done: crate::cpu::sync::AtomicUsize,
    chunks: usize,
    /// The pool's epoch when this task was posted.
    epoch: u64,
    /// The chunk body, its lifetime erased (see `run`).
    f: *const (dyn Fn(usize) + Sync + 'static),
    /// The calling thread, woken when a worker finishes the last chunk.
    caller: std::thread::Thread,
    /// The first panic of a chunk, re-raised on the calling thread.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    /// The chunks' buffer-pool traffic, for the pool's reserve
    /// (`memory::settle_region`).
    region: Region,
    /// The pool the caller draws from (its executor's or arena's): every
    /// chunk draws from it, whichever thread runs it.
    target: PoolRef,
}

// SAFETY: `f` points to a `Sync` closure and is only dereferenced while
// the caller keeps it alive (see `Task::run`); every other field is Send +
// Sync.
unsafe impl Send for Task {}
// SAFETY: as above.
unsafe impl Sync for Task {}

impl Task {
    /// A task over `chunks` chunks dealt out to `owners` threads.
    fn new(
        chunks: usize,
        owners: usize,
        epoch: u64,
        f: *const (dyn Fn(usize) + Sync + 'static),
    ) -> Self {
        Task {
            spans: Spans::new(chunks, owners),
            done: crate::cpu::sync::AtomicUsize::new(0),
            chunks,
            epoch,
            f,
            caller: std::thread::current(),
            panic: Mutex::new(None),
            region: Region::default(),
            target: freelists::current(),
        }
    }

    /// Claims and runs chunks until none is left: those of span `me`
    /// first, in order, then the others' from their backs.
    fn run(&self, me: Option<usize>, on_worker: bool) {
        if on_worker {
            freelists::with_target(self.target.clone(), || self.run_here(me, on_worker));
        } else {
            self.run_here(me, on_worker);
        }
    }

    /// [`run`](Self::run) on a thread already drawing from the task's pool.
    fn run_here(&self, me: Option<usize>, on_worker: bool) {
        let _mark = InParallel::enter();
        let mut ran = 0;
        while let Some(i) = self.spans.claim(me) {
            let _traffic = self.region.chunk();
            // SAFETY: chunk `i < chunks` was claimed by this thread alone,
            // and the caller of `parallel_for` keeps `f` alive until `done`
            // reaches `chunks`, which cannot happen before this chunk is
            // counted below, after `f` returns.
            let r = catch_unwind(AssertUnwindSafe(|| unsafe { (*self.f)(i) }));
            if let Err(p) = r {
                let mut slot = self.panic.lock().unwrap_or_else(|e| e.into_inner());
                slot.get_or_insert(p);
            }
            ran += 1;
        }
        if ran > 0 {
            let finished = self.done.fetch_add(ran, Ordering::AcqRel) + ran;
            if on_worker && finished == self.chunks {
                self.caller.unpark();
            }
        }
    }
}

/// Runs `f(chunk_index)` for every index in `0..chunks`, spreading chunks
/// over up to [`num_threads`] threads of a persistent pool (see the module
/// docs). Chunk `i` always does the same work, so results are independent
/// of the thread count. Runs inline when `chunks` is 1, when one thread is
/// configured, or when called from inside another `parallel_for`; use
/// [`parallel_for_cost`] to also run small ops inline.
///
/// The calling thread takes chunks too and never waits for a worker to
/// wake up: chunks are claimed one at a time, so a worker that starts late
/// finds fewer (or none) left, and the call returns as soon as every chunk
/// is done. Thread `t` of `T` starts on the contiguous span of chunks
/// `[t chunks / T, (t + 1) chunks / T)` (the caller is thread 0) and takes
/// from the back of another's span once its own is empty, so two loops of
/// the same length give each thread the same rows.
///
/// # Panics
/// A panic in `f` is propagated to the caller (after the other chunks in
/// flight have finished).
pub fn parallel_for(chunks: usize, f: impl Fn(usize) + Sync) {
    let threads = num_threads().min(chunks);
    if threads <= 1 || IN_PARALLEL.with(Cell::get) || chunks > spans::MAX_CHUNKS {
        (0..chunks).for_each(f);
        return;
    }
    DISPATCHES.with(|c| c.set(c.get() + 1));
    if let Some((halves, i)) = HALF.with(Cell::get) {
        // SAFETY: `HALF` is set only while this thread runs half `i` of
        // the `join` that owns `*halves` (see `HalfGuard`), and that join
        // does not return before this half, and so this call, is done.
        return unsafe { &*halves }.share(i, chunks, &f);
    }
    let body: &(dyn Fn(usize) + Sync) = &f;
    // SAFETY: only the lifetime is erased; `Task::run` dereferences the
    // pointer only for claimed chunks, and this function does not return
    // (so `f` lives) until every claimed chunk is done.
    let erased: *const (dyn Fn(usize) + Sync + 'static) = unsafe { std::mem::transmute(body) };
    let own = LOCAL.with(|l| l.borrow().as_ref().and_then(|l| l.pool.clone()));
    let pool: &Arc<Pool> = match &own {
        Some(p) => p,
        None => pool(threads),
    };
    let (task, lingering) = pool.post(|epoch| Task::new(chunks, threads, epoch, erased));
    // Lingering workers join by themselves; wake the others.
    for _ in lingering.min(threads - 1)..threads - 1 {
        let t = Arc::clone(&task);
        let p = Arc::clone(pool);
        pool.threads.spawn(move || p.work(t));
    }
    task.run(Some(0), false);
    // Wait for the chunks the workers claimed, as a worker lingers: they
    // are usually about to finish, and a parked caller would start the
    // next op a wake-up late. Spin, yielding the core every `YIELD_EVERY`,
    // and sleep (until the last chunk unparks us) only past `LINGER`.
    let start = Instant::now();
    let mut yielded = Duration::ZERO;
    while task.done.load(Ordering::Acquire) < chunks {
        let waited = start.elapsed();
        if waited < LINGER {
            wait_a_little(waited, &mut yielded);
        } else {
            std::thread::park_timeout(SPIN);
        }
    }
    settle_region(&task.region, threads, &task.target);
    let panic = task.panic.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(p) = panic {
        resume_unwind(p);
    }
}

/// How long a caller that has waited [`LINGER`] for the workers' last
/// chunks sleeps between looks (the last chunk also unparks it).
const SPIN: Duration = Duration::from_micros(50);

#[cfg(test)]
mod tests;

/// The examples that documented these kernels while they were public.
#[cfg(test)]
mod examples {
    #[test]
    fn module() {
        let _threads = crate::cpu::threads::lock_thread_count();
        use std::sync::atomic::{AtomicUsize, Ordering};
        let prev = crate::cpu::num_threads();
        crate::cpu::set_num_threads(2);
        let sum = AtomicUsize::new(0);
        crate::cpu::parallel_for(100, |i| {
            sum.fetch_add(i, Ordering::Relaxed);
        });
        assert_eq!(sum.load(Ordering::Relaxed), 4950);
        crate::cpu::set_num_threads(prev);
    }

    #[test]
    fn pool_dispatches() {
        let before = crate::cpu::threads::pool_dispatches();
        crate::cpu::threads::parallel_for_cost(4, 100, |_| {});
        assert_eq!(crate::cpu::threads::pool_dispatches(), before);
    }

    #[test]
    fn parallel_for_cost() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let n = AtomicUsize::new(0);
        // 1000 elements of a cheap op: far too little to wake a thread
        crate::cpu::threads::parallel_for_cost(4, 1000 / 2, |_| {
            n.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(n.load(Ordering::Relaxed), 4);
    }

    #[test]
    fn parallel_for() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let hits = AtomicUsize::new(0);
        crate::cpu::parallel_for(8, |_| {
            hits.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(hits.load(Ordering::Relaxed), 8);
    }
}
