//! The AMX path: `tdpbusd` on 16 x 16 tiles of `i32` sums.
//!
//! The packed weight's layout (`[panel][quad][16 channels][4 k]`) is the
//! B-tile layout of `tdpbusd` as it is: the 16 quads `16 t .. 16 t + 16`
//! of a panel are one tile of 16 rows x 64 bytes, rows 64 bytes apart.
//! When the quads are not a multiple of 16, the last tile of a panel reads
//! on into the next panel (the last panel's last tile is copied into a
//! zeroed 1 KiB block on the stack instead, so the packed weight keeps no
//! slack and its bytes stay what the other paths need); the activations
//! are copied into a scratch block whose `k` is padded with zeros to a
//! multiple of 64, so those extra weight bytes meet zero activations and
//! add exactly nothing.
//!
//! A chunk of the parallel loop is [`BLOCK_ROWS`] rows x up to
//! [`GROUP_PANELS`] panels: one `ldtilecfg`, the rows copied once, then
//! 32 x 32 blocks of `c` (tiles 0..3), each the sum over `k` of two A
//! tiles (4, 5) times two B tiles (6, 7). Rows past `m` are zero in the
//! scratch and their sums dropped; a lone last panel uses one column of
//! tiles.

use super::{padded_k, SharedOut, PANEL};
use crate::cpu::amx::tiles::{Config, Tiles};
use crate::cpu::amx::{zeroed_on_a_line, Line};
use std::cell::RefCell;

/// Rows of `a` per chunk: two tiles of 16.
pub(super) const BLOCK_ROWS: usize = 32;
/// Panels per chunk (256 columns).
pub(super) const GROUP_PANELS: usize = 16;
/// Quads of `k` per tile (64 bytes).
const TILE_QUADS: usize = 16;

/// `k` tiles per block: 1 KiB of `k`, so that the chunk's 32 rows (32
/// KiB) stay in L1/L2 while the pairs of panels stream past them (best of
/// 4, 8, 16 and unblocked in `tests::amx_speed`, load 8-9: 1186 GOP/s at
/// 1024 x 768 x 768, 576 at 1024 x 768 x 3072, 219 at 1024 x 3072 x 768).
const KB_TILES: usize = 16;

