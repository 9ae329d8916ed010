//! The AVX-512F versions of the packed kernel's intrinsics: the 12 x 32
//! tile in 24 accumulators (two 16-lane vectors per row; one vector per row
//! for a last panel of at most 16 columns), its partial tiles stored
//! through lane masks, and the packing's masked row copies and 16 x 16
//! register transposes.

use super::NR;
use std::arch::x86_64::*;

/// The lanes below `n` (at most 16) as a load or store mask.
#[inline]
fn lanes(n: usize) -> __mmask16 {
    if n >= 16 {
        0xffff
    } else {
        (1u16 << n) - 1
    }
}

/// Row `p < rows` of `dst` (`width <= 32` floats at `p * width`) = the
/// `len <= width` floats at `src[base + p * stride..]`, then zeros: one or
/// two masked 16-lane loads and stores per row, the masks computed once
/// per call (they used to be recomputed per row and half).
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
    let (in0, in1) = (lanes(len), lanes(len.saturating_sub(16)));
    let (out0, out1) = (lanes(width), lanes(width.saturating_sub(16)));
    let s = src.as_ptr().wrapping_add(base);
    let d = dst.as_mut_ptr();
    for p in 0..rows {
        let from = s.wrapping_add(p * stride);
        // SAFETY: the first `len` floats of row `p` are inside `src`
        // (asserted; a masked-off lane is not read, so `in1 = 0` reads
        // nothing past `from + 16`), and the `width` floats at
        // `p * width` inside `dst` (asserted).
        unsafe {
            let to = d.add(p * width);
            _mm512_mask_storeu_ps(to, out0, _mm512_maskz_loadu_ps(in0, from));
            if width > 16 {
                let v = _mm512_maskz_loadu_ps(in1, from.wrapping_add(16));
                _mm512_mask_storeu_ps(to.add(16), out1, v);
            }
        }
    }
}

/// The transpose of the 16 x 16 block whose row `i` is `r[i]`: lane `i`
/// of output `q` is lane `q` of `r[i]`. Pure data movement.
///
/// # Safety
/// The CPU has AVX-512F.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn transpose16(r: &[__m512; 16]) -> [__m512; 16] {
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
    out
}

/// Writes the low 12 lanes of the 16 vectors `out` as 16 rows of 12
/// contiguous floats (192 floats at `dst`): packed into 12 whole vectors
/// by two-source permutes (three vectors per four rows), then 12 plain
/// stores instead of 16 masked ones.
///
/// # Safety
/// The CPU has AVX-512F; 192 floats at `dst` are writable.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn store_rows_of_12(out: &[__m512; 16], dst: *mut f32) {
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
            // SAFETY: rows `4 g .. 4 g + 4` of 12 floats are floats
            // `48 g .. 48 g + 48` from `dst` (the caller's contract).
            unsafe { _mm512_storeu_ps(dst.add(48 * g + 16 * j), v) };
        }
    }
}

/// Packs rows `0..rows` of the row-major block at `src[base..]` (rows `rs`
/// apart, `kc` floats each) as `kc` columns of `R` (`dst[p R + i]` = row
/// `i`, float `p`; zero for `i >= rows`): the left operand's tile for `a`
/// with contiguous rows, and the right operand's panel for `b` with
/// contiguous columns (`R = NR`, a column of `b` as a "row"). The whole
/// loop in one function: 16 x 16 register transposes of 16 rows (zero
/// past `rows`) loaded straight from the source, the last `kc % 16`
/// columns by masked loads. It used to be an out-of-line call per 16
/// columns taking 16 bounds-checked slices. Pure data movement.
///
/// # Safety
/// The CPU has AVX-512F.
///
/// # Panics
/// When `R` is not a multiple of 4 in `4..=32`, `rows > R`, `dst` holds
/// fewer than `R * kc` floats, or `src` fewer than `base + (rows - 1) * rs
/// + kc`.
#[target_feature(enable = "avx512f")]
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
    let (s, d) = (src.as_ptr().wrapping_add(base), dst.as_mut_ptr());
    let row = |i: usize, p0: usize| s.wrapping_add(i * rs + p0);
    for g in (0..R).step_by(16) {
        let live = rows.saturating_sub(g).min(16);
        let width = (R - g).min(16);
        let mask = lanes(width);
        let mut p0 = 0;
        while p0 < kc {
            let n = (kc - p0).min(16);
            let mut r = [_mm512_setzero_ps(); 16];
            for (i, v) in r.iter_mut().enumerate().take(live) {
                // SAFETY: row `g + i < rows`, floats `p0..p0 + n <= kc`
                // of it: inside `src` (asserted above); the lanes past `n`
                // are masked off and not read.
                *v = unsafe {
                    if n == 16 {
                        _mm512_loadu_ps(row(g + i, p0))
                    } else {
                        _mm512_maskz_loadu_ps(lanes(n), row(g + i, p0))
                    }
                };
            }
            // SAFETY: the CPU has AVX-512F.
            let out = unsafe { transpose16(&r) };
            let at = d.wrapping_add(p0 * R + g);
            if R == 12 && n == 16 {
                // SAFETY: columns `p0..p0 + 16 <= kc` of 12 floats are 192
                // contiguous floats at `p0 * 12` of the `R * kc` tile.
                unsafe { store_rows_of_12(&out, at) };
            } else {
                for (q, &v) in out.iter().enumerate().take(n) {
                    // SAFETY: lanes `g..g + width <= R` of column `p0 + q
                    // < kc`: below `R * kc <= dst.len()` (asserted).
                    unsafe { _mm512_mask_storeu_ps(at.add(q * R), mask, v) };
                }
            }
            p0 += 16;
        }
    }
}

