//! forge's own f32 gemm for CPUs with AVX-512F or with AVX2 + FMA:
//! operands packed into pooled buffers, the right-hand operand packed once
//! per call and shared by every thread, and a 12 x 32 register-tile
//! micro-kernel (24 accumulators of 16 lanes with AVX-512, four passes of
//! 6 x 16 in 12 accumulators of 8 lanes with AVX2; `avx512.rs`, `avx2.rs`,
//! the set chosen once per process, [`Isa::detect`]).
//!
//! Why not `matrixmultiply` here: it packs into a fresh `malloc`ed buffer on
//! every call (which the C allocator maps and faults in again; see
//! `cpu::memory`), and with several threads each part packs the shared
//! operand again. Here the packed panels come from forge's buffer pool
//! (reused from one call to the next: no page faults after warm-up), and
//! the threads share one packed `b`, each packing only its own rows of `a`.
//! A parallel call makes two hand-offs whatever `k`: every `KC` block of
//! `b` packed in parallel panels, then every chunk running all the blocks
//! in increasing `k` (a 128 x 784 x 512 product used to make eight, two per
//! block). A serial call packs and multiplies one block at a time, the
//! block staying in cache while every chunk passes.
//!
//! # Bit-identical for every thread count
//! Each output element is `beta c + (sum over k-block 0) + (block 1) + ...`
//! with the blocks of [`KC`] in increasing `k`, each block's products
//! accumulated in increasing `k` with fused multiply-adds, whatever tile,
//! chunk or thread computes it (edge tiles run the same kernel on
//! zero-padded panels). So the partition never changes a bit; nor does the
//! instruction set: the AVX2 kernel computes every element in the same
//! order with the same fused operations as the AVX-512 one, only in
//! narrower vectors (`tests::kernels_equal_the_scalar_order` pins both to
//! a scalar loop).

use super::super::memory::Storage;
use super::Mat;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod direct;
mod out;
#[cfg(test)]
use direct::gemm_core_isa;
pub(crate) use direct::{
    gemm_core, gemm_core_packed_b, gemm_core_serial_in, serial_scratch_len, ASrc, PackB, PackedA,
};
pub(crate) use out::Out;

/// Rows of a register tile.
pub(super) const MR: usize = 12;
/// Columns of a register tile (two 16-lane vectors, or four of 8).
pub(super) const NR: usize = 32;
/// The `k` block: a packed `KC x NR` panel of `b` (32 KiB) stays in L1
/// while it is multiplied by every row tile of a chunk.
pub(crate) const KC: usize = 256;
/// The most row tiles in one chunk (a packed `a` block of at most
/// 16 x 12 x 256 floats, 192 KiB, stays in L2 while every panel of `b`
/// passes).
const MAX_CHUNK_TILES: usize = 16;

/// A buffer for a chunk's packed block of `a`, of at least `len` floats:
/// taken from the pool the call draws from (its executor's or arena's,
/// on whichever thread runs the chunk), always of the same size class
/// (`MAX_CHUNK_TILES * MR * KC` floats, 192 KiB) so that every chunk of
/// every product reuses the same buffers, and given back when the chunk
/// ends. It used to be a thread-local vector that each thread kept for
/// its whole life, outside every pool and its counters.
fn packed_a_buffer(len: usize) -> Storage<f32> {
    // `stale`: `pack_a` writes every slot it hands to the kernel, the
    // zero padding included (`tests::packed_a_writes_every_slot_of_a_stale_buffer`).
    Storage::stale(len.max(MAX_CHUNK_TILES * MR * KC))
}

/// Multiply-adds per nanosecond one thread sustains with this CPU's
/// kernel, for the parallel cost estimate: about 100 with AVX-512 (200
/// GFLOP/s, measured for 256-1024 on a Zen 4 core), 40 with AVX2 + FMA
/// (80 GFLOP/s on a Zen 3 core; commit fdfb3bb); 40 also where neither runs
/// (`matrixmultiply`'s AVX2 kernels are of that order).
pub(super) fn macs_per_ns() -> usize {
    match Isa::detect() {
        Some(Isa(Kind::Avx512)) => 100,
        _ => 40,
    }
}

