//! The AVX-512F versions of the packed kernel's intrinsics: the 12 x 32
//! tile in 24 accumulators (two 16-lane vectors per row), masked row
//! copies and a 16 x 16 register transpose for the packing.

use super::NR;
use std::arch::x86_64::*;

/// Row `p < rows` of `dst` (`width <= 32` floats at `p * width`) = the
/// `len <= width` floats at `src[base + p * stride..]`, then zeros: one or
/// two masked 16-lane loads and stores per row.
///
/// # Safety
/// The CPU has AVX-512F.
///
/// # Panics
/// When `src` or `dst` is too short, or `len > width` or `width > 32`.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn copy_rows_padded(
    src: &[f32],
    base: usize,
    stride: usize,
    len: usize,
    dst: &mut [f32],
    width: usize,
    rows: usize,
) {
    assert!(len <= width && width <= 32 && dst.len() >= rows * width);
    assert!(rows == 0 || len == 0 || base + (rows - 1) * stride + len <= src.len());
    let mask = |n: usize| if n >= 16 { 0xffff } else { (1u16 << n) - 1 };
    for p in 0..rows {
        for h in (0..width).step_by(16) {
            let n_in = len.saturating_sub(h).min(16);
            let v = if n_in == 0 {
                _mm512_setzero_ps()
            } else {
                // SAFETY: the first `n_in` floats from `base + p * stride
                // + h` are inside `src` (asserted); the other lanes are
                // masked off and not read.
                unsafe {
                    _mm512_maskz_loadu_ps(mask(n_in), src.as_ptr().add(base + p * stride + h))
                }
            };
            // SAFETY: `min(16, width - h)` floats at `p * width + h` are
            // inside row `p` of `dst` (asserted).
            unsafe {
                _mm512_mask_storeu_ps(dst.as_mut_ptr().add(p * width + h), mask(width - h), v)
            };
        }
    }
}

/// Writes the transpose of the 16 x 16 block whose row `r` is `src[r]`:
/// row `q` of the output (`src[0][q], ..., src[15][q]`, the lanes chosen by
/// `mask`) at `dst + q * ld`. Pure data movement.
///
/// # Safety
/// The CPU has AVX-512F; every `src[r]` holds 16 floats; for `q < 16`,
/// the masked lanes of `dst + q * ld .. + 16` are writable.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn transpose16(src: &[&[f32]; 16], dst: *mut f32, ld: usize, mask: u16) {
    let r: [__m512; 16] = std::array::from_fn(|i| {
        assert!(src[i].len() >= 16);
        // SAFETY: 16 floats (asserted).
        unsafe { _mm512_loadu_ps(src[i].as_ptr()) }
    });
    // pairs of rows interleaved within each 128-bit lane
    let mut t = [_mm512_setzero_ps(); 16];
    for i in 0..8 {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // u[4 g + c], lane l: rows 4 g .. 4 g + 4 of column 4 l + c
    let mut u = [_mm512_setzero_ps(); 16];
    for g in 0..4 {
        let d = |x: __m512| _mm512_castps_pd(x);
        let (t0, t1, t2, t3) = (
            d(t[4 * g]),
            d(t[4 * g + 1]),
            d(t[4 * g + 2]),
            d(t[4 * g + 3]),
        );
        u[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
        u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
        u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
        u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
    }
    // gather the 128-bit lanes: column c, c + 4, c + 8, c + 12
    let mut out = [_mm512_setzero_ps(); 16];
    for c in 0..4 {
        let v_lo = _mm512_shuffle_f32x4::<0x88>(u[c], u[4 + c]);
        let v_hi = _mm512_shuffle_f32x4::<0xdd>(u[c], u[4 + c]);
        let w_lo = _mm512_shuffle_f32x4::<0x88>(u[8 + c], u[12 + c]);
        let w_hi = _mm512_shuffle_f32x4::<0xdd>(u[8 + c], u[12 + c]);
        out[c] = _mm512_shuffle_f32x4::<0x88>(v_lo, w_lo);
        out[c + 8] = _mm512_shuffle_f32x4::<0xdd>(v_lo, w_lo);
        out[c + 4] = _mm512_shuffle_f32x4::<0x88>(v_hi, w_hi);
        out[c + 12] = _mm512_shuffle_f32x4::<0xdd>(v_hi, w_hi);
    }
    if ld == 12 && mask == 0x0fff {
        // The 16 rows of 12 are one contiguous run of 192 floats: packed
        // into 12 whole vectors by two-source permutes (three vectors per
        // four rows), then 12 plain stores instead of 16 masked ones.
        // lanes `s..12` of the first source, then the second's from 0
        let i0 = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 19);
        let i4 = _mm512_setr_epi32(4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 19, 20, 21, 22, 23);
        let i8 = _mm512_setr_epi32(8, 9, 10, 11, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27);
        for g in 0..4 {
            let o = &out[4 * g..4 * g + 4];
            let v = [
                _mm512_permutex2var_ps(o[0], i0, o[1]),
                _mm512_permutex2var_ps(o[1], i4, o[2]),
                _mm512_permutex2var_ps(o[2], i8, o[3]),
            ];
            for (j, &v) in v.iter().enumerate() {
                // SAFETY: rows `4 g .. 4 g + 4` of 12 floats (row stride
                // 12) are floats `48 g .. 48 g + 48` from `dst`, writable
                // (the caller's contract with `ld = 12`, all 12 lanes).
                unsafe { _mm512_storeu_ps(dst.add(48 * g + 16 * j), v) };
            }
        }
        return;
    }
    for (q, &v) in out.iter().enumerate() {
        // SAFETY: the caller guarantees the masked lanes are writable.
        unsafe { _mm512_mask_storeu_ps(dst.add(q * ld), mask, v) };
    }
}

