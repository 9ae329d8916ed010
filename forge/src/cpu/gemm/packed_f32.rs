//! forge's own f32 gemm for CPUs with AVX-512: operands packed into pooled
//! buffers, the right-hand operand packed once per call and shared by every
//! thread, and a 12 x 32 register-tile micro-kernel.
//!
//! Why not `matrixmultiply` here: it packs into a fresh `malloc`ed buffer on
//! every call (which the C allocator maps and faults in again; see
//! `cpu::memory`), and with several threads each part packs the shared
//! operand again. Here the packed panels come from forge's buffer pool
//! (reused from one call to the next: no page faults after warm-up), `b`
//! is packed once per `KC` block in parallel panels, and the threads then
//! share it, each packing only its own rows of `a`.
//!
//! # Bit-identical for every thread count
//! Each output element is `beta c + (sum over k-block 0) + (block 1) + ...`
//! with the blocks of [`KC`] in increasing `k`, each block's products
//! accumulated in increasing `k` with fused multiply-adds, whatever tile,
//! chunk or thread computes it (edge tiles run the same kernel on
//! zero-padded panels). So the partition never changes a bit.

use super::super::memory::Storage;
use super::Mat;

mod direct;
pub(crate) use direct::{gemm_core, ASrc, Out, PackedA};

/// Rows of a register tile.
const MR: usize = 12;
/// Columns of a register tile (two 16-lane vectors).
const NR: usize = 32;
/// The `k` block: a packed `KC x NR` panel of `b` (32 KiB) stays in L1
/// while it is multiplied by every row tile of a chunk.
const KC: usize = 256;
/// The most row tiles in one chunk (a packed `a` block of at most
/// 16 x 12 x 256 floats, 192 KiB, stays in L2 while every panel of `b`
/// passes).
const MAX_CHUNK_TILES: usize = 16;

