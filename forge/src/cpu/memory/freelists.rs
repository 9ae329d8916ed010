//! The free lists of a pool, their counters, the ceiling and trim; the
//! process's pool and the calling thread's choice of pool.
//!
//! A [`MemPool`] is a set of free lists with its own counters and ceiling.
//! The process has one (calls outside every executor use it); each
//! [`Executor`](crate::runtime::Executor) and each
//! [`Arena`](crate::runtime::Arena) owns another. Which pool a new buffer
//! comes from is the calling thread's *target* ([`current`], set by
//! [`with_target`] while an executor or an arena runs a call, and carried
//! to the worker threads with each parallel task); a buffer goes back to
//! the pool it came from, whatever thread frees it.

use super::asan;
use super::classes::{class_bytes, class_of, CLASSES, MAX_POOLED};
use super::reserve::{self, Region};
use std::alloc::{alloc, alloc_zeroed, dealloc, Layout};
use std::cell::RefCell;
use std::ptr::NonNull;
// The lock of the free lists comes from the sync shim, so that a
// `--cfg loom` build model-checks it (`loom_tests`); the rest is `std`.
use crate::cpu::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Alignments kept apart: 1, 2, 4, 8, 16 bytes (index = log2).
const ALIGNS: usize = 5;

/// A free buffer: the start of an allocation of `class_bytes(class)` bytes
/// with alignment `2^align`.
struct Free(NonNull<u8>);

// SAFETY: a free buffer is plain memory owned by the free lists alone; no
// other pointer to it exists while it is listed, so moving it to another
// thread is sound.
unsafe impl Send for Free {}

/// Counters of the CPU buffer pool, as returned by
/// [`memory_stats`](crate::runtime::memory_stats).
///
/// `live_bytes + held_bytes` is the pool's footprint: the bytes it has
/// taken from the operating system and not given back. `high_water_bytes`
/// is the largest footprint seen since the process started (or since
/// [`reset_high_water`](crate::runtime::reset_high_water)). Byte counts are
/// of whole size classes, so a buffer of 1000 `f32` counts as 4096 bytes
/// (its class) rather than 4000.
///
/// ```
/// let s = forge::runtime::memory_stats();
/// assert!(s.held_bytes <= s.high_water_bytes);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Allocations served from a free list (no request to the OS).
    pub hits: u64,
    /// Allocations that asked the operating system for a new buffer.
    pub misses: u64,
    /// Vectors wrapped as tensor storage without coming from the pool
    /// (`Tensor::from_vec`); they are freed to the OS, not pooled.
    pub wrapped: u64,
    /// Bytes of pooled buffers currently owned by tensors or kernels.
    pub live_bytes: usize,
    /// Bytes sitting in the free lists, ready for reuse.
    pub held_bytes: usize,
    /// The largest `live_bytes + held_bytes` seen.
    pub high_water_bytes: usize,
    /// Bytes given back to the OS: by [`trim_memory`](crate::runtime::trim_memory),
    /// or because keeping a freed buffer would have put `held_bytes` above
    /// the ceiling.
    pub released_bytes: u64,
    /// The most bytes the free lists may hold (see
    /// [`set_memory_ceiling`](crate::runtime::set_memory_ceiling)).
    pub ceiling_bytes: usize,
    /// In-place updates that found their values shared and wrote a copy
    /// instead: an optimizer step while something else (most often a loss
    /// still alive, whose graph holds every weight it read) shares a
    /// weight's values. Each is a full copy of the tensor; zero in a
    /// training loop that uses
    /// [`Optimizer::backward_step`](crate::optim::Optimizer::backward_step)
    /// or drops the loss before stepping.
    pub copies_on_write: u64,
    /// Bytes of the values those copies took (element bytes, not size
    /// classes).
    pub copied_on_write_bytes: u64,
    /// Bytes of every buffer taken from the pool since the process began
    /// (size classes, hits and misses alike): the difference over a
    /// training step is the memory that step allocated.
    pub taken_bytes: u64,
}

struct Pool {
    lists: Vec<Vec<Free>>,
    stats: MemoryStats,
}