/// One `rows x cols` tile of `c` (row stride `ldc`) from an `R x kc`
/// packed tile of `a` (`R` is `MR`, or 8 for [`gemm_prepacked`]'s short
/// tiles: each element is the same sum either way) and a `kc x NR` packed panel of `b`: on the first
/// `k` block `c = acc + beta c` (without reading `c` when beta is 0), or
/// `c = bias + acc` with a `bias` (the tile's 32 columns, held in two
/// registers; `c` not read), afterwards `c = c + acc`.
///
/// Columns `16 h..16 h + 16` of the tile start at `c[h]` (one pointer per
/// half, which need not be adjacent). `next`, when not null, is the panel
/// multiplied after this one, fetched into L2 a row (two lines) a step (a hint:
/// never read, so any address will do).
///
/// # Safety
/// The CPU has AVX-512F; each `c[h]` points to the `rows x` (its share of
/// `cols`) half tile with row stride `ldc` that nothing else accesses (`c[1]`
/// is not used when `cols <= 16`); `ap` holds `R * kc`, `bp` `kc * NR`.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn tile<const R: usize>(
    kc: usize,
    ap: &[f32],
    bp: &[f32],
    c: [*mut f32; 2],
    ldc: usize,
    rows: usize,
    cols: usize,
    first: bool,
    beta: f32,
    bias: Option<&[f32; NR]>,
    next: *const f32,
) {
    assert!(ap.len() >= R * kc && bp.len() >= NR * kc);
    let mut acc = [[_mm512_setzero_ps(); 2]; R];
    let (a, b) = (ap.as_ptr(), bp.as_ptr());
    // One step of `k`: row `p` of the panel times column `p` of the tile.
    let step = |acc: &mut [[__m512; 2]; R], p: usize| {
        // SAFETY: `p < kc`: row `p` of the panel and column `p` of the
        // tile are inside the asserted lengths.
        unsafe {
            let b0 = _mm512_loadu_ps(b.add(p * NR));
            let b1 = _mm512_loadu_ps(b.add(p * NR + 16));
            for (i, row) in acc.iter_mut().enumerate() {
                let av = _mm512_set1_ps(*a.add(p * R + i));
                row[0] = _mm512_fmadd_ps(av, b0, row[0]);
                row[1] = _mm512_fmadd_ps(av, b1, row[1]);
            }
        }
    };
    // The tile's rows of `c` are fetched while the first steps run, one
    // row a step (both ends of each half: a row of `c` need not start on a
    // cache line): `c`'s rows are far apart (a row stride of 4 KiB at
    // n = 1024), so they miss every cache, and the loads and stores at the
    // end used to stall (18% of a 1024^3 product's samples in the stores,
    // 7% after; Sapphire Rapids, commit de3846d).
    let ahead = rows.min(kc);
    for p in 0..ahead {
        let at = c[0].wrapping_add(p * ldc);
        _mm_prefetch::<_MM_HINT_T0>(at.cast());
        _mm_prefetch::<_MM_HINT_T0>(at.wrapping_add(15).cast());
        if cols > 16 {
            let at = c[1].wrapping_add(p * ldc);
            _mm_prefetch::<_MM_HINT_T0>(at.cast());
            _mm_prefetch::<_MM_HINT_T0>(at.wrapping_add(15).cast());
        }
        if !next.is_null() {
            _mm_prefetch::<_MM_HINT_T1>(next.wrapping_add(p * NR).cast());
            _mm_prefetch::<_MM_HINT_T1>(next.wrapping_add(p * NR + 16).cast());
        }
        step(&mut acc, p);
    }
    if next.is_null() {
        for p in ahead..kc {
            step(&mut acc, p);
        }
    } else {
        // The next panel, a row (two lines) a step, into L2.
        for p in ahead..kc {
            _mm_prefetch::<_MM_HINT_T1>(next.wrapping_add(p * NR).cast());
            _mm_prefetch::<_MM_HINT_T1>(next.wrapping_add(p * NR + 16).cast());
            step(&mut acc, p);
        }
    }
    let vbeta = _mm512_set1_ps(beta);
    // SAFETY: `NR` = 32 floats: two vectors.
    let vbias = bias.map(|b| unsafe {
        [
            _mm512_loadu_ps(b.as_ptr()),
            _mm512_loadu_ps(b.as_ptr().add(16)),
        ]
    });
    if rows == R && cols == NR {
        for (i, row) in acc.iter().enumerate() {
            for (h, &v) in row.iter().enumerate() {
                // SAFETY: element (i, 16 h .. 16 h + 16) of the full tile.
                unsafe {
                    let at = c[h].add(i * ldc);
                    let out = if !first {
                        _mm512_add_ps(_mm512_loadu_ps(at), v)
                    } else if let Some(vb) = vbias {
                        // `fma(1, bias, acc)` of the output prefilled with
                        // the bias: one rounding of the same sum
                        _mm512_add_ps(vb[h], v)
                    } else if beta == 0.0 {
                        v
                    } else {
                        _mm512_fmadd_ps(vbeta, _mm512_loadu_ps(at), v)
                    };
                    _mm512_storeu_ps(at, out);
                }
            }
        }
        return;
    }
    // An edge tile: the same sums, stored element by element with the same
    // (fused) arithmetic.
    let mut vals = [[0f32; NR]; R];
    for (i, row) in acc.iter().enumerate() {
        for (h, &v) in row.iter().enumerate() {
            // SAFETY: 16 floats at (i, 16 h) of the R x NR array.
            unsafe { _mm512_storeu_ps(vals[i].as_mut_ptr().add(16 * h), v) };
        }
    }
    for (i, vrow) in vals.iter().enumerate().take(rows) {
        for (j, &v) in vrow.iter().enumerate().take(cols) {
            // SAFETY: (i, j) is inside the `rows x cols` tile, in half
            // `j / 16`.
            let at = unsafe { &mut *c[j / 16].add(i * ldc + j % 16) };
            *at = if !first {
                *at + v
            } else if let Some(b) = bias {
                b[j] + v
            } else if beta == 0.0 {
                v
            } else {
                beta.mul_add(*at, v)
            };
        }
    }
}
