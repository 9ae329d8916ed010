//! The schedule of the fused time loops on several threads:
//! [`for_block_steps`] cuts the batch into blocks of rows, twice as many
//! as threads, and lets the threads take the blocks' steps a few at a
//! time, each block's in order, so that a thread slowed down by the host
//! (its core shared with another process, or a vCPU of the 2-vCPU
//! benchmark machine in a slow phase) hands its blocks over instead of
//! holding up the call.
//!
//! Before, each thread ran one block's whole time loop: a call took as
//! long as the slower thread. Timed per block on the Intel Xeon model 207
//! (`bench --json --models lstm --modes infer --threads 2`, 64 rows in two
//! blocks of 32), the two blocks took 2.1-2.5 ms each in quiet stretches
//! but 3.5 and 4.2 ms (median) in a slow phase of the host, and 2.5
//! against 6.4 ms with another process on one core: the call then lasted
//! as long as the slow block, while the fast thread waited.
//!
//! **Same bits.** A block's steps run one after the other, whichever thread
//! runs each of them, and each step computes its rows from its own rows
//! only (the rnn cell's module docs): the blocks and the threads only
//! decide when a row's step runs, not what it computes.
//!
//! A thread keeps to its own blocks (those of its share of the batch) and
//! takes another thread's only when that block is free and lags its own by
//! [`LAG`] steps or more, or when its own are done, so on an even machine
//! no block changes thread.

use super::MIN_BLOCK_ROWS;
use crate::cpu::{num_threads, parallel_for};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Steps of a block a thread runs before it chooses again.
const SLICE: usize = 2;

/// How many steps another thread's free block must lag a thread's own
/// before the thread takes it over.
const LAG: usize = 2 * SLICE;

/// Blocks per thread: with two, a thread that finishes its own blocks
/// first can take half of the slower thread's work.
const BLOCKS_PER_THREAD: usize = 2;

/// Spins between two `sched_yield`s of a thread that finds every unfinished
/// block taken.
const SPINS_PER_YIELD: u32 = 256;

/// One block's progress: its next step, and whether a thread holds it.
/// Each on its own cache lines (the threads poll them).
#[repr(align(128))]
struct Slot {
    next: AtomicUsize,
    busy: AtomicBool,
}

/// The blocks of one call and their progress.
struct Schedule {
    slots: Vec<Slot>,
    /// Blocks whose last step is done.
    finished: AtomicUsize,
    /// Set when a step panicked: the other threads stop.
    poisoned: AtomicBool,
    n: usize,
    t_len: usize,
    threads: usize,
}

/// Releases a held block (and marks the schedule poisoned when its step
/// panicked, so that no thread waits for the block).
struct Held<'a> {
    sched: &'a Schedule,
    slot: &'a Slot,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.sched.poisoned.store(true, Ordering::Relaxed);
        }
        self.slot.busy.store(false, Ordering::Release);
    }
}

impl Schedule {
    fn blocks(&self) -> usize {
        self.slots.len()
    }

    /// Rows `r0..r1` of block `b`.
    fn rows(&self, b: usize) -> (usize, usize) {
        let blocks = self.blocks();
        (b * self.n / blocks, (b + 1) * self.n / blocks)
    }

    /// The blocks thread `me` owns.
    fn own(&self, me: usize) -> std::ops::Range<usize> {
        let blocks = self.blocks();
        me * blocks / self.threads..(me + 1) * blocks / self.threads
    }

