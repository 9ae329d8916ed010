//! The AMX path: `tdpbf16ps` on 16 x 16 tiles of f32 sums.
//!
//! The packed weight's layout (`[panel][pair][16 channels][2 k]`) is the
//! B-tile layout of `tdpbf16ps` as it is: the 16 pairs `16 t .. 16 t + 16`
//! of a panel are one tile of 16 rows x 64 bytes, rows 64 bytes apart. When
//! a panel's pairs are not a multiple of 16, its last tile is copied into a
//! zeroed 1 KiB block first (reading on into the next panel, as the int8
//! kernel does, would meet zero activations with whatever values the next
//! panel holds, and `0 x inf` is NaN). The activations are read in place
//! when a chunk has 32 whole rows of a whole number of tiles, else copied
//! into a scratch block whose rows and `k` are padded with zeros.
//!
//! A chunk of the parallel loop is [`BLOCK_ROWS`] rows x up to
//! [`GROUP_PANELS`] panels: one `ldtilecfg`, then 32 x 32 blocks of `c`
//! (tiles 0..3), each the sum over `k` of two A tiles (4, 5) times two B
//! tiles (6, 7). Rows past `m` are zero in the scratch and their sums
//! dropped; a lone last panel uses one column of tiles; columns past `n`
//! are the packing's zero channels, their sums dropped too.
//!
//! # The bits
//! Every element is `+0` followed by one `tdpbf16ps` per tile of 16 pairs
//! of `k`, in increasing `k` (tile `t` holds pairs `16 t..16 t + 16`, zeros
//! past the end). Storing the sums between blocks of `k` and loading them
//! back is exact, and an element's instructions read only its own row and
//! channel, so the result does not depend on `m`, `n`, the position of the
//! element in its tile, the `k` blocking or the thread count: the same
//! bits whenever the AMX path runs (`tests::amx_bits_do_not_depend_on_the_split`).
//! They are not the bits of the other paths (see the module docs of
//! `bgemm`).

use super::{Sink, PANEL};
use crate::cpu::amx::tiles::{Config, Tiles};
use crate::cpu::amx::{zeroed_on_a_line, Line};
use std::cell::RefCell;

/// Rows of `a` per chunk: two tiles of 16.
pub(super) const BLOCK_ROWS: usize = 32;
/// Panels per chunk (256 columns).
pub(super) const GROUP_PANELS: usize = 16;
/// Pairs of `k` per tile (64 bytes of bf16).
const TILE_PAIRS: usize = 16;
/// `k` tiles per block: 12 tiles are 384 `k`, 24 KiB of the chunk's 32
/// rows, which stay in the 48 KiB L1 for the whole block while the panels
/// stream past them from L2 (loaded with `tileloaddt1`, the hint that keeps
/// a tile's data out of L1, so that they do not evict the rows). Longer
/// blocks store and reload the sums less often. Measured with
/// `tests::amx_speed` (1 thread, best of 5-6 alternating runs of the same
/// binary, other jobs stopped, 2026-12-06 on a Sapphire Rapids core):
/// with the panels loaded plainly, 8 tiles were best (on BERT-base under
/// bf16 autocast a call took 225-227 ms with 8 tiles against 237 with 12,
/// 247 with 64, 256 with 4); with the hint, at 1024 x 768 x 768 /
/// 1024 x 768 x 3072 / 1024 x 3072 x 768, in GFLOP/s:
///
/// | panels loaded | `k` tiles | GFLOP/s |
/// |---|---|---|
/// | plainly | 8 | 999 / 964 / 902 |
/// | with the hint | 8 | 1,088 / 966 / 1,030 |
/// | with the hint | 10 | 1,125 / 1,022 / 1,117 |
/// | with the hint | 12 | 1,148 / 1,121 / 1,063 |
/// | with the hint | 16 | 1,146 / 1,123 / 1,036 |
/// | with the hint | 6 | 1,091 / 937 / 1,003 |
///
/// The split does not change the bits (see "The bits").
const KB_TILES: usize = 12;

