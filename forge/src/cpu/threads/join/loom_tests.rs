//! Model check of [`join`](super::join)'s hand-off between its halves
//! (`cfg(loom)` only: `scripts/loom.sh`): a half's parallel loop posted in
//! its slot, the other half's thread helping with it, and the half's
//! `DONE` letting the helper go.

use super::{Halves, DONE, RUNNING};
use crate::cpu::sync::Ordering;
use loom::cell::UnsafeCell;
use loom::thread;
use std::sync::Arc;

/// A loop's results, one cell per chunk.
struct Cells(Vec<UnsafeCell<u64>>);

// SAFETY: each cell is written by the one thread that claimed its chunk
// and read by the half's thread only after `share` has returned (every
// chunk counted done, with Acquire); loom reports any access of a cell
// that is not ordered after the previous one.
unsafe impl Sync for Cells {}

impl Cells {
    /// Adds `v` to cell `i` (a method, so that a closure calling it
    /// captures the `Sync` whole rather than its `Vec` field).
    fn add(&self, i: usize, v: u64) {
        // SAFETY: called only for chunk `i`, which one thread alone
        // claimed (see `Sync` above); loom checks it.
        self.0[i].with_mut(|p| unsafe { *p += v });
    }
}

/// Half 0 posts two parallel loops of 2 chunks while the other thread,
/// done with half 1, helps: in every interleaving each chunk runs once,
/// the half sees every chunk's write when `share` returns, and the helper
/// returns once half 0 is `DONE` (a helper that never saw `DONE`, or a
/// `share` that returned before a helped chunk finished, fails the model:
/// a deadlock or a data race).
#[test]
fn a_helper_runs_posted_chunks_and_leaves_when_the_half_is_done() {
    loom::model(|| {
        const CHUNKS: usize = 2;
        let halves = Arc::new(Halves::default());
        halves.state[0].store(RUNNING, Ordering::Release);
        let helper = {
            let halves = Arc::clone(&halves);
            thread::spawn(move || halves.help(0))
        };
        for round in 0..2u64 {
            let cells = Cells((0..CHUNKS).map(|_| UnsafeCell::new(0)).collect());
            let body = |i: usize| cells.add(i, 1 + round);
            halves.share(0, CHUNKS, &body);
            for c in &cells.0 {
                // SAFETY: `share` returned, so every chunk is done and its
                // write ordered before this read (loom checks it).
                assert_eq!(c.with(|p| unsafe { *p }), 1 + round);
            }
        }
        halves.state[0].store(DONE, Ordering::Release);
        helper.join().unwrap();
    });
}
