//! The AVX2 + FMA versions of the packed kernel's intrinsics, for CPUs
//! without AVX-512: the same 12 x 32 tile from the same packed panels, in
//! passes of 6 x 16 (12 accumulators of 8 lanes, two loads of `b` and six
//! broadcasts of `a` per `k` step; 4 x 16 for the 8-row short tiles), and
//! the packing's row copies and transposes in 8-lane vectors.
//!
//! Each output element is accumulated from zero over its `k` block in
//! increasing `k` with fused multiply-adds, then combined with `c` exactly
//! as [`super::avx512::tile`] does, so the bits are the AVX-512 kernel's.

use super::NR;
use std::arch::x86_64::*;

/// The first `n <= 8` floats at `from` in the low lanes of a vector, zeros
/// above, with plain loads: no `vmaskmovps`, which AMD's Zen cores run as
/// microcode (the masked loads and stores were 18% of a GPT training step's
/// samples there, commit e51d249; Intel runs them at full speed, but these are
/// as fast there).
///
/// # Safety
/// The CPU has AVX2; the first `n` floats at `from` are readable.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn load_first(from: *const f32, n: usize) -> __m256 {
    match n {
        // SAFETY: 8 floats readable (the caller's contract).
        8.. => unsafe { _mm256_loadu_ps(from) },
        0 => _mm256_setzero_ps(),
        // SAFETY: 4 floats readable.
        4 => unsafe { _mm256_set_m128(_mm_setzero_ps(), _mm_loadu_ps(from)) },
        _ => {
            let mut lanes = [0f32; 8];
            // SAFETY: `n < 8` floats readable into an 8-float array.
            unsafe {
                std::ptr::copy_nonoverlapping(from, lanes.as_mut_ptr(), n);
                _mm256_loadu_ps(lanes.as_ptr())
            }
        }
    }
}

/// Writes the low `n <= 8` lanes of `v` at `to` with plain stores (see
/// [`load_first`]).
///
/// # Safety
/// The CPU has AVX2; the first `n` floats at `to` are writable.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn store_first(to: *mut f32, v: __m256, n: usize) {
    match n {
        // SAFETY: 8 floats writable (the caller's contract).
        8.. => unsafe { _mm256_storeu_ps(to, v) },
        0 => {}
        // SAFETY: 4 floats writable.
        4 => unsafe { _mm_storeu_ps(to, _mm256_castps256_ps128(v)) },
        _ => {
            let mut lanes = [0f32; 8];
            // SAFETY: an 8-float array written whole, then `n < 8` floats
            // of it copied to the writable floats at `to`.
            unsafe {
                _mm256_storeu_ps(lanes.as_mut_ptr(), v);
                std::ptr::copy_nonoverlapping(lanes.as_ptr(), to, n);
            }
        }
    }
}

/// Row `p < rows` of `dst` (`width <= 32` floats at `p * width`) = the
/// `len <= width` floats at `src[base + p * stride..]`, then zeros: up to
/// four 8-lane loads and stores per row ([`load_first`], [`store_first`]
/// where partial).
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
    // SAFETY: the extents are asserted above; the CPU has AVX2.
    unsafe {
        match (width, len == width) {
            // the packing's widths, whole rows: straight-line copies
            (12, true) => copy_whole_rows::<12>(src, base, stride, dst, rows),
            (8, true) => copy_whole_rows::<8>(src, base, stride, dst, rows),
            (32, true) => copy_whole_rows::<32>(src, base, stride, dst, rows),
            _ => copy_part_rows(src, base, stride, len, dst, width, rows),
        }
    }
}

/// [`copy_rows_padded`] for rows of `W` floats (a multiple of 4), all of
/// them copied: `W / 8` vectors and a 4-float half per row.
///
/// # Safety
/// The CPU has AVX2; `base + (rows - 1) * stride + W <= src.len()` and
/// `rows * W <= dst.len()` when `rows > 0`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn copy_whole_rows<const W: usize>(
    src: &[f32],
    base: usize,
    stride: usize,
    dst: &mut [f32],
    rows: usize,
) {
    const { assert!(W.is_multiple_of(4) && W <= 32) };
    let (s, d) = (src.as_ptr().wrapping_add(base), dst.as_mut_ptr());
    for p in 0..rows {
        let (from, to) = (s.wrapping_add(p * stride), d.wrapping_add(p * W));
        // SAFETY: row `p` of the source holds `W` floats and row `p` of
        // `dst` has room for them (the caller's contract).
        unsafe {
            for h in 0..W / 8 {
                _mm256_storeu_ps(to.add(8 * h), _mm256_loadu_ps(from.add(8 * h)));
            }
            if W % 8 == 4 {
                _mm_storeu_ps(to.add(W - 4), _mm_loadu_ps(from.add(W - 4)));
            }
        }
    }
}

