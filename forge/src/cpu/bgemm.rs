//! bf16 matrix products with f32 accumulation: `c = a b^T (+ bias)` with
//! `a` an `m x k` matrix of bf16 (activations, one row per output row),
//! `b` an `n x k` matrix of bf16 (a weight, one row per output channel) and
//! `c` the `m x n` matrix of f32 sums.
//!
//! `b` is packed once ([`PackedBf16`]): output channels in panels of 16,
//! `k` in pairs (zero-padded), so that one 64-byte load holds two
//! consecutive `k` of sixteen channels, the operand layout of `vdpbf16ps`.
//! The rows of `a` are read in place with an even stride ([`padded_k`])
//! and zero padding.
//!
//! Paths, chosen at every product from what the CPU has and the CPU class
//! in force allows (`cpu_has!`):
//! - AMX (the `amx` class only): `tdpbf16ps` on 16 x 16 tiles (`amx.rs`),
//!   for every product, whatever its size, so that a row's bits do not
//!   depend on how many rows share the product.
//! - AVX-512 BF16: `vdpbf16ps` on 512-bit registers, a 6-row x 64-column
//!   register tile.
//! - portable: plain f32 loops over the same packed layout.
//!
//! # The summation order of the `avx512` and `portable` classes
//! Every element starts at `+0.0` and takes the pairs `(2q, 2q + 1)` in
//! increasing `q`; each pair adds its odd product first, then its even one:
//! `s = ftz(ftz(s + a[2q+1] b[2q+1]) + a[2q] b[2q])`, each addition rounded
//! to nearest even and a subnormal result flushed to a zero of its sign
//! (what `vdpbf16ps` does whatever MXCSR says). A product of two bf16 is
//! exact in f32 unless it underflows, so one rounding per addition is the
//! whole story. bf16 subnormals never reach a kernel: [`to_bf16`] flushes
//! them (the instruction would treat them as zero). The bias, when given,
//! is added last in f32. The `k` blocking and the thread split do not change
//! any of this, so the result is the same bits for both paths and every
//! thread count (`tests::every_path_equals_the_reference`).
//!
//! # The `amx` class: other bits, as close to the exact sum
//! AMX's `tdpbf16ps` does not give these bits, nor any bits portable code
//! is known to reproduce: with one pair per element it rounds the pair's
//! sum before adding it (not the odd product, then the even one), and
//! with more pairs per instruction (what makes it fast) it sums them in
//! an internal adder that none of the models tried matches (the
//! experiment and its figures: `crate::cpu::amx`'s `bf16_probe`). So the
//! bits of a bf16 product are defined per CPU class: on the `amx` class
//! each element is one `tdpbf16ps` per 16 pairs of `k`, in increasing `k`,
//! the same bits for every size, split, thread count and run on the same
//! CPU (`tests::amx_bits_do_not_depend_on_the_split`); on the narrower
//! classes the order above. Both are f32 sums of the same exact products;
//! `tests::amx_error_is_bounded_by_the_vector_paths` measures both against
//! an f64 reference and bounds AMX's error by the vector path's.

#[cfg(target_arch = "x86_64")]
mod amx;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod conv;
#[cfg(test)]
mod tests;

pub(crate) use conv::conv2d;

use super::bf16_round::Bf16Rounder;
use super::memory::Storage;
use super::threads::parallel_for_cost;
use super::vmath::GeluBf16;

/// Output channels per packed panel.
pub(crate) const PANEL: usize = 16;
/// Rows of `a` per register tile.
const ROWS: usize = 6;
/// Panels per register tile (a 64-column tile).
const PANELS: usize = 4;
/// Pairs of `k` per block: one block of a 4-panel tile is 32 KiB, which
/// stays in L1 while the tile's rows stream past it.
const KC_PAIRS: usize = 128;
/// Rows of `a` per parallel chunk (a multiple of [`ROWS`]).
const CHUNK_ROWS: usize = 8 * ROWS;

