//! Integer matrix products for int8 inference: `c = a b^T` with `a` an
//! `m x k` matrix of unsigned bytes (quantized activations), `b` an
//! `n x k` matrix of signed bytes (a quantized weight, one row per output
//! channel) and `c` the `m x n` matrix of exact `i32` sums.
//!
//! The weight is packed once ([`PackedI8`]): output channels in panels of
//! 16, `k` in quads of 4 (zero-padded), so that one 64-byte load holds four
//! consecutive `k` of sixteen channels, the operand layout of `vpdpbusd`.
//! The activations are read in place, one row per output row, with a row
//! stride that is a multiple of 4 and zero padding ([`padded_k`]).
//!
//! Paths, chosen at every product from what the CPU has and the CPU class
//! in force allows (`cpu_has!`), widest first:
//! - AMX: `tdpbusd` on 16 x 16 tiles (`amx.rs`), for products of at least
//!   [`AMX_MIN_ROWS`] rows (below that the AVX-512 VNNI path is as fast:
//!   a tile always computes 16 rows).
//! - AVX-512 VNNI: `vpdpbusd` on 512-bit registers, a 4-row x 64-column tile.
//! - AVX-VNNI: the same instruction on 256-bit registers.
//! - AVX2: bytes widened to 16 bits (`vpmovzxbw` / `vpmovsxbw`) and
//!   multiplied with `vpmaddwd`, whose pair sums are exact; `vpmaddubsw`
//!   would be one instruction shorter but saturates its 16-bit pair sums
//!   (255 x 127 x 2 > 32767), and every path must give the same bits.
//! - portable: plain loops over the same packed layout.
//!
//! Every path computes each element as the exact sum of its `k` products
//! (each product fits in 16 bits, four of them in 18, and `i32` addition
//! wraps identically in any order), so every path and every thread count
//! gives the same bits, for any bytes (`tests::every_path_equals_the_reference`).
//! The sums cannot overflow below `k = 65_793` (`255 x 128 x k < 2^31`).

#[cfg(target_arch = "x86_64")]
mod amx;
#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod fp8_gemv;
mod quantize;
#[cfg(test)]
mod tests;

pub(crate) use fp8_gemv::gemv_fp8;
pub(crate) use quantize::{quantize_rows, range, Dequantize};

use super::buffers::SharedOut;
use super::memory::Storage;
use super::threads::parallel_for_cost;
use parallel_for_cost as threads_cost;

/// Output channels per packed panel.
pub(crate) const PANEL: usize = 16;
/// Rows of `a` per micro-tile.
const ROWS: usize = 4;
/// Panels per micro-tile (a 64-column tile on the 512-bit path).
const PANELS: usize = 4;
/// Blocks of [`ROWS`] rows per chunk of the vector paths' parallel loop
/// (one tile of columns): the per-chunk set-up (the accumulators' zero
/// fill, the panel's slice) is paid once for 16 rows.
const BLOCKS_PER_CHUNK: usize = 4;
/// The fewest rows [`PackedI8::gemm`] hands to the AMX path (measured,
/// `tests::amx_speed`, best of 5, load 8: at 768 x 768, 4 rows run at 93
/// GOP/s on the tiles and 233 on AVX-512 VNNI, 8 rows at 340 and 230).
pub(crate) const AMX_MIN_ROWS: usize = 8;

/// An instruction set of this module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    /// AMX-INT8 tiles (`tdpbusd`).
    Amx,
    /// AVX-512F + AVX-512 VNNI.
    Avx512Vnni,
    /// AVX2 + AVX-VNNI (256-bit `vpdpbusd`).
    AvxVnni,
    /// AVX2 (widening multiply-adds).
    Avx2,
    /// Plain loops.
    Portable,
}

impl Isa {
    /// Every path this CPU can run, widest first (always ends with
    /// `Portable`).
    pub(crate) fn all() -> Vec<Isa> {
        let mut all = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if crate::cpu::amx::int8() {
                all.push(Isa::Amx);
            }
            if has!("avx512f") && has!("avx512vnni") {
                all.push(Isa::Avx512Vnni);
            }
            if has!("avx2") && has!("avxvnni") {
                all.push(Isa::AvxVnni);
            }
            if has!("avx2") {
                all.push(Isa::Avx2);
            }
        }
        all.push(Isa::Portable);
        all
    }

    /// The widest path this CPU has and the CPU class in force on this
    /// thread allows (`crate::cpu::class`; every path gives the same bits).
    pub(crate) fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            use crate::cpu::class::cpu_has;
            if cpu_has!("amx-int8") {
                return Isa::Amx;
            }
        }
        Isa::detect_vector()
    }

    /// [`detect`](Self::detect) without the AMX path.
    pub(crate) fn detect_vector() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            use crate::cpu::class::cpu_has;
            if cpu_has!("avx512f") && cpu_has!("avx512vnni") {
                return Isa::Avx512Vnni;
            }
            if cpu_has!("avx2") && cpu_has!("avxvnni") {
                return Isa::AvxVnni;
            }
            if cpu_has!("avx2") {
                return Isa::Avx2;
            }
        }
        Isa::Portable
    }
}

