//! AddressSanitizer's view of the pool's blocks, in a build with
//! `--cfg forge_asan` beside `-Zsanitizer=address` (`scripts/sanitize.sh
//! address`); a no-op in every other build.
//!
//! ASan only knows the allocations the pool takes from the C library: a
//! block of a size class, up to a quarter longer than the request it
//! serves, and kept on a free list between uses. Without help, a kernel
//! reading past the end of a tensor reads the block's slack, and a buffer
//! used after it went back to the pool reads a listed block: both are
//! addressable as far as ASan knows, so both go unseen. With this, a free
//! block is poisoned whole and a taken block past the bytes requested (the
//! storage's capacity is then exactly the request, see
//! [`Storage::with_capacity`](super::Storage::with_capacity)), so either
//! access is reported as a heap-buffer-overflow or a use-after-poison.

use std::ptr::NonNull;

#[cfg(forge_asan)]
unsafe extern "C" {
    // The ASan runtime's interface (compiler-rt,
    // sanitizer/asan_interface.h); linked in by -Zsanitizer=address.
    fn __asan_poison_memory_region(addr: *const u8, size: usize);
    fn __asan_unpoison_memory_region(addr: *const u8, size: usize);
}

/// Marks `bytes` bytes from `at` as not to be accessed.
#[cfg_attr(not(forge_asan), allow(unused_variables))]
pub(super) fn poison(at: NonNull<u8>, bytes: usize) {
    // SAFETY: the callers pass a range inside one block the pool
    // allocated and still owns; poisoning changes ASan's shadow memory
    // only, never the bytes.
    #[cfg(forge_asan)]
    unsafe {
        __asan_poison_memory_region(at.as_ptr(), bytes)
    };
}

/// Marks `bytes` bytes from `at` as accessible again.
#[cfg_attr(not(forge_asan), allow(unused_variables))]
pub(super) fn unpoison(at: NonNull<u8>, bytes: usize) {
    // SAFETY: as for `poison`.
    #[cfg(forge_asan)]
    unsafe {
        __asan_unpoison_memory_region(at.as_ptr(), bytes)
    };
}

/// A block of `size` bytes handed out for a request of `bytes`: the
/// requested bytes accessible, the rest of the block poisoned.
pub(super) fn hand_out(at: NonNull<u8>, bytes: usize, size: usize) {
    unpoison(at, bytes);
    if ON && size > bytes {
        // SAFETY: `bytes < size`, the block's length: still inside it.
        poison(unsafe { at.add(bytes) }, size - bytes);
    }
}

/// Whether the pool's blocks are poisoned this way (the build has
/// `--cfg forge_asan`).
pub(crate) const ON: bool = cfg!(forge_asan);
