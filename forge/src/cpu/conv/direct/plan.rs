//! The direct convolution's tiles: which output positions each tile
//! computes, where their windows start in the (padded) input, where their
//! outputs go, and which taps they run (see the parent module's docs).
//! Depends on the geometry only.

use super::super::geom::ConvGeom;
use super::{MAX_NP, OB};
use std::sync::{Arc, Mutex};

/// Up to [`MAX_NP`] output positions computed together.
pub(in crate::cpu::conv) struct Tile {
    /// Positions in the tile.
    pub(in crate::cpu::conv) np: usize,
    /// Per position: the offset of its window's first tap (image, row and
    /// column; channel 0) in the layout the plan reads ([`Plan::padded`]).
    /// In the input as it is, a window that starts in the padding has a
    /// wrapped offset; `offs[j].wrapping_add(tap offset)` is an index for
    /// every tap the tile runs.
    pub(in crate::cpu::conv) offs: [usize; MAX_NP],
    /// Per position: its index in the output for channel 0
    /// (`b * o * l + oy * ow + ox`).
    pub(in crate::cpu::conv) outs: [usize; MAX_NP],
    /// The taps run, in order: `(tap * c * OB, offset of the tap in a
    /// channel of the input read)`: where the tap's weights start in a
    /// packed block, and where its input is.
    pub(in crate::cpu::conv) taps: Vec<(usize, usize)>,
    /// The largest `offs[j].wrapping_add(tap offset)` over the tile's
    /// positions and taps (0 without either): the farthest input of
    /// channel 0 the tile reads. A sum that wrapped (a read before the
    /// input) would be the largest, so `far + (c - 1) * plane` below the
    /// input's length bounds every read of the tile (checked per tile by
    /// the caller in O(1); it was a check of every position and tap).
    pub(in crate::cpu::conv) far: usize,
}

/// The tiles of a geometry and the channel plane of the input they read.
pub(in crate::cpu::conv) struct Plan {
    pub(in crate::cpu::conv) tiles: Vec<Tile>,
    pub(in crate::cpu::conv) plane: usize,
    /// Whether the offsets point into the zero-padded copy of the input
    /// (`[n, c, h + 2 p0, w + 2 p1]`) or into the input as it is (`[n, c,
    /// h, w]`: no copy to make).
    pub(in crate::cpu::conv) padded: bool,
}

/// Per output coordinate along one axis, the mask of kernel indices that
/// meet the image (bit `i` for index `i`).
fn axis_masks(out_len: usize, k: usize, s: usize, p: usize, d: usize, len: usize) -> Vec<u64> {
    (0..out_len)
        .map(|o| {
            (0..k)
                .filter(|&i| (o * s + i * d).checked_sub(p).is_some_and(|v| v < len))
                .fold(0u64, |m, i| m | 1 << i)
        })
        .collect()
}

