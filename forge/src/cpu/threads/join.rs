//! [`join`]: two independent ops at once, one per thread, each half's
//! parallel loops shared with the other half's thread once it is done.

use super::{num_threads, parallel_for, wait_a_little, Task, IN_PARALLEL};
use crate::cpu::memory::freelists::settle_region;
use crate::cpu::sync::{AtomicUsize, Mutex, Ordering};
use std::cell::Cell;
use std::panic::resume_unwind;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs `a` and `b`, on two threads of the pool when there are two, else
/// one after the other on the calling thread; returns both results. For
/// two independent ops too small to split well one by one (a small
/// convolution's input and weight gradients): one hand-off instead of two,
/// and no chunk of either waits for the other thread.
///
/// The thread that finishes its half first helps with the other's: each
/// half's parallel loops ([`parallel_for`]) are posted where the other
/// thread, once its own half is done, claims their chunks too (ResNet-18's
/// layer-4 convolutions: the weight gradient takes twice as long as the
/// input gradient, 2.0 against 1.0 ms on one thread). A `join` inside a
/// half runs inline. Each chunk does the same work whoever runs it, so
/// the results do not depend on the thread count.
///
/// # Panics
/// A panic in `a` or `b` is propagated to the caller.
pub fn join<A: Send, B: Send>(
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B + Send,
) -> (A, B) {
    if num_threads() < 2 || IN_PARALLEL.with(Cell::get) || HALF.with(Cell::get).is_some() {
        return (a(), b());
    }
    let (fa, fb) = (
        std::sync::Mutex::new(Some(a)),
        std::sync::Mutex::new(Some(b)),
    );
    let (ra, rb) = (std::sync::Mutex::new(None), std::sync::Mutex::new(None));
    let halves = Halves::default();
    parallel_for(2, |i| {
        {
            let _half = HalfGuard::enter(&halves, i);
            if i == 0 {
                let f = fa.lock().unwrap_or_else(|e| e.into_inner()).take();
                if let Some(f) = f {
                    *ra.lock().unwrap_or_else(|e| e.into_inner()) = Some(f());
                }
            } else {
                let f = fb.lock().unwrap_or_else(|e| e.into_inner()).take();
                if let Some(f) = f {
                    *rb.lock().unwrap_or_else(|e| e.into_inner()) = Some(f());
                }
            }
        }
        halves.help(1 - i);
    });
    let ra = ra.into_inner().unwrap_or_else(|e| e.into_inner());
    let rb = rb.into_inner().unwrap_or_else(|e| e.into_inner());
    (
        ra.expect("join: the first closure ran"),
        rb.expect("join: the second closure ran"),
    )
}

/// The two halves of one [`join`]: each half's current parallel loop, for
/// the other thread to help with once its own half is done.
#[derive(Default)]
pub(super) struct Halves {
    /// Per half: the task of its thread's running [`parallel_for`].
    slots: [Mutex<Option<Arc<Task>>>; 2],
    /// Per half: how many tasks it has posted, so that a helper looks in
    /// the slot (and takes its lock) only when there is a new one.
    posted: [AtomicUsize; 2],
    /// Per half: 0 until it starts, then [`RUNNING`], then [`DONE`].
    state: [AtomicUsize; 2],
}

const RUNNING: usize = 1;
const DONE: usize = 2;

thread_local! {
    /// While this thread runs half `i` of a [`join`]: that join's halves
    /// and `i`.
    pub(super) static HALF: Cell<Option<(*const Halves, usize)>> = const { Cell::new(None) };
}

impl Halves {
    /// [`parallel_for`] from inside half `i`: the chunks posted in this
    /// half's slot, run here and by the other half's thread if it is done
    /// with its own; returns when every chunk is done.
    pub(super) fn share(&self, i: usize, chunks: usize, f: &(dyn Fn(usize) + Sync)) {
        // SAFETY: only the lifetime is erased; `Task::run` dereferences the
        // pointer only for claimed chunks, and this function does not
        // return (so `f` lives) until every claimed chunk is done.
        let erased: *const (dyn Fn(usize) + Sync + 'static) = unsafe { std::mem::transmute(f) };
        // One span, this half's: the helper steals from its back.
        let task = Arc::new(Task::new(chunks, 1, 0, erased));
        *self.slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::clone(&task));
        self.posted[i].fetch_add(1, Ordering::Release);
        task.run(Some(0), false);
        let start = Instant::now();
        let mut yielded = Duration::ZERO;
        while task.done.load(Ordering::Acquire) < chunks {
            wait_a_little(start.elapsed(), &mut yielded);
        }
        *self.slots[i].lock().unwrap_or_else(|e| e.into_inner()) = None;
        // Two threads may run its chunks: this half's and the other's,
        // once that one is done.
        settle_region(&task.region, 2, &task.target);
        let panic = task.panic.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(p) = panic {
            resume_unwind(p);
        }
    }

    /// Runs chunks of half `other`'s parallel loops while that half runs
    /// on another thread; returns when it is done, or at once when it has
    /// not started (this thread then takes it up itself, as the next chunk
    /// of the join's loop).
    fn help(&self, other: usize) {
        let start = Instant::now();
        let mut yielded = Duration::ZERO;
        let mut seen = 0;
        while self.state[other].load(Ordering::Acquire) == RUNNING {
            let posted = self.posted[other].load(Ordering::Acquire);
            if posted != seen {
                seen = posted;
                let task = self.slots[other]
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                if let Some(t) = task {
                    t.run(None, true);
                    continue;
                }
            }
            wait_a_little(start.elapsed(), &mut yielded);
        }
    }
}

/// Marks the current thread as running half `i` of a [`join`] until
/// dropped (also when the half panics): its parallel loops are shared
/// through the halves' slots instead of running inline.
struct HalfGuard<'a> {
    halves: &'a Halves,
    i: usize,
    outer: bool,
}

impl<'a> HalfGuard<'a> {
    fn enter(halves: &'a Halves, i: usize) -> Self {
        halves.state[i].store(RUNNING, Ordering::Release);
        HALF.with(|h| h.set(Some((halves as *const Halves, i))));
        HalfGuard {
            halves,
            i,
            outer: IN_PARALLEL.with(|c| c.replace(false)),
        }
    }
}

impl Drop for HalfGuard<'_> {
    fn drop(&mut self) {
        IN_PARALLEL.with(|c| c.set(self.outer));
        HALF.with(|h| h.set(None));
        self.halves.state[self.i].store(DONE, Ordering::Release);
    }
}

#[cfg(all(test, loom))]
mod loom_tests;

/// The examples that documented these kernels while they were public.
#[cfg(test)]
mod examples {
    #[test]
    fn join() {
        let (x, y) = crate::cpu::threads::join(|| (0..10).sum::<i32>(), || "done");
        assert_eq!((x, y), (45, "done"));
    }
}