#[cfg(test)]
thread_local! {
    /// A test's choice of `KB_TILES` (`tests::amx_speed` compares them).
    pub(super) static KB_TILES_TEST: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// `KB_TILES`, or a test's choice.
fn kb_tiles_max() -> usize {
    #[cfg(test)]
    if let Some(kb) = KB_TILES_TEST.with(|c| c.get()) {
        return kb;
    }
    KB_TILES
}

thread_local! {
    /// The chunk's activations, `BLOCK_ROWS` rows of `k` padded to 64.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// The chunk's sums when they do not go straight into `c`.
    static CBUF: RefCell<Vec<i32>> = const { RefCell::new(Vec::new()) };
}

/// `c = a b^T` for the chunk of rows `r0..r0 + rows` and panels
/// `p0..p0 + panels`.
///
/// # Safety
/// AMX-INT8 is usable (`crate::cpu::amx::int8()`); `data` is the packed
/// weight of `n` channels and `quads` quads, `a` holds
/// the chunk's rows at stride `4 quads`, and `out` points to an `m x n`
/// matrix of which this call writes only its rows x columns block, which
/// no other thread touches.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn chunk(
    data: &[i8],
    n: usize,
    quads: usize,
    a: &[u8],
    r0: usize,
    rows: usize,
    p0: usize,
    panels: usize,
    out: SharedOut<i32>,
) {
    let kp = 4 * quads;
    debug_assert_eq!(kp, padded_k(kp));
    let tiles_k = quads.div_ceil(TILE_QUADS);
    let stride = tiles_k * 64;
    assert!(rows <= BLOCK_ROWS && a.len() >= (r0 + rows) * kp);
    assert!(data.len() >= (p0 + panels) * quads * 64);
    // Whole tiles of rows and of `k` are read in place; others through the
    // zero-padded scratch.
    let in_place = rows == BLOCK_ROWS && kp == stride;
    let pairs = panels.div_ceil(2);
    // A chunk of whole 32 x 32 blocks sums straight into `c`; others
    // into a local block of 32 rows x `pairs` x 32 columns.
    let whole = rows == BLOCK_ROWS && panels.is_multiple_of(2) && (p0 + panels) * PANEL <= n;
    // `k` in blocks of at most `KB_TILES` tiles, as even as they come.
    let k_blocks = tiles_k.div_ceil(kb_tiles_max());
    let kb_tiles = tiles_k.div_ceil(k_blocks);
    SCRATCH.with(|s| {
        CBUF.with(|cbuf| {
            let mut s = s.borrow_mut();
            let mut cbuf = cbuf.borrow_mut();
            let (a_blk, a_stride): (&[u8], usize) = if in_place {
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
            let (c0, c_stride) = if whole {
                // SAFETY: row `r0`, column `p0 * 16` lies inside the
                // `m x n` output (this chunk's first element).
                (
                    unsafe { out.get().add(r0 * n + p0 * PANEL) }.cast::<u8>(),
                    4 * n,
                )
            } else {
                c_at = zeroed_on_a_line(&mut cbuf, BLOCK_ROWS * pairs * 32);
                (cbuf[c_at..].as_mut_ptr().cast::<u8>(), pairs * 128)
            };
            let mut cfg = Config::new();
            for t in 0..8 {
                cfg.set(t, 16, 64);
            }
            // SAFETY: AMX-INT8 is usable (caller); no other `Tiles` lives
            // on this thread (chunks do not nest: the kernel calls nothing
            // that uses tiles).
            let tiles = unsafe { Tiles::new(&cfg) };
            let two_rows = rows > 16;
            for kb in 0..k_blocks {
                let t0 = kb * kb_tiles;
                let t1 = (t0 + kb_tiles).min(tiles_k);
                for q in 0..pairs {
                    let p = p0 + 2 * q;
                    let pair = p + 1 < p0 + panels;
                    // SAFETY: the A tiles read 32 rows of `a_blk` at
                    // `a_stride` (the scratch's 32 rows of `stride` bytes,
                    // or the chunk's 32 rows of `a`, `stride == kp` bytes
                    // each), 64 bytes at offsets `64 t < a_stride`; the B
                    // tiles read 16 rows of 64 bytes from `(panel quads +
                    // 16 t) * 64` when those 1,024 bytes lie inside `data`
                    // (`data.len()` bounds the panels, asserted above),
                    // else from `block`'s zeroed copy of the part that
                    // does; the C
                    // tiles load and store 32 rows of 32 `i32` at
                    // `c_stride` from `c0 + 128 q`: inside the local block
                    // (32 rows of `pairs` x 128 bytes), or rows `r0..r0 +
                    // 32`, columns `16 p..16 p + 32` of `c`, this chunk's
                    // alone (caller). Every tile is 16 x 64, so the shapes
                    // of `tdpbusd` agree.
                    unsafe {
                        block(
                            &tiles,
                            data,
                            quads,
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
            if !whole {
                let j0 = p0 * PANEL;
                let cols = (panels * PANEL).min(n - j0);
                for r in 0..rows {
                    // SAFETY: row `r0 + r`, columns `j0..j0 + cols` of the
                    // `m x n` output belong to this chunk alone (caller).
                    let dst = unsafe {
                        std::slice::from_raw_parts_mut(out.get().add((r0 + r) * n + j0), cols)
                    };
                    dst.copy_from_slice(&cbuf[c_at + r * pairs * 32..][..cols]);
                }
            }
        })
    });
}

/// One 32 x 32 block of sums over the `k` tiles `kt` (zeros in the
/// tiles a narrower block does not use), added to the block at `dst`
/// (rows `dst_stride` bytes apart) unless `kt` starts at 0.
///
/// # Safety
/// As in [`chunk`]'s body: the tiles are configured 16 x 64, the reads
/// stay inside `data` and `a.0`, the 32 rows of 128 bytes at `dst` are
/// readable and writable.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn block(
    t: &Tiles,
    data: &[i8],
    quads: usize,
    p: usize,
    pair: bool,
    two_rows: bool,
    a: (&[u8], usize),
    kt: std::ops::Range<usize>,
    dst: *mut u8,
    dst_stride: usize,
) {
    let (a, stride) = a;
    let bytes: &[u8] = {
        // SAFETY: `i8` and `u8` have the same size and alignment, and
        // every bit pattern is valid for both.
        unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), data.len()) }
    };
    // The B tile of `k` tile `kt` of the panel starting at byte `start`:
    // read in place when its 1,024 bytes lie inside the packed weight,
    // else (the last panel's last tile, when its quads are not a multiple
    // of 16) from `tail`, the part inside `data` followed by zeros, which
    // meet zero activations.
    // (Written only when needed: zeroing 1 KiB on every block was a tenth
    // of an int8 BERT-base forward.)
    let mut tail = std::mem::MaybeUninit::<Line<[u8; 1024]>>::uninit();
    let mut b_tile = |start: usize, kt: usize| -> *const u8 {
        let at = start + kt * 1024;
        match bytes.get(at..at + 1024) {
            Some(tile) => tile.as_ptr(),
            None => {
                let part = &bytes[at.min(bytes.len())..];
                let tail = &mut tail.write(Line([0u8; 1024])).0;
                tail[..part.len()].copy_from_slice(part);
                tail.as_ptr()
            }
        }
    };
    let b0 = p * quads * 64;
    let b1 = b0 + quads * 64;
    let a0 = a.as_ptr();
    let a1 = a0.wrapping_add(16 * stride);
    // SAFETY: see `chunk`: every address lies inside `data`, `a` or the
    // block at `dst`.
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
            t.load::<4>(a0.add(kt * 64), stride);
            // the panels stream past the chunk's rows: loaded with the
            // hint that keeps them out of L1 (`tileloaddt1`), so that the
            // rows stay there. `tests::amx_speed`, 1 thread, best of 5
            // alternating runs, 2026-12-06 on Sapphire Rapids: 1,507 /
            // 1,507 / 1,654 / 2,248 GOP/s at 1024 x 768 x 768, 1024 x 768 x
            // 3072, 1024 x 3072 x 768 and 128 x 784 x 512 plainly, 1,582 /
            // 1,659 / 1,864 / 2,472 with the hint.
            t.load_t1::<6>(b_tile(b0, kt), 64);
            t.dpbusd::<0, 4, 6>();
            if pair {
                t.load_t1::<7>(b_tile(b1, kt), 64);
                t.dpbusd::<1, 4, 7>();
            }
            if two_rows {
                t.load::<5>(a1.add(kt * 64), stride);
                t.dpbusd::<2, 5, 6>();
                if pair {
                    t.dpbusd::<3, 5, 7>();
                }
            }
        }
        t.store::<0>(dst, dst_stride);
        t.store::<1>(dst.add(64), dst_stride);
        t.store::<2>(dst.add(16 * dst_stride), dst_stride);
        t.store::<3>(dst.add(16 * dst_stride + 64), dst_stride);
    }
}
