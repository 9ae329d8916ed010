//! The AVX2 + FMA versions of the packed kernel's intrinsics, for CPUs
//! without AVX-512: the same 12 x 32 tile from the same packed panels, in
//! passes of 6 x 16 (12 accumulators of 8 lanes, two loads of `b` and six
//! broadcasts of `a` per `k` step; 4 x 16 for the 8-row short tiles), and
//! the packing's masked row copies and transposes in 8-lane vectors.
//!
//! Each output element is accumulated from zero over its `k` block in
//! increasing `k` with fused multiply-adds, then combined with `c` exactly
//! as [`super::avx512::tile`] does, so the bits are the AVX-512 kernel's.

use super::NR;
use std::arch::x86_64::*;

/// The first `n` lanes of an 8-lane mask (all bits set), the others clear,
/// for `maskload` / `maskstore`.
///
/// # Safety
/// The CPU has AVX2.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn first_lanes(n: usize) -> __m256i {
    _mm256_cmpgt_epi32(
        _mm256_set1_epi32(n.min(8) as i32),
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
    )
}

/// The lanes of an 8-lane mask whose bits are set in `bits` (lane `l` for
/// bit `l`).
///
/// # Safety
/// The CPU has AVX2.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn lanes_of(bits: u8) -> __m256i {
    let lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    let set = _mm256_and_si256(_mm256_set1_epi32(i32::from(bits)), lane_bit);
    _mm256_cmpeq_epi32(set, lane_bit)
}

/// Row `p < rows` of `dst` (`width <= 32` floats at `p * width`) = the
/// `len <= width` floats at `src[base + p * stride..]`, then zeros: up to
/// four 8-lane (masked where partial) loads and stores per row.
///
/// # Safety
/// The CPU has AVX2.
///
/// # Panics
/// When `src` or `dst` is too short, or `len > width` or `width > 32`.
#[target_feature(enable = "avx2")]
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
    for p in 0..rows {
        for h in (0..width).step_by(8) {
            let n_in = len.saturating_sub(h).min(8);
            let n_out = (width - h).min(8);
            let from = src.as_ptr().wrapping_add(base + p * stride + h);
            let v = if n_in == 8 {
                // SAFETY: the 8 floats from `base + p * stride + h` are
                // inside `src` (asserted).
                unsafe { _mm256_loadu_ps(from) }
            } else if n_in == 0 {
                _mm256_setzero_ps()
            } else {
                // SAFETY: the first `n_in` floats from `base + p * stride
                // + h` are inside `src` (asserted); the other lanes are
                // masked off and not read.
                unsafe { _mm256_maskload_ps(from, first_lanes(n_in)) }
            };
            // SAFETY: `n_out = min(8, width - h)` floats at `p * width +
            // h` are inside row `p` of `dst` (asserted); the masked-off
            // lanes are not written.
            unsafe {
                let to = dst.as_mut_ptr().add(p * width + h);
                if n_out == 8 {
                    _mm256_storeu_ps(to, v);
                } else {
                    _mm256_maskstore_ps(to, first_lanes(n_out), v);
                }
            }
        }
    }
}

/// The transpose of the 8 x 8 block whose row `i` is `r[i]`: lane `i` of
/// output `q` is lane `q` of `r[i]`.
///
/// # Safety
/// The CPU has AVX2.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
    // pairs of rows interleaved within each 128-bit half:
    // t[2 g] = r0[0] r1[0] r0[1] r1[1] | r0[4] r1[4] r0[5] r1[5] (g = 0)
    let mut t = [_mm256_setzero_ps(); 8];
    for g in 0..4 {
        t[2 * g] = _mm256_unpacklo_ps(r[2 * g], r[2 * g + 1]);
        t[2 * g + 1] = _mm256_unpackhi_ps(r[2 * g], r[2 * g + 1]);
    }
    // u[4 b + c], half h: rows 4 b .. 4 b + 4 of column c + 4 h
    let mut u = [_mm256_setzero_ps(); 8];
    for b in 0..2 {
        let (t0, t1, t2, t3) = (t[4 * b], t[4 * b + 1], t[4 * b + 2], t[4 * b + 3]);
        u[4 * b] = _mm256_shuffle_ps::<0x44>(t0, t2);
        u[4 * b + 1] = _mm256_shuffle_ps::<0xee>(t0, t2);
        u[4 * b + 2] = _mm256_shuffle_ps::<0x44>(t1, t3);
        u[4 * b + 3] = _mm256_shuffle_ps::<0xee>(t1, t3);
    }
    // the halves gathered: column c from the low halves, c + 4 the high
    let mut out = [_mm256_setzero_ps(); 8];
    for c in 0..4 {
        out[c] = _mm256_permute2f128_ps::<0x20>(u[c], u[4 + c]);
        out[c + 4] = _mm256_permute2f128_ps::<0x31>(u[c], u[4 + c]);
    }
    out
}

