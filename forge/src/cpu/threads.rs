//! The thread count and a scoped parallel-for over fixed chunks.

use std::sync::atomic::{AtomicUsize, Ordering};

static THREADS: AtomicUsize = AtomicUsize::new(0);

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
                });
            THREADS.store(n, Ordering::Relaxed);
            n
        }
        n => n,
    }
}

/// Sets the number of threads forge's kernels use (at least 1). Results do
/// not depend on it, only speed does.
///
/// ```
/// forge::cpu::set_num_threads(1);
/// assert_eq!(forge::cpu::num_threads(), 1);
/// ```
pub fn set_num_threads(n: usize) {
    THREADS.store(n.max(1), Ordering::Relaxed);
}

/// Runs `f(chunk_index)` for `0..chunks`, spreading chunks over up to
/// [`num_threads`] scoped threads. Chunk `i` always does the same work, so
/// results are independent of the thread count. Runs inline when `chunks`
/// is 1 or one thread is configured.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// let hits = AtomicUsize::new(0);
/// forge::cpu::parallel_for(8, |_| { hits.fetch_add(1, Ordering::Relaxed); });
/// assert_eq!(hits.load(Ordering::Relaxed), 8);
/// ```
pub fn parallel_for(chunks: usize, f: impl Fn(usize) + Sync) {
    let threads = num_threads().min(chunks);
    if threads <= 1 {
        (0..chunks).for_each(f);
        return;
    }
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 1..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= chunks {
                    break;
                }
                f(i);
            });
        }
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= chunks {
                break;
            }
            f(i);
        }
    });
}