/// `k` rounded up to a whole number of quads: the row stride (in bytes)
/// of the activations [`PackedI8::gemm`] reads.
///
/// ```ignore
/// assert_eq!(padded_k(5), 8);
/// ```
pub(crate) fn padded_k(k: usize) -> usize {
    k.div_ceil(4) * 4
}

/// An `n x k` matrix of `i8` packed for [`PackedI8::gemm`], with the sum of
/// each row (what an activation zero point multiplies).
#[derive(Clone, Debug)]
pub(crate) struct PackedI8 {
    n: usize,
    k: usize,
    /// `[panel][quad][16 channels][4 k]`, zero-padded in both `n` and `k`;
    /// pooled, so it starts on a cache line, as the AMX tile loads want
    /// (`crate::cpu::amx::zeroed_on_a_line` has the figures).
    data: Storage<i8>,
    /// `sum_p b[j][p]` per row `j`.
    row_sums: Vec<i32>,
}

impl PackedI8 {
    /// Packs `b` (`n x k`, row-major).
    ///
    /// # Panics
    /// When `b.len() != n * k`.
    pub(crate) fn new(n: usize, k: usize, b: &[i8]) -> Self {
        assert_eq!(
            b.len(),
            n * k,
            "qgemm: weight of {} bytes is not {n} x {k}",
            b.len()
        );
        let quads = padded_k(k) / 4;
        let panels = n.div_ceil(PANEL);
        let mut data = Storage::<i8>::zeroed(panels * quads * PANEL * 4);
        for j in 0..n {
            let (panel, lane) = (j / PANEL, j % PANEL);
            for p in 0..k {
                data[((panel * quads + p / 4) * PANEL + lane) * 4 + p % 4] = b[j * k + p];
            }
        }
        let row_sums = (0..n)
            .map(|j| b[j * k..(j + 1) * k].iter().map(|&v| v as i32).sum())
            .collect();
        PackedI8 {
            n,
            k,
            data,
            row_sums,
        }
    }

    /// The number of rows (output channels).
    pub(crate) fn n(&self) -> usize {
        self.n
    }

    /// The length of each row.
    pub(crate) fn k(&self) -> usize {
        self.k
    }

    /// The sum of each row.
    pub(crate) fn row_sums(&self) -> &[i32] {
        &self.row_sums
    }

    /// Bytes held (the packed matrix and the row sums).
    pub(crate) fn bytes(&self) -> usize {
        self.data.len() + 4 * self.row_sums.len()
    }

    /// The row-major `n x k` matrix back.
    pub(crate) fn unpack(&self) -> Vec<i8> {
        let mut out = vec![0i8; self.n * self.k];
        for (j, row) in out.chunks_exact_mut(self.k.max(1)).enumerate() {
            self.row_with(j, |p, v| row[p] = v);
        }
        out
    }

    /// Calls `f(p, value)` for the `k` values of row `j` in order: one row
    /// read from the packed panels (the four values of a quad are
    /// adjacent, the quads `4 x PANEL` bytes apart), without unpacking
    /// the rest (an int8 embedding's lookup).
    ///
    /// # Panics
    /// When `j >= n`.
    #[inline]
    pub(crate) fn row_with(&self, j: usize, mut f: impl FnMut(usize, i8)) {
        assert!(j < self.n, "qgemm: row {j} of {} rows", self.n);
        let quads = padded_k(self.k) / 4;
        let (panel, lane) = (j / PANEL, j % PANEL);
        let base = panel * quads * PANEL * 4 + lane * 4;
        for q in 0..self.k.div_ceil(4) {
            let quad = &self.data[base + q * PANEL * 4..][..4];
            for (i, &v) in quad.iter().enumerate().take(self.k - 4 * q) {
                f(4 * q + i, v);
            }
        }
    }

