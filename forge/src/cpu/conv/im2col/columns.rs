//! The column transforms of [`ConvGeom`]: `im2col` (one image's group, or
//! a chunk of images, unfolded into a column matrix, with the row copies
//! for each tap: general, and one shifted copy of the plane for "same"
//! convolutions), `col2im` (its adjoint, summed back into the planes), and
//! the channel-major gathering of output gradients for the batched paths.

use super::kernels;
use crate::base::Float;
use crate::cpu::buffers::{for_each_row_mut, for_each_row_work, refill, uninit_mut};
use crate::cpu::conv::geom::ConvGeom;
use crate::cpu::memory::Storage;
use std::mem::MaybeUninit;

impl ConvGeom {
    /// The input column of kernel tap `j` at output column `ox`, if inside.
    #[inline]
    pub(super) fn src(
        pos: usize,
        tap: usize,
        s: usize,
        p: usize,
        d: usize,
        len: usize,
    ) -> Option<usize> {
        (pos * s + tap * d).checked_sub(p).filter(|&v| v < len)
    }

    /// Unfolds one group of one image (`cg` channels of `h x w`) into the
    /// column matrix `[cg * kh * kw, oh * ow]`; padding reads as zero.
    pub(super) fn im2col<E: Float>(&self, x: &[E], cols: &mut [E]) {
        let (plane, taps, l) = (self.h * self.w, self.kh * self.kw, self.l());
        // SAFETY: `im2col_row` writes values only (`MaybeUninit::write`).
        let cols = unsafe { uninit_mut(cols) };
        let (inside, fast) = (self.inside_table(), kernels::fast::<E>());
        for ci in 0..self.cg() {
            let x = &x[ci * plane..(ci + 1) * plane];
            for t in 0..taps {
                let (range, row) = (inside[t % self.kw], &mut cols[(ci * taps + t) * l..][..l]);
                self.im2col_row(x, t, range, row, fast);
            }
        }
    }

    /// Writes kernel tap `t = i * kw + j` of one `h x w` plane as the
    /// `oh * ow` values it meets (zero where it falls on the padding):
    /// `row[oy * ow + ox] = plane[oy * s0 - p0 + i * d0, ox * s1 - p1 + j * d1]`.
    /// Every element of `row` is written.
    /// `inside` is [`inside_cols`](Self::inside_cols) of the tap's column;
    /// `fast` is [`kernels::fast`]'s answer for `E`.
    pub(super) fn im2col_row<E: Float>(
        &self,
        plane: &[E],
        t: usize,
        inside: (usize, usize),
        row: &mut [MaybeUninit<E>],
        fast: bool,
    ) {
        if self.rows_are_contiguous() {
            self.im2col_row_shifted(plane, t, inside, row);
        } else {
            self.im2col_row_general(plane, t, inside, row, fast);
        }
    }

    /// Whether [`im2col_row_shifted`](Self::im2col_row_shifted) applies:
    /// stride and dilation 1 and the output as wide as the input (3x3
    /// padding 1, the "same" convolutions of ResNet), so that a tap's
    /// output row `oy * ow + ox` reads input `oy * w + ox` plus a fixed
    /// shift.
    pub(super) fn rows_are_contiguous(&self) -> bool {
        self.stride == [1, 1] && self.dilation == [1, 1] && self.ow == self.w
    }

