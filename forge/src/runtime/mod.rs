//! The runtime the kernels run on: the worker threads, the buffer pool
//! tensors draw their memory from, and what this machine's CPU offers.
//!
//! This is the whole of what forge exposes of its CPU back end; the kernels
//! themselves are private. Results never depend on the thread count or on
//! the pool's state, only speed and memory use do.
//!
//! - Threads: [`num_threads`], [`set_num_threads`] (default: the machine's
//!   available parallelism, or `FORGE_NUM_THREADS`), and
//!   [`pool_dispatches`] to see whether work went to the worker threads.
//! - Memory: [`memory_stats`] ([`MemoryStats`]: reuses, requests to the
//!   operating system, footprint, high-water mark, and the copies an
//!   in-place update had to make), [`trim_memory`], [`set_memory_ceiling`]
//!   and [`reset_high_water`]; [`Storage`] is the pooled buffer behind
//!   every tensor. Each [`Executor`] owns a pool of its own (the process's
//!   default executor uses the process's), and an [`Arena`] holds the
//!   outputs of repeated calls; these functions act on the calling
//!   thread's pool: its executor's or arena's inside one of their calls,
//!   else the process's.
//! - The CPU: [`cpu_info`] names the vector instructions the kernels use.
//!
//! ```
//! use forge::runtime;
//! let before = runtime::memory_stats();
//! let t = forge::Tensor::<f32>::zeros(&[1000]);
//! let after = runtime::memory_stats();
//! assert_eq!(after.hits + after.misses, before.hits + before.misses + 1);
//! drop(t);
//! assert!(runtime::num_threads() >= 1);
//! println!("{}", runtime::cpu_info());
//! ```

mod arena;
mod cpu_info;
mod deferred;
mod describe;
mod executor;
mod flow;

pub use crate::cpu::memory::{MemoryStats, Storage};
pub use arena::{outside_arena, Arena};
pub use cpu_info::{cpu_info, CpuInfo, Simd};
pub use deferred::{Deferred, Status};
pub use describe::{describe, Description};
pub use executor::Executor;
pub use flow::Flow;

use crate::cpu::class::Class;

/// The private class of a public [`Simd`].
fn class_of(s: Simd) -> Class {
    match s {
        Simd::Portable => Class::Portable,
        Simd::Avx2Fma => Class::Avx2,
        Simd::Avx512 => Class::Avx512,
        Simd::Amx => Class::Amx,
    }
}

/// The public [`Simd`] of a private class.
fn simd_of(c: Class) -> Simd {
    match c {
        Class::Portable => Simd::Portable,
        Class::Avx2 => Simd::Avx2Fma,
        Class::Avx512 => Simd::Avx512,
        Class::Amx => Simd::Amx,
    }
}

/// The CPU class the kernels use on the calling thread: the executor's
/// pinned class inside one of its calls, else the process's (the widest
/// this CPU has, unless `FORGE_CPU_CLASS` or [`set_cpu_class`] chose a
/// narrower one).
///
/// ```
/// use forge::runtime::{cpu_class, detected_cpu_class, Executor, Simd};
/// println!("{} kernels, {} at best", cpu_class(), detected_cpu_class());
/// let pinned = Executor::current_thread().with_cpu_class(Simd::Portable).unwrap();
/// assert_eq!(pinned.run(cpu_class), Simd::Portable);
/// ```
pub fn cpu_class() -> Simd {
    simd_of(crate::cpu::class::current())
}

/// The widest CPU class this CPU supports.
///
/// ```
/// let best = forge::runtime::detected_cpu_class();
/// println!("this CPU runs {best} kernels at best");
/// ```
pub fn detected_cpu_class() -> Simd {
    simd_of(crate::cpu::class::detected())
}

/// Sets the process's CPU class (what `FORGE_CPU_CLASS` sets at start-up):
/// calls outside every executor, and executors without a pinned class,
/// use kernels of that class at most. Results are the same bits in every
/// class; only speed differs.
///
/// # Errors
/// [`ForgeError::Unsupported`](crate::ForgeError::Unsupported) when this
/// CPU lacks `class` (nothing changes).
///
/// ```
/// use forge::runtime::{cpu_class, set_cpu_class, Simd};
/// let before = cpu_class();
/// set_cpu_class(Simd::Portable).unwrap();
/// assert_eq!(cpu_class(), Simd::Portable);
/// set_cpu_class(before).unwrap();
/// ```
pub fn set_cpu_class(class: Simd) -> crate::Result<()> {
    let c = class_of(class);
    if c > crate::cpu::class::detected() {
        return Err(crate::ForgeError::unsupported(
            "CPU class",
            format!("{class} (this CPU has {})", detected_cpu_class()),
        ));
    }
    crate::cpu::class::set_process_class(c);
    Ok(())
}

/// The number of threads forge's kernels use on the calling thread: its
/// executor's inside an [`Executor`]'s call, else the process's (the
/// machine's available parallelism, or `FORGE_NUM_THREADS` when set, or
/// what [`set_num_threads`] set).
///
/// ```
/// assert!(forge::runtime::num_threads() >= 1);
/// ```
pub fn num_threads() -> usize {
    crate::cpu::threads::num_threads()
}

