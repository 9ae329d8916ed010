//! The zero-padded copy of a convolution's input that the direct kernel's
//! tiles read when some of their taps fall outside the image.

use super::ConvGeom;
use crate::cpu::buffers::for_each_row_mut;
use crate::cpu::memory::Storage;

/// The zero-padded input `[n, c, h + 2 p0, w + 2 p1]`, or `None` without
/// padding (the input is read as it is). Each wide padded plane is
/// written once, its border zeros and its rows (no zero fill of the whole
/// buffer first); narrow planes (at most [`SMALL_PADDED_WIDTH`] wide) are
/// zeroed in groups of up to [`PLANES_PER_FILL`], then their rows copied.
/// Planes in parallel when there are enough of them ([`for_each_row_mut`]:
/// the copy was a serial pass of the 2-thread convolution).
pub(super) fn padded(g: &ConvGeom, x: &[f32]) -> Option<Storage<f32>> {
    let [p0, p1] = g.padding;
    if p0 == 0 && p1 == 0 {
        return None;
    }
    let (hp, wp) = (g.h + 2 * p0, g.w + 2 * p1);
    let planes = g.n * g.c;
    // stale: every element is written below
    let mut xp = Storage::<f32>::stale(planes * hp * wp);
    if wp <= SMALL_PADDED_WIDTH {
        // Narrow planes (ResNet-18's 2x2 to 8x8 at batch 1): each group of
        // `k` planes zeroed in one fill, then its rows copied by moves of a
        // width known at compile time. Writing each row's border and
        // interior through `memset` / `memcpy` calls of 1-8 values (three
        // calls a row) took 5.5-7.7 µs per convolution, 15% of the
        // convolutions' one-thread time at batch 1.
        let k = gcd(planes, PLANES_PER_FILL);
        let (hw, phw) = (g.h * g.w, hp * wp);
        for_each_row_mut(&mut xp, k * phw, |grp, dst| {
            dst.fill(0.0);
            for (i, plane) in dst.chunks_exact_mut(phw).enumerate() {
                let ip = grp * k + i;
                let src = &x[ip * hw..(ip + 1) * hw];
                let rows = &mut plane[p0 * wp..(p0 + g.h) * wp];
                match g.w {
                    1 => copy_rows::<1>(rows, src, wp, p1),
                    2 => copy_rows::<2>(rows, src, wp, p1),
                    4 => copy_rows::<4>(rows, src, wp, p1),
                    8 => copy_rows::<8>(rows, src, wp, p1),
                    16 => copy_rows::<16>(rows, src, wp, p1),
                    _ => {
                        for (d, row) in rows.chunks_exact_mut(wp).zip(src.chunks_exact(g.w)) {
                            d[p1..p1 + g.w].copy_from_slice(row);
                        }
                    }
                }
            }
        });
        return Some(xp);
    }
    for_each_row_mut(&mut xp, hp * wp, |ip, dst| {
        let src = &x[ip * g.h * g.w..(ip + 1) * g.h * g.w];
        let (top, rest) = dst.split_at_mut(p0 * wp);
        let (rows, bottom) = rest.split_at_mut(g.h * wp);
        top.fill(0.0);
        bottom.fill(0.0);
        for (d, row) in rows.chunks_exact_mut(wp).zip(src.chunks_exact(g.w)) {
            let (left, d) = d.split_at_mut(p1);
            let (mid, right) = d.split_at_mut(g.w);
            left.fill(0.0);
            mid.copy_from_slice(row);
            right.fill(0.0);
        }
    });
    Some(xp)
}

/// The greatest common divisor of `a` and `b` (`b` when `a` is 0).
fn gcd(a: usize, b: usize) -> usize {
    if a == 0 {
        b
    } else {
        gcd(b % a, a)
    }
}

/// Most narrow padded planes [`padded`] zeroes in one fill (a power of
/// two, so that it divides a power-of-two channel count).
const PLANES_PER_FILL: usize = 64;

/// Padded rows at most this wide (padding included) are written by
/// [`padded`]'s narrow-plane path: groups of planes zeroed in one fill,
/// then the rows copied.
const SMALL_PADDED_WIDTH: usize = 24;

/// Copies the rows of `src` (`W` values each) into the padded `rows`
/// (`wp` values each, the copy starting at column `p1`): one move of `W`
/// values per row, no library call.
///
/// # Panics
/// When a row of `rows` is shorter than `p1 + W`.
#[inline(always)]
fn copy_rows<const W: usize>(rows: &mut [f32], src: &[f32], wp: usize, p1: usize) {
    for (d, s) in rows.chunks_exact_mut(wp).zip(src.chunks_exact(W)) {
        let d: &mut [f32; W] = (&mut d[p1..p1 + W]).try_into().expect("padded: row width");
        let s: &[f32; W] = s.try_into().expect("padded: row width");
        *d = *s;
    }
}