    /// `c = a b^T` on the CPU's widest path: `a` holds `m` rows of
    /// [`padded_k`]`(k)` bytes (the padding zero), `c` is row-major `m x n`.
    /// Uses up to [`num_threads`](super::num_threads) threads; the result
    /// is the same for every thread count and path.
    ///
    /// # Panics
    /// When a buffer is too small.
    #[cfg(test)]
    pub(crate) fn gemm(&self, m: usize, a: &[u8], c: &mut [i32]) {
        self.gemm_then(
            m,
            a,
            c,
            &mut [] as &mut [u8],
            None::<&fn(usize, &[i32], &mut [u8])>,
        )
    }

    /// [`gemm`](Self::gemm), then `then` on every block of sums as soon as a
    /// chunk of the parallel loop has made it, while it is in cache (on the
    /// vector paths, straight from the micro-tile's accumulators):
    /// `then(j0, sums, outs)` for each row of the block, `sums` the row's
    /// columns `j0..j0 + sums.len()` of `a b^T` and `outs` the same columns
    /// of the same row of `out` (row-major `m x n`). Each element of `out`
    /// is given to exactly one call, so an element-wise epilogue gives the
    /// same bits as a pass over the sums after the product. With an
    /// epilogue, `c` is only scratch (the AMX path's tiles are stored
    /// there): what it holds afterwards is unspecified.
    ///
    /// # Panics
    /// When a buffer is too small (`out` too, when there is an epilogue).
    pub(crate) fn gemm_then<T: Send, F: Fn(usize, &[i32], &mut [T]) + Sync>(
        &self,
        m: usize,
        a: &[u8],
        c: &mut [i32],
        out: &mut [T],
        then: Option<&F>,
    ) {
        self.run(path_for(m), m, a, c, out, then)
    }

    /// The estimated single-thread time, in nanoseconds, of
    /// [`gemm_then`](Self::gemm_then) with `m` rows on the path it takes:
    /// what it weighs against [`PARALLEL_MIN_NS`](super::threads::PARALLEL_MIN_NS)
    /// before splitting.
    pub(crate) fn cost_ns(&self, m: usize) -> usize {
        cost_on(path_for(m), m, self.n, padded_k(self.k))
    }

    /// [`gemm`](Self::gemm) on a given path (which the CPU must have).
    #[cfg(test)]
    pub(crate) fn gemm_with(&self, isa: Isa, m: usize, a: &[u8], c: &mut [i32]) {
        self.run(
            isa,
            m,
            a,
            c,
            &mut [] as &mut [u8],
            None::<&fn(usize, &[i32], &mut [u8])>,
        )
    }

