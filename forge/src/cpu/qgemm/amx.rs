//! The AMX path: `tdpbusd` on 16 x 16 tiles of `i32` sums.
//!
//! The packed weight's layout (`[panel][quad][16 channels][4 k]`) is the
//! B-tile layout of `tdpbusd` as it is: the 16 quads `16 t .. 16 t + 16`
//! of a panel are one tile of 16 rows x 64 bytes, rows 64 bytes apart.
//! When the quads are not a multiple of 16, the last tile of a panel reads
//! on into the next panel (or into the zero slack `PackedI8` keeps after
//! its last panel); the activations are copied into a scratch block
//! whose `k` is padded with zeros to a multiple of 64, so those extra
//! weight bytes meet zero activations and add exactly nothing.
//!
//! A chunk of the parallel loop is [`BLOCK_ROWS`] rows x up to
//! [`GROUP_PANELS`] panels: one `ldtilecfg`, the rows copied once, then
//! 32 x 32 blocks of `c` (tiles 0..3), each the sum over `k` of two A
//! tiles (4, 5) times two B tiles (6, 7). Rows past `m` are zero in the
//! scratch and their sums dropped; a lone last panel uses one column of
//! tiles.

use super::{padded_k, SharedOut, PANEL};
use crate::cpu::amx::tiles::{Config, Tiles};
use std::cell::RefCell;

/// Rows of `a` per chunk: two tiles of 16.
pub(super) const BLOCK_ROWS: usize = 32;
/// Panels per chunk (256 columns).
pub(super) const GROUP_PANELS: usize = 16;
/// Quads of `k` per tile (64 bytes).
const TILE_QUADS: usize = 16;

/// Zero bytes `PackedI8` keeps after its last panel for a `k` of `quads`
/// quads: what the last tile of the last panel reads past it.
pub(super) fn slack(quads: usize) -> usize {
    (quads.next_multiple_of(TILE_QUADS) - quads) * 64
}

thread_local! {
    /// The chunk's activations, `BLOCK_ROWS` rows of `k` padded to 64.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// `c = a b^T` for the chunk of rows `r0..r0 + rows` and panels
/// `p0..p0 + panels`.
///
/// # Safety
/// AMX-INT8 is usable (`crate::cpu::amx::int8()`); `data` is the packed
/// weight of `n` channels and `quads` quads (with its [`slack`]), `a` holds
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
    out: SharedOut,
) {
    let kp = 4 * quads;
    debug_assert_eq!(kp, padded_k(kp));
    let tiles_k = quads.div_ceil(TILE_QUADS);
    let stride = tiles_k * 64;
    assert!(rows <= BLOCK_ROWS && a.len() >= (r0 + rows) * kp);
    assert!(data.len() >= (p0 + panels) * quads * 64 + slack(quads));
    SCRATCH.with(|s| {
        let mut s = s.borrow_mut();
        s.clear();
        s.resize(BLOCK_ROWS * stride, 0);
        for r in 0..rows {
            s[r * stride..][..kp].copy_from_slice(&a[(r0 + r) * kp..][..kp]);
        }
        let mut cfg = Config::new();
        for t in 0..8 {
            cfg.set(t, 16, 64);
        }
        // SAFETY: AMX-INT8 is usable (caller); no other `Tiles` lives on
        // this thread (chunks do not nest: the kernel calls nothing that
        // uses tiles).
        let tiles = unsafe { Tiles::new(&cfg) };
        let two_rows = rows > 16;
        let mut p = p0;
        while p < p0 + panels {
            let pair = p + 1 < p0 + panels;
            let mut acc = [0i32; 32 * 32];
            // SAFETY: the A tiles read rows 0..32 of the scratch, each
            // `stride` bytes, at offsets `64 t < stride`; the B tiles read
            // 16 rows of 64 bytes from `(panel quads + 16 t) * 64`, which
            // ends at most `slack` bytes past the panel, inside `data`
            // (asserted above); the stores write 16 rows of 64 bytes at
            // stride 128 into `acc` (32 rows of 128 bytes). Every tile is
            // 16 x 64, so the shapes of `tdpbusd` agree.
            unsafe {
                block(&tiles, data, quads, p, pair, two_rows, &s, stride, &mut acc);
            }
            let j0 = p * PANEL;
            let cols = ((1 + usize::from(pair)) * PANEL).min(n - j0);
            for r in 0..rows {
                // SAFETY: row `r0 + r`, columns `j0..j0 + cols` of the
                // `m x n` output belong to this chunk alone (caller).
                let dst = unsafe {
                    std::slice::from_raw_parts_mut(out.get().add((r0 + r) * n + j0), cols)
                };
                dst.copy_from_slice(&acc[r * 32..][..cols]);
            }
            p += 2;
        }
        drop(tiles);
    });
}

/// One 32 x 32 (or narrower) block of sums into `acc` (32 rows of 32).
///
/// # Safety
/// As in [`chunk`]'s body: the tiles are configured 16 x 64 and the
/// reads stay inside `data` and `s`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn block(
    t: &Tiles,
    data: &[i8],
    quads: usize,
    p: usize,
    pair: bool,
    two_rows: bool,
    s: &[u8],
    stride: usize,
    acc: &mut [i32; 32 * 32],
) {
    let tiles_k = quads.div_ceil(TILE_QUADS);
    let b0 = data.as_ptr().wrapping_add(p * quads * 64).cast::<u8>();
    let b1 = b0.wrapping_add(quads * 64);
    let a0 = s.as_ptr();
    let a1 = a0.wrapping_add(16 * stride);
    t.zero::<0>();
    t.zero::<1>();
    t.zero::<2>();
    t.zero::<3>();
    // SAFETY: see `chunk`: every address lies inside `data` or `s`.
    unsafe {
        for kt in 0..tiles_k {
            t.load::<4>(a0.add(kt * 64), stride);
            t.load::<6>(b0.add(kt * 1024), 64);
            t.dpbusd::<0, 4, 6>();
            if pair {
                t.load::<7>(b1.add(kt * 1024), 64);
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
        let c = acc.as_mut_ptr().cast::<u8>();
        t.store::<0>(c, 128);
        t.store::<1>(c.add(64), 128);
        t.store::<2>(c.add(16 * 128), 128);
        t.store::<3>(c.add(16 * 128 + 64), 128);
    }
}