/// An instruction set of this module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    /// AMX-BF16 tiles (`tdpbf16ps`): other bits than the other paths.
    Amx,
    /// AVX-512F + AVX-512 BF16.
    Avx512Bf16,
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
            if crate::cpu::amx::bf16() {
                all.push(Isa::Amx);
            }
            if has!("avx512f") && has!("avx512bf16") {
                all.push(Isa::Avx512Bf16);
            }
        }
        all.push(Isa::Portable);
        all
    }

    /// The widest path this CPU has and the CPU class in force on this
    /// thread allows (every path but [`Isa::Amx`] gives the same bits).
    pub(crate) fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            use crate::cpu::class::cpu_has;
            if cpu_has!("amx-bf16") {
                return Isa::Amx;
            }
            if cpu_has!("avx512f") && cpu_has!("avx512bf16") {
                return Isa::Avx512Bf16;
            }
        }
        Isa::Portable
    }
}

/// `x` rounded to bf16 (nearest, ties to even), as its bit pattern. NaNs
/// stay NaN (quieted), infinities stay infinite, values past the largest
/// bf16 become infinite, and subnormals become a zero of their sign.
pub(crate) fn to_bf16(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        return ((b >> 16) | 0x40) as u16;
    }
    if x.is_subnormal() {
        return ((b >> 16) & 0x8000) as u16;
    }
    // cannot overflow u32: the largest finite pattern plus 0x8000 is below 2^32
    ((b + 0x7fff + ((b >> 16) & 1)) >> 16) as u16
}