/// The ceiling when neither `FORGE_POOL_CEILING_MB` nor [`set_ceiling`]
/// says otherwise: 1 GiB.
pub const DEFAULT_CEILING_BYTES: usize = 1 << 30;

/// A pool of free lists: the process's ([`PROCESS`]), an executor's or an
/// arena's.
pub(crate) struct MemPool {
    /// Built at the first use (the ceiling read from the environment).
    state: Mutex<Option<Pool>>,
    /// Set for an arena's pool: its name and the call it serves now.
    arena: Option<ArenaMark>,
}

/// What makes a pool an arena's: buffers it hands out carry the
/// generation (the arena's call) they were taken in, and reading one after
/// the arena has moved on panics (`Storage`'s accessors).
pub(crate) struct ArenaMark {
    pub name: String,
    /// The arena's current call, from 1; bumped as each call starts.
    pub generation: AtomicU64,
}

/// The process's pool: used by calls outside every executor, and by the
/// process's default executor.
#[cfg(not(loom))]
static PROCESS: MemPool = MemPool {
    state: Mutex::new(None),
    arena: None,
};

// Under loom a lock is an object of the current model run, so the
// process's pool is made afresh in each run (loom's `Mutex::new` is not
// `const` either).
#[cfg(loom)]
loom::lazy_static! {
    static ref PROCESS: MemPool = MemPool::new(None);
}

/// The process's pool.
fn process() -> &'static MemPool {
    &PROCESS
}

/// A pool a buffer belongs to: `None` is the process's.
pub(crate) type PoolRef = Option<Arc<MemPool>>;

thread_local! {
    /// Where this thread's new buffers come from (`None`: the process's
    /// pool), and the pool outside its innermost arena.
    static TARGET: RefCell<(PoolRef, PoolRef)> = const { RefCell::new((None, None)) };
}

/// The pool this thread's new buffers come from now.
pub(crate) fn current() -> PoolRef {
    TARGET.with(|t| t.borrow().0.clone())
}

/// The pool outside the thread's innermost arena (its executor's, or the
/// process's).
pub(crate) fn current_base() -> PoolRef {
    TARGET.with(|t| t.borrow().1.clone())
}

/// Runs `f` with `target` as this thread's pool (and, unless `target` is
/// an arena's, as the pool outside arenas too), restoring the previous
/// ones afterwards, also when `f` panics.
pub(crate) fn with_target<R>(target: PoolRef, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<(PoolRef, PoolRef)>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(prev) = self.0.take() {
                TARGET.with(|t| *t.borrow_mut() = prev);
            }
        }
    }
    let is_arena = target.as_ref().is_some_and(|p| p.arena.is_some());
    let prev = TARGET.with(|t| {
        let mut t = t.borrow_mut();
        let base = if is_arena {
            t.1.clone()
        } else {
            target.clone()
        };
        std::mem::replace(&mut *t, (target, base))
    });
    let _restore = Restore(Some(prev));
    f()
}

/// The pool `r` names.
fn resolve(r: &PoolRef) -> &MemPool {
    r.as_deref().unwrap_or_else(|| process())
}

/// Whether `a` and `b` name the same pool.
fn same(a: &PoolRef, b: &PoolRef) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        _ => false,
    }
}

/// Keeps glibc's allocator from handing large temporaries back to the OS;
/// returns whether it changed anything (glibc on Linux only).
///
/// Kernels outside forge allocate their own scratch with `malloc`
/// (`matrixmultiply` packs every gemm's operands into a fresh buffer of up
/// to a few MiB). glibc serves such sizes with `mmap` or trims them off the
/// top of a heap when they are freed, so every call faults its buffer in
/// again. This raises the mmap threshold to its maximum (32 MiB) and the
/// trim threshold to 512 MiB (both fixed values, which also stops glibc's
/// own adjustment), so freed scratch stays mapped for the next call.
///
/// It changes the allocator of the whole process, so forge never does it
/// by itself: only when asked ([`crate::runtime::tune_malloc`], or
/// `FORGE_MALLOC_TUNE=1` read at the pool's first use).
pub fn tune_malloc() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // glibc's <malloc.h>: int mallopt(int param, int value).
        unsafe extern "C" {
            fn mallopt(param: i32, value: i32) -> i32;
        }
        const M_TRIM_THRESHOLD: i32 = -1;
        const M_MMAP_THRESHOLD: i32 = -3;
        // SAFETY: mallopt only sets allocator parameters; these two take
        // any non-negative byte count (an out-of-range value is refused
        // with a 0 return, which leaves the default in place).
        unsafe {
            mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 && mallopt(M_TRIM_THRESHOLD, 512 << 20) == 1
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    false
}