/// An instruction set the micro-kernel and the packing have versions for,
/// that this CPU has: the field is private, so a value is made only by
/// [`Isa::detect`] or [`Isa::all`], which check the CPU; that is what makes
/// the dispatching functions ([`tile`], [`pack_a_rows`],
/// [`copy_rows_padded`]) sound to call with any value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Isa(Kind);

/// The sets of [`Isa`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// AVX-512F: the 12 x 32 tile in 24 accumulators, two 16-lane vectors
    /// per row.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Avx512,
    /// AVX2 + FMA: the same tile in passes of 6 x 16 (12 accumulators of 8
    /// lanes; 4 x 16 for the 8-row short tiles).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Avx2,
}

impl Isa {
    /// The widest set this CPU has (AVX-512F, else AVX2 + FMA), detected
    /// once; `None` when it has neither.
    pub(super) fn detect() -> Option<Isa> {
        // One answer per CPU class (`cpu::class`), each detected once.
        static ISA: [std::sync::OnceLock<Option<Isa>>; crate::cpu::class::CLASSES] =
            [const { std::sync::OnceLock::new() }; crate::cpu::class::CLASSES];
        *ISA[crate::cpu::class::current() as usize].get_or_init(|| Isa::all().first().copied())
    }

    /// Every set this CPU has, widest first.
    pub(super) fn all() -> Vec<Isa> {
        let mut all = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            if crate::cpu::class::cpu_has!("avx512f") {
                all.push(Isa(Kind::Avx512));
            }
            if crate::cpu::class::cpu_has!("avx2") && crate::cpu::class::cpu_has!("fma") {
                all.push(Isa(Kind::Avx2));
            }
        }
        all
    }
}

impl Isa {
    /// Whether the kernel reads whole tiles of a matrix with contiguous
    /// rows in place ([`ATile::Rows`]) instead of packing them: AVX-512
    /// only (`avx512::tile_rows`; the AVX2 passes read packed tiles).
    pub(super) fn reads_rows_in_place(self) -> bool {
        matches!(self.0, Kind::Avx512)
    }

    /// How many calls of [`tile`] make a whole tile: one with AVX-512, one
    /// per 16-column half with AVX2.
    fn parts(self) -> usize {
        match self.0 {
            Kind::Avx512 => 1,
            Kind::Avx2 => 2,
        }
    }
}

/// The set this CPU runs the path with.
///
/// # Panics
/// When it has none ([`available`] is false).
fn isa() -> Isa {
    Isa::detect().expect("packed_f32: AVX-512F or AVX2 + FMA required")
}

/// Whether this path runs on this CPU (AVX-512F, or AVX2 and FMA).
pub(super) fn available() -> bool {
    Isa::detect().is_some()
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
/// When the CPU lacks both AVX-512F and AVX2 + FMA (check [`available`]
/// first).
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
    gemm_bias(m, k, n, a, b, beta, None, c, threads)
}

