//! The AVX-512 BF16 register tile: 6 rows x up to 4 panels of 16 channels,
//! one `vdpbf16ps` per row, panel and pair.

use super::{PANEL, PANELS, ROWS};
use std::arch::x86_64::*;

/// See [`super::tile_with`].
///
/// # Safety
/// The CPU has AVX-512F and AVX-512 BF16; each row holds `2 qn` elements
/// and `w` holds `panels` panels (`1..=4`), `stride` elements apart, of at
/// least `qn * 32` elements.
#[target_feature(enable = "avx512f,avx512bf16")]
pub(super) unsafe fn tile(
    qn: usize,
    stride: usize,
    a_rows: [&[u16]; ROWS],
    w: &[u16],
    panels: usize,
    acc: &mut [[f32; PANEL * PANELS]; ROWS],
) {
    // SAFETY: forwarded from the caller.
    unsafe {
        match panels {
            1 => tile_p::<1>(qn, stride, a_rows, w, acc),
            2 => tile_p::<2>(qn, stride, a_rows, w, acc),
            3 => tile_p::<3>(qn, stride, a_rows, w, acc),
            _ => tile_p::<4>(qn, stride, a_rows, w, acc),
        }
    }
}

#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn tile_p<const P: usize>(
    qn: usize,
    stride: usize,
    a_rows: [&[u16]; ROWS],
    w: &[u16],
    acc: &mut [[f32; PANEL * PANELS]; ROWS],
) {
    let mut sums = [[_mm512_setzero_ps(); P]; ROWS];
    for r in 0..ROWS {
        for p in 0..P {
            // SAFETY: 16 lanes at `16 p` fit in the row of 64.
            sums[r][p] = unsafe { _mm512_loadu_ps(acc[r][p * PANEL..].as_ptr()) };
        }
    }
    let wp = w.as_ptr();
    let rp: [*const u16; ROWS] = std::array::from_fn(|r| a_rows[r].as_ptr());
    for q in 0..qn {
        let mut wv = [_mm512_setzero_si512(); P];
        for (p, v) in wv.iter_mut().enumerate() {
            // SAFETY: panel `p`, pair `q` (32 elements) lies inside `w`
            // (caller).
            *v = unsafe { _mm512_loadu_si512(wp.add(p * stride + q * 32).cast()) };
        }
        for r in 0..ROWS {
            // SAFETY: elements `2q, 2q + 1` lie inside row `r` (caller).
            let pair = unsafe { rp[r].add(2 * q).cast::<i32>().read_unaligned() };
            // SAFETY: both are 512 bits of plain data; `__m512bh` is the
            // same register read as 32 bf16.
            let av = unsafe { std::mem::transmute::<__m512i, __m512bh>(_mm512_set1_epi32(pair)) };
            for p in 0..P {
                // SAFETY: as above.
                let wb = unsafe { std::mem::transmute::<__m512i, __m512bh>(wv[p]) };
                sums[r][p] = _mm512_dpbf16_ps(sums[r][p], av, wb);
            }
        }
    }
    for r in 0..ROWS {
        for p in 0..P {
            // SAFETY: as for the loads above.
            unsafe { _mm512_storeu_ps(acc[r][p * PANEL..].as_mut_ptr(), sums[r][p]) };
        }
    }
}