impl MemPool {
    /// A new, empty pool (an arena's when `arena` is given).
    pub(crate) fn new(arena: Option<ArenaMark>) -> Self {
        MemPool {
            state: Mutex::new(None),
            arena,
        }
    }

    /// The arena mark of an arena's pool.
    pub(crate) fn arena(&self) -> Option<&ArenaMark> {
        self.arena.as_ref()
    }

    fn with<R>(&self, f: impl FnOnce(&mut Pool) -> R) -> R {
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let pool = guard.get_or_insert_with(new_pool);
        f(pool)
    }
}

impl Drop for MemPool {
    /// An executor's or an arena's pool goes when the last buffer taken
    /// from it and its owner are gone: its free buffers go back to the OS.
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(pool) = state.take() {
            for (slot, list) in pool.lists.into_iter().enumerate() {
                let l = layout(slot % CLASSES, 1 << (slot / CLASSES));
                for Free(ptr) in list {
                    asan::unpoison(ptr, l.size());
                    // SAFETY: a listed buffer is owned by the list alone
                    // and was allocated by `fresh` with this layout.
                    unsafe { dealloc(ptr.as_ptr(), l) };
                }
            }
        }
    }
}

/// A new pool's free lists and counters.
fn new_pool() -> Pool {
    {
        static TUNE: std::sync::Once = std::sync::Once::new();
        TUNE.call_once(|| {
            if std::env::var("FORGE_MALLOC_TUNE").is_ok_and(|v| v == "1") {
                tune_malloc();
            }
        });
        let ceiling = std::env::var("FORGE_POOL_CEILING_MB")
            .ok()
            .and_then(|s| s.parse::<usize>().ok())
            .map_or(DEFAULT_CEILING_BYTES, |mb| mb.saturating_mul(1 << 20));
        Pool {
            lists: (0..ALIGNS * CLASSES).map(|_| Vec::new()).collect(),
            stats: MemoryStats {
                ceiling_bytes: ceiling,
                ..MemoryStats::default()
            },
        }
    }
}

fn align_index(align: usize) -> usize {
    debug_assert!(align.is_power_of_two() && align <= 16);
    align.trailing_zeros() as usize
}

/// The allocation behind a block of `class` for requests aligned to
/// `align`: every block starts on a cache line (a 64-byte vector load
/// from the start of a tensor never spans two lines), and blocks of
/// [`HUGE_BYTES`] or more on a 2 MiB boundary ([`advise_huge`]). The
/// alignment is a function of the class and the requested alignment
/// alone, so [`give`] and [`trim`] free with the layout [`take`]
/// allocated with.
fn layout(class: usize, align: usize) -> Layout {
    let size = class_bytes(class);
    let align = if size >= HUGE_BYTES {
        HUGE_BYTES
    } else {
        align.max(64)
    };
    Layout::from_size_align(size, align).expect("pool: bad layout")
}

/// Blocks of at least this many bytes (2 MiB) start on a huge-page
/// boundary and are advised as transparent huge pages.
const HUGE_BYTES: usize = 2 << 20;