    /// [`im2col_row`](Self::im2col_row) when
    /// [`rows_are_contiguous`](Self::rows_are_contiguous): the output rows
    /// whose input row is inside are one shifted copy of the plane, then
    /// the columns on the padding are zeroed; the rest is zero. The same
    /// values as [`im2col_row_general`](Self::im2col_row_general), which
    /// copies each output row's inside run on its own: on the 8x8 and 4x4
    /// planes of ResNet-18 at 32x32 those runs are 8 or 4 values, and the
    /// per-run work was most of im2col's time (7% of a training step).
    pub(super) fn im2col_row_shifted<E: Float>(
        &self,
        plane: &[E],
        t: usize,
        (ox_lo, ox_hi): (usize, usize),
        row: &mut [MaybeUninit<E>],
    ) {
        let (i, j, w) = (t / self.kw, t % self.kw, self.w);
        let (oh, ow, h) = (self.oh, self.ow, self.h);
        let [p0, p1] = self.padding;
        let zero = |d: &mut [MaybeUninit<E>]| d.iter_mut().for_each(|v| _ = v.write(E::zero()));
        let row = &mut row[..oh * ow];
        // Output rows `oy_lo..oy_hi` read input rows `oy + i - p0` inside.
        let oy_lo = p0.saturating_sub(i).min(oh);
        let oy_hi = (h + p0).saturating_sub(i).clamp(oy_lo, oh);
        zero(&mut row[..oy_lo * ow]);
        zero(&mut row[oy_hi * ow..]);
        if oy_lo == oy_hi {
            return;
        }
        // Output element `q` reads input `q + shift`, `shift = (i - p0) w +
        // (j - p1)`; copy the `q` whose source is inside the plane (those
        // left out are on the padding columns, zeroed below).
        let shift = (i * w + j) as isize - (p0 * w + p1) as isize;
        let q_lo = (oy_lo * ow).max((-shift).max(0) as usize);
        let q_hi = (oy_hi * ow).min((plane.len() as isize - shift).max(0) as usize);
        if q_lo < q_hi {
            let src = &plane[(q_lo as isize + shift) as usize..][..q_hi - q_lo];
            for (d, &v) in row[q_lo..q_hi].iter_mut().zip(src) {
                d.write(v);
            }
        }
        let (lo, hi) = (ox_lo.min(ow), ox_hi.clamp(ox_lo.min(ow), ow));
        for r in row[oy_lo * ow..oy_hi * ow].chunks_exact_mut(ow) {
            zero(&mut r[..lo]);
            zero(&mut r[hi..]);
        }
    }

    /// [`im2col_row`](Self::im2col_row) for any geometry: the output rows
    /// whose input row is inside ([`inside_rows`](Self::inside_rows)) copy
    /// their inside run (one [`kernels::copy`] over all of them at stride 1),
    /// the rest is zero.
    pub(super) fn im2col_row_general<E: Float>(
        &self,
        plane: &[E],
        t: usize,
        (ox_lo, ox_hi): (usize, usize),
        row: &mut [MaybeUninit<E>],
        fast: bool,
    ) {
        let (i, j, ow, oh) = (t / self.kw, t % self.kw, self.ow, self.oh);
        let [s0, s1] = self.stride;
        let [p0, p1] = self.padding;
        let [d0, d1] = self.dilation;
        let zero = |d: &mut [MaybeUninit<E>]| d.iter_mut().for_each(|v| _ = v.write(E::zero()));
        let row = &mut row[..oh * ow];
        let (oy_lo, oy_hi) = self.inside_rows(i);
        zero(&mut row[..oy_lo * ow]);
        zero(&mut row[oy_hi * ow..]);
        let (lo, hi) = (ox_lo.min(ow), ox_hi.clamp(ox_lo.min(ow), ow));
        for dst in row[oy_lo * ow..oy_hi * ow].chunks_exact_mut(ow) {
            zero(&mut dst[..lo]);
            zero(&mut dst[hi..]);
        }
        if lo >= hi || oy_lo >= oy_hi {
            return;
        }
        // Output row `oy` reads input row `y0 + (oy - oy_lo) s0`, its
        // inside run from input column `x0`.
        let y0 = oy_lo * s0 + i * d0 - p0;
        let x0 = lo * s1 + j * d1 - p1;
        let src = &plane[y0 * self.w + x0..];
        let dst = &mut row[oy_lo * ow + lo..];
        if s1 == 1 {
            kernels::copy(src, s0 * self.w, dst, ow, (hi - lo, oy_hi - oy_lo), fast);
        } else {
            for r in 0..oy_hi - oy_lo {
                let src = &src[r * s0 * self.w..];
                for (k, d) in dst[r * ow..][..hi - lo].iter_mut().enumerate() {
                    d.write(src[k * s1]);
                }
            }
        }
    }