/// [`gemm`] with a bias epilogue (see [`Out::with_epilogue`]): with
/// `bias`, `c = a b + bias` (`beta` must be 0), the bits of [`gemm`] with
/// `beta = 1` over `c` holding `bias` in every row.
///
/// # Panics
/// As [`gemm`]; when `bias` is shorter than `n` or given with a non-zero
/// `beta`.
#[allow(clippy::too_many_arguments)]
pub(super) fn gemm_bias(
    m: usize,
    k: usize,
    n: usize,
    a: Mat<f32>,
    b: Mat<f32>,
    beta: f32,
    bias: Option<&[f32]>,
    c: &mut [f32],
    threads: usize,
) {
    assert!(c.len() >= m * n);
    let out = Out::row_major(c.as_mut_ptr(), n).with_epilogue(bias, None);
    let pack =
        |k0: usize, kc: usize, j0: usize, dst: &mut [f32]| pack_b_panel(b, k0, kc, j0, n, dst);
    // SAFETY: `c` holds the `m x n` row-major output (asserted), borrowed
    // mutably for the whole call, as `bias` is borrowed.
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
    /// When the CPU lacks both AVX-512F and AVX2 + FMA (check
    /// [`available`] first).
    pub(super) fn new(k: usize, n: usize, b: Mat<f32>) -> Self {
        let isa = isa();
        let width = n.div_ceil(NR) * NR;
        let mut panels = Storage::<f32>::zeroed(k * width);
        let mut k0 = 0;
        while k0 < k {
            let kc = KC.min(k - k0);
            let block = &mut panels[k0 * width..(k0 + kc) * width];
            for (j, dst) in block.chunks_exact_mut(kc * NR).enumerate() {
                pack_b_with(isa, b, k0, kc, j * NR, n, dst);
            }
            k0 += kc;
        }
        PackedB { panels, k, n }
    }

    /// `b` (`k x n`, both non-zero) given by its panels: `pack(k0, kc, j0,
    /// dst)` writes the `kc x NR` panel at rows `k0..k0 + kc`, columns
    /// `j0..j0 + NR` (zero past `n`) into `dst`, as [`pack_b_panel`] packs
    /// a matrix (a weight held in another form, decoded in this step: see
    /// `fp8_panels.rs`). The buffer is pooled and written whole.
    pub(super) fn from_panels(
        k: usize,
        n: usize,
        pack: impl Fn(usize, usize, usize, &mut [f32]),
    ) -> Self {
        let width = n.div_ceil(NR) * NR;
        // unzeroed: every panel is written whole by `pack`
        let mut panels = Storage::<f32>::stale(k * width);
        let mut k0 = 0;
        while k0 < k {
            let kc = KC.min(k - k0);
            let block = &mut panels[k0 * width..(k0 + kc) * width];
            for (j, dst) in block.chunks_exact_mut(kc * NR).enumerate() {
                pack(k0, kc, j * NR, dst);
            }
            k0 += kc;
        }
        PackedB { panels, k, n }
    }

    /// `(k, n)`.
    pub(super) fn dims(&self) -> (usize, usize) {
        (self.k, self.n)
    }

    /// The packed panels, in the layout [`gemm_core_packed_b`] reads.
    pub(super) fn panels(&self) -> &[f32] {
        &self.panels
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
/// When the CPU lacks both AVX-512F and AVX2 + FMA, or `c` is shorter
/// than `m x n`.
pub(super) fn gemm_prepacked(m: usize, a: Mat<f32>, b: &PackedB, beta: f32, c: &mut [f32]) {
    gemm_prepacked_isa(isa(), m, a, b, beta, c)
}

/// [`gemm_prepacked`] with the kernels of `isa`.
fn gemm_prepacked_isa(isa: Isa, m: usize, a: Mat<f32>, b: &PackedB, beta: f32, c: &mut [f32]) {
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
            run_rows::<MR>(isa, a, i0, (t1 * MR).min(m) - i0, pb, step, c);
            t0 = t1;
        }
        if short > 0 {
            let i0 = full * MR;
            run_rows::<SHORT>(isa, a, i0, m - i0, pb, step, c);
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
    isa: Isa,
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
    {
        let len = tiles * R * kc;
        let mut buf = packed_a_buffer(len);
        let pa = &mut buf[..len];
        pack_a::<R>(isa, a, i0, rows, k0, kc, pa);
        for (j, bp) in pb.chunks_exact(kc * NR).enumerate() {
            let cols = NR.min(n - j * NR);
            for part in 0..isa.parts() {
                for (t, ap) in pa.chunks_exact(R * kc).enumerate() {
                    let r = R.min(rows - t * R);
                    let at = (i0 + t * R) * n + j * NR;
                    assert!(at + (r - 1) * n + cols <= c.len());
                    // SAFETY: the `r x cols` tile at row i0 + t R, column
                    // j NR lies inside the `m x n` output (asserted),
                    // which this call holds mutably.
                    unsafe {
                        let c0 = c.as_mut_ptr().add(at);
                        let halves = [c0, c0.wrapping_add(16)];
                        tile::<R>(
                            isa,
                            part,
                            kc,
                            ATile::Packed(ap),
                            bp,
                            halves,
                            n,
                            r,
                            cols,
                            first,
                            beta,
                            None,
                            std::ptr::null(),
                        )
                    };
                }
            }
        }
    }
}

/// Packs rows `k0..k0 + kc`, columns `j0..j0 + NR` of `b` (zero past `n`)
/// as `kc` rows of `NR`.
///
/// # Panics
/// When the CPU lacks both AVX-512F and AVX2 + FMA, or `b` or `dst` is
/// too short.
pub(super) fn pack_b_panel(
    b: Mat<f32>,
    k0: usize,
    kc: usize,
    j0: usize,
    n: usize,
    dst: &mut [f32],
) {
    pack_b_with(isa(), b, k0, kc, j0, n, dst)
}

/// [`pack_b_panel`] with the instructions of `isa` (the same values
/// whichever).
fn pack_b_with(isa: Isa, b: Mat<f32>, k0: usize, kc: usize, j0: usize, n: usize, dst: &mut [f32]) {
    let cols = NR.min(n - j0);
    if b.rs == 1 && b.cs != 1 {
        // columns of b contiguous (`x W^T`): a transpose
        pack_b_columns(isa, b, k0, kc, j0, cols, dst);
        return;
    }
    if b.cs == 1 {
        // rows of b contiguous: `cols` floats of each row, zero-padded
        // (rows `k0..k0 + kc` of `b` hold `cols` floats from column `j0`:
        // the caller checked `b`'s extent; `dst` holds `kc` rows of `NR`)
        copy_rows_padded(isa, b.data, k0 * b.rs + j0, b.rs, cols, dst, NR, kc);
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
/// `len <= width` floats at `src[base + p * stride..]`, then zeros: masked
/// vector loads and stores of `isa`'s width. Pure data movement.
///
/// # Panics
/// When `src` or `dst` is too short, or `len > width` or `width > 32`.
#[allow(clippy::too_many_arguments)]
fn copy_rows_padded(
    isa: Isa,
    src: &[f32],
    base: usize,
    stride: usize,
    len: usize,
    dst: &mut [f32],
    width: usize,
    rows: usize,
) {
    match isa.0 {
        // SAFETY: an `Isa` value exists only for a CPU that has its
        // features ([`Isa::detect`], [`Isa::all`]); the function checks
        // the extents itself.
        #[cfg(target_arch = "x86_64")]
        Kind::Avx512 => unsafe {
            avx512::copy_rows_padded(src, base, stride, len, dst, width, rows)
        },
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        Kind::Avx2 => unsafe { avx2::copy_rows_padded(src, base, stride, len, dst, width, rows) },
        #[cfg(not(target_arch = "x86_64"))]
        _ => unreachable!("packed_f32 needs x86-64"),
    }
}

/// [`pack_b_panel`] for `b` with contiguous columns (`b.rs == 1`): a
/// transpose of `cols` columns of `b` as the rows of [`pack_a_rows`]'s
/// kernels (8 x 8 blocks with AVX2, 16 x 16 with AVX-512).
fn pack_b_columns(
    isa: Isa,
    b: Mat<f32>,
    k0: usize,
    kc: usize,
    j0: usize,
    cols: usize,
    dst: &mut [f32],
) {
    // column `j0 + jj` of `b` as row `jj` of a transpose
    let base = k0 + j0 * b.cs;
    match isa.0 {
        // SAFETY: an `Isa` value exists only for a CPU that has its
        // features ([`Isa::detect`], [`Isa::all`]); the functions check the
        // extents themselves.
        #[cfg(target_arch = "x86_64")]
        Kind::Avx512 => unsafe { avx512::pack_a_rows::<NR>(b.data, base, b.cs, cols, kc, dst) },
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        Kind::Avx2 => unsafe { avx2::pack_a_rows::<NR>(b.data, base, b.cs, cols, kc, dst) },
        #[cfg(not(target_arch = "x86_64"))]
        _ => unreachable!("packed_f32 needs x86-64 ({base}, {cols})"),
    }
}

/// Packs rows `i0..i0 + rows`, columns `k0..k0 + kc` of `a` as tiles of
/// `R` rows (`MR`, or 8 for [`gemm_prepacked`]'s short tiles): tile `t` is
/// `kc` columns of `R` (zero past `rows`).
fn pack_a<const R: usize>(
    isa: Isa,
    a: Mat<f32>,
    i0: usize,
    rows: usize,
    k0: usize,
    kc: usize,
    dst: &mut [f32],
) {
    for (t, tile) in dst.chunks_exact_mut(R * kc).enumerate() {
        let r = R.min(rows.saturating_sub(t * R));
        if a.cs == 1 {
            pack_a_rows::<R>(isa, a, i0 + t * R, r, k0, kc, tile);
        } else if a.rs == 1 {
            // columns of a contiguous (`g^T x`): `r` floats per column
            // (columns `k0..k0 + kc` of `a` hold `r` floats from row
            // `i0 + t * R`: the caller checked `a`'s extent; `tile` holds
            // `kc` columns of `R`)
            copy_rows_padded(isa, a.data, i0 + t * R + k0 * a.cs, a.cs, r, tile, R, kc);
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

/// Tile rows `i0..i0 + r` of `a` with contiguous rows (`a.cs == 1`),
/// columns `k0..k0 + kc`, packed as `kc` columns of `R` (zero past `r`):
/// a transpose, with AVX2 in 8 x 8 blocks straight from `a`'s rows, with
/// AVX-512 in 16 x 16 blocks, the whole loop in one call
/// (`avx512::pack_a_rows`).
fn pack_a_rows<const R: usize>(
    isa: Isa,
    a: Mat<f32>,
    i0: usize,
    r: usize,
    k0: usize,
    kc: usize,
    tile: &mut [f32],
) {
    let base = i0 * a.rs + k0;
    match isa.0 {
        // SAFETY: an `Isa` value exists only for a CPU that has its
        // features ([`Isa::detect`], [`Isa::all`]); the functions check the
        // extents themselves.
        #[cfg(target_arch = "x86_64")]
        Kind::Avx512 => unsafe { avx512::pack_a_rows::<R>(a.data, base, a.rs, r, kc, tile) },
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        Kind::Avx2 => unsafe { avx2::pack_a_rows::<R>(a.data, base, a.rs, r, kc, tile) },
        #[cfg(not(target_arch = "x86_64"))]
        _ => unreachable!("packed_f32 needs x86-64 ({base}, {r})"),
    }
}

/// A tile of the left operand as the kernel reads it.
#[derive(Clone, Copy)]
pub(super) enum ATile<'a> {
    /// Packed by [`pack_a`]: element `(i, p)` of an `R`-row tile at
    /// `p * R + i`.
    Packed(&'a [f32]),
    /// Read in place from a matrix with contiguous rows: element `(i, p)`
    /// at `ptr + i * lda + p`; whole tiles only, and only where
    /// [`Isa::reads_rows_in_place`]. The same floats in the same order as
    /// packed, so the same bits.
    Rows(*const f32, usize),
}

/// One `rows x cols` tile of `c` (row stride `ldc`) from an `R x kc`
/// packed tile of `a` (`R` is `MR`, or [`SHORT`] for [`gemm_prepacked`]'s
/// short tiles) and a `kc x NR` packed panel of `b`, with `isa`'s
/// micro-kernel: on the first `k` block `c = acc + beta c` (without
/// reading `c` when beta is 0), or `c = bias + acc` when a `bias` is given
/// (the tile's `NR` columns, zero past `cols`; `beta` is then not used and
/// `c` not read: the bits of `beta = 1` over a tile prefilled with the
/// bias, `fma(1, bias, acc)` being one rounding of `bias + acc`),
/// afterwards `c = c + acc`, where each
/// element's `acc` is its `kc` products accumulated from zero in
/// increasing `k` with fused multiply-adds. Every kernel computes exactly
/// that per element, so the bits do not depend on `isa` (nor on `R`).
///
/// Columns `16 h..16 h + 16` of the tile start at `c[h]` (one pointer per
/// half, which need not be adjacent).
///
/// The call computes part `part < isa.parts()` of the tile's columns: the
/// whole tile with AVX-512, the 16-column half `part` with AVX2 (so that a
/// half panel, 16 KiB, stays in L1 while the caller runs it against every
/// row tile of its chunk, before the other half; the whole panel and an
/// `a` tile do not fit in a 32 KiB L1 together).
///
/// `next`, when not null, is the panel the caller multiplies after this
/// one: the AVX-512 kernel fetches it into L2 while it runs (a hint only,
/// never read; a parallel product's packed `b` is larger than L2, and the
/// first tile of every panel used to wait on its loads: 14% of a 2-thread
/// 1024^3 product's samples on the panel's loads, 3% with the hint;
/// Sapphire Rapids, commit de3846d). The AVX2 kernel ignores it: on the same
/// CPU with AVX2 forced it measured no better.
///
/// # Safety
/// Each `c[h]` points to the `rows x` (its share of `cols`) half tile
/// with row stride `ldc` that nothing else accesses (`c[1]` is not used
/// when `cols <= 16`); `1 <= rows <= R`, `1 <= cols <= NR`.
///
/// # Panics
/// When `ap` holds fewer than `R * kc` floats or `bp` fewer than
/// `kc * NR`.
#[allow(clippy::too_many_arguments)]
#[inline]
unsafe fn tile<const R: usize>(
    isa: Isa,
    part: usize,
    kc: usize,
    a: ATile<'_>,
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
    match isa.0 {
        // SAFETY: the CPU has the features of `isa` (an `Isa` value exists
        // only where it does); the rest is the caller's contract.
        #[cfg(target_arch = "x86_64")]
        // A tile of at most 16 columns (a last panel's) multiplies one
        // vector a row, not two: each element the same sum.
        Kind::Avx512 => unsafe {
            let narrow = cols <= 16;
            match a {
                ATile::Packed(ap) => {
                    let kernel = if narrow {
                        avx512::tile::<R, 1>
                    } else {
                        avx512::tile::<R, 2>
                    };
                    kernel(kc, ap, bp, c, ldc, rows, cols, first, beta, bias, next)
                }
                ATile::Rows(at, lda) => {
                    let kernel = if narrow {
                        avx512::tile_rows::<R, 1>
                    } else {
                        avx512::tile_rows::<R, 2>
                    };
                    kernel(
                        kc,
                        (at, lda),
                        bp,
                        c,
                        ldc,
                        rows,
                        cols,
                        first,
                        beta,
                        bias,
                        next,
                    )
                }
            }
        },
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        Kind::Avx2 => unsafe {
            let ATile::Packed(ap) = a else {
                unreachable!("packed_f32: the AVX2 kernel reads packed tiles only")
            };
            avx2::half_tile::<R>(part, kc, ap, bp, c, ldc, rows, cols, first, beta, bias)
        },
        #[cfg(not(target_arch = "x86_64"))]
        _ => unreachable!("packed_f32 needs x86-64"),
    }
}

#[cfg(test)]
mod tests;
