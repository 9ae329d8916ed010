//! The general entry of the packed kernel: a left operand packed per
//! chunk or once beforehand ([`PackedA`]), a right operand given by a
//! panel packer, and an output laid out in segments ([`Out`]), so that a
//! convolution can multiply its weight, packed once per call, by every
//! chunk of images and store each product straight into `[images, o,
//! positions]`. [`gemm`](super::gemm) is this with a plain matrix on each
//! side; the thread splits and the per-element arithmetic are the same.

use super::super::super::memory::Storage;
use super::super::super::threads::{
    parallel_for, parallel_for_cost, worth_splitting, PARALLEL_MIN_NS,
};
use super::super::Mat;
use super::out::{epilogue_rows, Out, ACT_PANELS};
use super::{
    isa, macs_per_ns, pack_a, packed_a_buffer, tile, ATile, Isa, Shared, KC, MAX_CHUNK_TILES, MR,
    NR, SHORT,
};

/// Packs the `kc x NR` panel of a right operand at rows `k0..k0 + kc`,
/// columns `j0..j0 + NR`: `(k0, kc, j0, panel)`.
pub(crate) type PackB<'a> = &'a (dyn Fn(usize, usize, usize, &mut [f32]) + Sync);

/// Where a product's left operand comes from: a matrix packed by each row
/// chunk as it goes, or packed once beforehand ([`PackedA`]).
#[derive(Clone, Copy)]
pub(crate) enum ASrc<'a> {
    /// Packed chunk by chunk into each thread's buffer.
    Mat(Mat<'a, f32>),
    /// Already packed.
    Packed(&'a PackedA),
}

/// A chunk's tiles of the left operand for one `k` block, as the
/// multiplying reads them.
#[derive(Clone, Copy)]
enum ChunkA<'a> {
    /// Packed, tile after tile.
    Packed(&'a [f32]),
    /// Whole tiles read in place from the matrix (its rows contiguous);
    /// the second field is the last tile packed, read when that tile is
    /// partial, in tiles of [`SHORT`] rows when the third is true (a tail
    /// of at most 8 rows) and of [`MR`] otherwise.
    InPlace(Mat<'a, f32>, &'a [f32], bool),
}

/// An `m x k` left operand packed once, for several products with it (a
/// convolution's weight is multiplied by every chunk of images): per `k`
/// block of [`KC`], its row tiles of `MR x kc` one after another, exactly
/// what each chunk of [`gemm`] packs for itself, so a product from it has
/// the same bits.
pub(crate) struct PackedA {
    m: usize,
    k: usize,
    /// The tiles, `k` block by `k` block (visible to the packing tests).
    pub(super) data: Storage<f32>,
}

impl PackedA {
    /// Packs `a` (`m x k`, both non-zero), in parallel over row tiles when
    /// worth it (each tile is packed the same way whoever packs it).
    ///
    /// # Panics
    /// When `a`'s buffer is too small for `m x k` (an index out of range),
    /// or the CPU lacks both AVX-512F and AVX2 + FMA.
    pub(crate) fn new(m: usize, k: usize, a: Mat<f32>) -> Self {
        let isa = isa();
        let tiles = m.div_ceil(MR);
        // Unzeroed: `pack_a` writes every slot of every tile, the zero
        // padding of a last partial tile included.
        let mut data = Storage::stale(tiles * MR * k);
        let ptr = Shared(data.as_mut_ptr());
        // About one ns per packed element.
        parallel_for_cost(tiles, m * k, |t| {
            let rows = MR.min(m - t * MR);
            let mut k0 = 0;
            while k0 < k {
                let kc = KC.min(k - k0);
                let p = ptr;
                // SAFETY: tile `t` of block `k0` is `MR * kc` elements at
                // `k0 * tiles * MR + t * MR * kc`, inside the buffer and
                // written by this iteration only.
                let dst = unsafe {
                    std::slice::from_raw_parts_mut(p.0.add(k0 * tiles * MR + t * MR * kc), MR * kc)
                };
                pack_a::<MR>(isa, a, t * MR, rows, k0, kc, dst);
                k0 += kc;
            }
        });
        PackedA { m, k, data }
    }

    /// `a` (`m x k`, both non-zero) given by the panels of its transpose:
    /// `pack(k0, kc, j0, dst)` writes the `kc x NR` panel of `a^T` at rows
    /// `k0..k0 + kc`, columns `j0..j0 + NR` (`dst[p * NR + q] = a[j0 + q,
    /// k0 + p]`), as a right operand's panels are packed (a weight held in
    /// another form and decoded in this step, `fp8_panels.rs`). Each value
    /// lands where [`new`](Self::new) puts it, so the tiles are the same;
    /// panels in parallel when worth it (each writes its own rows).
    pub(crate) fn from_panels(m: usize, k: usize, pack: PackB<'_>) -> Self {
        let tiles = m.div_ceil(MR);
        let panels = m.div_ceil(NR);
        let blocks = k.div_ceil(KC);
        // Unzeroed: the panels write every row below `m` of every block,
        // and the rows of the last tile past `m` are zeroed below.
        let mut data = Storage::<f32>::stale(tiles * MR * k);
        let ptr = Shared(data.as_mut_ptr());
        parallel_for_cost(blocks * panels, m * k, |i| {
            let (kb, j) = (i / panels, i % panels);
            let (k0, j0) = (kb * KC, j * NR);
            let kc = KC.min(k - k0);
            let mut panel = [0f32; KC * NR];
            pack(k0, kc, j0, &mut panel[..kc * NR]);
            let p = ptr;
            for q in 0..NR.min(m - j0) {
                let row = j0 + q;
                let at = k0 * tiles * MR + row / MR * MR * kc + row % MR;
                for (pp, v) in panel[..kc * NR].chunks_exact(NR).enumerate() {
                    // SAFETY: element (row, k0 + pp) of the tiles lies
                    // inside the buffer (`row < m`, `k0 + pp < k`), and
                    // only this task writes row `row` of block `kb`.
                    unsafe { *p.0.add(at + pp * MR) = v[q] };
                }
            }
        });
        // the rows of the last tile past `m`, zero in every block
        let mut k0 = 0;
        while k0 < k {
            let kc = KC.min(k - k0);
            let tile = &mut data[k0 * tiles * MR + (tiles - 1) * MR * kc..][..MR * kc];
            for col in tile.chunks_exact_mut(MR) {
                col[m - (tiles - 1) * MR..].fill(0.0);
            }
            k0 += kc;
        }
        PackedA { m, k, data }
    }

    /// Rows of the packed operand.
    pub(crate) fn rows(&self) -> usize {
        self.m
    }

    /// Columns of the packed operand.
    pub(crate) fn cols(&self) -> usize {
        self.k
    }

    /// Tiles `t0..t1` of the `k` block starting at `k0` (`kc` long).
    fn tiles(&self, k0: usize, kc: usize, t0: usize, t1: usize) -> &[f32] {
        let at = k0 * self.m.div_ceil(MR) * MR + t0 * MR * kc;
        &self.data[at..at + (t1 - t0) * MR * kc]
    }
}

/// `out = a b + beta out` for an `m x k` left operand from `a` and a `k x n`
/// right operand whose `kc x NR` panels `pack_b(k0, kc, j0, panel)` writes
/// (rows `k0..k0 + kc`, columns `j0..j0 + NR`, zero past `n`: every element
/// of the panel), with up to `threads` threads; `m`, `n`, `k` are non-zero.
/// Same arithmetic per element whatever the partition (see the module
/// docs), and the same as [`gemm`]'s for the same operands.
///
/// # Safety
/// `out` addresses `m x n` distinct elements of one live buffer that
/// nothing else accesses during the call, and its bias, if any, stays alive
/// for the call; a [`PackedA`] has `m` rows and `k` columns.
///
/// # Panics
/// When the CPU lacks both AVX-512F and AVX2 + FMA (check
/// [`available`](super::available) first).
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm_core(
    m: usize,
    k: usize,
    n: usize,
    a: ASrc<'_>,
    pack_b: PackB<'_>,
    beta: f32,
    out: Out,
    threads: usize,
) {
    // SAFETY: the caller's contract.
    unsafe { gemm_core_isa(isa(), m, k, n, a, pack_b, beta, out, threads) }
}

/// [`gemm_core`] with `b` packed beforehand: `panels` holds every `KC`
/// block of `b` as the parallel path lays them out (block `kb` at
/// `kb * ceil(n / NR) * NR * KC`, its panel `j` `kc x NR` at
/// `j * kc * NR` within; a [`PackedB`](super::PackedB)'s buffer). The same
/// bits as [`gemm_core`] packing the same `b` (packing is a copy), with
/// the same split of the work.
///
/// # Safety
/// As [`gemm_core`].
///
/// # Panics
/// When `panels` is shorter than `b` packed, or the CPU lacks both
/// AVX-512F and AVX2 + FMA.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm_core_packed_b(
    m: usize,
    k: usize,
    n: usize,
    a: ASrc<'_>,
    panels: &[f32],
    beta: f32,
    out: Out,
    threads: usize,
) {
    assert!(
        panels.len() >= k * n.div_ceil(NR) * NR,
        "packed_f32: packed rhs too small"
    );
    // SAFETY: the caller's contract.
    unsafe {
        gemm_core_src(
            isa(),
            m,
            k,
            n,
            a,
            BSrc::Packed(panels),
            beta,
            out,
            threads,
            None,
        )
    }
}