/// The f32 value of a bf16 bit pattern (exact).
pub(crate) fn from_bf16(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

/// `x` rounded to the nearest bf16 value, as an f32.
#[cfg(test)]
pub(crate) fn round_bf16(x: f32) -> f32 {
    from_bf16(to_bf16(x))
}

/// `k` rounded up to a whole number of pairs: the row stride (in
/// elements) of the activations [`PackedBf16::gemm`] reads.
pub(crate) fn padded_k(k: usize) -> usize {
    k.div_ceil(2) * 2
}

/// `rows` rows of `k` f32 (row-major) as bf16 rows of [`padded_k`]`(k)`
/// elements, the padding zero.
pub(crate) fn rows_to_bf16(src: &[f32], rows: usize, k: usize) -> Vec<u16> {
    let kp = padded_k(k);
    let mut out = vec![0u16; rows * kp];
    if k == 0 {
        return out;
    }
    for (dst, row) in out.chunks_exact_mut(kp).zip(src.chunks_exact(k)) {
        for (d, &v) in dst.iter_mut().zip(row) {
            *d = to_bf16(v);
        }
    }
    out
}

/// `x` plus an f32 rounding step: one addition of the summation order,
/// rounded, its subnormal result flushed to zero (see the module docs).
#[inline(always)]
fn ftz(x: f32) -> f32 {
    if x.is_subnormal() {
        0.0f32.copysign(x)
    } else {
        x
    }
}

/// An `n x k` matrix of bf16 packed for [`PackedBf16::gemm`].
#[derive(Clone, Debug)]
pub(crate) struct PackedBf16 {
    n: usize,
    k: usize,
    /// `[panel][pair][16 channels][2 k]`, zero-padded in both `n` and `k`
    /// (pooled: the convolution packs its patches at every call).
    data: Storage<u16>,
}

impl PackedBf16 {
    /// Packs `b` (`n x k`, row-major f32), each value rounded to bf16.
    ///
    /// # Panics
    /// When `b.len() != n * k`.
    pub(crate) fn new(n: usize, k: usize, b: &[f32]) -> Self {
        assert_eq!(
            b.len(),
            n * k,
            "bgemm: weight of {} elements is not {n} x {k}",
            b.len()
        );
        Self::from_fn(n, k, |j, p| b[j * k + p])
    }

    /// Packs the `n x k` matrix whose element `(j, p)` is `f(j, p)`, each
    /// value rounded to bf16 (`f` is called once per element, `p` fastest).
    pub(crate) fn from_fn(n: usize, k: usize, mut f: impl FnMut(usize, usize) -> f32) -> Self {
        let pairs = padded_k(k) / 2;
        let panels = n.div_ceil(PANEL);
        let mut data = Storage::<u16>::zeroed(panels * pairs * PANEL * 2);
        for j in 0..n {
            let (panel, lane) = (j / PANEL, j % PANEL);
            let base = panel * pairs * PANEL * 2 + lane * 2;
            for p in 0..k {
                data[base + (p / 2) * PANEL * 2 + p % 2] = to_bf16(f(j, p));
            }
        }
        PackedBf16 { n, k, data }
    }

    /// Packs the `n x k` matrix of bf16 whose row `j` is `row(j)` (`k`
    /// values each): the layout of [`new`](Self::new) from values already
    /// rounded, e.g. the keys of an attention head (`a k^T`).
    ///
    /// # Panics
    /// When a row is shorter than `k`.
    pub(crate) fn from_bf16_rows<'a>(n: usize, k: usize, row: impl Fn(usize) -> &'a [u16]) -> Self {
        let pairs = padded_k(k) / 2;
        let mut data = Storage::<u16>::zeroed(n.div_ceil(PANEL) * pairs * PANEL * 2);
        for j in 0..n {
            let (panel, lane) = (j / PANEL, j % PANEL);
            let dst = &mut data[panel * pairs * PANEL * 2 + lane * 2..];
            let src = &row(j)[..k];
            let (whole, last) = src.split_at(k & !1);
            // two elements at a time, fixed-size moves (a copy of a
            // run-time length here was a `memmove` call per pair: 3.7% of
            // a bf16 BERT call)
            for (dst, pair) in dst.chunks_mut(PANEL * 2).zip(whole.chunks_exact(2)) {
                dst[..2].copy_from_slice(&[pair[0], pair[1]]);
            }
            if let [v] = last {
                dst[(k / 2) * PANEL * 2] = *v;
            }
        }
        PackedBf16 { n, k, data }
    }

    /// Packs the `n x k` matrix of bf16 whose column `p` is `col(p)` (`n`
    /// values each): the transpose of a row-major `k x n` matrix, e.g. the
    /// values of an attention head (`p v`), read row by row.
    ///
    /// # Panics
    /// When a column is shorter than `n`.
    pub(crate) fn from_bf16_cols<'a>(n: usize, k: usize, col: impl Fn(usize) -> &'a [u16]) -> Self {
        let pairs = padded_k(k) / 2;
        let panels = n.div_ceil(PANEL);
        let mut data = Storage::<u16>::zeroed(panels * pairs * PANEL * 2);
        // the two columns of a pair interleaved into each panel's block
        for q in 0..pairs {
            let even = &col(2 * q)[..n];
            let odd = (2 * q + 1 < k).then(|| &col(2 * q + 1)[..n]);
            for (panel, lanes) in even.chunks(PANEL).enumerate() {
                let dst = &mut data[panel * pairs * PANEL * 2 + q * PANEL * 2..][..2 * lanes.len()];
                match odd {
                    Some(odd) => {
                        let odd = &odd[panel * PANEL..][..lanes.len()];
                        for ((d, &e), &o) in dst.chunks_exact_mut(2).zip(lanes).zip(odd) {
                            d.copy_from_slice(&[e, o]);
                        }
                    }
                    None => {
                        for (d, &e) in dst.chunks_exact_mut(2).zip(lanes) {
                            d[0] = e;
                        }
                    }
                }
            }
        }
        PackedBf16 { n, k, data }
    }

    /// The row-major `n x k` matrix back, as f32.
    #[cfg(test)]
    pub(crate) fn unpack(&self) -> Vec<f32> {
        let pairs = padded_k(self.k) / 2;
        let mut out = vec![0f32; self.n * self.k];
        for j in 0..self.n {
            let (panel, lane) = (j / PANEL, j % PANEL);
            for p in 0..self.k {
                out[j * self.k + p] = from_bf16(
                    self.data[panel * pairs * PANEL * 2 + (p / 2) * PANEL * 2 + lane * 2 + p % 2],
                );
            }
        }
        out
    }

    /// `c = a b^T (+ bias)` on the CPU's widest path: `a` holds `m` rows of
    /// [`padded_k`]`(k)` bf16 (the padding zero), `c` is row-major `m x n`,
    /// `bias` (if any) has `n` elements. Uses up to
    /// [`num_threads`](super::num_threads) threads; the result is the same
    /// for every thread count, and for every path of the CPU class in
    /// force (see the module docs).
    ///
    /// # Panics
    /// When a buffer is too small.
    pub(crate) fn gemm(&self, m: usize, a: &[u16], bias: Option<&[f32]>, c: &mut [f32]) {
        self.gemm_with(Isa::detect(), m, a, bias, c)
    }

    /// [`gemm`](Self::gemm) on a given path (which the CPU must have).
    pub(crate) fn gemm_with(
        &self,
        isa: Isa,
        m: usize,
        a: &[u16],
        bias: Option<&[f32]>,
        c: &mut [f32],
    ) {
        if !self.check(isa, m, a, bias, c.len()) {
            return;
        }
        let kp = padded_k(self.k);
        #[cfg(target_arch = "x86_64")]
        if isa == Isa::Amx {
            return self.gemm_amx(m, a, bias, Sink::F32(Shared(c.as_mut_ptr())));
        }
        let pairs = kp / 2;
        let groups = m.div_ceil(CHUNK_ROWS);
        let tiles = self.n.div_ceil(PANEL * PANELS);
        let out = Shared(c.as_mut_ptr());
        // about 64 multiply-adds per nanosecond on the vector path
        let cost = m * self.n * kp / 64;
        parallel_for_cost(groups * tiles, cost, |chunk| {
            let (tile, group) = (chunk / groups, chunk % groups);
            let g0 = group * CHUNK_ROWS;
            let g_rows = CHUNK_ROWS.min(m - g0);
            let p0 = tile * PANELS;
            let panels = PANELS.min(self.n.div_ceil(PANEL) - p0);
            let j0 = p0 * PANEL;
            let cols = (panels * PANEL).min(self.n - j0);
            let mut acc = vec![[0f32; PANEL * PANELS]; g_rows.div_ceil(ROWS) * ROWS];
            let w = &self.data[p0 * pairs * PANEL * 2..];
            for q0 in (0..pairs).step_by(KC_PAIRS) {
                let qn = KC_PAIRS.min(pairs - q0);
                for (b, block) in acc.chunks_exact_mut(ROWS).enumerate() {
                    let r0 = g0 + b * ROWS;
                    let rows = ROWS.min(g0 + g_rows - r0);
                    // rows past the end repeat the last one; their sums are dropped
                    let a_rows: [&[u16]; ROWS] = std::array::from_fn(|r| {
                        &a[(r0 + r.min(rows - 1)) * kp + 2 * q0..][..2 * qn]
                    });
                    let block: &mut [[f32; PANEL * PANELS]; ROWS] =
                        block.try_into().expect("ROWS rows");
                    tile_with(isa, qn, pairs, a_rows, &w[q0 * PANEL * 2..], panels, block);
                }
            }
            for (r, acc_r) in acc.iter().enumerate().take(g_rows) {
                // SAFETY: each chunk writes its own rows x columns block of
                // `c`, inside the `m x n` checked above.
                let dst = unsafe {
                    std::slice::from_raw_parts_mut(out.get().add((g0 + r) * self.n + j0), cols)
                };
                dst.copy_from_slice(&acc_r[..cols]);
                if let Some(b) = bias {
                    for (d, &bv) in dst.iter_mut().zip(&b[j0..j0 + cols]) {
                        *d += bv;
                    }
                }
            }
        });
    }
}