    /// The output rows `oy_lo..oy_hi` whose input row for kernel row `i`
    /// is inside the image (a run: stride and dilation are positive);
    /// empty when `oy_lo >= oy_hi`.
    pub(super) fn inside_rows(&self, i: usize) -> (usize, usize) {
        let [s0, p0, d0] = [self.stride[0], self.padding[0], self.dilation[0]];
        let inside = |oy: usize| Self::src(oy, i, s0, p0, d0, self.h).is_some();
        let oy_lo = (0..self.oh).find(|&oy| inside(oy)).unwrap_or(self.oh);
        let oy_hi = (oy_lo..self.oh).find(|&oy| !inside(oy)).unwrap_or(self.oh);
        (oy_lo, oy_hi)
    }

    /// The output columns `ox_lo..ox_hi` whose input column for kernel
    /// column `j` is inside the image (a run: stride and dilation are
    /// positive); empty when `ox_lo >= ox_hi`.
    pub(super) fn inside_cols(&self, j: usize) -> (usize, usize) {
        if self.ow == 0 {
            return (0, 0);
        }
        let [s1, p1, d1] = [self.stride[1], self.padding[1], self.dilation[1]];
        let inside = |ox: usize| Self::src(ox, j, s1, p1, d1, self.w).is_some();
        let ox_lo = (0..self.ow).find(|&ox| inside(ox)).unwrap_or(self.ow);
        let ox_hi = (ox_lo..self.ow).find(|&ox| !inside(ox)).unwrap_or(self.ow);
        (ox_lo, ox_hi)
    }

    /// [`inside_cols`](Self::inside_cols) for every kernel column.
    pub(super) fn inside_table(&self) -> Vec<(usize, usize)> {
        (0..self.kw).map(|j| self.inside_cols(j)).collect()
    }

    /// The adjoint of [`im2col`](Self::im2col): adds every column entry
    /// back onto the input position it was read from.
    pub(super) fn col2im<E: Float>(&self, cols: &[E], x: &mut [E]) {
        let (plane, taps, l) = (self.h * self.w, self.kh * self.kw, self.l());
        let (inside, fast) = (self.inside_table(), kernels::fast::<E>());
        for ci in 0..self.cg() {
            let x = &mut x[ci * plane..(ci + 1) * plane];
            self.col2im_channel(&cols[ci * taps * l..], l, 0, &inside, x, fast);
        }
    }

    /// The adjoint of [`im2col_row`](Self::im2col_row) over every tap of
    /// one channel: adds rows `rows[t * ld + off..][..oh * ow]` back onto
    /// one `h x w` plane, taps in increasing order (`inside` is
    /// [`inside_table`](Self::inside_table)). At stride 1 for `f32` with
    /// AVX-512 one pass over the plane ([`kernels::col2im_plane`]), each
    /// value getting the same terms in the same order (`fast` is
    /// [`kernels::fast`]'s answer for `E`).
    pub(super) fn col2im_channel<E: Float>(
        &self,
        rows: &[E],
        ld: usize,
        off: usize,
        inside: &[(usize, usize)],
        plane: &mut [E],
        fast: bool,
    ) {
        let (l, ow) = (self.l(), self.ow);
        let [s0, s1] = self.stride;
        let [p0, p1] = self.padding;
        let [d0, d1] = self.dilation;
        if self.stride == [1, 1] {
            let pg = kernels::PlaneGeom {
                kh: self.kh,
                kw: self.kw,
                h: self.h,
                w: self.w,
                oh: self.oh,
                ow,
                padding: self.padding,
                dilation: self.dilation,
                inside,
            };
            if kernels::col2im_plane(&pg, rows, ld, off, plane, fast) {
                return;
            }
        }
        for i in 0..self.kh {
            for (j, &(ox_lo, ox_hi)) in inside.iter().enumerate() {
                let row = &rows[(i * self.kw + j) * ld + off..][..l];
                if ox_lo >= ox_hi {
                    continue;
                }
                for oy in 0..self.oh {
                    let Some(y) = Self::src(oy, i, s0, p0, d0, self.h) else {
                        continue;
                    };
                    let src = &row[oy * ow + ox_lo..oy * ow + ox_hi];
                    let dst = &mut plane[y * self.w..(y + 1) * self.w];
                    let x0 = ox_lo * s1 + j * d1 - p1;
                    if s1 == 1 {
                        for (d, &v) in dst[x0..x0 + src.len()].iter_mut().zip(src) {
                            *d += v;
                        }
                    } else {
                        for (k, &v) in src.iter().enumerate() {
                            dst[x0 + k * s1] += v;
                        }
                    }
                }
            }
        }
    }