thread_local! {
    /// Each thread's packed block of `a`: kept from call to call (never
    /// returned to the allocator, so never faulted in again), at most
    /// `MAX_CHUNK_TILES * MR * KC` floats.
    static PACKED_A: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Multiply-adds per nanosecond one thread sustains here (about 200
/// GFLOP/s), for the parallel cost estimate.
const MACS_PER_NS: usize = 100;

/// Whether this path runs on this CPU.
pub(super) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Raw pointers shared by the chunks of one call.
#[derive(Clone, Copy)]
struct Shared(*mut f32);
// SAFETY: the chunks write disjoint parts through the pointer (disjoint
// panels of the packed buffer, disjoint tiles of `c`), and the buffers
// outlive the parallel loops that use them.
unsafe impl Send for Shared {}
// SAFETY: as above.
unsafe impl Sync for Shared {}

/// `c = a b + beta c` (`c` row-major `m x n`, `ldc = n`) with up to
/// `threads` threads; `m`, `n`, `k` are all non-zero, the operands' extents
/// are checked by the caller.
///
/// # Panics
/// When the CPU lacks AVX-512F (check [`available`] first).
#[allow(clippy::too_many_arguments)]
pub(super) fn gemm(
    m: usize,
    k: usize,
    n: usize,
    a: Mat<f32>,
    b: Mat<f32>,
    beta: f32,
    c: &mut [f32],
    threads: usize,
) {
    assert!(c.len() >= m * n);
    let out = Out::row_major(c.as_mut_ptr(), n);
    let pack =
        |k0: usize, kc: usize, j0: usize, dst: &mut [f32]| pack_b_panel(b, k0, kc, j0, n, dst);
    // SAFETY: `c` holds the `m x n` row-major output (asserted), borrowed
    // mutably for the whole call.
    unsafe { gemm_core(m, k, n, ASrc::Mat(a), &pack, beta, out, threads) };
}

/// `b` (`k x n`) packed once into the panels [`gemm`] would pack on every
/// call (`KC` blocks of rows one after the other, each cut into `kc x NR`
/// panels), for [`gemm_prepacked`]: an operand multiplied many times (a
/// recurrent layer's hidden weights, once per time step).
pub(super) struct PackedB {
    panels: Storage<f32>,
    k: usize,
    n: usize,
}

impl PackedB {
    /// Packs `b`, `k x n` (both non-zero; the extent is checked by the
    /// caller).
    ///
    /// # Panics
    /// When the CPU lacks AVX-512F (check [`available`] first).
    pub(super) fn new(k: usize, n: usize, b: Mat<f32>) -> Self {
        assert!(available(), "packed_f32: AVX-512F required");
        let width = n.div_ceil(NR) * NR;
        let mut panels = Storage::<f32>::zeroed(k * width);
        let mut k0 = 0;
        while k0 < k {
            let kc = KC.min(k - k0);
            let block = &mut panels[k0 * width..(k0 + kc) * width];
            for (j, dst) in block.chunks_exact_mut(kc * NR).enumerate() {
                pack_b_panel(b, k0, kc, j * NR, n, dst);
            }
            k0 += kc;
        }
        PackedB { panels, k, n }
    }

    /// `(k, n)`.
    pub(super) fn dims(&self) -> (usize, usize) {
        (self.k, self.n)
    }
}

/// How [`gemm_prepacked`] cuts `m` rows: `(tiles of MR rows, tiles of
/// SHORT rows)` after them, padding as few rows as it can (64 rows: four
/// of 12 and two of 8 instead of six of 12, the last one a third empty).
fn row_split(m: usize) -> (usize, usize) {
    let (q, r) = (m / MR, m % MR);
    match r {
        0 => (q, 0),
        // the last full tile and the rest: at most 16 rows, two short tiles
        1..=4 if q > 0 => (q - 1, 2),
        1..=SHORT => (q, 1),
        _ => (q + 1, 0),
    }
}

/// Rows of the short tiles of [`gemm_prepacked`].
const SHORT: usize = 8;

/// `c = a b + beta c` on the calling thread with `b` packed beforehand
/// (`c` row-major `m x n`, `m >= 1`; the extents are checked by the
/// caller). Each element is the same sum as in [`gemm`] (the `KC` blocks
/// in increasing `k`, fused multiply-adds in increasing `k` within a
/// block), so the bits are [`gemm`]'s; the rows are cut into tiles of
/// `MR` and of [`SHORT`] rows ([`row_split`]) instead of `MR` only.
///
/// # Panics
/// When the CPU lacks AVX-512F, or `c` is shorter than `m x n`.
pub(super) fn gemm_prepacked(m: usize, a: Mat<f32>, b: &PackedB, beta: f32, c: &mut [f32]) {
    assert!(available(), "packed_f32: AVX-512F required");
    let (k, n) = (b.k, b.n);
    assert!(c.len() >= m * n, "packed_f32: output too small");
    let width = n.div_ceil(NR) * NR;
    let (full, short) = row_split(m);
    let mut k0 = 0;
    while k0 < k {
        let kc = KC.min(k - k0);
        let pb = &b.panels[k0 * width..(k0 + kc) * width];
        let step = Block {
            k0,
            kc,
            n,
            beta,
            first: k0 == 0,
        };
        let mut t0 = 0;
        while t0 < full {
            let t1 = (t0 + MAX_CHUNK_TILES).min(full);
            let i0 = t0 * MR;
            run_rows::<MR>(a, i0, (t1 * MR).min(m) - i0, pb, step, c);
            t0 = t1;
        }
        if short > 0 {
            let i0 = full * MR;
            run_rows::<SHORT>(a, i0, m - i0, pb, step, c);
        }
        k0 += kc;
    }
}

/// One `KC` block of a [`gemm_prepacked`] product.
#[derive(Clone, Copy)]
struct Block {
    k0: usize,
    kc: usize,
    n: usize,
    beta: f32,
    first: bool,
}

/// Rows `i0..i0 + rows` of `c` for one `KC` block: those rows of `a`
/// packed in tiles of `R` rows, then every panel of `pb` against every
/// tile.
fn run_rows<const R: usize>(
    a: Mat<f32>,
    i0: usize,
    rows: usize,
    pb: &[f32],
    blk: Block,
    c: &mut [f32],
) {
    let Block {
        k0,
        kc,
        n,
        beta,
        first,
    } = blk;
    let tiles = rows.div_ceil(R);
    PACKED_A.with(|buf| {
        let mut buf = buf.borrow_mut();
        let len = tiles * R * kc;
        if buf.len() < len {
            buf.resize(len.max(MAX_CHUNK_TILES * MR * KC), 0.0);
        }
        let pa = &mut buf[..len];
        pack_a::<R>(a, i0, rows, k0, kc, pa);
        for (j, bp) in pb.chunks_exact(kc * NR).enumerate() {
            let cols = NR.min(n - j * NR);
            for (t, ap) in pa.chunks_exact(R * kc).enumerate() {
                let r = R.min(rows - t * R);
                let at = (i0 + t * R) * n + j * NR;
                assert!(at + (r - 1) * n + cols <= c.len());
                // SAFETY: the `r x cols` tile at row i0 + t R, column j NR
                // lies inside the `m x n` output (asserted), which this
                // call holds mutably.
                unsafe {
                    let c0 = c.as_mut_ptr().add(at);
                    tile::<R>(
                        kc,
                        ap,
                        bp,
                        [c0, c0.wrapping_add(16)],
                        n,
                        r,
                        cols,
                        first,
                        beta,
                    )
                };
            }
        }
    });
}

/// Packs rows `k0..k0 + kc`, columns `j0..j0 + NR` of `b` (zero past `n`)
/// as `kc` rows of `NR`.
pub(super) fn pack_b_panel(
    b: Mat<f32>,
    k0: usize,
    kc: usize,
    j0: usize,
    n: usize,
    dst: &mut [f32],
) {
    let cols = NR.min(n - j0);
    if b.rs == 1 && b.cs != 1 {
        // columns of b contiguous (`x W^T`): a transpose
        pack_b_columns(b, k0, kc, j0, cols, dst);
        return;
    }
    if b.cs == 1 {
        // rows of b contiguous: `cols` floats of each row, zero-padded
        // SAFETY: `gemm` runs only where AVX-512F is available; rows
        // `k0..k0 + kc` of `b` hold `cols` floats from column `j0` (the
        // caller checked `b`'s extent), `dst` holds `kc` rows of `NR`.
        unsafe { copy_rows_padded(b.data, k0 * b.rs + j0, b.rs, cols, dst, NR, kc) };
        return;
    }
    for (p, row) in dst.chunks_exact_mut(NR).enumerate() {
        let base = (k0 + p) * b.rs + j0 * b.cs;
        for (jj, v) in row[..cols].iter_mut().enumerate() {
            *v = b.data[base + jj * b.cs];
        }
        row[cols..].fill(0.0);
    }
}

/// Row `p < rows` of `dst` (`width <= 32` floats at `p * width`) = the
/// `len <= width` floats at `src[base + p * stride..]`, then zeros: one or
/// two masked 16-lane loads and stores per row.
///
/// # Safety
/// The CPU has AVX-512F.
///
/// # Panics
/// When `src` or `dst` is too short, or `len > width` or `width > 32`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn copy_rows_padded(
    src: &[f32],
    base: usize,
    stride: usize,
    len: usize,
    dst: &mut [f32],
    width: usize,
    rows: usize,
) {
    use std::arch::x86_64::*;
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

/// Off x86-64 the path is never taken ([`available`] is false).
#[cfg(not(target_arch = "x86_64"))]
unsafe fn copy_rows_padded(
    _: &[f32],
    _: usize,
    _: usize,
    _: usize,
    _: &mut [f32],
    _: usize,
    _: usize,
) {
    unreachable!("packed_f32 needs x86-64")
}

/// [`pack_b_panel`] for `b` with contiguous columns (`b.rs == 1`): the
/// 16 x 16 blocks of whole column groups go through [`transpose16`], the
/// rest element by element.
fn pack_b_columns(b: Mat<f32>, k0: usize, kc: usize, j0: usize, cols: usize, dst: &mut [f32]) {
    assert!(dst.len() >= kc * NR);
    let whole = kc - kc % 16;
    for g in (0..NR).step_by(16) {
        let group = cols.saturating_sub(g).min(16);
        let mut p_done = 0;
        if group == 16 {
            for p0 in (0..whole).step_by(16) {
                let src: [&[f32]; 16] = std::array::from_fn(|r| {
                    let at = k0 + p0 + (j0 + g + r) * b.cs;
                    &b.data[at..at + 16]
                });
                // SAFETY: `gemm` runs only where AVX-512F is available;
                // every source row holds 16 floats, and rows `p0..p0 + 16`
                // of the destination (row stride `NR`) hold columns
                // `g..g + 16` inside `dst` (asserted above).
                unsafe { transpose16(&src, dst.as_mut_ptr().add(p0 * NR + g), NR, 0xffff) };
            }
            p_done = whole;
        }
        for p in p_done..kc {
            let row = &mut dst[p * NR + g..p * NR + g + 16];
            for (jj, v) in row.iter_mut().enumerate() {
                *v = if jj < group {
                    b.data[k0 + p + (j0 + g + jj) * b.cs]
                } else {
                    0.0
                };
            }
        }
    }
}

/// Packs rows `i0..i0 + rows`, columns `k0..k0 + kc` of `a` as tiles of
/// `R` rows (`MR`, or 8 for [`gemm_prepacked`]'s short tiles): tile `t` is
/// `kc` columns of `R` (zero past `rows`).
fn pack_a<const R: usize>(
    a: Mat<f32>,
    i0: usize,
    rows: usize,
    k0: usize,
    kc: usize,
    dst: &mut [f32],
) {
    let whole = kc - kc % 16;
    for (t, tile) in dst.chunks_exact_mut(R * kc).enumerate() {
        let r = R.min(rows.saturating_sub(t * R));
        if a.cs == 1 {
            // rows of a contiguous: a transpose, 16 columns of `k` at a
            // time through [`transpose16`] (the rows past `r` and the
            // lanes past `R` are not written), the rest element by element
            let zero = [0f32; 16];
            for p0 in (0..whole).step_by(16) {
                let src: [&[f32]; 16] = std::array::from_fn(|i| {
                    let at = (i0 + t * R + i) * a.rs + k0 + p0;
                    if i < r {
                        &a.data[at..at + 16]
                    } else {
                        &zero[..]
                    }
                });
                // SAFETY: `gemm` runs only where AVX-512F is available;
                // every source row holds 16 floats; the masked stores
                // write `R` floats at rows `p0..p0 + 16` (row stride
                // `R`) of the `R * kc` tile.
                unsafe {
                    transpose16(
                        &src,
                        tile.as_mut_ptr().add(p0 * R),
                        R,
                        ((1u32 << R) - 1) as u16,
                    )
                };
            }
            for p in whole..kc {
                for i in 0..R {
                    tile[p * R + i] = if i < r {
                        a.data[(i0 + t * R + i) * a.rs + k0 + p]
                    } else {
                        0.0
                    };
                }
            }
        } else if a.rs == 1 {
            // columns of a contiguous (`g^T x`): `r` floats per column
            // SAFETY: `gemm` runs only where AVX-512F is available;
            // columns `k0..k0 + kc` of `a` hold `r` floats from row
            // `i0 + t * R` (the caller checked `a`'s extent), `tile`
            // holds `kc` columns of `R`.
            unsafe { copy_rows_padded(a.data, i0 + t * R + k0 * a.cs, a.cs, r, tile, R, kc) };
        } else {
            for (p, col) in tile.chunks_exact_mut(R).enumerate() {
                let base = (i0 + t * R) * a.rs + (k0 + p) * a.cs;
                for (i, v) in col[..r].iter_mut().enumerate() {
                    *v = a.data[base + i * a.rs];
                }
                col[r..].fill(0.0);
            }
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
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn transpose16(src: &[&[f32]; 16], dst: *mut f32, ld: usize, mask: u16) {
    use std::arch::x86_64::*;
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
    for (q, &v) in out.iter().enumerate() {
        // SAFETY: the caller guarantees the masked lanes are writable.
        unsafe { _mm512_mask_storeu_ps(dst.add(q * ld), mask, v) };
    }
}

/// Off x86-64 the path is never taken ([`available`] is false).
#[cfg(not(target_arch = "x86_64"))]
unsafe fn transpose16(_: &[&[f32]; 16], _: *mut f32, _: usize, _: u16) {
    unreachable!("packed_f32 needs x86-64")
}

/// One `rows x cols` tile of `c` (row stride `ldc`) from an `R x kc`
/// packed tile of `a` (`R` is `MR`, or 8 for [`gemm_prepacked`]'s short
/// tiles: each element is the same sum either way) and a `kc x NR` packed panel of `b`: on the first
/// `k` block `c = acc + beta c` (without reading `c` when beta is 0),
/// afterwards `c = c + acc`.
///
/// Columns `16 h..16 h + 16` of the tile start at `c[h]` (one pointer per
/// half, which need not be adjacent).
///
/// # Safety
/// The CPU has AVX-512F; each `c[h]` points to the `rows x` (its share of
/// `cols`) half tile with row stride `ldc` that nothing else accesses (`c[1]`
/// is not used when `cols <= 16`); `ap` holds `R * kc`, `bp` `kc * NR`.
#[allow(clippy::too_many_arguments)]
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn tile<const R: usize>(
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
    use std::arch::x86_64::*;
    assert!(ap.len() >= R * kc && bp.len() >= NR * kc);
    let mut acc = [[_mm512_setzero_ps(); 2]; R];
    let (a, b) = (ap.as_ptr(), bp.as_ptr());
    for p in 0..kc {
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
    }
    let vbeta = _mm512_set1_ps(beta);
    if rows == R && cols == NR {
        for (i, row) in acc.iter().enumerate() {
            for (h, &v) in row.iter().enumerate() {
                // SAFETY: element (i, 16 h .. 16 h + 16) of the full tile.
                unsafe {
                    let at = c[h].add(i * ldc);
                    let out = if !first {
                        _mm512_add_ps(_mm512_loadu_ps(at), v)
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
            } else if beta == 0.0 {
                v
            } else {
                beta.mul_add(*at, v)
            };
        }
    }
}

/// Off x86-64 the path is never taken ([`available`] is false).
#[allow(clippy::too_many_arguments)]
#[cfg(not(target_arch = "x86_64"))]
unsafe fn tile<const R: usize>(
    _: usize,
    _: &[f32],
    _: &[f32],
    _: [*mut f32; 2],
    _: usize,
    _: usize,
    _: usize,
    _: bool,
    _: f32,
) {
    unreachable!("packed_f32 needs x86-64")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The packed panels of `b` and tiles of `a` equal an element-by-element
    /// reading of the operand, zero padding included, for both layouts,
    /// edge panels and tiles, and `k` blocks whose length is not a multiple
    /// of 16 (the transposing paths go 16 x 16 blocks at a time).
    #[test]
    fn packs_equal_the_element_reading() {
        if !available() {
            return;
        }
        let (m, k, n) = (29, 300, 45);
        let buf: Vec<f32> = (0..k * m.max(n)).map(|v| v as f32 + 0.5).collect();
        let blocks = [(0, KC), (KC, k - KC), (3, 37)];
        for b in [Mat::row_major(&buf, n), Mat::transposed(&buf, k)] {
            for j0 in (0..n).step_by(NR) {
                for (k0, kc) in blocks {
                    let mut dst = vec![f32::NAN; kc * NR];
                    pack_b_panel(b, k0, kc, j0, n, &mut dst);
                    for p in 0..kc {
                        for jj in 0..NR {
                            let j = j0 + jj;
                            let want = if j < n {
                                b.data[(k0 + p) * b.rs + j * b.cs]
                            } else {
                                0.0
                            };
                            assert_eq!(dst[p * NR + jj], want, "b rs {} ({p}, {j})", b.rs);
                        }
                    }
                }
            }
        }
        // tiles of MR rows and gemm_prepacked's short tiles
        check_a::<MR>(&buf, m, k, blocks);
        check_a::<SHORT>(&buf, m, k, blocks);
    }

    /// [`packs_equal_the_element_reading`] for `a` in tiles of `R` rows.
    fn check_a<const R: usize>(buf: &[f32], m: usize, k: usize, blocks: [(usize, usize); 3]) {
        for a in [Mat::row_major(buf, k), Mat::transposed(buf, m)] {
            for (i0, rows) in [(0, m), (5, 13), (17, 12)] {
                for (k0, kc) in blocks {
                    let tiles = rows.div_ceil(R);
                    let mut dst = vec![f32::NAN; tiles * R * kc];
                    pack_a::<R>(a, i0, rows, k0, kc, &mut dst);
                    for t in 0..tiles {
                        for p in 0..kc {
                            for i in 0..R {
                                let r = t * R + i;
                                let want = if r < rows {
                                    a.data[(i0 + r) * a.rs + (k0 + p) * a.cs]
                                } else {
                                    0.0
                                };
                                assert_eq!(
                                    dst[(t * kc + p) * R + i],
                                    want,
                                    "a cs {} ({r}, {p})",
                                    a.cs
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
