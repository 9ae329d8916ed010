//! The AVX-512 VNNI micro-tile: 4 rows x up to 4 panels of 16 channels,
//! one `vpdpbusd` per row, panel and quad.

use super::{PANEL, PANELS, ROWS};
use std::arch::x86_64::*;

/// See [`super::tile_with`].
///
/// # Safety
/// The CPU has AVX-512F and AVX-512 VNNI; each row holds `4 quads` bytes
/// and `w` `panels` panels of `quads * 64` bytes (`panels <= 4`).
#[target_feature(enable = "avx512f,avx512vnni")]
pub(super) unsafe fn tile(
    quads: usize,
    a_rows: [&[u8]; ROWS],
    w: &[i8],
    panels: usize,
    acc: &mut [[i32; PANEL * PANELS]; ROWS],
) {
    // SAFETY: forwarded from the caller.
    unsafe {
        match panels {
            1 => tile_p::<1>(quads, a_rows, w, acc),
            2 => tile_p::<2>(quads, a_rows, w, acc),
            3 => tile_p::<3>(quads, a_rows, w, acc),
            _ => tile_p::<4>(quads, a_rows, w, acc),
        }
    }
}

#[target_feature(enable = "avx512f,avx512vnni")]
unsafe fn tile_p<const P: usize>(
    quads: usize,
    a_rows: [&[u8]; ROWS],
    w: &[i8],
    acc: &mut [[i32; PANEL * PANELS]; ROWS],
) {
    let stride = quads * PANEL * 4;
    let mut sums = [[_mm512_setzero_si512(); P]; ROWS];
    let wp = w.as_ptr();
    for q in 0..quads {
        let mut wv = [_mm512_setzero_si512(); P];
        for (p, v) in wv.iter_mut().enumerate() {
            // SAFETY: panel `p`, quad `q` lies inside `w` (caller).
            *v = unsafe { _mm512_loadu_si512(wp.add(p * stride + q * 64).cast()) };
        }
        for r in 0..ROWS {
            // SAFETY: bytes `4q..4q+4` lie inside row `r` (caller).
            let quad = unsafe { a_rows[r].as_ptr().add(4 * q).cast::<i32>().read_unaligned() };
            let av = _mm512_set1_epi32(quad);
            for p in 0..P {
                sums[r][p] = _mm512_dpbusd_epi32(sums[r][p], av, wv[p]);
            }
        }
    }
    for r in 0..ROWS {
        for p in 0..P {
            // SAFETY: 16 lanes at `16 p` fit in the row of 64.
            unsafe { _mm512_storeu_si512(acc[r][p * PANEL..].as_mut_ptr().cast(), sums[r][p]) };
        }
    }
}
