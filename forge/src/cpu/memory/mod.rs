//! The CPU device's buffer pool: where tensor storage comes from and where
//! it goes back to.
//!
//! Every op writes its output into a [`Storage`], whose buffer is taken from
//! process-wide free lists, one per size class and alignment (so an `f32`
//! buffer may be reused for an `i32` of the same byte size). Dropping the
//! storage (when the last tensor sharing it is dropped) puts the buffer back
//! on its list instead of freeing it, so a training loop that repeats the
//! same shapes stops asking the operating system for memory after its first
//! step: no page faults, no `munmap` of large buffers and no TLB shootdowns
//! between threads.
//!
//! * **Size classes**: four per power of two above 64 bytes, so at most a
//!   quarter of a buffer is slack (see [`MemoryStats`] for how bytes count).
//! * **Alignment and huge pages**: every block starts on a 64-byte cache
//!   line; blocks of 2 MiB or more start on a 2 MiB boundary and are
//!   advised as transparent huge pages (`madvise(MADV_HUGEPAGE)` on Linux),
//!   so a large operand costs a handful of TLB entries instead of one per
//!   4 KiB page (a 1024^3 sgemm at 2 threads: 180 -> 281 GFLOP/s).
//! * **Ceiling**: the free lists hold at most [`stats`]`().ceiling_bytes`
//!   (1 GiB by default, `FORGE_POOL_CEILING_MB` to change it at start-up,
//!   [`set_ceiling`] at run time). A buffer freed while the lists are full
//!   goes back to the OS.
//! * **Trim**: [`trim`] returns every free buffer to the OS, for example
//!   after training before a long idle phase.
//! * **Counters**: [`stats`] returns [`MemoryStats`]: hits (reuses), misses
//!   (buffers asked from the OS), vectors wrapped from outside, live and
//!   held bytes, the high-water mark of the footprint, released bytes, and
//!   the copies in-place updates had to make of shared values.
//!
//! Users reach all of this through [`crate::runtime`].

mod asan;
mod classes;
pub(crate) mod freelists;
#[cfg(all(test, loom))]
mod loom_tests;
pub(crate) mod reserve;
mod storage;

pub(crate) use freelists::{count_copy_on_write, stats_of_process, thread_takes};
pub use freelists::{
    reset_high_water, set_ceiling, stats, trim, MemoryStats, DEFAULT_CEILING_BYTES,
};
pub use storage::Storage;