thread_local! {
    /// The chunk's activations, `BLOCK_ROWS` rows of `k` padded to 32.
    static SCRATCH: RefCell<Vec<u16>> = const { RefCell::new(Vec::new()) };
    /// The chunk's sums when they do not go straight into `c`.
    static CBUF: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// `c = a b^T (+ bias)` for the chunk of rows `r0..r0 + rows` and panels
/// `p0..p0 + panels`, into `sink` (`c` itself, or its GELU in bf16).
///
/// # Safety
/// AMX-BF16 is usable (`crate::cpu::amx::bf16()`); `data` is the packed
/// weight of `n` channels and `pairs` pairs (`div_ceil(n, 16) * pairs *
/// 32` elements), `a` holds at least `r0 + rows` rows of `2 pairs`
/// elements, `bias` (if any) has `n` elements, and `sink` points to an
/// `m x n` matrix of which this call writes only its rows x columns block,
/// which no other thread touches.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn chunk(
    data: &[u16],
    n: usize,
    pairs: usize,
    a: &[u16],
    r0: usize,
    rows: usize,
    p0: usize,
    panels: usize,
    bias: Option<&[f32]>,
    sink: Sink,
) {
    let kp = 2 * pairs;
    let tiles_k = pairs.div_ceil(TILE_PAIRS);
    // row stride of the scratch, in elements
    let stride = tiles_k * TILE_PAIRS * 2;
    assert!(rows <= BLOCK_ROWS && a.len() >= (r0 + rows) * kp);
    assert!(data.len() >= (p0 + panels) * pairs * PANEL * 2);
    let in_place = rows == BLOCK_ROWS && kp == stride;
    let col_pairs = panels.div_ceil(2);
    // the sums go straight into `c` when it is kept and the chunk is whole
    // blocks; else they stay in the local block
    let out = match sink {
        Sink::F32(out) => Some(out),
        Sink::GeluBf16 { .. } => None,
    };
    let whole = out.is_some()
        && rows == BLOCK_ROWS
        && panels.is_multiple_of(2)
        && (p0 + panels) * PANEL <= n;
    let k_blocks = tiles_k.div_ceil(KB_TILES);
    let kb_tiles = tiles_k.div_ceil(k_blocks);
    SCRATCH.with(|s| {
        CBUF.with(|cbuf| {
            let mut s = s.borrow_mut();
            let mut cbuf = cbuf.borrow_mut();
            let (a_blk, a_stride): (&[u16], usize) = if in_place {
                (&a[r0 * kp..][..BLOCK_ROWS * kp], kp)
            } else {
                let at = zeroed_on_a_line(&mut s, BLOCK_ROWS * stride);
                let s = &mut s[at..];
                for r in 0..rows {
                    s[r * stride..][..kp].copy_from_slice(&a[(r0 + r) * kp..][..kp]);
                }
                (&s[..], stride)
            };
            let mut c_at = 0;
            let (c0, c_stride) = if let (true, Some(out)) = (whole, out) {
                // SAFETY: row `r0`, column `p0 * 16` lies inside the
                // `m x n` output (this chunk's first element).
                (
                    unsafe { out.get().add(r0 * n + p0 * PANEL) }.cast::<u8>(),
                    4 * n,
                )
            } else {
                c_at = zeroed_on_a_line(&mut cbuf, BLOCK_ROWS * col_pairs * 32);
                (cbuf[c_at..].as_mut_ptr().cast::<u8>(), col_pairs * 128)
            };
            let mut cfg = Config::new();
            for t in 0..8 {
                cfg.set(t, 16, 64);
            }
            // SAFETY: AMX-BF16 is usable (caller); no other `Tiles` lives
            // on this thread (chunks do not nest: the kernel calls nothing
            // that uses tiles).
            let tiles = unsafe { Tiles::new(&cfg) };
            let two_rows = rows > 16;
            for kb in 0..k_blocks {
                let t0 = kb * kb_tiles;
                let t1 = (t0 + kb_tiles).min(tiles_k);
                for q in 0..col_pairs {
                    let p = p0 + 2 * q;
                    let pair = p + 1 < p0 + panels;
                    // SAFETY: the A tiles read 32 rows of `a_blk` at
                    // `a_stride` elements (the scratch's 32 rows of
                    // `stride`, or the chunk's 32 rows of `a`, `stride ==
                    // kp` each), 64 bytes at element `32 t < a_stride`; the
                    // B tiles read 1,024 bytes of panel `p` (or `p + 1`)
                    // when they lie inside that panel, else a zeroed copy;
                    // the C tiles load and store 32 rows of 32 `f32` at
                    // `c_stride` bytes from `c0 + 128 q`: inside the local
                    // block (32 rows of `col_pairs` x 128 bytes), or rows
                    // `r0..r0 + 32`, columns `16 p..16 p + 32` of `c`, this
                    // chunk's alone (caller). Every tile is 16 x 64, so the
                    // shapes of `tdpbf16ps` agree.
                    unsafe {
                        block(
                            &tiles,
                            data,
                            pairs,
                            p,
                            pair,
                            two_rows,
                            (a_blk, a_stride),
                            t0..t1,
                            c0.add(q * 128),
                            c_stride,
                        );
                    }
                }
            }
            drop(tiles);
            // found once per chunk, not per row
            let wide = bias.is_some() && crate::cpu::class::cpu_has!("avx512f");
            let j0 = p0 * PANEL;
            let cols = (panels * PANEL).min(n - j0);
            for r in 0..rows {
                match sink {
                    Sink::F32(out) => {
                        // SAFETY: row `r0 + r`, columns `j0..j0 + cols` of
                        // the `m x n` output belong to this chunk alone
                        // (caller).
                        let dst = unsafe {
                            std::slice::from_raw_parts_mut(out.get().add((r0 + r) * n + j0), cols)
                        };
                        if !whole {
                            dst.copy_from_slice(&cbuf[c_at + r * col_pairs * 32..][..cols]);
                        }
                        if let Some(b) = bias {
                            add_bias(dst, &b[j0..j0 + cols], wide);
                        }
                    }
                    Sink::GeluBf16 { out, gelu, round } => {
                        // the row's sums, still in this chunk's block
                        let src = &mut cbuf[c_at + r * col_pairs * 32..][..cols];
                        if let Some(b) = bias {
                            add_bias(src, &b[j0..j0 + cols], wide);
                        }
                        gelu.apply(src);
                        // SAFETY: as above, in the `m x n` bf16 output.
                        let dst = unsafe {
                            std::slice::from_raw_parts_mut(out.get().add((r0 + r) * n + j0), cols)
                        };
                        round.round(src, dst);
                    }
                }
            }
        })
    });
}

