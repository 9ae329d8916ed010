//! Intel AMX (Advanced Matrix Extensions): detection, the Linux
//! permission request, and the tile instructions the int8 kernel
//! (`cpu::qgemm`) and the bf16 kernel (`cpu::bgemm`) use.
//!
//! AMX adds eight tile registers (`tmm0`..`tmm7`, up to 16 rows of 64
//! bytes each) and matrix multiply-adds on them: `tdpbusd` (unsigned x
//! signed bytes into exact `i32` sums) and `tdpbf16ps` (bf16 pairs into
//! `f32`). A kernel loads a tile configuration (`ldtilecfg`: the rows and
//! the bytes per row of each tile), loads tiles from memory (`tileloadd`,
//! any row stride), multiplies, stores the accumulators (`tilestored`)
//! and releases the tiles (`tilerelease`, which returns the tile state to
//! its initial, empty state so that context switches stop saving it).
//!
//! AMX is usable when the CPU reports it (CPUID leaf 7: `amx-tile`, and
//! `amx-int8` / `amx-bf16` for the instructions), the OS enables the tile
//! state (XCR0 bits 17 and 18), and, on Linux, the process asked for the
//! tile data state once (`arch_prctl(ARCH_REQ_XCOMP_PERM,
//! XFEATURE_XTILEDATA)`): without that request the first tile instruction
//! kills the process with `SIGILL`. [`int8`] and [`bf16`] do all three
//! once per process; any refusal means "no AMX" and the kernels take
//! their AVX-512 paths, never a crash. The CPU class
//! (`crate::cpu::class`, `FORGE_CPU_CLASS=avx512` or narrower) turns AMX
//! off like any other path: `cpu_has!("amx-int8")` asks both.
//!
//! The int8 products (`cpu::qgemm`) and, on the `amx` CPU class only, the
//! bf16 products (`cpu::bgemm`) use the tiles. The int8 sums are exact, so
//! the tiles give every other path's bits; `tdpbf16ps` sums the pairs of
//! one instruction in a way no portable code is known to reproduce bit
//! for bit (`bf16_probe.rs` holds the experiment and its findings), so the
//! bf16 bits are defined per CPU class (see `cpu::bgemm`).
//!
//! The instructions are written with `core::arch::asm!` (the AMX
//! intrinsics are not stable Rust): the tile registers are named in the
//! templates, so each wrapper takes its tile numbers as const generics.

use std::sync::OnceLock;

/// What this process may use: (tile state usable, int8, bf16).
fn support() -> (bool, bool, bool) {
    static SUPPORT: OnceLock<(bool, bool, bool)> = OnceLock::new();
    *SUPPORT.get_or_init(probe)
}

/// Whether `tdpbusd` is usable here (CPU, OS and permission; not the CPU
/// class: ask `cpu_has!("amx-int8")` for that).
pub(crate) fn int8() -> bool {
    let (tiles, int8, _) = support();
    tiles && int8
}

/// Whether `tdpbf16ps` is usable here (CPU, OS and permission; not the CPU
/// class: ask `cpu_has!("amx-bf16")` for that).
pub(crate) fn bf16() -> bool {
    let (tiles, _, bf16) = support();
    tiles && bf16
}

