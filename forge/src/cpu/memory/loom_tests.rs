//! Model check of the free lists (`cfg(loom)` only: `scripts/loom.sh`):
//! threads taking and giving back buffers of one class at once, every
//! interleaving of their turns at the pool's lock.

use super::freelists::{give, stats, take, trim};
use loom::thread;

/// Bytes of the class the threads use (the smallest).
const BYTES: usize = 64;

/// Takes a buffer, stamps it with `id`, lets the other threads run, and
/// checks the stamp is still there before giving the buffer back: a
/// buffer handed to two threads at once (say, one given back twice)
/// shows up as the other thread's stamp in some interleaving.
fn use_one(id: u64) {
    let block = take(BYTES, 8);
    assert_eq!(block.bytes, BYTES);
    let p = block.ptr.as_ptr().cast::<u64>();
    // SAFETY: `take` returned a block of `BYTES` >= 8 bytes aligned to 64,
    // owned by this thread until `give` below; the reads and writes stay
    // in its first 8 bytes. (Volatile, so that a second owner's write in
    // between is seen, not folded away.)
    unsafe { p.write_volatile(id) };
    thread::yield_now();
    // SAFETY: as above, the block is still this thread's.
    let seen = unsafe { p.read_volatile() };
    assert_eq!(seen, id, "a pooled buffer was held by two threads at once");
    // SAFETY: `block` came from `take(BYTES, 8)`, whose class is exactly
    // `BYTES`, and is not touched after this call.
    unsafe { give(block.ptr, BYTES, 8) };
}

/// Two threads and the main one each take and give a buffer twice, the
/// free list starting with one buffer in it: no buffer is ever held by two
/// threads, and afterwards the counters balance (nothing live, every
/// buffer the OS gave counted as held, each take a hit or a miss).
#[test]
fn no_buffer_is_held_twice_and_the_counters_balance() {
    let mut builder = loom::model::Builder::new();
    // 3 threads with a lock each turn: bound the preemptions so that the
    // model ends in minutes (every schedule with at most 2 forced
    // switches, plus all voluntary ones at the yields and the lock).
    builder.preemption_bound = Some(2);
    builder.check(|| {
        // One buffer in the free list to start with.
        use_one(0);
        let before = stats();
        let handles: Vec<_> = (1..3)
            .map(|id| {
                thread::spawn(move || {
                    use_one(id);
                    use_one(id);
                })
            })
            .collect();
        use_one(3);
        for h in handles {
            h.join().unwrap();
        }
        let after = stats();
        assert_eq!(after.live_bytes, 0);
        assert_eq!(after.hits + after.misses, before.hits + before.misses + 5);
        assert_eq!(after.held_bytes as u64, after.misses * BYTES as u64);
        trim();
    });
}