/// The tiles of `g` (whose kernel is at most 64 taps per axis).
///
/// With `as_is_ok`, where every tile's positions are of one tap class
/// (each tile runs only taps that meet the image at all of its positions:
/// the classes grouped over the batch, or no padding), the offsets point
/// into the input as it is, which the caller then reads without a padded
/// copy: each read is one the padded layout reads at the same position
/// and tap, so the sums are the same. A window's first tap may then lie
/// before the image (`oy * s - p0 < 0`): its position offset wraps
/// (`usize` arithmetic modulo 2^64), and only the sum with the offset of
/// a tap that meets the image is an index (see [`Tile::offs`]).
pub(in crate::cpu::conv) fn plan(g: &ConvGeom, as_is_ok: bool) -> Plan {
    let [p0, p1] = g.padding;
    let l = g.l();
    let rows = axis_masks(g.oh, g.kh, g.stride[0], p0, g.dilation[0], g.h);
    let cols = axis_masks(g.ow, g.kw, g.stride[1], p1, g.dilation[1], g.w);
    // Tap classes: positions with the same (row mask, column mask).
    let mut classes: Vec<(u64, u64)> = Vec::new();
    let class_of: Vec<usize> = (0..l)
        .map(|pos| {
            let key = (rows[pos / g.ow], cols[pos % g.ow]);
            match classes.iter().position(|&c| c == key) {
                Some(i) => i,
                None => {
                    classes.push(key);
                    classes.len() - 1
                }
            }
        })
        .collect();
    let mut counts = vec![0usize; classes.len()];
    for &c in &class_of {
        counts[c] += 1;
    }
    let by_class = counts.iter().all(|&c| c * g.n >= MAX_NP);
    // Segments of positions `(b, pos)`: by class over the batch, or all
    // positions in order.
    let segments: Vec<Vec<(usize, usize)>> = if by_class {
        (0..classes.len())
            .map(|cl| {
                (0..g.n)
                    .flat_map(|b| (0..l).map(move |pos| (b, pos)))
                    .filter(|&(_, pos)| class_of[pos] == cl)
                    .collect()
            })
            .collect()
    } else {
        vec![(0..g.n)
            .flat_map(|b| (0..l).map(move |pos| (b, pos)))
            .collect()]
    };
    // Each tile's positions `(b, pos)` and taps `(ky, kx)`; whether every
    // tile's positions share one tap class.
    type Part<'a> = (&'a [(usize, usize)], Vec<(usize, usize)>);
    let mut parts: Vec<Part> = Vec::new();
    let mut one_class = true;
    for seg in &segments {
        let nt = seg.len().div_ceil(MAX_NP);
        for t in 0..nt {
            let part = &seg[t * seg.len() / nt..(t + 1) * seg.len() / nt];
            let (mut rmask, mut cmask) = (0u64, 0u64);
            let mut pairs: Vec<(u64, u64)> = Vec::new();
            for &(_, pos) in part {
                let (oy, ox) = (pos / g.ow, pos % g.ow);
                let pair = (rows[oy], cols[ox]);
                if !pairs.contains(&pair) {
                    pairs.push(pair);
                }
                rmask |= rows[oy];
                cmask |= cols[ox];
            }
            one_class &= pairs.len() == 1;
            let mut taps = Vec::new();
            for ky in 0..g.kh {
                for kx in 0..g.kw {
                    let used = rmask >> ky & 1 == 1
                        && cmask >> kx & 1 == 1
                        && pairs
                            .iter()
                            .any(|&(r, c)| r >> ky & 1 == 1 && c >> kx & 1 == 1);
                    if used {
                        taps.push((ky, kx));
                    }
                }
            }
            parts.push((part, taps));
        }
    }
    // The layout read: padded, or (see the docs) the input as it is, the
    // window's origin shifted back by the padding.
    let padded = (p0 > 0 || p1 > 0) && !(as_is_ok && one_class);
    let (hp, wp, shift) = if padded {
        (g.h + 2 * p0, g.w + 2 * p1, 0usize)
    } else {
        (g.h, g.w, (p0 * g.w + p1).wrapping_neg())
    };
    let plane = hp * wp;
    let img = g.c * plane;
    let tiles = parts
        .into_iter()
        .map(|(part, taps)| {
            let mut tile = Tile {
                np: part.len(),
                offs: [0; MAX_NP],
                outs: [0; MAX_NP],
                taps: Vec::with_capacity(taps.len()),
                far: 0,
            };
            for (j, &(b, pos)) in part.iter().enumerate() {
                let (oy, ox) = (pos / g.ow, pos % g.ow);
                tile.offs[j] =
                    (b * img + oy * g.stride[0] * wp + ox * g.stride[1]).wrapping_add(shift);
                tile.outs[j] = b * g.o * l + pos;
            }
            for (ky, kx) in taps {
                tile.taps.push((
                    (ky * g.kw + kx) * g.c * OB,
                    ky * g.dilation[0] * wp + kx * g.dilation[1],
                ));
            }
            tile.far = farthest(&tile.offs[..tile.np], &tile.taps);
            tile
        })
        .collect();
    Plan {
        tiles,
        plane,
        padded,
    }
}

/// The largest `off.wrapping_add(tap offset)` over `offs` and `taps`
/// ([`Tile::far`]); 0 when either is empty.
pub(in crate::cpu::conv) fn farthest(offs: &[usize], taps: &[(usize, usize)]) -> usize {
    offs.iter()
        .flat_map(|&off| taps.iter().map(move |t| off.wrapping_add(t.1)))
        .max()
        .unwrap_or(0)
}

/// How many geometries' plans [`plan_cached`] keeps (ResNet-18 at one
/// batch size has 11 distinct convolution geometries).
const KEPT_PLANS: usize = 32;

/// The plans made last (with the `as_is_ok` they were made with), newest
/// at the end.
static PLANS: Mutex<Vec<(PlanKey, Arc<Plan>)>> = Mutex::new(Vec::new());

/// What a kept plan was made for: the geometry and `as_is_ok`.
type PlanKey = (ConvGeom, bool);

/// [`plan`] of `g` (and `as_is_ok`), kept for the next call with the same
/// arguments (a network's inference asks for the same few plans on every
/// call; the plan depends on them only, so a kept one is the one `plan`
/// makes).
/// At most [`KEPT_PLANS`] are kept, the oldest dropped first.
pub(in crate::cpu::conv) fn plan_cached(g: &ConvGeom, as_is_ok: bool) -> Arc<Plan> {
    let key = (*g, as_is_ok);
    let kept = |plans: &Vec<(PlanKey, Arc<Plan>)>| {
        plans
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, p)| p.clone())
    };
    if let Some(p) = kept(&PLANS.lock().unwrap_or_else(|e| e.into_inner())) {
        return p;
    }
    let p = Arc::new(plan(g, as_is_ok));
    let mut plans = PLANS.lock().unwrap_or_else(|e| e.into_inner());
    if kept(&plans).is_none() {
        if plans.len() == KEPT_PLANS {
            plans.remove(0);
        }
        plans.push((key, p.clone()));
    }
    p
}