/// Where [`gemm_core_src`] takes `b`'s panels from.
#[derive(Clone, Copy)]
enum BSrc<'a> {
    /// Packed in the call.
    Pack(PackB<'a>),
    /// Packed beforehand, in the parallel path's layout.
    Packed(&'a [f32]),
}

/// [`gemm_core`] with the micro-kernel and packing of `isa`.
///
/// # Safety
/// As [`gemm_core`].
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn gemm_core_isa(
    isa: Isa,
    m: usize,
    k: usize,
    n: usize,
    a: ASrc<'_>,
    pack_b: PackB<'_>,
    beta: f32,
    out: Out,
    threads: usize,
) {
    // SAFETY: the caller's contract.
    unsafe {
        gemm_core_src(
            isa,
            m,
            k,
            n,
            a,
            BSrc::Pack(pack_b),
            beta,
            out,
            threads,
            None,
        )
    }
}

/// Floats of scratch [`gemm_core_serial_in`] packs an `m x k` by `k x n`
/// product into: one `k` block of `b`'s panels and one row chunk of `a`'s
/// tiles, as the serial path takes them from the pool.
pub(crate) fn serial_scratch_len(m: usize, k: usize, n: usize) -> usize {
    let kc = KC.min(k);
    n.div_ceil(NR) * NR * kc + m.div_ceil(MR).min(MAX_CHUNK_TILES) * MR * kc
}

/// [`gemm_core`] on the calling thread alone with `b` packed by `pack_b`
/// and `a` a plain matrix, both packed into `scratch` (at least
/// [`serial_scratch_len`] floats) instead of buffers from the pool: the
/// same panels, tiles, kernel calls and order as the serial path, so the
/// same bits. For many small products inside one parallel loop (attention
/// heads), whose pool traffic (two buffers a product) made the two
/// threads queue on the pool's lock.
///
/// # Safety
/// As [`gemm_core`].
///
/// # Panics
/// When `scratch` is too short, or the CPU lacks both AVX-512F and AVX2 +
/// FMA.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm_core_serial_in(
    m: usize,
    k: usize,
    n: usize,
    a: Mat<f32>,
    pack_b: PackB<'_>,
    beta: f32,
    out: Out,
    scratch: &mut [f32],
) {
    assert!(
        scratch.len() >= serial_scratch_len(m, k, n),
        "packed_f32: scratch too short"
    );
    let scratch = Shared(scratch.as_mut_ptr());
    // SAFETY: the caller's contract; `scratch` holds what the serial path
    // packs (asserted), borrowed mutably for the whole call.
    unsafe {
        gemm_core_src(
            isa(),
            m,
            k,
            n,
            ASrc::Mat(a),
            BSrc::Pack(pack_b),
            beta,
            out,
            1,
            Some(scratch),
        )
    }
}