/// Asks Linux to back the `bytes` bytes at `ptr` with transparent huge
/// pages (`madvise(MADV_HUGEPAGE)`; effective where
/// `/sys/kernel/mm/transparent_hugepage/enabled` is `madvise` or
/// `always`, as on Debian and most distributions). A 4 MiB operand on
/// 4 KiB pages spans 1024 TLB entries, and a gemm's packing walks its
/// rows a page apart: with its three matrices on huge pages a 1-thread
/// 1024^3 product ran at 132-134 GFLOP/s against 79-92, 2 threads at 281
/// against 178-181 (Sapphire Rapids, commit f22bf04). Elsewhere, and where
/// the kernel refuses, nothing changes.
fn advise_huge(ptr: NonNull<u8>, bytes: usize) {
    // Not under Miri, which cannot call into the C library (the advice
    // changes no value, so nothing it checks is lost).
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        // <sys/mman.h>: int madvise(void *addr, size_t len, int advice).
        unsafe extern "C" {
            fn madvise(addr: *mut u8, len: usize, advice: i32) -> i32;
        }
        const MADV_HUGEPAGE: i32 = 14;
        // SAFETY: the range is one allocation of `bytes` bytes that this
        // pool owns and has not handed out; the advice changes only how
        // the kernel backs it, never its contents. A refusal (an old
        // kernel, THP compiled out) returns -1 and leaves it as it was.
        unsafe { madvise(ptr.as_ptr(), bytes, MADV_HUGEPAGE) };
    }
    #[cfg(not(all(target_os = "linux", not(miri))))]
    let _ = (ptr, bytes);
}

/// A buffer handed out by a pool: `bytes` usable bytes (a whole class),
/// aligned to `align`, from `pool`; `generation` is the arena call it was
/// taken in (0 outside arenas).
pub(crate) struct Block {
    pub ptr: NonNull<u8>,
    pub bytes: usize,
    pub pool: PoolRef,
    pub generation: u64,
}

/// Whether a request of `bytes` with alignment `align` is served by the
/// pool (otherwise the caller allocates directly).
pub(crate) fn pooled(bytes: usize, align: usize) -> bool {
    bytes > 0 && bytes <= MAX_POOLED && align <= 16
}

thread_local! {
    /// Buffers this thread took from the pool: (all, fresh from the OS).
    static TAKEN: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}

/// How many buffers the calling thread has taken from the pool, and how
/// many of them came fresh from the OS (the profiler's per-op counts).
pub(crate) fn thread_takes() -> (u64, u64) {
    TAKEN.with(std::cell::Cell::get)
}

/// Takes a buffer of at least `bytes` bytes from the free lists of the
/// calling thread's pool ([`current`]), or from the OS when the class's
/// list is empty. `pooled(bytes, align)` must hold.
pub(crate) fn take(bytes: usize, align: usize) -> Block {
    let class = class_of(bytes);
    let size = class_bytes(class);
    let slot = align_index(align) * CLASSES + class;
    let target = current();
    let pool = resolve(&target);
    let generation = pool
        .arena
        .as_ref()
        .map_or(0, |a| a.generation.load(Ordering::Relaxed));
    let reused = pool.with(|p| {
        let got = p.lists[slot].pop();
        if got.is_some() {
            p.stats.hits += 1;
            p.stats.held_bytes -= size;
        } else {
            p.stats.misses += 1;
            p.stats.high_water_bytes = p
                .stats
                .high_water_bytes
                .max(p.stats.live_bytes + p.stats.held_bytes + size);
        }
        p.stats.live_bytes += size;
        p.stats.taken_bytes += size as u64;
        got
    });
    reserve::note(slot, 1);
    TAKEN.with(|t| {
        let (all, fresh) = t.get();
        t.set((all + 1, fresh + u64::from(reused.is_none())));
    });
    let ptr = match reused {
        Some(Free(ptr)) => ptr,
        None => fresh(class, align),
    };
    asan::hand_out(ptr, bytes, size);
    Block {
        ptr,
        bytes: size,
        pool: target,
        generation,
    }
}

