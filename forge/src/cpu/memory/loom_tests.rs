//! Model checks of the buffer pool's free lists under every interleaving
//! loom explores (`cfg(loom)` only: `scripts/loom.sh`): takes, gives and a
//! trim racing on one [`MemPool`](super::freelists::MemPool), whose lock is
//! loom's under this cfg (`cpu/sync.rs`).
//!
//! The buffers themselves are plain memory loom does not track, so each
//! thread checks its ownership itself: it writes its mark into the buffer
//! it took, lets the others run, and reads the mark back. A buffer handed
//! to two threads at once (a buffer listed twice, a pop that does not
//! remove) shows as a mark overwritten in some schedule.

use super::freelists::{give, stats, take, trim};
use loom::thread;

/// Bytes and alignment of the buffers the threads share a class of.
const BYTES: usize = 64;
const ALIGN: usize = 8;

/// Takes a buffer, marks it with `mark`, lets every other thread run,
/// checks the mark is still there, gives the buffer back.
fn hold_once(mark: u64) {
    let b = take(BYTES, ALIGN);
    let p = b.ptr.as_ptr().cast::<u64>();
    // SAFETY: the block is `BYTES >= 8` bytes, aligned to at least 64, and
    // (if the pool is right) this thread's alone until it is given back.
    unsafe { p.write(mark) };
    thread::yield_now();
    // SAFETY: as above.
    let seen = unsafe { p.read() };
    assert_eq!(seen, mark, "a buffer was held by two threads at once");
    // SAFETY: `b` came from `take` with these bytes and alignment, from the
    // process's pool (no thread here sets another target), and is not used
    // again.
    unsafe { give(b.ptr, b.bytes, ALIGN, &b.pool) };
}

/// Three threads each take a buffer of the same class, hold it across a
/// yield and give it back; one of them then trims the pool while the
/// others may still be taking or giving. In every interleaving: no buffer
/// is held by two threads at once, and at the end the counters balance
/// (nothing live, every take counted once as a hit or a miss, the held
/// bytes exactly what a final trim releases).
#[test]
fn takes_gives_and_a_trim_never_share_a_buffer_and_balance_the_counters() {
    loom::model(|| {
        let before = stats();
        let others: Vec<_> = [2u64, 3]
            .into_iter()
            .map(|mark| thread::spawn(move || hold_once(mark)))
            .collect();
        hold_once(1);
        trim();
        for h in others {
            h.join().unwrap();
        }
        let s = stats();
        assert_eq!(s.live_bytes, 0, "{s:?}");
        assert_eq!(s.hits + s.misses - before.hits - before.misses, 3, "{s:?}");
        let held = s.held_bytes;
        assert_eq!(trim(), held, "{s:?}");
        assert_eq!(stats().held_bytes, 0);
    });
}

/// Two threads take and give back twice each, over the same class: the
/// second round reuses what the first gave back (hits), whoever gave it.
/// No buffer is held twice, and the pool never asks the OS for more than
/// the two buffers both threads can hold at once (each buffer taken from
/// the OS stays listed: the footprint's high-water mark is what is held).
#[test]
fn reuse_across_threads_never_shares_a_buffer() {
    loom::model(|| {
        let other = thread::spawn(|| {
            hold_once(20);
            hold_once(21);
        });
        hold_once(10);
        hold_once(11);
        other.join().unwrap();
        let s = stats();
        assert_eq!(s.live_bytes, 0, "{s:?}");
        assert!(s.misses <= 2 && s.hits + s.misses == 4, "{s:?}");
        assert_eq!(s.high_water_bytes, s.held_bytes, "{s:?}");
        trim();
    });
}