/// Whether any AMX instruction is usable here.
pub(crate) fn any() -> bool {
    int8() || bf16()
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn probe() -> (bool, bool, bool) {
    use std::arch::x86_64::{__cpuid, __cpuid_count};
    // Leaf 0 gives the highest leaf.
    let max_leaf = __cpuid(0).eax;
    if max_leaf < 7 {
        return (false, false, false);
    }
    // Leaf 7 is at most the highest leaf (checked above).
    let l7 = __cpuid_count(7, 0);
    let tile = l7.edx & (1 << 24) != 0;
    let int8 = l7.edx & (1 << 25) != 0;
    let bf16 = l7.edx & (1 << 22) != 0;
    if !tile {
        return (false, false, false);
    }
    // Leaf 1 exists (the highest leaf is at least 7).
    let osxsave = __cpuid(1).ecx & (1 << 27) != 0;
    if !osxsave {
        return (false, false, false);
    }
    // XCR0 bit 17: XTILECFG, bit 18: XTILEDATA, both enabled by the OS.
    // SAFETY: XGETBV is available when CPUID.1:ECX.OSXSAVE is set (checked).
    let xcr0 = unsafe { xgetbv0() };
    if xcr0 & (0b11 << 17) != 0b11 << 17 {
        return (false, false, false);
    }
    (request_permission(), int8, bf16)
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn probe() -> (bool, bool, bool) {
    // Other systems enable the tile state differently (or not at all);
    // forge uses AMX on Linux only.
    (false, false, false)
}

/// XCR0 (extended control register 0).
///
/// # Safety
/// The CPU has XSAVE and the OS enabled it (CPUID.1:ECX.OSXSAVE).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
unsafe fn xgetbv0() -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: XGETBV with ECX = 0 reads XCR0, allowed at any privilege
    // level once OSXSAVE is set (the caller's condition); it touches no
    // memory.
    unsafe {
        core::arch::asm!("xgetbv", in("ecx") 0u32, out("eax") lo, out("edx") hi,
            options(nomem, nostack, preserves_flags));
    }
    (u64::from(hi) << 32) | u64::from(lo)
}

/// Asks Linux for the tile data state (once per process: the permission
/// then holds for every thread). `false` when the kernel refuses (older
/// than 5.16, or a seccomp filter): then forge does not use AMX.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn request_permission() -> bool {
    const SYS_ARCH_PRCTL: u64 = 158;
    const ARCH_GET_XCOMP_PERM: u64 = 0x1022;
    const ARCH_REQ_XCOMP_PERM: u64 = 0x1023;
    const XFEATURE_XTILEDATA: u64 = 18;
    let ret: i64;
    // SAFETY: the arch_prctl system call with ARCH_REQ_XCOMP_PERM takes a
    // feature number and touches no user memory; `syscall` clobbers rcx
    // and r11 (declared) and returns in rax.
    unsafe {
        core::arch::asm!("syscall",
            inlateout("rax") SYS_ARCH_PRCTL as i64 => ret,
            in("rdi") ARCH_REQ_XCOMP_PERM, in("rsi") XFEATURE_XTILEDATA,
            lateout("rcx") _, lateout("r11") _, options(nostack));
    }
    if ret != 0 {
        return false;
    }
    let mut granted: u64 = 0;
    let ret: i64;
    // SAFETY: ARCH_GET_XCOMP_PERM writes one u64 (the permitted feature
    // mask) to the address in rsi, which is `granted`, live and writable.
    unsafe {
        core::arch::asm!("syscall",
            inlateout("rax") SYS_ARCH_PRCTL as i64 => ret,
            in("rdi") ARCH_GET_XCOMP_PERM, in("rsi") &mut granted as *mut u64,
            lateout("rcx") _, lateout("r11") _, options(nostack));
    }
    ret == 0 && granted & (1 << XFEATURE_XTILEDATA) != 0
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod tiles;

#[cfg(all(test, target_arch = "x86_64"))]
mod tests;

#[cfg(all(test, target_arch = "x86_64"))]
mod bf16_probe;

/// A value that starts on a cache line.
#[repr(align(64))]
pub(crate) struct Line<T>(pub(crate) T);

/// `v` cleared to `len` zeros from the returned index on, which starts on
/// a cache line (`v` holds a line more than `len`): a tile row that spans two
/// lines loads at a third of the speed of one on a line (a loop of four
/// 1 KiB tile loads and four `tdpbf16ps`, all in L1, 2026-12-06 on a
/// Sapphire Rapids core: 870 GFLOP/s with the rows 16 bytes off a line,
/// 2,300 on lines, the instruction alone 2,800). The pooled buffers of
/// the in-place path (activations, packed weights, outputs) start on a
/// line already.
pub(crate) fn zeroed_on_a_line<T: Copy + Default>(v: &mut Vec<T>, len: usize) -> usize {
    let per_line = 64 / std::mem::size_of::<T>();
    v.clear();
    v.resize(len + per_line, T::default());
    // `align_offset` may give up (`usize::MAX`); then the rows stay where
    // they are, which is only slower
    v.as_ptr().align_offset(64).min(per_line)
}
