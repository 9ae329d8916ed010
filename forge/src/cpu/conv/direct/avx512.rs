//! The direct convolution's tile with AVX-512F intrinsics: the 32 channels
//! of a position in two zmm accumulators, up to 12 positions (24
//! accumulators), each lane updated with one fused multiply-add per tap in
//! the portable loops' order (same bits).

use super::plan::Tile;
use super::{Acc, MAX_NP, OB};
use std::arch::x86_64::{
    __m512, _mm512_fmadd_ps, _mm512_loadu_ps, _mm512_set1_ps, _mm512_setzero_ps, _mm512_storeu_ps,
};

/// The tile's sums into `acc[..tile.np]` (see `super::portable`).
///
/// # Safety
/// The CPU has AVX-512F and FMA, and every read is in bounds: `xp` holds
/// index `(c - 1) * plane + offs[j].wrapping_add(tap offset)` for every
/// position and tap (`super::tile_reads_inside`), `w` index `(c - 1) * wstride + tap weight offset + 31`.
#[target_feature(enable = "avx512f,fma")]
pub(super) unsafe fn tile(
    xp: &[f32],
    c: usize,
    plane: usize,
    tile: &Tile,
    w: &[f32],
    wstride: usize,
    acc: &mut Acc,
) {
    macro_rules! by_np {
        ($($n:literal)*) => {
            match tile.np {
                // SAFETY: the caller's contract.
                $($n => unsafe { block::<$n>(xp, c, plane, tile, w, wstride, acc) },)*
                _ => unreachable!("tile of {} positions", tile.np),
            }
        };
    }
    by_np!(1 2 3 4 5 6 7 8 9 10 11 12)
}

/// [`tile`] for `NP` positions (registers sized at compile time).
///
/// # Safety
/// As [`tile`].
#[target_feature(enable = "avx512f,fma")]
unsafe fn block<const NP: usize>(
    xp: &[f32],
    c: usize,
    plane: usize,
    tile: &Tile,
    w: &[f32],
    wstride: usize,
    acc: &mut Acc,
) {
    const { assert!(NP <= MAX_NP && OB == 32) };
    let mut a0 = [_mm512_setzero_ps(); NP];
    let mut a1 = [_mm512_setzero_ps(); NP];
    let offs: [usize; NP] = std::array::from_fn(|j| tile.offs[j]);
    let (x, wp) = (xp.as_ptr(), w.as_ptr());
    for ci in 0..c {
        // SAFETY: in bounds by the caller's contract (channel `ci < c`).
        let (xc, wc) = unsafe { (x.add(ci * plane), wp.add(ci * wstride)) };
        for &(wo, to) in &tile.taps {
            // SAFETY: weights `wo..wo + 32` of channel `ci` and inputs
            // `to.wrapping_add(offs[j])` of channel `ci` are in bounds
            // (contract; the pointer to the tap wraps, the one read is in
            // bounds).
            unsafe {
                let w0: __m512 = _mm512_loadu_ps(wc.add(wo));
                let w1: __m512 = _mm512_loadu_ps(wc.add(wo + 16));
                let xt = xc.wrapping_add(to);
                for j in 0..NP {
                    let xv = _mm512_set1_ps(*xt.wrapping_add(offs[j]));
                    a0[j] = _mm512_fmadd_ps(w0, xv, a0[j]);
                    a1[j] = _mm512_fmadd_ps(w1, xv, a1[j]);
                    // the next position's broadcast after these FMAs
                    load_barrier();
                }
            }
        }
    }
    for j in 0..NP {
        let row = acc[j].as_mut_ptr();
        // SAFETY: `acc[j]` holds 32 `f32`: lanes 0..16 and 16..32.
        unsafe {
            _mm512_storeu_ps(row, a0[j]);
            _mm512_storeu_ps(row.add(16), a1[j]);
        }
    }
}

/// An empty `asm!` block that the compiler must assume reads and writes
/// memory, so no load is moved across it. Between one position's FMAs and
/// the next position's broadcast it keeps each broadcast next to its FMAs:
/// without it LLVM hoisted all 12 broadcasts of a tap above the 24 FMAs,
/// which with 24 accumulators and 2 weight vectors needs 38 of the 32 zmm
/// registers, and spilled five accumulators to the stack (a store and a
/// reload each per tap, and register copies) in the hot loop. No
/// instruction is emitted, so the arithmetic is unchanged. (The AVX2
/// kernel's 12 accumulators, 2 weights and 6 broadcasts would need 20 of
/// its 16 ymm registers.)
#[inline(always)]
pub(super) fn load_barrier() {
    // SAFETY: no instructions; the block touches no register or memory
    // (the default options only tell the compiler it might).
    unsafe { std::arch::asm!("", options(nostack, preserves_flags)) }
}