/// Defines a tile kernel (see [`tile`]) whose left operand is the
/// parameter `$a`, with `$setup` run first and `$addr` the address of
/// element `(i, p)` of the tile (`$i`, `$p` naming the row and the step of
/// `k`); the parameters `$kc` and `$rows` are named by the caller so that
/// `$setup` and `$addr` can read them. One body for both kernels, each
/// compiled on its own (two `k` loops in one function cost the packed
/// loop's registers: bench/EXPERIMENTS.md, 2026-12-07 07:40).
macro_rules! tile_kernel {
    (
        $(#[$attr:meta])*
        fn $name:ident($kc:ident, $rows:ident, $a:ident: $aty:ty)
        { $($setup:tt)* }
        |$p:ident, $i:ident| $addr:expr
    ) => {
        $(#[$attr])*
        #[allow(clippy::too_many_arguments)]
        #[target_feature(enable = "avx512f")]
        pub(super) unsafe fn $name<const R: usize, const H: usize>(
            $kc: usize,
            $a: $aty,
            bp: &[f32],
            c: [*mut f32; 2],
            ldc: usize,
            $rows: usize,
            cols: usize,
            first: bool,
            beta: f32,
            bias: Option<&[f32; NR]>,
            next: *const f32,
        ) {
            assert!(bp.len() >= NR * $kc);
            assert!(H == 2 || cols <= 16, "packed_f32: a one-vector tile has at most 16 columns");
            $($setup)*
            let mut acc = [[_mm512_setzero_ps(); H]; R];
            let b = bp.as_ptr();
            // One step of `k`: row `p` of the panel (its first `16 H`
            // columns) times column `p` of the tile.
            let step = |acc: &mut [[__m512; H]; R], $p: usize| {
                // SAFETY: `p < kc`: row `p` of the panel and column `p` of the
                // tile are inside the asserted lengths (or the caller's contract).
                unsafe {
                    let bv: [__m512; H] =
                        std::array::from_fn(|h| _mm512_loadu_ps(b.add($p * NR + 16 * h)));
                    for ($i, row) in acc.iter_mut().enumerate() {
                        let av = _mm512_set1_ps(*$addr);
                        for (r, &bh) in row.iter_mut().zip(&bv) {
                            *r = _mm512_fmadd_ps(av, bh, *r);
                        }
                    }
                }
            };
            // The tile's rows of `c` are fetched while the first steps run, one
            // row a step (both ends of each half: a row of `c` need not start on a
            // cache line): `c`'s rows are far apart (a row stride of 4 KiB at
            // n = 1024), so they miss every cache, and the loads and stores at the
            // end used to stall (18% of a 1024^3 product's samples in the stores,
            // 7% after; Sapphire Rapids, commit de3846d).
            let ahead = $rows.min($kc);
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
                for p in ahead..$kc {
                    step(&mut acc, p);
                }
            } else {
                // The next panel, a row (two lines) a step, into L2.
                for p in ahead..$kc {
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
            // Each element: `c + acc` after the first block; on the first,
            // `bias + acc`, `acc`, or `fma(beta, c, acc)`. The same
            // arithmetic lane by lane for whole and partial tiles: a
            // partial tile's rows are stored through lane masks (its
            // columns past `cols` and rows past `rows` untouched).
            let out = |at: *const f32, mask: __mmask16, h: usize, v: __m512| {
                // SAFETY: the lanes of `mask` at `at` are inside the tile
                // (the caller's contract); lanes outside it are not read.
                unsafe {
                    if !first {
                        _mm512_add_ps(_mm512_maskz_loadu_ps(mask, at), v)
                    } else if let Some(vb) = vbias {
                        // `fma(1, bias, acc)` of the output prefilled with
                        // the bias: one rounding of the same sum
                        _mm512_add_ps(vb[h], v)
                    } else if beta == 0.0 {
                        v
                    } else {
                        _mm512_fmadd_ps(vbeta, _mm512_maskz_loadu_ps(mask, at), v)
                    }
                }
            };
            if $rows == R && cols == 16 * H {
                for (i, row) in acc.iter().enumerate() {
                    for (h, &v) in row.iter().enumerate() {
                        // SAFETY: element (i, 16 h .. 16 h + 16) of the full tile.
                        unsafe {
                            let at = c[h].add(i * ldc);
                            _mm512_storeu_ps(at, out(at, 0xffff, h, v));
                        }
                    }
                }
                return;
            }
            // An edge tile: its first `rows` rows, each half's first
            // `cols - 16 h` columns
            for (i, row) in acc.iter().enumerate().take($rows) {
                for (h, &v) in row.iter().enumerate() {
                    let n = cols.saturating_sub(16 * h);
                    if n == 0 {
                        continue;
                    }
                    let mask = lanes(n);
                    // SAFETY: lanes `0..min(n, 16)` of row `i` of half `h`
                    // are inside the `rows x cols` tile.
                    unsafe {
                        let at = c[h].add(i * ldc);
                        _mm512_mask_storeu_ps(at, mask, out(at, mask, h, v));
                    }
                }
            }
        }
    };
}

tile_kernel! {
    /// One `rows x cols` tile of `c` (row stride `ldc`) from an `R x kc`
    /// packed tile of `a` (`R` is `MR`, or 8 for [`gemm_prepacked`]'s
    /// short tiles: each element is the same sum either way) and a `kc x
    /// NR` packed panel of `b`: on the first `k` block `c = acc + beta c`
    /// (without reading `c` when beta is 0), or `c = bias + acc` with a
    /// `bias` (the tile's 32 columns, held in two registers; `c` not read),
    /// afterwards `c = c + acc`.
    ///
    /// Columns `16 h..16 h + 16` of the tile start at `c[h]` (one pointer
    /// per half, which need not be adjacent). `next`, when not null, is the
    /// panel multiplied after this one, fetched into L2 a row (two lines) a
    /// step (a hint: never read, so any address will do).
    ///
    /// # Safety
    /// The CPU has AVX-512F; each `c[h]` points to the `rows x` (its share
    /// of `cols`) half tile with row stride `ldc` that nothing else accesses
    /// (`c[1]` is not used when `cols <= 16`); `ap` holds `R * kc`, `bp`
    /// `kc * NR`.
    fn tile(kc, rows, ap: &[f32]) {
        assert!(ap.len() >= R * kc);
        let a = ap.as_ptr();
    }
    |p, i| a.add(p * R + i)
}

tile_kernel! {
    /// [`tile`] with the tile of `a` read in place from a matrix with
    /// contiguous rows: element `(i, p)` at `a.0 + i * a.1 + p`. The same
    /// floats multiplied in the same order as from the packed tile, so the
    /// same bits, without the packing's pass over `a`.
    ///
    /// # Safety
    /// As [`tile`], and `rows == R`, and for every `i < R` the `kc` floats
    /// from `a.0 + i * a.1` are readable.
    fn tile_rows(kc, rows, a: (*const f32, usize)) {
        assert_eq!(rows, R, "packed_f32: tiles read in place are whole");
        let row: [*const f32; R] = std::array::from_fn(|i| a.0.wrapping_add(i * a.1));
    }
    |p, i| row[i].add(p)
}