    /// The block thread `me` should take next, if any is free: the least
    /// advanced of its own, unless another's lags that by [`LAG`] steps
    /// or more (or none of its own is free). A hint: the caller claims it.
    fn pick(&self, me: usize) -> Option<usize> {
        let own = self.own(me);
        // (block, its next step)
        let mut best_own: Option<(usize, usize)> = None;
        let mut best_other: Option<(usize, usize)> = None;
        for (b, slot) in self.slots.iter().enumerate() {
            let next = slot.next.load(Ordering::Relaxed);
            if next >= self.t_len || slot.busy.load(Ordering::Relaxed) {
                continue;
            }
            let best = if own.contains(&b) {
                &mut best_own
            } else {
                &mut best_other
            };
            if best.is_none_or(|(_, m)| next < m) {
                *best = Some((b, next));
            }
        }
        match (best_own, best_other) {
            (Some((o, on)), Some((x, xn))) => Some(if xn + LAG <= on { x } else { o }),
            (o, x) => o.or(x).map(|(b, _)| b),
        }
    }

    /// Thread `me`'s loop: takes blocks and runs up to [`SLICE`] of their
    /// steps at a time until every block is done (or a step panicked).
    fn run(&self, me: usize, step: &(impl Fn(usize, usize, usize) + Sync)) {
        let mut spins = 0u32;
        while self.finished.load(Ordering::Acquire) < self.blocks()
            && !self.poisoned.load(Ordering::Relaxed)
        {
            let Some(b) = self.pick(me) else {
                // every unfinished block is held by another thread
                spins += 1;
                if spins.is_multiple_of(SPINS_PER_YIELD) {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
                continue;
            };
            let slot = &self.slots[b];
            if slot
                .busy
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            let held = Held { sched: self, slot };
            // the last holder stored `next` before its release (Acquire
            // above): this is the block's true next step
            let s0 = slot.next.load(Ordering::Relaxed);
            let s1 = (s0 + SLICE).min(self.t_len);
            let (r0, r1) = self.rows(b);
            for s in s0..s1 {
                step(r0, r1, s);
            }
            slot.next.store(s1, Ordering::Relaxed);
            if s0 < s1 && s1 == self.t_len {
                self.finished.fetch_add(1, Ordering::AcqRel);
            }
            drop(held);
        }
    }
}

/// Runs `step(r0, r1, s)` for every block `r0..r1` of the batch's `n` rows
/// and every step `s` in `0..t_len`, each block's steps in order, one at a
/// time: with one thread (or fewer than `2 MIN_BLOCK_ROWS` rows) all rows
/// are one block, stepped in order on the calling thread; otherwise
/// [`BLOCKS_PER_THREAD`] blocks per thread of at least [`MIN_BLOCK_ROWS`]
/// rows each, whose steps the threads share (see the module docs). Two
/// steps of one block never overlap, and step `s + 1` of a block starts
/// after step `s` has returned (and sees its writes); steps of different
/// blocks may run at once.
///
/// # Panics
/// A panic in `step` is propagated to the caller (the other threads stop
/// at their next choice).
pub(super) fn for_block_steps(n: usize, t_len: usize, step: impl Fn(usize, usize, usize) + Sync) {
    let threads = num_threads().min(n / MIN_BLOCK_ROWS).max(1);
    if threads == 1 {
        for s in 0..t_len {
            step(0, n, s);
        }
        return;
    }
    let blocks = (BLOCKS_PER_THREAD * threads).min(n / MIN_BLOCK_ROWS);
    let sched = Schedule {
        slots: (0..blocks)
            .map(|_| Slot {
                next: AtomicUsize::new(0),
                busy: AtomicBool::new(false),
            })
            .collect(),
        finished: AtomicUsize::new(if t_len == 0 { blocks } else { 0 }),
        poisoned: AtomicBool::new(false),
        n,
        t_len,
        threads,
    };
    parallel_for(threads, |me| sched.run(me, &step));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::Executor;
    use std::sync::Mutex;

    /// Every `(block, step)` the schedule ran, in the order each ran, on
    /// an executor of `threads` threads; `slow` rows' steps sleep (a
    /// thread held up by the host).
    fn trace(
        threads: usize,
        n: usize,
        t_len: usize,
        slow: Option<usize>,
    ) -> Vec<(usize, usize, usize)> {
        let log = Mutex::new(Vec::new());
        Executor::new(threads).run(|| {
            for_block_steps(n, t_len, |r0, r1, s| {
                if slow.is_some_and(|r| (r0..r1).contains(&r)) {
                    std::thread::sleep(std::time::Duration::from_micros(300));
                }
                log.lock().unwrap().push((r0, r1, s));
            })
        });
        log.into_inner().unwrap()
    }

    /// Each block's steps, once each and in order, and the blocks tiling
    /// `0..n`.
    fn check(log: &[(usize, usize, usize)], n: usize, t_len: usize, blocks: usize) {
        let mut spans: Vec<(usize, usize)> = log.iter().map(|&(a, b, _)| (a, b)).collect();
        spans.sort_unstable();
        spans.dedup();
        assert_eq!(spans.len(), blocks, "blocks {spans:?}");
        assert_eq!(spans[0].0, 0);
        assert_eq!(spans[blocks - 1].1, n);
        for w in spans.windows(2) {
            assert_eq!(w[0].1, w[1].0, "blocks {spans:?}");
        }
        for (r0, r1) in spans {
            assert!(r1 - r0 >= MIN_BLOCK_ROWS.min(n));
            let steps: Vec<usize> = log
                .iter()
                .filter(|&&(a, b, _)| (a, b) == (r0, r1))
                .map(|&(_, _, s)| s)
                .collect();
            assert_eq!(steps, (0..t_len).collect::<Vec<_>>(), "block {r0}..{r1}");
        }
    }

    #[test]
    fn every_block_runs_every_step_once_in_order() {
        for (threads, n, t_len, blocks) in [
            (1, 64, 7, 1),
            (2, 64, 7, 4),
            (2, 40, 5, 4),
            (2, 24, 3, 3),
            (2, 15, 4, 1),
            (2, 16, 1, 2),
            (3, 64, 9, 6),
            (2, 64, 0, 0),
        ] {
            let log = trace(threads, n, t_len, None);
            if blocks == 0 {
                assert!(log.is_empty());
            } else {
                check(&log, n, t_len, blocks);
            }
        }
    }

    #[test]
    fn a_slow_thread_hands_its_blocks_over_in_order() {
        // rows 40.. (the last block, the worker's) sleep at every step;
        // the caller takes over the worker's other block
        let log = trace(2, 64, 12, Some(50));
        check(&log, 64, 12, 4);
    }

    /// A recurrence per row (each step reads the row's value from the
    /// step before, whichever thread ran it) with the worker slowed down,
    /// so that its blocks move to the caller: every row's value as the
    /// serial loop's.
    #[test]
    fn a_recurrence_over_moving_blocks_equals_the_serial_loop() {
        let (n, t_len) = (64, 40);
        let next = |v: f64, r: usize, s: usize| (v * 0.75 + (s * 7 + r) as f64).sin();
        let mut want = vec![0.5; n];
        for s in 0..t_len {
            for (r, v) in want.iter_mut().enumerate() {
                *v = next(*v, r, s);
            }
        }
        let mut got = vec![0.5; n];
        let rows = super::super::Rows::new(&mut got);
        let caller = std::thread::current().id();
        Executor::new(2).run(|| {
            for_block_steps(n, t_len, |r0, r1, s| {
                if std::thread::current().id() != caller {
                    std::thread::sleep(std::time::Duration::from_micros(200));
                }
                // SAFETY: this block's own rows; its steps never overlap.
                let v = unsafe { rows.at(0, n, r0, r1, 1) };
                for (k, v) in v.iter_mut().enumerate() {
                    *v = next(*v, r0 + k, s);
                }
            })
        });
        assert_eq!(got, want);
    }

    #[test]
    fn a_panicking_step_reaches_the_caller() {
        let r = std::panic::catch_unwind(|| {
            Executor::new(2).run(|| {
                for_block_steps(64, 8, |r0, _, s| {
                    if r0 == 48 && s == 3 {
                        panic!("step panicked");
                    }
                })
            })
        });
        assert!(r.is_err());
    }
}
