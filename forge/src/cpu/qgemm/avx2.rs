//! The 256-bit micro-tiles: with AVX-VNNI (`vpdpbusd` on 256-bit
//! registers) and with plain AVX2 (bytes widened to 16 bits and
//! multiplied with `vpmaddwd`, exact where `vpmaddubsw` would saturate).

use super::{PANEL, PANELS, ROWS};
use std::arch::x86_64::*;

/// See [`super::tile_with`], with AVX-VNNI.
///
/// # Safety
/// The CPU has AVX2 and AVX-VNNI; bounds as [`super::tile_with`] checks.
#[target_feature(enable = "avx2,avxvnni")]
pub(super) unsafe fn tile_vnni(
    quads: usize,
    a_rows: [&[u8]; ROWS],
    w: &[i8],
    panels: usize,
    acc: &mut [[i32; PANEL * PANELS]; ROWS],
) {
    let stride = quads * PANEL * 4;
    let wp = w.as_ptr();
    for p in 0..panels {
        // one panel (two registers of 8 channels) at a time: 8 sums
        let mut sums = [[_mm256_setzero_si256(); 2]; ROWS];
        for q in 0..quads {
            // SAFETY: panel `p`, quad `q` lies inside `w` (caller).
            let (w0, w1) = unsafe {
                let at = wp.add(p * stride + q * 64);
                (
                    _mm256_loadu_si256(at.cast()),
                    _mm256_loadu_si256(at.add(32).cast()),
                )
            };
            for r in 0..ROWS {
                // SAFETY: bytes `4q..4q+4` lie inside row `r` (caller).
                let quad = unsafe { a_rows[r].as_ptr().add(4 * q).cast::<i32>().read_unaligned() };
                let av = _mm256_set1_epi32(quad);
                sums[r][0] = _mm256_dpbusd_avx_epi32(sums[r][0], av, w0);
                sums[r][1] = _mm256_dpbusd_avx_epi32(sums[r][1], av, w1);
            }
        }
        for r in 0..ROWS {
            let dst = acc[r][p * PANEL..].as_mut_ptr();
            // SAFETY: 16 lanes at `16 p` fit in the row of 64.
            unsafe {
                _mm256_storeu_si256(dst.cast(), sums[r][0]);
                _mm256_storeu_si256(dst.add(8).cast(), sums[r][1]);
            }
        }
    }
}

/// See [`super::tile_with`], with AVX2 alone: each 16-byte slice of a quad
/// (4 channels x 4 `k`) is sign-extended to 16 lanes of `i16`, the row's
/// 4 bytes zero-extended and repeated to match, and `vpmaddwd` adds
/// adjacent products exactly into `i32`; the two partial sums of each
/// channel are added at the end.
///
/// # Safety
/// The CPU has AVX2; bounds as [`super::tile_with`] checks.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn tile_widen(
    quads: usize,
    a_rows: [&[u8]; ROWS],
    w: &[i8],
    panels: usize,
    acc: &mut [[i32; PANEL * PANELS]; ROWS],
) {
    let stride = quads * PANEL * 4;
    let wp = w.as_ptr();
    for p in 0..panels {
        // per row, 4 registers: channels 4g..4g+4, two partial sums each
        let mut sums = [[_mm256_setzero_si256(); 4]; ROWS];
        for q in 0..quads {
            let mut wv = [_mm256_setzero_si256(); 4];
            for (g, v) in wv.iter_mut().enumerate() {
                // SAFETY: panel `p`, quad `q` lies inside `w` (caller).
                *v = unsafe {
                    _mm256_cvtepi8_epi16(_mm_loadu_si128(
                        wp.add(p * stride + q * 64 + 16 * g).cast(),
                    ))
                };
            }
            for r in 0..ROWS {
                // SAFETY: bytes `4q..4q+4` lie inside row `r` (caller).
                let quad = unsafe { a_rows[r].as_ptr().add(4 * q).cast::<i32>().read_unaligned() };
                let av = _mm256_cvtepu8_epi16(_mm_set1_epi32(quad));
                for g in 0..4 {
                    sums[r][g] = _mm256_add_epi32(sums[r][g], _mm256_madd_epi16(av, wv[g]));
                }
            }
        }
        for r in 0..ROWS {
            for g in 0..4 {
                let mut lanes = [0i32; 8];
                // SAFETY: 8 lanes into an array of 8.
                unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), sums[r][g]) };
                for c in 0..4 {
                    acc[r][p * PANEL + 4 * g + c] = lanes[2 * c].wrapping_add(lanes[2 * c + 1]);
                }
            }
        }
    }
}