/// Sets the number of threads forge's kernels use (clamped to `1..=256`).
/// Results do not depend on it, only speed does. It takes effect at the
/// next kernel; the first kernel run with a new count starts that count's
/// worker threads, which then stay for the life of the process. The count
/// is the process's default executor's ([`Executor::process`]); calls
/// inside another [`Executor`] use that executor's count.
///
/// ```
/// let before = forge::runtime::num_threads();
/// forge::runtime::set_num_threads(1);
/// assert_eq!(forge::runtime::num_threads(), 1);
/// forge::runtime::set_num_threads(before);
/// ```
pub fn set_num_threads(n: usize) {
    crate::cpu::threads::set_num_threads(n)
}

/// How many parallel calls made from the calling thread handed work to the
/// worker threads. Calls that ran inline do not count: one thread, one
/// chunk, a call nested in another, or an op too small to pay for waking a
/// worker (about 15 µs of work). Per thread, so a caller can check whether
/// an op of its own went parallel.
///
/// ```
/// use forge::{runtime, Tensor};
/// let before = runtime::pool_dispatches();
/// let _ = Tensor::<f32>::ones(&[4]).exp(); // far too small to split
/// assert_eq!(runtime::pool_dispatches(), before);
/// ```
pub fn pool_dispatches() -> u64 {
    crate::cpu::threads::pool_dispatches()
}

/// A snapshot of the calling thread's buffer pool's counters (see
/// [`MemoryStats`]): inside an [`Executor`]'s call its pool's (also
/// [`Executor::memory_stats`]), inside an [`Arena`]'s call the arena's,
/// else the process's.
///
/// ```
/// let s = forge::runtime::memory_stats();
/// assert!(s.held_bytes <= s.high_water_bytes);
/// ```
pub fn memory_stats() -> MemoryStats {
    crate::cpu::memory::stats()
}

/// Gives every free buffer of the calling thread's pool (see
/// [`memory_stats`]) back to the operating system and returns the number
/// of bytes released, for example after training,
/// before a long idle phase. Tensors alive keep their memory; the pool
/// refills from the operating system as tensors are created again.
///
/// ```
/// drop(forge::Tensor::<f32>::zeros(&[1 << 16]));
/// let released = forge::runtime::trim_memory();
/// // Another thread may free a buffer meanwhile; in a quiet process this is 0.
/// let _ = (released, forge::runtime::memory_stats().held_bytes);
/// ```
pub fn trim_memory() -> usize {
    crate::cpu::memory::trim()
}

/// The most bytes the pool's free lists hold when neither
/// `FORGE_POOL_CEILING_MB` nor [`set_memory_ceiling`] says otherwise: 1 GiB.
///
/// ```
/// assert_eq!(forge::runtime::DEFAULT_MEMORY_CEILING, 1 << 30);
/// ```
pub const DEFAULT_MEMORY_CEILING: usize = crate::cpu::memory::DEFAULT_CEILING_BYTES;

/// Sets the most bytes the calling thread's pool (see [`memory_stats`])
/// may keep on its free lists. A freed buffer that
/// would push the held bytes above it goes back to the operating system
/// instead; lowering the ceiling below what is held releases the excess at
/// once (largest buffers first). Buffers in use by tensors are never
/// affected.
///
/// ```
/// use forge::runtime;
/// runtime::set_memory_ceiling(64 << 20);
/// assert_eq!(runtime::memory_stats().ceiling_bytes, 64 << 20);
/// runtime::set_memory_ceiling(runtime::DEFAULT_MEMORY_CEILING);
/// ```
pub fn set_memory_ceiling(bytes: usize) {
    crate::cpu::memory::set_ceiling(bytes)
}

/// Restarts the calling thread's pool's high-water mark at its current footprint
/// (`live_bytes + held_bytes`), to measure the peak of one phase.
///
/// ```
/// forge::runtime::reset_high_water();
/// let s = forge::runtime::memory_stats();
/// assert!(s.high_water_bytes >= s.live_bytes + s.held_bytes);
/// ```
pub fn reset_high_water() {
    crate::cpu::memory::reset_high_water()
}

/// Tunes glibc's `malloc` for kernels that allocate their own scratch
/// (the gemm's packing buffers): the mmap threshold goes to 32 MiB and the
/// trim threshold to 512 MiB, so freed scratch stays mapped for the next
/// call instead of being faulted in again. Returns whether the settings
/// changed (glibc on Linux only; elsewhere nothing happens).
///
/// This changes the allocator of the whole process, so forge never calls
/// it by itself: a program that owns its process may call it once at
/// start-up (or set `FORGE_MALLOC_TUNE=1`). A library embedding forge
/// should leave it to the program.
///
/// ```
/// // In a program's main, before the first model runs:
/// let tuned = forge::runtime::tune_malloc();
/// assert_eq!(tuned, cfg!(all(target_os = "linux", target_env = "gnu")));
/// ```
pub fn tune_malloc() -> bool {
    crate::cpu::memory::freelists::tune_malloc()
}