/// `dst[j] += bias[j]`: in 16 lanes when `wide` (the CPU has AVX-512F, as
/// every CPU with AMX has; the crate's baseline loop runs in 4), the same
/// sums either way.
fn add_bias(dst: &mut [f32], bias: &[f32], wide: bool) {
    #[target_feature(enable = "avx512f")]
    fn avx512(dst: &mut [f32], bias: &[f32]) {
        for (d, &b) in dst.iter_mut().zip(bias) {
            *d += b;
        }
    }
    if wide {
        // SAFETY: the CPU has AVX-512F (the caller checked, `wide`); the
        // loop is safe code over two slices.
        unsafe { avx512(dst, bias) };
    } else {
        for (d, &b) in dst.iter_mut().zip(bias) {
            *d += b;
        }
    }
}

/// One 32 x 32 block of sums over the `k` tiles `kt` (zeros in the tiles a
/// narrower block does not use), added to the block at `dst` (rows
/// `dst_stride` bytes apart) unless `kt` starts at 0.
///
/// # Safety
/// As in [`chunk`]'s body: the tiles are configured 16 x 64, the reads
/// stay inside `data` and `a.0`, the 32 rows of 128 bytes at `dst` are
/// readable and writable.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn block(
    t: &Tiles,
    data: &[u16],
    pairs: usize,
    p: usize,
    pair: bool,
    two_rows: bool,
    a: (&[u16], usize),
    kt: std::ops::Range<usize>,
    dst: *mut u8,
    dst_stride: usize,
) {
    let (a, stride) = a;
    // The B tile of `k` tile `kt` of panel `panel`: in place when its 16
    // pairs lie inside the panel, else the pairs that do followed by zeros
    // (in `tail`).
    // (Written only when needed, not zeroed on every block.)
    let mut tail = std::mem::MaybeUninit::<Line<[u16; TILE_PAIRS * 32]>>::uninit();
    let mut b_tile = |panel: usize, kt: usize| -> *const u8 {
        let start = panel * pairs * 32;
        let q0 = kt * TILE_PAIRS;
        if q0 + TILE_PAIRS <= pairs {
            data[start + q0 * 32..][..TILE_PAIRS * 32].as_ptr().cast()
        } else {
            let part = &data[start + q0 * 32..start + pairs * 32];
            let tail = &mut tail.write(Line([0u16; TILE_PAIRS * 32])).0;
            tail[..part.len()].copy_from_slice(part);
            tail.as_ptr().cast()
        }
    };
    let a0 = a.as_ptr().cast::<u8>();
    let a_bytes = 2 * stride;
    let a1 = a0.wrapping_add(16 * a_bytes);
    // SAFETY: see `chunk`: every address lies inside `data`, `tail`, `a`
    // or the block at `dst`.
    unsafe {
        if kt.start == 0 {
            t.zero::<0>();
            t.zero::<1>();
            t.zero::<2>();
            t.zero::<3>();
        } else {
            t.load::<0>(dst, dst_stride);
            t.load::<1>(dst.add(64), dst_stride);
            t.load::<2>(dst.add(16 * dst_stride), dst_stride);
            t.load::<3>(dst.add(16 * dst_stride + 64), dst_stride);
        }
        for kt in kt {
            t.load::<4>(a0.add(kt * 64), a_bytes);
            // the panels stream past: kept out of L1 (see `KB_TILES`)
            t.load_t1::<6>(b_tile(p, kt), 64);
            t.dpbf16ps::<0, 4, 6>();
            if pair {
                t.load_t1::<7>(b_tile(p + 1, kt), 64);
                t.dpbf16ps::<1, 4, 7>();
            }
            if two_rows {
                t.load::<5>(a1.add(kt * 64), a_bytes);
                t.dpbf16ps::<2, 5, 6>();
                if pair {
                    t.dpbf16ps::<3, 5, 7>();
                }
            }
        }
        t.store::<0>(dst, dst_stride);
        t.store::<1>(dst.add(64), dst_stride);
        t.store::<2>(dst.add(16 * dst_stride), dst_stride);
        t.store::<3>(dst.add(16 * dst_stride + 64), dst_stride);
    }
}