/// A new block of `class` for alignment `align`, from the OS: zeroed and
/// resident.
fn fresh(class: usize, align: usize) -> NonNull<u8> {
    let size = class_bytes(class);
    let l = layout(class, align);
    // Zeroed, so that every byte of a pooled block is initialised
    // from the start and stays so (it is only ever overwritten with
    // values): `Storage::stale` relies on it.
    if size >= HUGE_BYTES {
        // Advised before its first write, so that the first touch
        // of each 2 MiB faults in a huge page; then zeroed (the
        // allocator may hand back memory it has used).
        // SAFETY: `l` has a non-zero size.
        let raw = unsafe { alloc(l) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(l));
        advise_huge(ptr, size);
        // SAFETY: the block is `size` bytes, not yet handed out.
        unsafe { ptr.as_ptr().write_bytes(0, size) };
        ptr
    } else {
        // SAFETY: `l` has a non-zero size (every class is >= 64 bytes).
        let raw = unsafe { alloc_zeroed(l) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(l));
        fault_in(ptr, size);
        ptr
    }
}

/// Ends a parallel region run on up to `threads` threads (see
/// [`reserve`]) whose chunks drew from `target`: outermost, each free list
/// of `target` the region used gets the buffers it lacked for the region's
/// worst-case overlap, so the next run of the same region takes nothing
/// from the OS however its chunks interleave. Never above the ceiling.
pub(crate) fn settle_region(region: &Region, threads: usize, target: &PoolRef) {
    let pool = resolve(target);
    reserve::settle(region, threads, |slot, worst, net| {
        let (align, class) = (1usize << (slot / CLASSES), slot % CLASSES);
        let size = class_bytes(class);
        let missing = pool.with(|p| {
            let room = p.stats.ceiling_bytes.saturating_sub(p.stats.held_bytes) / size;
            let n = reserve::lacking(p.lists[slot].len(), worst, net).min(room);
            if n > 0 {
                p.stats.misses += n as u64;
                p.stats.high_water_bytes = p
                    .stats
                    .high_water_bytes
                    .max(p.stats.live_bytes + p.stats.held_bytes + n * size);
                p.stats.held_bytes += n * size;
            }
            n
        });
        for _ in 0..missing {
            let ptr = fresh(class, align);
            asan::poison(ptr, size);
            pool.with(|p| p.lists[slot].push(Free(ptr)));
        }
    });
}

/// Writes a zero into every page of a fresh block of `bytes` bytes, so
/// that the whole block is resident from its first use. Large blocks come
/// as untouched zero pages, which the OS maps one at a time as they are
/// first written; a block is reused by requests of any length in its class
/// (up to a quarter longer than the first), so without this a steady loop
/// kept faulting pages in, step after step, whenever a request met a block
/// that only shorter ones had used (LeNet's 2-thread train step: 4.6
/// faults a step, in bursts of ~240). Here all of it happens on the miss.
fn fault_in(ptr: NonNull<u8>, bytes: usize) {
    const PAGE: usize = 4096;
    for off in (0..bytes).step_by(PAGE) {
        // SAFETY: `off < bytes`, the block's size, and the block is not yet
        // handed out; the byte is zero (alloc_zeroed) and stays zero.
        unsafe { ptr.as_ptr().add(off).write_volatile(0) };
    }
}

/// Returns a block from [`take`] (same `bytes` as it handed out, same
/// `align`, same `pool`) to its free list, or to the OS when the free
/// lists would otherwise hold more than the ceiling.
///
/// # Safety
/// `ptr` must come from [`take`] with this `bytes`, `align` and `pool`, and
/// must not be used again by the caller.
pub(crate) unsafe fn give(ptr: NonNull<u8>, bytes: usize, align: usize, pool: &PoolRef) {
    let class = class_of(bytes);
    debug_assert_eq!(class_bytes(class), bytes);
    let slot = align_index(align) * CLASSES + class;
    // A parallel region's record is of the pool its chunks draw from; a
    // buffer of another pool freed inside it is not its traffic.
    // `try_with`: a buffer may come back from another thread-local's
    // destructor (a cache of converted weights) after this thread's
    // `TARGET` is gone; it is then no region's traffic.
    if TARGET
        .try_with(|t| same(&t.borrow().0, pool))
        .unwrap_or(false)
    {
        reserve::note(slot, -1);
    }
    let keep = resolve(pool).with(|p| {
        p.stats.live_bytes -= bytes;
        if p.stats.held_bytes + bytes <= p.stats.ceiling_bytes {
            p.stats.held_bytes += bytes;
            asan::poison(ptr, bytes);
            p.lists[slot].push(Free(ptr));
            true
        } else {
            p.stats.released_bytes += bytes as u64;
            false
        }
    });
    if !keep {
        asan::unpoison(ptr, bytes);
        // SAFETY: the caller gives up `ptr`, allocated by `take` with this
        // layout; it is not listed, so nothing else refers to it.
        unsafe { dealloc(ptr.as_ptr(), layout(class, align)) };
    }
}