impl PackedBf16 {
    /// Checks a product's operands (`out_len`: the output's elements) and
    /// the path; `false` when there is nothing to compute (`m` or `n` is 0).
    ///
    /// # Panics
    /// When a buffer is too small or the CPU cannot run `isa`.
    fn check(&self, isa: Isa, m: usize, a: &[u16], bias: Option<&[f32]>, out_len: usize) -> bool {
        let kp = padded_k(self.k);
        assert!(
            a.len() >= m * kp,
            "bgemm: activations of {} elements for {m} x {kp}",
            a.len()
        );
        assert!(
            out_len >= m * self.n,
            "bgemm: output of {out_len} for {m} x {}",
            self.n
        );
        if let Some(b) = bias {
            assert_eq!(b.len(), self.n, "bgemm: bias of {} for {}", b.len(), self.n);
        }
        assert!(
            Isa::all().contains(&isa),
            "bgemm: this CPU cannot run {isa:?}"
        );
        m > 0 && self.n > 0
    }

    /// `GELU(a b^T + bias)` (the exact GELU of `cpu::vmath::GeluBf16`)
    /// rounded to bf16 into `out` (row-major `m x n`): the bits of
    /// [`gemm`](Self::gemm) followed by that GELU and the rounding of
    /// `cpu::bf16_round`, element by element. On the AMX path the GELU and
    /// the rounding are the product's epilogue: each chunk's sums go
    /// through them while they are in cache, and the f32 matrix is never
    /// written (BERT's widening product: 12.6 MB of f32 at 8 x 128 tokens,
    /// written, read and written back before, now 6.3 MB of bf16 written
    /// once). Other paths run the product, then the GELU in blocks of rows.
    ///
    /// # Panics
    /// When a buffer is too small.
    pub(crate) fn gemm_gelu_bf16(
        &self,
        m: usize,
        a: &[u16],
        bias: Option<&[f32]>,
        out: &mut [u16],
    ) {
        self.gemm_gelu_bf16_with(Isa::detect(), m, a, bias, out)
    }