/// [`gemm_core_isa`] with `b` packed in the call or beforehand; with
/// `scratch` (serial calls only: `threads == 1`, `b` packed in the call),
/// `b`'s block at its start and `a`'s chunk after it (see
/// [`gemm_core_serial_in`]) instead of buffers from the pool.
///
/// # Safety
/// As [`gemm_core`]; `scratch` points to [`serial_scratch_len`] writable
/// floats that nothing else accesses during the call.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_core_src(
    isa: Isa,
    m: usize,
    k: usize,
    n: usize,
    a: ASrc<'_>,
    b: BSrc<'_>,
    beta: f32,
    out: Out,
    threads: usize,
    scratch: Option<Shared>,
) {
    assert!(
        scratch.is_none() || (threads == 1 && matches!(b, BSrc::Pack(_))),
        "packed_f32: scratch is for serial calls packing b"
    );
    if let ASrc::Packed(p) = a {
        assert!(p.m == m && p.k == k, "packed_f32: packed operand shape");
    }
    let has_bias = !out.bias.0.is_null();
    assert!(
        !has_bias || (out.bias_len >= n && beta == 0.0),
        "packed_f32: a bias epilogue needs n values and beta = 0"
    );
    let has_row_bias = !out.row_bias.0.is_null();
    assert!(
        !has_row_bias || (out.row_bias_len >= m && !has_bias),
        "packed_f32: a row epilogue needs m values and no column bias"
    );
    let epilogue = has_row_bias || out.act.is_some();
    // With a bias, the kernel stores each tile's first block of products
    // added to the bias, held in registers (the bits of `beta = 1` over an
    // output prefilled with it; see `tile`).
    let panels = n.div_ceil(NR);
    let cost = m * n * k / macs_per_ns();
    // Two hand-offs when parallel and `b` is packed in the call (the
    // packing, then the products), one when it was packed beforehand:
    // split only with enough work for each. (With two for a packed weight
    // too, GPT batch-1 inference kept its 64 x 128 x 256 head product,
    // 21 us estimated, on one thread.)
    let handoffs = if matches!(b, BSrc::Packed(_)) { 1 } else { 2 };
    let parallel = threads > 1 && worth_splitting(cost, handoffs);
    // Row chunks of whole tiles; with several threads about four chunks
    // per thread (chunks are claimed one at a time, so the threads even
    // out: with two per thread, a 1024-row product cut into 16, 16, 16, 16,
    // 16 and 6 tiles left one thread 48 tiles and the other 38).
    let row_tiles = m.div_ceil(MR);
    // Which operand the threads share. Split by rows, each thread
    // multiplies all of packed `b` (`k x n`); split by columns, all of `a`
    // (`m x k`). Where two cores share no cache, the shared operand's
    // half packed by the other thread crosses between them, so when `b`
    // is the larger (a convolution's im2col columns, `n` = images x
    // positions; a layer's weight for a batch smaller than its width) the
    // threads split the columns, each packing the panels it multiplies.
    // With `a` packed per chunk, every column chunk packs all of `a`, so
    // then only two column chunks per thread. With `b` packed beforehand
    // (a cached weight) that fits a core's L2 and `a` packed per chunk, by
    // rows: no thread packs anything the other needs, and each packs only
    // its own rows of `a` (split by columns, GPT batch-1 inference's
    // 64-row products packed all of `a` four times: a third of the
    // packing and products' samples were the packing of `a`). A larger
    // weight (BERT's) stays split by columns: by rows every row chunk
    // would stream all of it.
    let rows_share_b = matches!(b, BSrc::Packed(_))
        && matches!(a, ASrc::Mat(_))
        && k * panels * NR * 4 <= ROW_SPLIT_MAX_B_BYTES;
    let by_cols = parallel && n > m && !rows_share_b;
    let chunk_tiles = if parallel && !by_cols {
        row_tiles.div_ceil(4 * threads).clamp(1, MAX_CHUNK_TILES)
    } else {
        row_tiles.min(MAX_CHUNK_TILES)
    };
    let row_chunks = row_tiles.div_ceil(chunk_tiles);
    // Too few row chunks (a short, wide product): cut the columns too;
    // split by columns, about four chunks per thread.
    let col_chunks = if by_cols {
        let per_thread = if matches!(a, ASrc::Packed(_)) { 4 } else { 2 };
        (per_thread * threads).min(panels)
    } else if parallel && row_chunks < 2 * threads {
        (2 * threads).div_ceil(row_chunks).min(panels)
    } else {
        1
    };
    let chunk_panels = panels.div_ceil(col_chunks);
    let col_chunks = panels.div_ceil(chunk_panels);
    // One chunk's product for the `k` block at `k0` (`kc` long) of `b`
    // packed at `pb` (panel `j` is `kc x NR` at `j * kc * NR`). Chunks run
    // along the split's dimension first, so that each thread's contiguous
    // span of chunks is a contiguous range of rows (or of columns).
    let run_block = |chunk: usize, k0: usize, kc: usize, pb: Shared| {
        let first = k0 == 0;
        let last = k0 + kc == k;
        let (rc, cc) = if by_cols {
            (chunk % row_chunks, chunk / row_chunks)
        } else {
            (chunk / col_chunks, chunk % col_chunks)
        };
        let t0 = rc * chunk_tiles;
        let t1 = (t0 + chunk_tiles).min(row_tiles);
        let j0 = cc * chunk_panels;
        let j1 = (j0 + chunk_panels).min(panels);
        let multiply = |src: ChunkA<'_>| {
            let p = pb;
            // the first panel whose outputs `act` has not yet run on
            let act_from = std::cell::Cell::new(j0);
            for j in j0..j1 {
                // SAFETY: panel `j` of this block was fully written by the
                // packing, which returned before any multiplying started.
                let bp = unsafe { std::slice::from_raw_parts(p.0.add(j * kc * NR), kc * NR) };
                let cols = NR.min(n - j * NR);
                // the panel's columns of the bias, zero past `n`, for the
                // tiles' first block
                let bias = (has_bias && first).then(|| {
                    // SAFETY: the bias holds at least `n` floats (asserted
                    // above), read only and alive for the call (the
                    // caller's contract).
                    let all = unsafe { std::slice::from_raw_parts(out.bias.0.cast_const(), n) };
                    let mut tile_bias = [0f32; NR];
                    tile_bias[..cols].copy_from_slice(&all[j * NR..j * NR + cols]);
                    tile_bias
                });
                for part in 0..isa.parts() {
                    for t in t0..t1 {
                        let rows = MR.min(m - t * MR);
                        let (ap, short) = match src {
                            ChunkA::Packed(pa) => (
                                ATile::Packed(&pa[(t - t0) * MR * kc..(t - t0 + 1) * MR * kc]),
                                false,
                            ),
                            // a whole tile's rows read where they are:
                            // row `t MR + i` from column `k0` on
                            ChunkA::InPlace(a, _, _) if rows == MR => (
                                ATile::Rows(a.data.as_ptr().wrapping_add(t * MR * a.rs + k0), a.rs),
                                false,
                            ),
                            ChunkA::InPlace(_, last, short) => (ATile::Packed(last), short),
                        };
                        let halves = [out.at(t * MR, j * NR), out.at(t * MR, j * NR + 16)];
                        // the chunk's next panel, fetched while its first
                        // tile runs
                        let next = if t == t0 && j + 1 < j1 {
                            p.0.wrapping_add((j + 1) * kc * NR)
                        } else {
                            std::ptr::null()
                        };
                        let b = bias.as_ref();
                        // SAFETY: the tile `rows x cols` at (t * MR,
                        // j * NR) lies inside the output (the caller's
                        // contract), each half's columns contiguous
                        // (segments of whole vectors), and belongs to
                        // this chunk alone. A tile read in place is
                        // whole (`rows == MR`), and its rows `t MR + i`,
                        // columns `k0..k0 + kc` lie inside `a`'s buffer
                        // (asserted for all `m x k` where the chunk
                        // chose to read in place; `cs == 1`). A short
                        // tile has at most `SHORT` rows, packed as such.
                        unsafe {
                            if short {
                                tile::<SHORT>(
                                    isa, part, kc, ap, bp, halves, out.ldc, rows, cols, first,
                                    beta, b, next,
                                )
                            } else {
                                tile::<MR>(
                                    isa, part, kc, ap, bp, halves, out.ldc, rows, cols, first,
                                    beta, b, next,
                                )
                            }
                        };
                    }
                }
                if last && epilogue && (j + 1 == j1 || j + 1 - act_from.get() >= ACT_PANELS) {
                    // every part of these panels' tiles done: their sums
                    // are final, and still in cache
                    let (c0, c1) = (act_from.get() * NR, ((j + 1) * NR).min(n));
                    // SAFETY: as for the kernel above: the rows and columns
                    // are inside the output and this chunk's alone.
                    unsafe { epilogue_rows(out, t0 * MR, (t1 * MR).min(m), c0, c1) };
                    act_from.set(j + 1);
                }
            }
        };
        match (a, scratch) {
            (ASrc::Packed(p), _) => multiply(ChunkA::Packed(p.tiles(k0, kc, t0, t1))),
            (ASrc::Mat(a), _) if a.cs == 1 && isa.reads_rows_in_place() => {
                // Rows contiguous: the kernel reads whole tiles in place
                // and only a last partial tile is packed (zero-padded to
                // `MR` rows, as the chunk's packing would pack it).
                // the reads below are raw: every row's `k` floats must
                // be inside the buffer (the packing's reads are checked)
                assert!(
                    (m - 1) * a.rs + k <= a.data.len(),
                    "packed_f32: the left operand's buffer is too short"
                );
                // A tail of at most `SHORT` rows runs the 8-row kernel
                // (each element's sum is the same whatever the tile's
                // rows): a batch of 128 rows multiplies 128 + 0 padded
                // rows, not 132, and 64 rows 68, not 72.
                let tail = m - (t1 - 1) * MR;
                let short = tail <= SHORT;
                let r = if short { SHORT } else { MR };
                let mut last = (tail < MR).then(|| packed_a_buffer(MR * kc));
                if let Some(buf) = last.as_mut() {
                    let (at, dst) = ((t1 - 1) * MR, &mut buf[..r * kc]);
                    if short {
                        pack_a::<SHORT>(isa, a, at, tail, k0, kc, dst);
                    } else {
                        pack_a::<MR>(isa, a, at, tail, k0, kc, dst);
                    }
                }
                multiply(ChunkA::InPlace(
                    a,
                    last.as_ref().map_or(&[][..], |buf| &buf[..r * kc]),
                    short,
                ));
            }
            (ASrc::Mat(a), Some(s)) => {
                let len = (t1 - t0) * MR * kc;
                // SAFETY: the chunk's tiles go after `b`'s block in the
                // caller's scratch (`serial_scratch_len`: a block of `b`
                // and a chunk of at most `MAX_CHUNK_TILES` tiles of `kc <=
                // KC`); serial, so one chunk at a time uses it.
                let pa = unsafe {
                    std::slice::from_raw_parts_mut(s.0.add(panels * NR * KC.min(k)), len)
                };
                pack_a::<MR>(isa, a, t0 * MR, ((t1 * MR).min(m)) - t0 * MR, k0, kc, pa);
                multiply(ChunkA::Packed(pa));
            }
            (ASrc::Mat(a), None) => {
                let len = (t1 - t0) * MR * kc;
                let mut buf = packed_a_buffer(len);
                let pa = &mut buf[..len];
                pack_a::<MR>(isa, a, t0 * MR, ((t1 * MR).min(m)) - t0 * MR, k0, kc, pa);
                multiply(ChunkA::Packed(pa));
            }
        }
    };
    let chunks = row_chunks * col_chunks;
    let blocks = k.div_ceil(KC);
    let pack_b = match b {
        BSrc::Pack(pack_b) => pack_b,
        BSrc::Packed(panels) => {
            // Every block already packed, where the parallel path packs
            // them: only the multiplying runs, split as it would be.
            let block = panels_n(n) * KC;
            let base = Shared(panels.as_ptr().cast_mut());
            let block_at = |kb: usize| {
                let b = base;
                // SAFETY: block `kb` starts inside `panels` (its length is
                // checked by `gemm_core_packed_b`); the multiplying only
                // reads through this pointer.
                (
                    kb * KC,
                    KC.min(k - kb * KC),
                    Shared(unsafe { b.0.add(kb * block) }),
                )
            };
            if parallel {
                parallel_for(chunks, |chunk| {
                    for kb in 0..blocks {
                        let (k0, kc, p) = block_at(kb);
                        run_block(chunk, k0, kc, p);
                    }
                });
            } else {
                // block by block, as the serial path packs them
                for kb in 0..blocks {
                    let (k0, kc, p) = block_at(kb);
                    (0..chunks).for_each(|chunk| run_block(chunk, k0, kc, p));
                }
            }
            return;
        }
    };
    if !parallel {
        // Serial: one `KC` block of `b` packed at a time (it stays in
        // cache while every chunk multiplies it), in a buffer from the pool
        // sized for a whole block whatever `k`, so that products of one
        // width reuse one size class.
        let mut packed_b = Storage::<f32>::with_capacity(if scratch.is_some() {
            0
        } else {
            panels * NR * KC
        });
        // (the caller's scratch, when given, holds a block at its start)
        let pb = scratch.unwrap_or(Shared(packed_b.spare_capacity_mut().as_mut_ptr().cast()));
        for kb in 0..blocks {
            let (k0, kc) = (kb * KC, KC.min(k - kb * KC));
            for j in 0..panels {
                // SAFETY: panel `j` owns `kc * NR` elements at
                // `j * kc * NR` from `pb`, inside the capacity of
                // `panels * NR * KC` (pooled, so on a cache line: every
                // 64-byte load of a panel row is one line), or inside the
                // caller's scratch, whose first `panels * NR * min(k, KC)`
                // floats are for `b` (`serial_scratch_len`).
                let dst = unsafe { std::slice::from_raw_parts_mut(pb.0.add(j * kc * NR), kc * NR) };
                pack_b(k0, kc, j * NR, dst);
            }
            (0..chunks).for_each(|chunk| run_block(chunk, k0, kc, pb));
        }
        return;
    }
    // Parallel: two hand-offs per call whatever `k`. First every `k`
    // block of `b` in parallel panels (block `kb` at `kb * panels * NR *
    // KC`, its panel `j` `kc x NR` at `j * kc * NR` within), in a pooled
    // buffer of whole blocks, so that calls of one shape reuse one size
    // class; packed by the threads that multiply next: the pool is woken
    // for the chunks anyway, and a packing left to the caller alone is
    // serial time (a 256^3 product's).
    let block = panels * NR * KC;
    let mut packed_b = Storage::<f32>::with_capacity(blocks * block);
    let pb = Shared(packed_b.spare_capacity_mut().as_mut_ptr().cast());
    // Split by columns, panel-major (every `k` block of panel 0, then of
    // panel 1, ...), so that each thread packs the panels it multiplies.
    parallel_for_cost(blocks * panels, PARALLEL_MIN_NS, |i| {
        let (kb, j) = if by_cols {
            (i % blocks, i / blocks)
        } else {
            (i / panels, i % panels)
        };
        let (k0, kc) = (kb * KC, KC.min(k - kb * KC));
        let p = pb;
        // SAFETY: panel `j` of block `kb` owns `kc * NR` elements at
        // `kb * block + j * kc * NR` from `pb`, inside the capacity of
        // `blocks * block`, written by this iteration only.
        let dst =
            unsafe { std::slice::from_raw_parts_mut(p.0.add(kb * block + j * kc * NR), kc * NR) };
        pack_b(k0, kc, j * NR, dst);
    });
    // Then each chunk runs every block in increasing `k` (the same
    // operations per element in the same order as the serial loop).
    parallel_for(chunks, |chunk| {
        let base = pb;
        for kb in 0..blocks {
            let (k0, kc) = (kb * KC, KC.min(k - kb * KC));
            // SAFETY: block `kb` starts inside the `blocks * block` buffer.
            let p = Shared(unsafe { base.0.add(kb * block) });
            run_block(chunk, k0, kc, p);
        }
    });
}

/// Columns of `n` rounded up to whole panels.
fn panels_n(n: usize) -> usize {
    n.div_ceil(NR) * NR
}

/// The largest weight packed beforehand that a parallel product splits by
/// rows (every thread reading all of it), in bytes: a core's L2 on the
/// Intel Xeon of model 207 (2 MiB). The batch-128 MLP's 784 x 512 weight
/// (1.6 MB) ran faster so at two threads (0.87 -> 0.77 ms a step).
const ROW_SPLIT_MAX_B_BYTES: usize = 2 << 20;