/// [`copy_rows_padded`] for any `len <= width <= 32`, 8 lanes at a time
/// ([`load_first`] and [`store_first`] for the partial ones).
///
/// # Safety
/// As [`copy_whole_rows`] with `len` floats read per row and `width`
/// written.
#[target_feature(enable = "avx2")]
unsafe fn copy_part_rows(
    src: &[f32],
    base: usize,
    stride: usize,
    len: usize,
    dst: &mut [f32],
    width: usize,
    rows: usize,
) {
    for p in 0..rows {
        for h in (0..width).step_by(8) {
            let n_in = len.saturating_sub(h).min(8);
            let n_out = (width - h).min(8);
            let from = src.as_ptr().wrapping_add(base + p * stride + h);
            // SAFETY: the `n_in` floats from `base + p * stride + h` are
            // inside `src`, and the `n_out = min(8, width - h)` floats at
            // `p * width + h` inside row `p` of `dst` (the caller's
            // contract).
            unsafe {
                let v = load_first(from, n_in);
                store_first(dst.as_mut_ptr().add(p * width + h), v, n_out);
            }
        }
    }
}

/// Packs rows `0..rows` of the row-major block at `src[base..]` (rows
/// `rs` apart, `kc` floats each) as `kc` columns of `R` (`dst[p R + i]` =
/// row `i`, float `p`; zero for `i >= rows`): the left operand's tile for
/// `a` with contiguous rows, and the right operand's panel for `b` with
/// contiguous columns (`R = NR`, a column of `b` as a "row"), in 8 x 8
/// transposes (a 4 x 8 one for the last four rows of a 12-row tile) loaded
/// and stored straight from the operands. Pure data movement.
///
/// # Safety
/// The CPU has AVX2.
///
/// # Panics
/// When `R` is not a multiple of 4 in `4..=32`, `rows > R`, `dst` holds
/// fewer than `R * kc` floats, or `src` fewer than `base + (rows - 1) * rs
/// + kc`.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn pack_a_rows<const R: usize>(
    src: &[f32],
    base: usize,
    rs: usize,
    rows: usize,
    kc: usize,
    dst: &mut [f32],
) {
    assert!(R.is_multiple_of(4) && (4..=32).contains(&R) && rows <= R && dst.len() >= R * kc);
    assert!(rows == 0 || kc == 0 || base + (rows - 1) * rs + kc <= src.len());
    let whole = kc - kc % 8;
    let (s, d) = (src.as_ptr().wrapping_add(base), dst.as_mut_ptr());
    // SAFETY (for every load and store below): a load reads floats
    // `p0..p0 + 8 <= kc` of a row `i < rows` of the source, and a store
    // writes lanes `g..g + 8 <= R` (or 4) of column `p < kc` of `dst`,
    // inside the extents asserted above.
    // One group of 8 (or 4) rows at a time, along the whole of `kc`, with
    // each row's next lines prefetched: eight sequential streams. Walking
    // `k` across all `R` rows at once (32 streams for a panel of `b`) left
    // the loads waiting on L3: for `x W^T` at 128 x 784 x 512 (a 1.6 MB
    // weight) the packing was 22% of a 1-thread product's perf samples,
    // and is 12.5% so (AVX2 Zen, commit 6a26c49).
    let row = |i: usize, p0: usize| s.wrapping_add(i * rs + p0);
    for g in (0..R - R % 8).step_by(8) {
        let live = rows.saturating_sub(g).min(8);
        for p0 in (0..whole).step_by(8) {
            let mut r = [_mm256_setzero_ps(); 8];
            for (i, v) in r.iter_mut().enumerate().take(live) {
                if p0 % 16 == 0 {
                    _mm_prefetch::<_MM_HINT_T0>(row(g + i, p0 + 64).cast());
                }
                // SAFETY: row `g + i < rows`, floats `p0..p0 + 8 <= whole
                // <= kc` of it: inside `src` (asserted above).
                *v = unsafe { _mm256_loadu_ps(row(g + i, p0)) };
            }
            // SAFETY: the CPU has AVX2.
            let cols = unsafe { transpose8(r) };
            for (q, &v) in cols.iter().enumerate() {
                // SAFETY: lanes `g..g + 8 <= R` of column `p0 + q < kc`:
                // below `R * kc <= dst.len()` (asserted above).
                unsafe { _mm256_storeu_ps(d.add((p0 + q) * R + g), v) };
            }
        }
    }
    if R % 8 == 4 {
        let g = R - 4;
        let live = rows.saturating_sub(g);
        for p0 in (0..whole).step_by(8) {
            let mut r = [_mm256_setzero_ps(); 4];
            for (i, v) in r.iter_mut().enumerate().take(live) {
                // SAFETY: row `g + i < rows`, floats `p0..p0 + 8 <= kc` of
                // it: inside `src` (asserted above).
                *v = unsafe { _mm256_loadu_ps(row(g + i, p0)) };
            }
            // SAFETY: the CPU has AVX2.
            let cols = unsafe { transpose4x8(r) };
            for (q, &v) in cols.iter().enumerate() {
                // SAFETY: lanes `R - 4..R` of column `p0 + q < kc`: below
                // `R * kc <= dst.len()` (asserted above).
                unsafe { _mm_storeu_ps(d.add((p0 + q) * R + g), v) };
            }
        }
    }
    for p in whole..kc {
        for i in 0..R {
            dst[p * R + i] = if i < rows {
                src[base + i * rs + p]
            } else {
                0.0
            };
        }
    }
}