    /// [`gemm_gelu_bf16`](Self::gemm_gelu_bf16) on a given path (which
    /// the CPU must have).
    pub(crate) fn gemm_gelu_bf16_with(
        &self,
        isa: Isa,
        m: usize,
        a: &[u16],
        bias: Option<&[f32]>,
        out: &mut [u16],
    ) {
        if !self.check(isa, m, a, bias, out.len()) {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if isa == Isa::Amx {
            let sink = Sink::GeluBf16 {
                out: Shared(out.as_mut_ptr()),
                gelu: GeluBf16::new(),
                round: Bf16Rounder::new(),
            };
            return self.gemm_amx(m, a, bias, sink);
        }
        // written whole by the product
        let mut c = Storage::<f32>::stale(m * self.n);
        self.gemm_with(isa, m, a, bias, &mut c);
        gelu_rows_to_bf16(&mut c, self.n, &mut out[..m * self.n]);
    }
}

/// Rows (of `width`) of `h`, GELU'd in place and rounded to bf16 into
/// `hb`, one block of rows at a time (in cache).
fn gelu_rows_to_bf16(h: &mut [f32], width: usize, hb: &mut [u16]) {
    assert_eq!(h.len(), hb.len(), "gelu_rows_to_bf16: lengths differ");
    let rows = h.len() / width.max(1);
    // about 16K elements per block, whole rows, whatever the thread count
    let per = (16_384 / width.max(1)).max(1);
    let (src, dst) = (Shared(h.as_mut_ptr()), Shared(hb.as_mut_ptr()));
    // found once, not per piece
    let (gelu, round) = (GeluBf16::new(), Bf16Rounder::new());
    // about a nanosecond per element (the GELU's polynomial)
    parallel_for_cost(rows.div_ceil(per), h.len(), |blk| {
        let (first, n) = (blk * per, per.min(rows - blk * per));
        // SAFETY: rows `first..first + n` of `h` and `hb` (both `rows x
        // width`) belong to this block alone.
        let (hr, out) = unsafe {
            (
                std::slice::from_raw_parts_mut(src.get().add(first * width), n * width),
                std::slice::from_raw_parts_mut(dst.get().add(first * width), n * width),
            )
        };
        // in pieces of 1,024 values (4 KiB), so that GELU's output is
        // still in L1 when it is rounded (a whole block is 64 KiB)
        for (h, o) in hr.chunks_mut(1024).zip(out.chunks_mut(1024)) {
            gelu.apply(h);
            round.round(h, o);
        }
    });
}

impl PackedBf16 {
    /// [`gemm_with`](Self::gemm_with) on the AMX path (checked there),
    /// into `sink` (an `m x n` matrix the caller checked).
    #[cfg(target_arch = "x86_64")]
    fn gemm_amx(&self, m: usize, a: &[u16], bias: Option<&[f32]>, sink: Sink) {
        let pairs = padded_k(self.k) / 2;
        let panels = self.n.div_ceil(PANEL);
        let blocks = m.div_ceil(amx::BLOCK_ROWS);
        let groups = panels.div_ceil(amx::GROUP_PANELS);
        // about 256 multiply-adds per nanosecond on the tiles
        let cost = m * self.n * 2 * pairs / 256;
        // consecutive chunks share their panels (256 channels: 384 KiB at
        // k = 768, 1.5 MiB at k = 3072, kept in L2 while the row blocks
        // stream past), so a weight larger than L2 is read from memory once
        // per group rather than once per block of 32 rows (at 1024 x 768 x
        // 3072, 18 MB of traffic instead of 150; `tests::amx_speed` could
        // not tell the two orders apart at load 11 on 2 cores)
        parallel_for_cost(blocks * groups, cost, |chunk| {
            let (group, block) = (chunk / blocks, chunk % blocks);
            let r0 = block * amx::BLOCK_ROWS;
            let p0 = group * amx::GROUP_PANELS;
            // SAFETY: `gemm_with` checked that the CPU runs `Isa::Amx`
            // (AMX-BF16 usable) and the sizes of `a`, `c` and `bias`;
            // `data` is this weight's packing (`panels * pairs * 32`
            // elements); each chunk writes its own rows x panels block of
            // the sink's matrix.
            unsafe {
                amx::chunk(
                    &self.data,
                    self.n,
                    pairs,
                    a,
                    r0,
                    amx::BLOCK_ROWS.min(m - r0),
                    p0,
                    amx::GROUP_PANELS.min(panels - p0),
                    bias,
                    sink,
                )
            }
        });
    }
}

/// An output's pointer shared by the chunks of one product (`f32` sums or
/// bf16 values).
struct Shared<T>(*mut T);
// SAFETY: the chunks write disjoint blocks of the output, which outlives
// the loop.
unsafe impl<T> Send for Shared<T> {}
// SAFETY: as above: no two chunks touch the same element.
unsafe impl<T> Sync for Shared<T> {}

// by hand: a derive would ask `T: Copy` of the pointee
impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Shared<T> {}

impl<T> Shared<T> {
    fn get(self) -> *mut T {
        self.0
    }
}

/// `c`'s pointer.
type SharedOut = Shared<f32>;
/// A bf16 output's pointer.
type SharedBf16 = Shared<u16>;

/// Where a product's finished sums go (an `m x n` matrix either way).
#[derive(Clone, Copy)]
enum Sink {
    /// `c`, the f32 sums (bias added).
    F32(SharedOut),
    /// The GELU of the sums (bias added), rounded to bf16: the f32 sums
    /// are not kept (see [`PackedBf16::gemm_gelu_bf16`]).
    GeluBf16 {
        out: SharedBf16,
        gelu: GeluBf16,
        round: Bf16Rounder,
    },
}

/// One register tile over `qn` pairs: `acc[r][16 p + l]` continues its
/// sum with the pairs of row `r` of `a_rows` (each `2 qn` long) times lane
/// `l` of panel `p` of `w` (panels `pairs * 32` elements apart, each pair
/// 32 elements), in the module's order. The CPU must have `isa`
/// ([`PackedBf16::gemm_with`] checks it once per product).
fn tile_with(
    isa: Isa,
    qn: usize,
    pairs: usize,
    a_rows: [&[u16]; ROWS],
    w: &[u16],
    panels: usize,
    acc: &mut [[f32; PANEL * PANELS]; ROWS],
) {
    assert!(
        (1..=PANELS).contains(&panels)
            && w.len() >= (panels - 1) * pairs * PANEL * 2 + qn * PANEL * 2,
        "bgemm: packed weight too small"
    );
    assert!(
        a_rows.iter().all(|r| r.len() >= 2 * qn),
        "bgemm: row too short"
    );
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512Bf16 => {
            // SAFETY: the CPU has AVX-512F and BF16 (`gemm_with` checks);
            // the kernel reads `2 qn` elements of each row and `qn` pairs of
            // `panels` panels of `w` (both checked above).
            unsafe { avx512::tile(qn, pairs * PANEL * 2, a_rows, w, panels, acc) }
        }
        _ => tile_portable(qn, pairs * PANEL * 2, a_rows, w, panels, acc),
    }
}

/// The portable tile: the same sums with plain loops.
fn tile_portable(
    qn: usize,
    stride: usize,
    a_rows: [&[u16]; ROWS],
    w: &[u16],
    panels: usize,
    acc: &mut [[f32; PANEL * PANELS]; ROWS],
) {
    for (r, row) in a_rows.iter().enumerate() {
        for p in 0..panels {
            let panel = &w[p * stride..][..qn * PANEL * 2];
            let out: &mut [f32; PANEL] = (&mut acc[r][p * PANEL..][..PANEL])
                .try_into()
                .expect("PANEL lanes");
            for (q, block) in panel.chunks_exact(PANEL * 2).enumerate() {
                let (a0, a1) = (from_bf16(row[2 * q]), from_bf16(row[2 * q + 1]));
                for (o, w2) in out.iter_mut().zip(block.chunks_exact(2)) {
                    let s = ftz(*o + a1 * from_bf16(w2[1]));
                    *o = ftz(s + a0 * from_bf16(w2[0]));
                }
            }
        }
    }
}
