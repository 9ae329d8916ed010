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
use super::super::threads::{parallel_for, parallel_for_cost, PARALLEL_MIN_NS};
use super::Mat;

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
    assert!(available(), "packed_f32: AVX-512F required");
    assert!(c.len() >= m * n);
    let panels = n.div_ceil(NR);
    let cost = m * n * k / MACS_PER_NS;
    let parallel = threads > 1 && cost >= PARALLEL_MIN_NS;
    // Row chunks of whole tiles; with several threads about four chunks
    // per thread (chunks are claimed one at a time, so the threads even
    // out: with two per thread, a 1024-row product cut into 16, 16, 16, 16,
    // 16 and 6 tiles left one thread 48 tiles and the other 38).
    let row_tiles = m.div_ceil(MR);
    let chunk_tiles = if parallel {
        row_tiles.div_ceil(4 * threads).clamp(1, MAX_CHUNK_TILES)
    } else {
        row_tiles.min(MAX_CHUNK_TILES)
    };
    let row_chunks = row_tiles.div_ceil(chunk_tiles);
    // Too few row chunks (a short, wide product): cut the columns too.
    let col_chunks = if parallel && row_chunks < 2 * threads {
        (2 * threads).div_ceil(row_chunks).min(panels)
    } else {
        1
    };
    let chunk_panels = panels.div_ceil(col_chunks);
    let col_chunks = panels.div_ceil(chunk_panels);
    // From the pool, sized for a whole `KC` block whatever `k`, so that
    // products of one width reuse one size class.
    let mut packed_b = Storage::<f32>::with_capacity(panels * NR * KC);
    let pb = Shared(packed_b.spare_capacity_mut().as_mut_ptr().cast());
    let cp = Shared(c.as_mut_ptr());
    let mut k0 = 0;
    while k0 < k {
        let kc = KC.min(k - k0);
        // Pack rows k0..k0 + kc of b: panel j is `kc x NR` at j * kc * NR.
        // Packed by the threads that multiply next whenever the product is
        // parallel: the pool is woken for the chunks anyway, and a packing
        // left to the caller alone is serial time (a 256^3 product's).
        let pack_cost = if parallel { PARALLEL_MIN_NS } else { 0 };
        parallel_for_cost(panels, pack_cost, |j| {
            let p = pb;
            // SAFETY: panel `j` owns `kc * NR` elements at `j * kc * NR`,
            // inside the `panels * NR * KC` capacity.
            let dst = unsafe { std::slice::from_raw_parts_mut(p.0.add(j * kc * NR), kc * NR) };
            pack_b_panel(b, k0, kc, j * NR, n, dst);
        });
        let first = k0 == 0;
        let run = |chunk: usize| {
            let (rc, cc) = (chunk / col_chunks, chunk % col_chunks);
            let t0 = rc * chunk_tiles;
            let t1 = (t0 + chunk_tiles).min(row_tiles);
            let j0 = cc * chunk_panels;
            let j1 = (j0 + chunk_panels).min(panels);
            PACKED_A.with(|buf| {
                let mut buf = buf.borrow_mut();
                let len = (t1 - t0) * MR * kc;
                if buf.len() < len {
                    buf.resize(MAX_CHUNK_TILES * MR * KC, 0.0);
                }
                let pa = &mut buf[..len];
                pack_a(a, t0 * MR, ((t1 * MR).min(m)) - t0 * MR, k0, kc, pa);
                let (p, q) = (pb, cp);
                for j in j0..j1 {
                    // SAFETY: panel `j` was fully written by the packing loop,
                    // which returned before this one started.
                    let bp = unsafe { std::slice::from_raw_parts(p.0.add(j * kc * NR), kc * NR) };
                    let cols = NR.min(n - j * NR);
                    for t in t0..t1 {
                        let rows = MR.min(m - t * MR);
                        let ap = &pa[(t - t0) * MR * kc..(t - t0 + 1) * MR * kc];
                        // SAFETY: the tile `rows x cols` at (t * MR, j * NR)
                        // lies inside the `m x n` output (row stride `n`), and
                        // belongs to this chunk alone.
                        unsafe {
                            tile(
                                kc,
                                ap,
                                bp,
                                q.0.add(t * MR * n + j * NR),
                                n,
                                rows,
                                cols,
                                first,
                                beta,
                            )
                        };
                    }
                }
            });
        };
        if parallel {
            parallel_for(row_chunks * col_chunks, run);
        } else {
            (0..row_chunks * col_chunks).for_each(run);
        }
        k0 += kc;
    }
}