/// Writes the transpose of the 16 x 16 block whose row `r` is `src[r]`:
/// row `q` of the output (`src[0][q], ..., src[15][q]`, the lanes chosen by
/// `mask`) at `dst + q * ld`, as four 8 x 8 transposes (those whose lanes
/// are all masked off are skipped). Pure data movement.
///
/// # Safety
/// The CPU has AVX2; every `src[r]` holds 16 floats; for `q < 16`, the
/// masked lanes of `dst + q * ld .. + 16` are writable.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn transpose16(src: &[&[f32]; 16], dst: *mut f32, ld: usize, mask: u16) {
    for rb in [0, 8] {
        let bits = (mask >> rb) as u8;
        if bits == 0 {
            continue;
        }
        // SAFETY: the CPU has AVX2.
        let lanes = unsafe { lanes_of(bits) };
        for kb in [0, 8] {
            let mut r = [_mm256_setzero_ps(); 8];
            for (i, v) in r.iter_mut().enumerate() {
                let row = src[rb + i];
                assert!(row.len() >= 16);
                // SAFETY: floats `kb..kb + 8` of a 16-float row (asserted).
                *v = unsafe { _mm256_loadu_ps(row.as_ptr().add(kb)) };
            }
            // SAFETY: the CPU has AVX2.
            let cols = unsafe { transpose8(r) };
            for (q, &v) in cols.iter().enumerate() {
                // SAFETY: the caller guarantees the masked lanes of row
                // `kb + q` are writable; lanes `rb..rb + 8` of it are
                // written only where `mask` has their bit.
                unsafe {
                    let to = dst.wrapping_add((kb + q) * ld + rb);
                    if bits == 0xff {
                        _mm256_storeu_ps(to, v);
                    } else {
                        _mm256_maskstore_ps(to, lanes, v);
                    }
                }
            }
        }
    }
}

/// Columns `16 h..16 h + 16` of one `rows x cols` tile of `c` from an
/// `R x kc` packed tile of `a` and a `kc x NR` panel of `b`:
/// [`super::tile`]'s contract and arithmetic, in passes of `S x 16` (`S`
/// is 6 for 12-row tiles, 4 for the 8-row short ones). Nothing when the
/// half is wholly past `cols`; passes wholly past `rows` are skipped (they
/// would only compute padding).
///
/// # Safety
/// The CPU has AVX2 and FMA; `c[h]` points to the `rows x` (its share of
/// `cols`) half tile with row stride `ldc` that nothing else accesses;
/// `h < 2`, `1 <= rows <= R`, `1 <= cols <= NR`.
///
/// # Panics
/// When `ap` holds fewer than `R * kc` floats or `bp` fewer than
/// `kc * NR`, or `R` is not 12 or 8.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn half_tile<const R: usize>(
    h: usize,
    kc: usize,
    ap: &[f32],
    bp: &[f32],
    c: [*mut f32; 2],
    ldc: usize,
    rows: usize,
    cols: usize,
    first: bool,
    beta: f32,
) {
    assert!(ap.len() >= R * kc && bp.len() >= NR * kc);
    assert!(rows <= R && cols <= NR && h < 2);
    let hcols = cols.saturating_sub(16 * h).min(16);
    if hcols == 0 {
        return;
    }
    let (a, b, ch) = (ap.as_ptr(), bp.as_ptr().wrapping_add(16 * h), c[h]);
    // SAFETY (both arms): the `R`-row packed tile and columns `16 h..16 h
    // + 16` of the panel lie inside `ap` and `bp` (asserted); the passes
    // write the `rows x hcols` half tile the caller gave.
    match R {
        12 => unsafe { passes::<R, 6>(kc, a, b, ch, ldc, rows, hcols, first, beta) },
        8 => unsafe { passes::<R, 4>(kc, a, b, ch, ldc, rows, hcols, first, beta) },
        _ => unreachable!("packed tiles have 12 or 8 rows"),
    }
}

