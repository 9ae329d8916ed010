//! Model checks of the spans' chunk dealing and stealing and of a task's
//! completion count, under every interleaving loom explores (`cfg(loom)`
//! only: `scripts/loom.sh`).
//!
//! loom runs each closure of `loom::model` once per schedule of its threads
//! and per value a relaxed load may see, and fails the test on a data race
//! on a `loom::cell::UnsafeCell`, a deadlock, or a panic in any of them.

use super::spans::Spans;
use super::Task;
use crate::cpu::sync::Ordering;
use loom::cell::UnsafeCell;
use loom::thread;
use std::sync::Arc;

/// Claims chunks of `spans` as `me` until none is left.
fn drain(spans: &Spans, me: Option<usize>) -> Vec<usize> {
    std::iter::from_fn(|| spans.claim(me)).collect()
}

/// Every chunk is claimed exactly once, whoever claims it: two owners
/// racing a span-less thief over 4 chunks (so both ends of both spans
/// are contended), every interleaving of their compare-exchanges.
#[test]
fn every_chunk_is_claimed_exactly_once() {
    loom::model(|| {
        let spans = Arc::new(Spans::new(4, 2));
        let handles: Vec<_> = [Some(1), None]
            .into_iter()
            .map(|me| {
                let spans = Arc::clone(&spans);
                thread::spawn(move || drain(&spans, me))
            })
            .collect();
        let mine = drain(&spans, Some(0));
        // Owner 0 takes its own span [0, 2) from the front, in order.
        let own: Vec<usize> = mine.iter().copied().filter(|&i| i < 2).collect();
        assert!(own.windows(2).all(|w| w[0] < w[1]), "{mine:?}");
        let mut all = mine;
        for h in handles {
            all.extend(h.join().unwrap());
        }
        all.sort_unstable();
        assert_eq!(all, [0, 1, 2, 3]);
    });
}

/// A chunk's results, written by whichever thread ran it.
struct Cells(Vec<UnsafeCell<u64>>);

// SAFETY: each cell is written by the one thread that claimed its chunk
// (the spans hand every index out once: the test above) and read by the
// caller only after `done` says every chunk is finished; loom checks both
// claims, reporting any write or read that is not ordered after another
// access of the same cell.
unsafe impl Sync for Cells {}

/// What `parallel_for` relies on to return: once the caller has seen
/// `done == chunks` (Acquire), every chunk's writes are visible to it,
/// whichever thread ran the chunk, because each thread adds its count
/// with a release after its last chunk. Two threads over 3 chunks (the
/// worker's span is stolen from and steals); loom reports a data race on
/// a result cell if any chunk's write is not ordered before the caller's
/// read (make the `fetch_add` in `Task::run` `Relaxed` to see it fail).
#[test]
fn the_caller_sees_every_chunk_once_done_reaches_the_count() {
    loom::model(|| {
        const CHUNKS: usize = 3;
        let cells = Arc::new(Cells((0..CHUNKS).map(|_| UnsafeCell::new(0)).collect()));
        let writer = Arc::clone(&cells);
        let body: Box<dyn Fn(usize) + Sync> = Box::new(move |i| {
            // SAFETY: chunk `i < CHUNKS` is claimed by one thread alone
            // (see `Cells`), so this is the cell's only access until the
            // caller reads it after `done`.
            writer.0[i].with_mut(|p| unsafe { *p = 10 + i as u64 });
        });
        let f: *const (dyn Fn(usize) + Sync + 'static) = &*body;
        let task = Arc::new(Task::new(CHUNKS, 2, 1, f));
        let worker = {
            let task = Arc::clone(&task);
            thread::spawn(move || task.run(Some(1), true))
        };
        task.run(Some(0), false);
        while task.done.load(Ordering::Acquire) < CHUNKS {
            thread::yield_now();
        }
        for (i, c) in cells.0.iter().enumerate() {
            // SAFETY: `done == CHUNKS` was read with Acquire, after every
            // writer's release; loom checks that ordering.
            assert_eq!(c.with(|p| unsafe { *p }), 10 + i as u64);
        }
        worker.join().unwrap();
        // `body` outlives every call through `f`: the worker has returned.
        drop(body);
    });
}