/// Counts one vector wrapped as storage from outside the pool (in the
/// calling thread's pool's counters).
pub(crate) fn count_wrapped() {
    resolve(&current()).with(|p| p.stats.wrapped += 1);
}

/// Counts one in-place update that had to copy `bytes` of shared values
/// ([`MemoryStats::copies_on_write`]), in the calling thread's pool.
pub(crate) fn count_copy_on_write(bytes: usize) {
    resolve(&current()).with(|p| {
        p.stats.copies_on_write += 1;
        p.stats.copied_on_write_bytes += bytes as u64;
    });
}

/// A snapshot of the process's pool's counters, whatever the calling
/// thread's pool.
pub(crate) fn stats_of_process() -> MemoryStats {
    process().stats()
}

/// A snapshot of the calling thread's pool's counters (public as
/// `forge::runtime::memory_stats`).
pub fn stats() -> MemoryStats {
    resolve(&current()).stats()
}

/// Sets the most bytes the free lists may hold. A freed buffer that would
/// push the held bytes above it goes back to the OS instead; lowering the
/// ceiling below what is held releases the excess at once (largest classes
/// first). The default is 1 GiB, or `FORGE_POOL_CEILING_MB` mebibytes when
/// that environment variable is set. Buffers in use by tensors are never
/// affected (public as `forge::runtime::set_memory_ceiling`).
pub fn set_ceiling(bytes: usize) {
    resolve(&current()).set_ceiling(bytes);
}

/// Gives every free buffer back to the operating system and returns the
/// number of bytes released. Tensors alive keep their memory; the pool
/// refills from the OS as they are created again (public as
/// `forge::runtime::trim_memory`).
pub fn trim() -> usize {
    resolve(&current()).release_above(0)
}

impl MemPool {
    /// A snapshot of this pool's counters.
    pub(crate) fn stats(&self) -> MemoryStats {
        self.with(|p| p.stats)
    }

    /// [`set_ceiling`] for this pool.
    pub(crate) fn set_ceiling(&self, bytes: usize) {
        self.with(|p| p.stats.ceiling_bytes = bytes);
        self.release_above(bytes);
    }

    /// [`reset_high_water`] for this pool.
    pub(crate) fn reset_high_water(&self) {
        self.with(|p| p.stats.high_water_bytes = p.stats.live_bytes + p.stats.held_bytes);
    }

    /// Releases free buffers, largest classes first, until at most `limit`
    /// bytes are held. Returns the bytes released.
    pub(crate) fn release_above(&self, limit: usize) -> usize {
        let mut out: Vec<(Free, Layout)> = Vec::new();
        self.with(|p| {
            for class in (0..CLASSES).rev() {
                for a in 0..ALIGNS {
                    let list = &mut p.lists[a * CLASSES + class];
                    while p.stats.held_bytes > limit {
                        let Some(f) = list.pop() else { break };
                        p.stats.held_bytes -= class_bytes(class);
                        out.push((f, layout(class, 1 << a)));
                    }
                }
            }
        });
        let mut released = 0;
        for (Free(ptr), l) in out {
            released += l.size();
            asan::unpoison(ptr, l.size());
            // SAFETY: `ptr` was removed from its free list above, so this is
            // the only reference; it was allocated by `take` with layout `l`.
            unsafe { dealloc(ptr.as_ptr(), l) };
        }
        self.with(|p| p.stats.released_bytes += released as u64);
        released
    }
}

/// Restarts the high-water mark at the current footprint
/// (`live_bytes + held_bytes`) (public as `forge::runtime::reset_high_water`).
pub fn reset_high_water() {
    resolve(&current()).reset_high_water();
}