/// The passes of `S` rows over one 16-column half of a tile, from row 0
/// to `rows`.
///
/// # Safety
/// The CPU has AVX2 and FMA; `a` is a packed `R x kc` tile, `b` a column
/// half of a packed `kc x NR` panel (16 floats per row at stride `NR`);
/// `c` the half tile of `rows x cols` (`cols <= 16`) with row stride
/// `ldc`, accessed by nothing else.
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn passes<const R: usize, const S: usize>(
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    rows: usize,
    cols: usize,
    first: bool,
    beta: f32,
) {
    let mut r0 = 0;
    while r0 < rows {
        // SAFETY: rows `r0..r0 + S <= R` of the tile (`S` divides `R`),
        // and rows `r0..rows` of `c`: the caller's contract.
        unsafe {
            pass::<R, S>(
                kc,
                a.add(r0),
                b,
                c.add(r0 * ldc),
                ldc,
                S.min(rows - r0),
                cols,
                first,
                beta,
            )
        };
        r0 += S;
    }
}

/// `S x 16` accumulators over `kc` steps of `k`, then stored into the
/// `rows x cols` corner of `c` (`rows <= S`, `cols <= 16`): on the first
/// `k` block `c = acc + beta c` (`c` not read when beta is 0), afterwards
/// `c = c + acc`, with the AVX-512 kernel's operations (a fused `beta c +
/// acc`, an add).
///
/// # Safety
/// The CPU has AVX2 and FMA; `a + p * R + i` for `p < kc`, `i < S` and
/// `b + p * NR + l` for `l < 16` are readable; `c + i * ldc + j` for
/// `i < rows`, `j < cols` is writable and accessed by nothing else.
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn pass<const R: usize, const S: usize>(
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    rows: usize,
    cols: usize,
    first: bool,
    beta: f32,
) {
    // The rows of `c` this pass stores are touched only at its end; ask
    // for them now, so that their cache misses overlap the `kc` steps
    // (with `c` larger than L2, a 1024^3 product, each store was a miss
    // to L3 the kernel waited for). A hint only: nothing is read here.
    for i in 0..rows {
        let row = c.wrapping_add(i * ldc);
        _mm_prefetch::<_MM_HINT_T0>(row.cast::<i8>());
        _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(cols - 1).cast::<i8>());
    }
    let mut acc = [[_mm256_setzero_ps(); 2]; S];
    for p in 0..kc {
        // SAFETY: `p < kc`: row `p` of the panel half and column `p` of
        // the tile (the caller's contract).
        unsafe {
            let b0 = _mm256_loadu_ps(b.add(p * NR));
            let b1 = _mm256_loadu_ps(b.add(p * NR + 8));
            for (i, row) in acc.iter_mut().enumerate() {
                let av = _mm256_broadcast_ss(&*a.add(p * R + i));
                row[0] = _mm256_fmadd_ps(av, b0, row[0]);
                row[1] = _mm256_fmadd_ps(av, b1, row[1]);
            }
        }
    }
    let vbeta = _mm256_set1_ps(beta);
    if rows == S && cols == 16 {
        for (i, row) in acc.iter().enumerate() {
            for (q, &v) in row.iter().enumerate() {
                // SAFETY: element (i, 8 q .. 8 q + 8) of the full pass.
                unsafe {
                    let at = c.add(i * ldc + 8 * q);
                    let out = if !first {
                        _mm256_add_ps(_mm256_loadu_ps(at), v)
                    } else if beta == 0.0 {
                        v
                    } else {
                        _mm256_fmadd_ps(vbeta, _mm256_loadu_ps(at), v)
                    };
                    _mm256_storeu_ps(at, out);
                }
            }
        }
        return;
    }
    // An edge: the same sums, stored element by element with the same
    // (fused) arithmetic.
    let mut vals = [[0f32; 16]; S];
    for (i, row) in acc.iter().enumerate() {
        for (q, &v) in row.iter().enumerate() {
            // SAFETY: 8 floats at (i, 8 q) of the S x 16 array.
            unsafe { _mm256_storeu_ps(vals[i].as_mut_ptr().add(8 * q), v) };
        }
    }
    for (i, vrow) in vals.iter().enumerate().take(rows) {
        for (j, &v) in vrow.iter().enumerate().take(cols) {
            // SAFETY: (i, j) is inside the `rows x cols` corner.
            let at = unsafe { &mut *c.add(i * ldc + j) };
            *at = if !first {
                *at + v
            } else if beta == 0.0 {
                v
            } else {
                beta.mul_add(*at, v)
            };
        }
    }
}
