//! Reserves for parallel regions: what makes the pool's steady state
//! independent of how the threads happen to be scheduled.
//!
//! Inside one thread, the pool's traffic is a fixed sequence, so after the
//! first step of a repeating loop every request finds a free buffer. Inside
//! a parallel region it is not: two chunks that each take a scratch buffer
//! need two buffers when they overlap and one when a thread runs both (a
//! worker woke late, or the other half of a `join` was stolen). A loop whose
//! warm-up steps never saw the overlap then takes a buffer from the OS in a
//! later step, and how many steps that takes depends on the scheduler.
//!
//! So each chunk of a region records its traffic per free list ([`Usage`]:
//! the running count of buffers it holds and that count's peak), the region
//! adds the chunks up into the most it could ever need at once with its
//! threads ([`Region::worst`]: every chunk's lasting buffers, plus the
//! largest transient excess once per thread), and when the outermost region
//! ends, each list it used is topped up so that the region's next run will
//! find that many buffers at its start ([`settle`], [`lacking`]). A region nested in another
//! (a `join` half's loops) folds its worst case into its parent's record
//! instead. The next run of the same region then meets no empty list
//! whatever the interleaving, and a single-threaded loop never records
//! anything (no region, no cost).

use std::cell::RefCell;
use std::sync::Mutex;

/// One free list's traffic within a scope.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Entry {
    /// The free list (alignment index * classes + class).
    slot: usize,
    /// Buffers taken minus buffers given back.
    count: i64,
    /// The largest `count` reached.
    peak: i64,
}

/// The traffic of one chunk of a region (or of the code a region folds
/// into): an entry per free list it touched.
#[derive(Clone, Debug, Default)]
pub(crate) struct Usage {
    entries: Vec<Entry>,
}

impl Usage {
    fn entry(&mut self, slot: usize) -> &mut Entry {
        let at = match self.entries.iter().position(|e| e.slot == slot) {
            Some(at) => at,
            None => {
                self.entries.push(Entry {
                    slot,
                    ..Entry::default()
                });
                self.entries.len() - 1
            }
        };
        &mut self.entries[at]
    }

    fn note(&mut self, slot: usize, delta: i64) {
        let e = self.entry(slot);
        e.count += delta;
        e.peak = e.peak.max(e.count);
    }

    /// Adds a finished region whose worst case for `slot` is `worst`
    /// buffers at once, `net` of which it still holds.
    fn absorb(&mut self, slot: usize, worst: i64, net: i64) {
        let e = self.entry(slot);
        e.peak = e.peak.max(e.count + worst);
        e.count += net;
    }
}

thread_local! {
    /// The scopes this thread is inside, innermost last; empty outside
    /// every parallel region (the common, untracked case).
    static STACK: RefCell<Vec<Usage>> = const { RefCell::new(Vec::new()) };
}

/// Records one take (`delta` 1) or give (`delta` -1) on free list
/// `slot`, if this thread is inside a scope.
pub(super) fn note(slot: usize, delta: i64) {
    // `try_with`: during the thread's exit no region is open any more.
    let _ = STACK.try_with(|s| {
        if let Some(top) = s.borrow_mut().last_mut() {
            top.note(slot, delta);
        }
    });
}

/// A region's record, filled by its chunks on whichever threads run them.
#[derive(Debug, Default)]
pub(crate) struct Region {
    per_slot: Mutex<Vec<Sum>>,
}

/// The chunks' traffic on one free list, added up.
#[derive(Clone, Copy, Debug, Default)]
struct Sum {
    slot: usize,
    /// Buffers the chunks kept (their positive counts), summed.
    lasting: i64,
    /// Buffers taken minus given, summed over the chunks.
    net: i64,
    /// The largest transient excess of one chunk (its peak above what it
    /// kept).
    excess: i64,
}

/// While alive, this thread's pool traffic is recorded for one chunk;
/// dropping it (also when the chunk panics) adds the record to the region.
pub(crate) struct ChunkScope<'a> {
    region: &'a Region,
}

impl Region {
    /// Starts recording a chunk of this region on the current thread.
    pub(crate) fn chunk(&self) -> ChunkScope<'_> {
        STACK.with(|s| s.borrow_mut().push(Usage::default()));
        ChunkScope { region: self }
    }

    /// The region's record per free list: `(slot, worst, net)`,
    /// where `worst` bounds the buffers held at once when up to `threads`
    /// chunks overlap: every chunk's lasting buffers, plus the largest
    /// transient excess once per thread.
    fn worst(&self, threads: usize) -> Vec<(usize, i64, i64)> {
        let sums = self.per_slot.lock().unwrap_or_else(|e| e.into_inner());
        sums.iter()
            .map(|s| (s.slot, s.lasting + threads as i64 * s.excess, s.net))
            .collect()
    }
}

