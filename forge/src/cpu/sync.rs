//! The synchronisation primitives of the thread pool's spans, a task's
//! completion count, `join`'s hand-off and the buffer pool's free lists
//! (their lock), in one place so that a model checker
//! can swap them: a normal build takes them from `std`; a build with
//! `RUSTFLAGS="--cfg loom"` takes them from the [loom] crate, whose
//! `loom::model` runs a test under every interleaving of its threads
//! (`loom_tests` under `cpu/threads/`, `cpu/threads/join/` and
//! `cpu/memory/`;
//! `scripts/loom.sh` runs them).
//!
//! Only the types the model-checked code uses go through here, so a normal
//! build is exactly what it was (these are re-exports of `std`'s types).
//!
//! [loom]: https://docs.rs/loom

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::Mutex;

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::Mutex;

/// One look of a wait loop that has found nothing to do: a hint to the
/// core under a normal build; under loom a yield to the model's other
/// threads (a spinning loop must yield there, or the model never ends).
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(not(loom))]
    std::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}