    /// [`gemm_then`](Self::gemm_then) on a given path.
    fn run<T: Send, F: Fn(usize, &[i32], &mut [T]) + Sync>(
        &self,
        isa: Isa,
        m: usize,
        a: &[u8],
        c: &mut [i32],
        out: &mut [T],
        then: Option<&F>,
    ) {
        let kp = padded_k(self.k);
        assert!(
            a.len() >= m * kp,
            "qgemm: activations of {} bytes for {m} x {kp}",
            a.len()
        );
        assert!(
            c.len() >= m * self.n,
            "qgemm: output of {} for {m} x {}",
            c.len(),
            self.n
        );
        assert!(
            then.is_none() || out.len() >= m * self.n,
            "qgemm: epilogue output of {} for {m} x {}",
            out.len(),
            self.n
        );
        assert!(
            Isa::all().contains(&isa),
            "qgemm: this CPU cannot run {isa:?}"
        );
        if m == 0 || self.n == 0 {
            return;
        }
        let sums = SharedOut(c.as_mut_ptr());
        let outs = SharedOut(out.as_mut_ptr());
        let n = self.n;
        #[cfg(target_arch = "x86_64")]
        if isa == Isa::Amx {
            // The epilogue over the block of rows `r0..r0 + rows`, columns
            // `j0..j0 + cols`, which the calling chunk has just written.
            let finish = |r0: usize, rows: usize, j0: usize, cols: usize| {
                let Some(then) = then else { return };
                for r in r0..r0 + rows {
                    // SAFETY: the block lies inside the `m x n` matrices `c` and
                    // `out` (lengths checked above); the chunk that wrote it is
                    // the only one touching it, and it is done writing `c`.
                    let (s, o) = unsafe {
                        (
                            std::slice::from_raw_parts(sums.get().add(r * n + j0), cols),
                            std::slice::from_raw_parts_mut(outs.get().add(r * n + j0), cols),
                        )
                    };
                    then(j0, s, o);
                }
            };
            return self.gemm_amx(m, a, sums, &finish);
        }
        let blocks = m.div_ceil(ROWS);
        let groups = blocks.div_ceil(BLOCKS_PER_CHUNK);
        let tiles = self.n.div_ceil(PANEL * PANELS);
        let cost = cost_on(isa, m, self.n, kp);
        parallel_for_cost(groups * tiles, cost, |chunk| {
            let (group, tile) = chunk_at(chunk, groups);
            let p0 = tile * PANELS;
            let panels = PANELS.min(self.n.div_ceil(PANEL) - p0);
            let w = &self.data[p0 * (kp / 4) * PANEL * 4..];
            let j0 = p0 * PANEL;
            let cols = (panels * PANEL).min(self.n - j0);
            // set once per chunk: each tile overwrites the panels it reads
            let mut acc = [[0i32; PANEL * PANELS]; ROWS];
            let first = group * BLOCKS_PER_CHUNK;
            for block in first..blocks.min(first + BLOCKS_PER_CHUNK) {
                let r0 = block * ROWS;
                let rows = ROWS.min(m - r0);
                // rows past the end repeat the last one; their sums are dropped
                let a_rows: [&[u8]; ROWS] =
                    std::array::from_fn(|r| &a[(r0 + r.min(rows - 1)) * kp..][..kp]);
                if then.is_some() {
                    // the epilogue's outputs are fetched while the tile runs
                    for r in r0..r0 + rows {
                        prefetch(outs.get().wrapping_add(r * n + j0), cols);
                    }
                }
                tile_with(isa, kp / 4, a_rows, w, panels, &mut acc);
                for (r, acc_r) in acc.iter().enumerate().take(rows) {
                    let at = (r0 + r) * n + j0;
                    match then {
                        // the epilogue reads the tile's sums where they are
                        Some(then) => {
                            // SAFETY: each chunk owns its rows x columns
                            // block of `out`, inside the `m x n` checked
                            // above.
                            let o =
                                unsafe { std::slice::from_raw_parts_mut(outs.get().add(at), cols) };
                            then(j0, &acc_r[..cols], o);
                        }
                        None => {
                            // SAFETY: each chunk writes its own rows x
                            // columns block of `c`, inside the `m x n`
                            // checked above.
                            let dst =
                                unsafe { std::slice::from_raw_parts_mut(sums.get().add(at), cols) };
                            dst.copy_from_slice(&acc_r[..cols]);
                        }
                    }
                }
            }
        });
    }
}

impl PackedI8 {
    /// [`gemm_with`](Self::gemm_with) on the AMX path (checked there).
    #[cfg(target_arch = "x86_64")]
    fn gemm_amx(
        &self,
        m: usize,
        a: &[u8],
        out: SharedOut<i32>,
        finish: &(dyn Fn(usize, usize, usize, usize) + Sync),
    ) {
        let quads = padded_k(self.k) / 4;
        let panels = self.n.div_ceil(PANEL);
        let blocks = m.div_ceil(amx::BLOCK_ROWS);
        let groups = panels.div_ceil(amx::GROUP_PANELS);
        let cost = cost_on(Isa::Amx, m, self.n, 4 * quads);
        parallel_for_cost(blocks * groups, cost, |chunk| {
            let (block, group) = chunk_at(chunk, blocks);
            let r0 = block * amx::BLOCK_ROWS;
            let p0 = group * amx::GROUP_PANELS;
            let rows = amx::BLOCK_ROWS.min(m - r0);
            let group_panels = amx::GROUP_PANELS.min(panels - p0);
            // SAFETY: `run` checked that the CPU runs `Isa::Amx`
            // (AMX-INT8 usable) and the sizes of `a` and `c`; `data` is
            // this weight's packing with its slack; each chunk writes its
            // own rows x panels block of `c`.
            unsafe {
                amx::chunk(
                    &self.data,
                    self.n,
                    quads,
                    a,
                    r0,
                    rows,
                    p0,
                    group_panels,
                    out,
                )
            }
            let j0 = p0 * PANEL;
            finish(r0, rows, j0, (group_panels * PANEL).min(self.n - j0));
        });
    }
}