/// Packs rows `k0..k0 + kc`, columns `j0..j0 + NR` of `b` (zero past `n`)
/// as `kc` rows of `NR`.
fn pack_b_panel(b: Mat<f32>, k0: usize, kc: usize, j0: usize, n: usize, dst: &mut [f32]) {
    let cols = NR.min(n - j0);
    for (p, row) in dst.chunks_exact_mut(NR).enumerate() {
        let base = (k0 + p) * b.rs + j0 * b.cs;
        if b.cs == 1 {
            row[..cols].copy_from_slice(&b.data[base..base + cols]);
        } else if b.rs != 1 {
            for (jj, v) in row[..cols].iter_mut().enumerate() {
                *v = b.data[base + jj * b.cs];
            }
        }
        row[cols..].fill(0.0);
    }
    if b.rs == 1 && b.cs != 1 {
        // columns of b contiguous (`x W^T`): read each column along k
        for jj in 0..cols {
            let base = k0 + (j0 + jj) * b.cs;
            for (p, &v) in b.data[base..base + kc].iter().enumerate() {
                dst[p * NR + jj] = v;
            }
        }
    }
}

/// Packs rows `i0..i0 + rows`, columns `k0..k0 + kc` of `a` as tiles of
/// `MR` rows: tile `t` is `kc` columns of `MR` (zero past `rows`).
fn pack_a(a: Mat<f32>, i0: usize, rows: usize, k0: usize, kc: usize, dst: &mut [f32]) {
    for (t, tile) in dst.chunks_exact_mut(MR * kc).enumerate() {
        let r = MR.min(rows.saturating_sub(t * MR));
        if a.cs == 1 {
            // rows of a contiguous: read each row along k
            tile.fill(0.0);
            for i in 0..r {
                let base = (i0 + t * MR + i) * a.rs + k0;
                for (p, &v) in a.data[base..base + kc].iter().enumerate() {
                    tile[p * MR + i] = v;
                }
            }
        } else {
            for (p, col) in tile.chunks_exact_mut(MR).enumerate() {
                let base = (i0 + t * MR) * a.rs + (k0 + p) * a.cs;
                for (i, v) in col[..r].iter_mut().enumerate() {
                    *v = a.data[base + i * a.rs];
                }
                col[r..].fill(0.0);
            }
        }
    }
}

/// One `rows x cols` tile of `c` (row stride `ldc`) from an `MR x kc`
/// packed tile of `a` and a `kc x NR` packed panel of `b`: on the first
/// `k` block `c = acc + beta c` (without reading `c` when beta is 0),
/// afterwards `c = c + acc`.
///
/// # Safety
/// The CPU has AVX-512F; `c` points to a `rows x cols` tile with row stride
/// `ldc` that nothing else accesses; `ap` holds `MR * kc`, `bp` `kc * NR`.
#[allow(clippy::too_many_arguments)]
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn tile(
    kc: usize,
    ap: &[f32],
    bp: &[f32],
    c: *mut f32,
    ldc: usize,
    rows: usize,
    cols: usize,
    first: bool,
    beta: f32,
) {
    use std::arch::x86_64::*;
    assert!(ap.len() >= MR * kc && bp.len() >= NR * kc);
    let mut acc = [[_mm512_setzero_ps(); 2]; MR];
    let (a, b) = (ap.as_ptr(), bp.as_ptr());
    for p in 0..kc {
        // SAFETY: `p < kc`: row `p` of the panel and column `p` of the
        // tile are inside the asserted lengths.
        unsafe {
            let b0 = _mm512_loadu_ps(b.add(p * NR));
            let b1 = _mm512_loadu_ps(b.add(p * NR + 16));
            for (i, row) in acc.iter_mut().enumerate() {
                let av = _mm512_set1_ps(*a.add(p * MR + i));
                row[0] = _mm512_fmadd_ps(av, b0, row[0]);
                row[1] = _mm512_fmadd_ps(av, b1, row[1]);
            }
        }
    }
    let vbeta = _mm512_set1_ps(beta);
    if rows == MR && cols == NR {
        for (i, row) in acc.iter().enumerate() {
            for (h, &v) in row.iter().enumerate() {
                // SAFETY: element (i, 16 h .. 16 h + 16) of the full tile.
                unsafe {
                    let at = c.add(i * ldc + 16 * h);
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
    let mut vals = [0f32; MR * NR];
    for (i, row) in acc.iter().enumerate() {
        for (h, &v) in row.iter().enumerate() {
            // SAFETY: 16 floats at (i, 16 h) of the MR x NR array.
            unsafe { _mm512_storeu_ps(vals.as_mut_ptr().add(i * NR + 16 * h), v) };
        }
    }
    for i in 0..rows {
        for j in 0..cols {
            // SAFETY: (i, j) is inside the `rows x cols` tile.
            let at = unsafe { &mut *c.add(i * ldc + j) };
            let v = vals[i * NR + j];
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
unsafe fn tile(
    _: usize,
    _: &[f32],
    _: &[f32],
    _: *mut f32,
    _: usize,
    _: usize,
    _: usize,
    _: bool,
    _: f32,
) {
    unreachable!("packed_f32 needs x86-64")
}
