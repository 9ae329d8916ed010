//! The chunks of one parallel loop, dealt out in contiguous spans: one per
//! thread taking part, each thread claiming from the front of its own span
//! and, once that is empty, from the back of the others'.
//!
//! Why spans and not one shared counter: with a counter, chunk `i` of one
//! op and chunk `i` of the next went to whichever thread came first, so a
//! thread mostly read what the other had just written. Where the two cores
//! share a last-level cache that costs little; where they do not (the
//! 2-vCPU benchmark machine, whose host sometimes places the vCPUs on two
//! AMD core complexes: a cache-line round trip of 330-370 ns instead of
//! 55-75 ns), every such read crossed between the complexes, and
//! ResNet-18's 2-thread step took 50-53 ms instead of 34 (1 thread: 56).
//! With spans, thread `t` of `T` starts on chunks `[t n / T, (t + 1) n / T)`
//! of every loop, so consecutive ops over the same rows keep each half on
//! the core that wrote it, and a claim touches the claiming thread's own
//! cache line unless it steals.
//!
//! Which thread runs a chunk never changes what the chunk computes, so
//! results stay bit-identical for any thread count and any steal.

use crate::cpu::sync::{AtomicU64, Ordering};

/// The spans of one loop over `chunks` chunks, for `owners` threads: owner
/// `t`'s remaining chunks `[front, back)` packed in one word (`front` in
/// the high half), so that the owner, taking from the front, and a thief,
/// taking from the back, each claim with one compare-exchange. The words
/// lie [`STRIDE`] words apart, so no two share a cache line (or a pair of
/// lines, which the adjacent-line prefetcher fetches together) and owners
/// do not contend.
pub(super) struct Spans {
    words: Box<[AtomicU64]>,
}

/// Words from one span to the next: 128 bytes. Not a `#[repr(align(128))]`
/// type: an over-aligned allocation per loop went through the C
/// allocator's aligned path, whose split-off remainders grew the heap
/// (0.3-1.0 page faults per 2-thread MLP training step, against 0-0.02).
const STRIDE: usize = 16;

fn pack(front: usize, back: usize) -> u64 {
    ((front as u64) << 32) | back as u64
}

fn unpack(v: u64) -> (usize, usize) {
    ((v >> 32) as usize, (v & 0xffff_ffff) as usize)
}

/// Most chunks a loop may have (the span bounds are 32-bit).
pub(super) const MAX_CHUNKS: usize = u32::MAX as usize;

impl Spans {
    /// `chunks` split into `owners` contiguous spans of sizes differing by
    /// at most one, in order: owner `t` gets `[t chunks / owners, (t + 1)
    /// chunks / owners)`.
    ///
    /// # Panics
    /// When `owners` is 0 or `chunks` exceeds [`MAX_CHUNKS`].
    pub(super) fn new(chunks: usize, owners: usize) -> Self {
        assert!(
            owners > 0 && chunks <= MAX_CHUNKS,
            "Spans: {chunks} chunks, {owners} owners"
        );
        let words = (0..owners * STRIDE)
            .map(|w| {
                let t = w / STRIDE;
                AtomicU64::new(if w % STRIDE == 0 {
                    pack(t * chunks / owners, (t + 1) * chunks / owners)
                } else {
                    0
                })
            })
            .collect();
        Spans { words }
    }

    /// Claims the next chunk for owner `me` (`None`: a thread with no span
    /// of its own, which only steals): the front of its own span, else the
    /// back of another's, looking at the owners after `me` in turn.
    /// `None` when every span is empty.
    pub(super) fn claim(&self, me: Option<usize>) -> Option<usize> {
        let n = self.words.len() / STRIDE;
        let me = me.filter(|&t| t < n);
        if let Some(i) = me.and_then(|t| self.take(t, true)) {
            return Some(i);
        }
        let first = me.map_or(0, |t| t + 1);
        (0..n)
            .map(|k| (first + k) % n)
            .filter(|&t| Some(t) != me)
            .find_map(|t| self.take(t, false))
    }

    /// Takes one chunk from span `t`: its front when `front`, else its back.
    fn take(&self, t: usize, front: bool) -> Option<usize> {
        let span = &self.words[t * STRIDE];
        let mut cur = span.load(Ordering::Relaxed);
        loop {
            let (f, b) = unpack(cur);
            if f >= b {
                return None;
            }
            let (next, got) = if front {
                (pack(f + 1, b), f)
            } else {
                (pack(f, b - 1), b - 1)
            };
            // Relaxed, as the shared counter was: a claim only decides who
            // runs a chunk; the chunk's writes reach the caller through the
            // task's `done` count (AcqRel / Acquire).
            match span.compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Some(got),
                Err(now) => cur = now,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_take_their_own_span_in_order_then_steal_from_the_back() {
        let s = Spans::new(10, 2);
        // owner 0: [0, 5), owner 1: [5, 10)
        assert_eq!(s.claim(Some(0)), Some(0));
        assert_eq!(s.claim(Some(1)), Some(5));
        assert_eq!(s.claim(Some(0)), Some(1));
        for want in [2, 3, 4] {
            assert_eq!(s.claim(Some(0)), Some(want));
        }
        // owner 0's span is empty: it steals owner 1's last chunks
        assert_eq!(s.claim(Some(0)), Some(9));
        assert_eq!(s.claim(Some(1)), Some(6));
        // a thread without a span steals only
        assert_eq!(s.claim(None), Some(8));
        assert_eq!(s.claim(Some(1)), Some(7));
        assert_eq!(s.claim(Some(0)), None);
        assert_eq!(s.claim(Some(1)), None);
        assert_eq!(s.claim(None), None);
    }

    #[test]
    fn spans_cover_every_chunk_once_for_any_split() {
        for chunks in [0, 1, 2, 3, 7, 64, 1000] {
            for owners in 1..6 {
                let s = Spans::new(chunks, owners);
                let mut seen = vec![0u32; chunks];
                // round-robin over owners and a span-less thief
                let mut who = 0;
                let mut empty = 0;
                while empty <= owners {
                    let me = if who == owners { None } else { Some(who) };
                    match s.claim(me) {
                        Some(i) => {
                            seen[i] += 1;
                            empty = 0;
                        }
                        None => empty += 1,
                    }
                    who = (who + 1) % (owners + 1);
                }
                assert_eq!(seen, vec![1; chunks], "{chunks} chunks, {owners} owners");
            }
        }
    }

    #[test]
    fn an_owner_out_of_range_only_steals() {
        let s = Spans::new(4, 2);
        assert_eq!(s.claim(Some(7)), Some(1));
        assert_eq!(s.claim(Some(0)), Some(0));
        assert_eq!(s.claim(Some(7)), Some(3));
        assert_eq!(s.claim(Some(7)), Some(2));
        assert_eq!(s.claim(Some(7)), None);
    }
}
