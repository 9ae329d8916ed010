//! The direct convolution's tile with AVX2 + FMA intrinsics, for CPUs
//! without AVX-512: the 32 channels in two passes of 16 (two ymm per
//! position), up to 6 positions per pass (12 accumulators of the 16
//! registers), each lane updated with one fused multiply-add per tap in
//! the portable loops' order (lanes are independent, so the passes change
//! no bits).

use super::plan::Tile;
use super::Acc;
use std::arch::x86_64::{
    __m256, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_set1_ps, _mm256_setzero_ps, _mm256_storeu_ps,
};

/// Positions per pass.
const NP2: usize = 6;

/// The tile's sums into `acc[..tile.np]` (see `super::portable`).
///
/// # Safety
/// The CPU has AVX2 and FMA; reads in bounds as for `super::avx512::tile`.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn tile(
    xp: &[f32],
    c: usize,
    plane: usize,
    tile: &Tile,
    w: &[f32],
    wstride: usize,
    acc: &mut Acc,
) {
    for j0 in (0..tile.np).step_by(NP2) {
        let n = NP2.min(tile.np - j0);
        for q0 in [0, 16] {
            macro_rules! by_np {
                ($($n:literal)*) => {
                    match n {
                        // SAFETY: the caller's contract.
                        $($n => unsafe {
                            block::<$n>(xp, c, plane, tile, j0, q0, w, wstride, acc)
                        },)*
                        _ => unreachable!("pass of {n} positions"),
                    }
                };
            }
            by_np!(1 2 3 4 5 6)
        }
    }
}

/// Positions `j0..j0 + NP`, channels `q0..q0 + 16` of [`tile`].
///
/// # Safety
/// As [`tile`], with `j0 + NP <= tile.np` and `q0 <= 16`.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma")]
unsafe fn block<const NP: usize>(
    xp: &[f32],
    c: usize,
    plane: usize,
    tile: &Tile,
    j0: usize,
    q0: usize,
    w: &[f32],
    wstride: usize,
    acc: &mut Acc,
) {
    let mut a0 = [_mm256_setzero_ps(); NP];
    let mut a1 = [_mm256_setzero_ps(); NP];
    let offs: [usize; NP] = std::array::from_fn(|j| tile.offs[j0 + j]);
    let (x, wp) = (xp.as_ptr(), w.as_ptr());
    for ci in 0..c {
        // SAFETY: in bounds by the caller's contract (channel `ci < c`).
        let (xc, wc) = unsafe { (x.add(ci * plane), wp.add(ci * wstride + q0)) };
        for &(wo, to) in &tile.taps {
            // SAFETY: weights `q0 + wo..q0 + wo + 16` and inputs
            // `to.wrapping_add(offs[j])` of channel `ci` are in bounds
            // (contract; the pointer to the tap wraps, the one read is in
            // bounds).
            unsafe {
                let w0: __m256 = _mm256_loadu_ps(wc.add(wo));
                let w1: __m256 = _mm256_loadu_ps(wc.add(wo + 8));
                let xt = xc.wrapping_add(to);
                for j in 0..NP {
                    let xv = _mm256_set1_ps(*xt.wrapping_add(offs[j]));
                    a0[j] = _mm256_fmadd_ps(w0, xv, a0[j]);
                    a1[j] = _mm256_fmadd_ps(w1, xv, a1[j]);
                    // the next position's broadcast after these FMAs
                    super::avx512::load_barrier();
                }
            }
        }
    }
    for j in 0..NP {
        let row = acc[j0 + j][q0..q0 + 16].as_mut_ptr();
        // SAFETY: the slice holds 16 `f32`: lanes 0..8 and 8..16.
        unsafe {
            _mm256_storeu_ps(row, a0[j]);
            _mm256_storeu_ps(row.add(8), a1[j]);
        }
    }
}