    /// Images per chunk of the batched (groups = 1) paths: as many as keep
    /// the column buffer within `budget` elements, at least one. It
    /// depends on the geometry only, never on the thread count.
    pub(super) fn batch_chunk(&self, budget: usize) -> usize {
        (budget / (self.k_len() * self.l()).max(1)).clamp(1, self.n.max(1))
    }

    /// Unfolds images `b0..b0 + nb` into `cols [c * kh * kw, nb * oh * ow]`
    /// (image `bi`'s positions at columns `bi * l..`), writing every
    /// element, in parallel over the rows (one per channel and tap).
    pub(super) fn im2col_batch<E: Float>(
        &self,
        x: &[E],
        b0: usize,
        nb: usize,
        cols: &mut [MaybeUninit<E>],
    ) {
        let (plane, taps, l) = (self.h * self.w, self.kh * self.kw, self.l());
        let ld = nb * l;
        let (inside, fast) = (self.inside_table(), kernels::fast::<E>());
        // Work per row: its elements, plus about 8 elements' worth per run
        // copied (one run per image on the shifted path, one per output
        // row otherwise).
        let runs = if self.rows_are_contiguous() {
            nb
        } else {
            nb * self.oh
        };
        for_each_row_work(
            &mut cols[..self.c * taps * ld],
            ld,
            ld + 8 * runs,
            |r, row| {
                let (ci, t) = (r / taps, r % taps);
                let range = inside[t % self.kw];
                for bi in 0..nb {
                    let at = ((b0 + bi) * self.c + ci) * plane;
                    let (src, dst) = (&x[at..at + plane], &mut row[bi * l..(bi + 1) * l]);
                    self.im2col_row(src, t, range, dst, fast);
                }
            },
        );
    }

    /// `gy [n, o, l]` images `b0..b0 + nb` as `[o, nb * l]` (channel-major),
    /// writing every element.
    pub(super) fn gather_channels<E: Float>(
        &self,
        gy: &[E],
        b0: usize,
        nb: usize,
        out: &mut [MaybeUninit<E>],
    ) {
        let (o, l) = (self.o, self.l());
        let ld = nb * l;
        for_each_row_mut(&mut out[..o * ld], ld, |oc, row| {
            for bi in 0..nb {
                let at = ((b0 + bi) * o + oc) * l;
                for (d, &v) in row[bi * l..(bi + 1) * l].iter_mut().zip(&gy[at..at + l]) {
                    d.write(v);
                }
            }
        });
    }

    /// Images `b0..b0 + nb` of `gy [n, o, l]` as `[o, nb * l]`: the image's
    /// own slice for one image, else gathered into `scratch`.
    pub(super) fn channel_major<'a, E: Float>(
        &self,
        gy: &'a [E],
        b0: usize,
        nb: usize,
        scratch: &'a mut Storage<E>,
    ) -> &'a [E] {
        let ol = self.o * self.l();
        if nb == 1 {
            return &gy[b0 * ol..(b0 + 1) * ol];
        }
        refill(scratch, nb * ol, |c| self.gather_channels(gy, b0, nb, c));
        &scratch[..nb * ol]
    }
}