/// The transpose of the 4 x 8 block whose row `i` is `r[i]`: output `q`
/// holds lane `q` of each row.
///
/// # Safety
/// The CPU has AVX2.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn transpose4x8(r: [__m256; 4]) -> [__m128; 8] {
    // t0 = r0[0] r1[0] r0[1] r1[1] | r0[4] r1[4] r0[5] r1[5], and so on
    let t0 = _mm256_unpacklo_ps(r[0], r[1]);
    let t1 = _mm256_unpackhi_ps(r[0], r[1]);
    let t2 = _mm256_unpacklo_ps(r[2], r[3]);
    let t3 = _mm256_unpackhi_ps(r[2], r[3]);
    // u[c], half h: the four rows' lane c + 4 h
    let u = [
        _mm256_shuffle_ps::<0x44>(t0, t2),
        _mm256_shuffle_ps::<0xee>(t0, t2),
        _mm256_shuffle_ps::<0x44>(t1, t3),
        _mm256_shuffle_ps::<0xee>(t1, t3),
    ];
    [
        _mm256_castps256_ps128(u[0]),
        _mm256_castps256_ps128(u[1]),
        _mm256_castps256_ps128(u[2]),
        _mm256_castps256_ps128(u[3]),
        _mm256_extractf128_ps::<1>(u[0]),
        _mm256_extractf128_ps::<1>(u[1]),
        _mm256_extractf128_ps::<1>(u[2]),
        _mm256_extractf128_ps::<1>(u[3]),
    ]
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
    bias: Option<&[f32; NR]>,
) {
    assert!(ap.len() >= R * kc && bp.len() >= NR * kc);
    assert!(rows <= R && cols <= NR && h < 2);
    let bias: Option<&[f32; 16]> =
        bias.map(|b| <&[f32; 16]>::try_from(&b[16 * h..16 * h + 16]).expect("16 floats"));
    let hcols = cols.saturating_sub(16 * h).min(16);
    if hcols == 0 {
        return;
    }
    let (a, b, ch) = (ap.as_ptr(), bp.as_ptr().wrapping_add(16 * h), c[h]);
    // The `R`-row packed tile and columns `16 h..16 h + 16` of the panel lie
    // inside `ap` and `bp` (asserted); the passes write the `rows x hcols`
    // half tile the caller gave.
    match R {
        // SAFETY: the CPU has AVX2 and FMA (our contract); bounds as above.
        12 => unsafe { passes::<R, 6>(kc, a, b, ch, ldc, rows, hcols, first, beta, bias) },
        // SAFETY: as for 12 rows.
        8 => unsafe { passes::<R, 4>(kc, a, b, ch, ldc, rows, hcols, first, beta, bias) },
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
    bias: Option<&[f32; 16]>,
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
                bias,
            )
        };
        r0 += S;
    }
}

/// `S x 16` accumulators over `kc` steps of `k`, then stored into the
/// `rows x cols` corner of `c` (`rows <= S`, `cols <= 16`): on the first
/// `k` block `c = acc + beta c` (`c` not read when beta is 0), or `c =
/// bias + acc` with a `bias` (the half's 16 columns; `c` not read),
/// afterwards `c = c + acc`, with the AVX-512 kernel's operations (a fused
/// `beta c + acc`, an add).
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
    bias: Option<&[f32; 16]>,
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
    // SAFETY: 16 floats: two vectors.
    let vbias = bias.map(|b| unsafe {
        [
            _mm256_loadu_ps(b.as_ptr()),
            _mm256_loadu_ps(b.as_ptr().add(8)),
        ]
    });
    if rows == S && cols == 16 {
        for (i, row) in acc.iter().enumerate() {
            for (q, &v) in row.iter().enumerate() {
                // SAFETY: element (i, 8 q .. 8 q + 8) of the full pass.
                unsafe {
                    let at = c.add(i * ldc + 8 * q);
                    let out = if !first {
                        _mm256_add_ps(_mm256_loadu_ps(at), v)
                    } else if let Some(vb) = vbias {
                        _mm256_add_ps(vb[q], v)
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