impl Drop for ChunkScope<'_> {
    fn drop(&mut self) {
        let usage = STACK.with(|s| s.borrow_mut().pop()).unwrap_or_default();
        if usage.entries.is_empty() {
            return;
        }
        let mut sums = self
            .region
            .per_slot
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for e in usage.entries {
            let kept = e.count.max(0);
            let at = match sums.iter().position(|s| s.slot == e.slot) {
                Some(at) => at,
                None => {
                    sums.push(Sum {
                        slot: e.slot,
                        ..Sum::default()
                    });
                    sums.len() - 1
                }
            };
            let s = &mut sums[at];
            s.lasting += kept;
            s.net += e.count;
            s.excess = s.excess.max(e.peak - kept);
        }
    }
}

/// Ends a region run on up to `threads` threads: inside another scope its
/// worst case joins that scope's record; outermost, every free list it used
/// is handed to `top_up(slot, worst, net)` (see [`lacking`]).
pub(super) fn settle(region: &Region, threads: usize, top_up: impl Fn(usize, i64, i64)) {
    let worst = region.worst(threads);
    if worst.is_empty() {
        return;
    }
    let nested = STACK.with(|s| {
        let mut s = s.borrow_mut();
        match s.last_mut() {
            Some(top) => {
                for &(slot, w, net) in &worst {
                    top.absorb(slot, w, net);
                }
                true
            }
            None => false,
        }
    });
    if !nested {
        for (slot, w, net) in worst {
            top_up(slot, w, net);
        }
    }
}

/// How many buffers a free list lacks for the next run of a region that
/// may need `worst` at once: it holds `len` now, and the `net` buffers the
/// region took and kept come back before that run (a repeating loop frees
/// what it made), so it will hold `len + net` at the next run's start.
/// Buffers the OS supplied during this run are already among them.
pub(super) fn lacking(len: usize, worst: i64, net: i64) -> usize {
    (worst - (len as i64 + net)).max(0) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_scratch_counts_once_per_thread() {
        // Four chunks, each taking one scratch buffer of list 3 and giving
        // it back, on two threads: at most two at once.
        let region = Region::default();
        for _ in 0..4 {
            let _c = region.chunk();
            note(3, 1);
            note(3, -1);
        }
        assert_eq!(region.worst(2), vec![(3, 2, 0)]);
        assert_eq!(region.worst(1), vec![(3, 1, 0)]);
    }

    #[test]
    fn kept_buffers_add_up_and_scratch_rides_on_top() {
        // Three chunks each keep one output buffer (list 5) and use two
        // scratch buffers at once on the way.
        let region = Region::default();
        for _ in 0..3 {
            let _c = region.chunk();
            note(5, 1);
            note(5, 1);
            note(5, 1);
            note(5, -1);
            note(5, -1);
        }
        // Kept: 3; excess per chunk: peak 3 - kept 1 = 2, twice for 2 threads.
        assert_eq!(region.worst(2), vec![(5, 3 + 2 * 2, 3)]);
    }

    #[test]
    fn a_nested_region_folds_into_its_parent() {
        let outer = Region::default();
        {
            let _c = outer.chunk();
            note(1, 1); // the chunk holds one buffer of list 1
            let inner = Region::default();
            for _ in 0..2 {
                let _c = inner.chunk();
                note(1, 1);
                note(1, -1);
            }
            settle(&inner, 2, |_, _, _| panic!("nested regions never top up"));
            note(1, -1);
        }
        // The outer chunk peaked at 1 + 2 (the inner worst case on top of
        // the buffer it held); it kept nothing.
        assert_eq!(outer.worst(1), vec![(1, 3, 0)]);
    }

    #[test]
    fn lacking_counts_what_the_next_run_will_find() {
        // One buffer free after a serial run whose two chunks shared it;
        // two may overlap: one more.
        assert_eq!(lacking(1, 2, 0), 1);
        assert_eq!(lacking(2, 2, 0), 0);
        assert_eq!(lacking(5, 2, 0), 0);
        // The region kept 2 buffers (they return before its next run).
        assert_eq!(lacking(1, 4, 2), 1);
    }

    #[test]
    fn outside_a_scope_nothing_is_recorded() {
        note(7, 1);
        assert!(STACK.with(|s| s.borrow().is_empty()));
    }
}
