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
//! * A `parallel_for` called from inside another one (a kernel within a
//!   parallel chunk) runs inline, so nested kernels never oversubscribe.
//! * Chunk `i` always does the same work, whatever the thread count, and
//!   each output element is written by exactly one chunk: results are
//!   bit-identical for 1 and N threads.
//!
//! ```
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! forge::cpu::set_num_threads(2);
//! let sum = AtomicUsize::new(0);
//! forge::cpu::parallel_for(100, |i| { sum.fetch_add(i, Ordering::Relaxed); });
//! assert_eq!(sum.load(Ordering::Relaxed), 4950);
//! ```

use rayon::{ThreadPool, ThreadPoolBuilder};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

static THREADS: AtomicUsize = AtomicUsize::new(0);

/// Thread counts up to this get a cached pool; larger requests are clamped.
const MAX_THREADS: usize = 256;

static POOLS: [OnceLock<ThreadPool>; MAX_THREADS + 1] =
    [const { OnceLock::new() }; MAX_THREADS + 1];

thread_local! {
    /// True while this thread runs chunks of a `parallel_for`.
    static IN_PARALLEL: Cell<bool> = const { Cell::new(false) };
}

/// The number of threads forge's kernels use. Defaults to the machine's
/// available parallelism, or `FORGE_NUM_THREADS` when set.
///
/// ```
/// assert!(forge::cpu::num_threads() >= 1);
/// ```
pub fn num_threads() -> usize {
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
/// worker threads, which then stay for the life of the process.
///
/// ```
/// forge::cpu::set_num_threads(1);
/// assert_eq!(forge::cpu::num_threads(), 1);
/// ```
pub fn set_num_threads(n: usize) {
    THREADS.store(n.clamp(1, MAX_THREADS), Ordering::Relaxed);
}

/// The persistent pool for `threads` threads (`threads - 1` workers).
fn pool(threads: usize) -> &'static ThreadPool {
    POOLS[threads].get_or_init(|| {
        ThreadPoolBuilder::new()
            .num_threads(threads - 1)
            .thread_name(move |i| format!("forge-{threads}-{i}"))
            .build()
            .expect("forge: cannot start the worker threads")
    })
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

/// Runs `f(chunk_index)` for every index in `0..chunks`, spreading chunks
/// over up to [`num_threads`] threads of a persistent pool (see the module
/// docs). Chunk `i` always does the same work, so results are independent
/// of the thread count. Runs inline when `chunks` is 1, when one thread is
/// configured, or when called from inside another `parallel_for`.
///
/// # Panics
/// A panic in `f` is propagated to the caller (after the other chunks in
/// flight have finished).
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// let hits = AtomicUsize::new(0);
/// forge::cpu::parallel_for(8, |_| { hits.fetch_add(1, Ordering::Relaxed); });
/// assert_eq!(hits.load(Ordering::Relaxed), 8);
/// ```
pub fn parallel_for(chunks: usize, f: impl Fn(usize) + Sync) {
    let threads = num_threads().min(chunks);
    if threads <= 1 || IN_PARALLEL.with(Cell::get) {
        (0..chunks).for_each(f);
        return;
    }
    let next = AtomicUsize::new(0);
    let work = || {
        let _mark = InParallel::enter();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= chunks {
                break;
            }
            f(i);
        }
    };
    pool(threads).in_place_scope(|s| {
        for _ in 1..threads {
            s.spawn(|_| work());
        }
        work();
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn every_chunk_runs_once_for_any_thread_count() {
        for threads in [1, 2, 3, 8] {
            set_num_threads(threads);
            let seen = Mutex::new(vec![0u32; 37]);
            parallel_for(37, |i| seen.lock().unwrap()[i] += 1);
            assert_eq!(*seen.lock().unwrap(), vec![1; 37], "{threads} threads");
        }
    }

    #[test]
    fn nested_calls_run_inline() {
        set_num_threads(2);
        let total = AtomicUsize::new(0);
        parallel_for(4, |_| {
            parallel_for(4, |_| {
                assert!(IN_PARALLEL.with(Cell::get));
                total.fetch_add(1, Ordering::Relaxed);
            })
        });
        assert_eq!(total.load(Ordering::Relaxed), 16);
    }

    #[test]
    fn panics_propagate() {
        set_num_threads(2);
        let r = std::panic::catch_unwind(|| parallel_for(4, |i| assert!(i != 3, "chunk 3")));
        assert!(r.is_err());
        // The pool still works afterwards.
        let n = AtomicUsize::new(0);
        parallel_for(4, |_| {
            n.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(n.load(Ordering::Relaxed), 4);
    }
}