/// The path [`PackedI8::gemm_then`] takes for `m` rows: the widest, but
/// not AMX below [`AMX_MIN_ROWS`].
fn path_for(m: usize) -> Isa {
    match Isa::detect() {
        Isa::Amx if m < AMX_MIN_ROWS => Isa::detect_vector(),
        isa => isa,
    }
}

/// The estimated single-thread time, in nanoseconds, of an `m x n` product
/// over `kp` (padded) bytes on `isa`: about 512 multiply-adds per
/// nanosecond on the tiles, 64 on the vector paths.
fn cost_on(isa: Isa, m: usize, n: usize, kp: usize) -> usize {
    match isa {
        Isa::Amx => m * n * kp / 512,
        _ => m * n * kp / 64,
    }
}

/// The block of rows and the tile of columns of chunk `chunk` of a
/// product with `blocks` blocks of rows: columns first, so that a tile's
/// slice of the weight stays in cache while every block of rows passes
/// (the activations, `m x k` bytes, are read once per tile of 64 or 256
/// columns), where rows first read the whole weight once per block of 4 or
/// 32 rows, from memory when it is larger than the L2 cache. Each chunk
/// computes the same sums whatever the order, so the result does not
/// depend on it.
fn chunk_at(chunk: usize, blocks: usize) -> (usize, usize) {
    (chunk % blocks, chunk / blocks)
}

/// Asks the CPU to bring the `len` elements at `p` into its L1 cache (a
/// hint: no effect on values; nothing on targets without one). Writing
/// them later then finds them there instead of waiting for memory.
#[inline(always)]
fn prefetch<T>(p: *const T, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let bytes = len * std::mem::size_of::<T>();
        for off in (0..bytes).step_by(64) {
            // SAFETY: a prefetch never faults and changes no value; the
            // address is only computed (`wrapping_add`), never dereferenced.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>().wrapping_add(off)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, len);
}

/// One micro-tile: `acc[r][16 p + l] = sum_q dot(a_rows[r][4q..4q+4],
/// w[panel p][quad q][lane l])` for `panels` panels of `w` (the panels
/// after the first start `quads * 64` bytes apart), overwriting those
/// panels of `acc` (its other columns are left as they are, so one `acc`
/// serves every tile of a chunk). The CPU must have
/// `isa` ([`PackedI8::gemm_with`] checks it once per product).
fn tile_with(
    isa: Isa,
    quads: usize,
    a_rows: [&[u8]; ROWS],
    w: &[i8],
    panels: usize,
    acc: &mut [[i32; PANEL * PANELS]; ROWS],
) {
    assert!(
        w.len() >= panels * quads * PANEL * 4,
        "qgemm: packed weight too small"
    );
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512Vnni => {
            // SAFETY: the CPU has AVX-512F and VNNI (`gemm_with` checks);
            // the kernel reads `quads * 4` bytes of each row (each is a
            // slice of that length) and `panels` panels of `w` (checked
            // above).
            unsafe { avx512::tile(quads, a_rows, w, panels, acc) }
        }
        #[cfg(target_arch = "x86_64")]
        Isa::AvxVnni => {
            // SAFETY: the CPU has AVX2 and AVX-VNNI (`gemm_with` checks);
            // bounds as above.
            unsafe { avx2::tile_vnni(quads, a_rows, w, panels, acc) }
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => {
            // SAFETY: the CPU has AVX2 (`gemm_with` checks); bounds as above.
            unsafe { avx2::tile_widen(quads, a_rows, w, panels, acc) }
        }
        _ => tile_portable(quads, a_rows, w, panels, acc),
    }
}

/// The portable micro-tile: the same sums with plain loops.
fn tile_portable(
    quads: usize,
    a_rows: [&[u8]; ROWS],
    w: &[i8],
    panels: usize,
    acc: &mut [[i32; PANEL * PANELS]; ROWS],
) {
    for (r, row) in a_rows.iter().enumerate() {
        for p in 0..panels {
            let panel = &w[p * quads * PANEL * 4..][..quads * PANEL * 4];
            let out = &mut acc[r][p * PANEL..][..PANEL];
            // overwritten, as the vector tiles store theirs
            out.fill(0);
            for (q, block) in panel.chunks_exact(PANEL * 4).enumerate() {
                let a4 = &row[4 * q..4 * q + 4];
                for (o, w4) in out.iter_mut().zip(block.chunks_exact(4)) {
                    let mut s = 0i32;
                    for t in 0..4 {
                        s += a4[t] as i32 * w4[t] as i32;
                    }
                    *o = o.wrapping_add(s);
                }
            }
        }
    }
}
