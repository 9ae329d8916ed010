//! 3-d convolution kernels by vol2col / col2vol and gemm: the forward
//! convolution, its input gradient (which is also the transposed
//! convolution) and its weight gradient, the same three products as the 2-d
//! im2col path (`conv/im2col.rs`) with one more spatial axis.
//!
//! Work is split over the batch: each image is computed by one call (its
//! column matrix and gemm on the calling worker), and the weight gradient
//! sums per-chunk partial results in chunk order over chunks of a fixed
//! number of images, so results do not depend on the thread count.

use crate::base::Float;
use crate::cpu::buffers::for_each_chunk_mut;
use crate::cpu::gemm::{gemm, Mat};
use crate::cpu::memory::Storage;

/// Images per chunk of the weight-gradient reduction: fixed (never derived
/// from the thread count) so the summation order is always the same.
const WEIGHT_GRAD_CHUNK: usize = 4;

/// The geometry of a 3-d convolution
/// `x [n, c, d, h, w] (*) weight [o, c / groups, kd, kh, kw] -> y [n, o, od, oh, ow]`,
/// where input position `oz * stride - padding + i * dilation` meets kernel
/// position `i` along each axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Conv3dGeom {
    /// Batch size.
    pub n: usize,
    /// Input channels.
    pub c: usize,
    /// Input size (depth, height, width).
    pub size: [usize; 3],
    /// Output channels.
    pub o: usize,
    /// Kernel size (depth, height, width).
    pub kernel: [usize; 3],
    /// Output size (depth, height, width).
    pub out: [usize; 3],
    /// Stride per axis.
    pub stride: [usize; 3],
    /// Zero padding on each side, per axis.
    pub padding: [usize; 3],
    /// Kernel dilation per axis.
    pub dilation: [usize; 3],
    /// Channel groups.
    pub groups: usize,
}

/// `floor((len + 2 p - d (k - 1) - 1) / s) + 1`, or `None` when the padded
/// input is smaller than the dilated kernel (or a size is zero).
fn out_len(len: usize, k: usize, s: usize, p: usize, d: usize) -> Option<usize> {
    if k == 0 || s == 0 || d == 0 || len == 0 {
        return None;
    }
    (len + 2 * p)
        .checked_sub(d * (k - 1) + 1)
        .map(|v| v / s + 1)
}

impl Conv3dGeom {
    /// The geometry of a convolution of an input of shape `x` with a weight
    /// of shape `wt` (both 5-d); `None` when the output would be empty.
    pub(crate) fn new(
        x: [usize; 5],
        wt: [usize; 5],
        stride: [usize; 3],
        padding: [usize; 3],
        dilation: [usize; 3],
        groups: usize,
    ) -> Option<Self> {
        let mut out = [0; 3];
        for a in 0..3 {
            out[a] = out_len(x[2 + a], wt[2 + a], stride[a], padding[a], dilation[a])?;
        }
        Some(Conv3dGeom {
            n: x[0],
            c: x[1],
            size: [x[2], x[3], x[4]],
            o: wt[0],
            kernel: [wt[2], wt[3], wt[4]],
            out,
            stride,
            padding,
            dilation,
            groups,
        })
    }

    fn cg(&self) -> usize {
        self.c / self.groups
    }

    fn og(&self) -> usize {
        self.o / self.groups
    }

    /// Input elements per channel: `d * h * w`.
    pub(crate) fn vol(&self) -> usize {
        self.size.iter().product()
    }

    /// Output positions per channel: `od * oh * ow`.
    pub(crate) fn l(&self) -> usize {
        self.out.iter().product()
    }

    /// Kernel taps per channel: `kd * kh * kw`.
    fn taps(&self) -> usize {
        self.kernel.iter().product()
    }

    /// Rows of one group's column matrix: `c / groups * kd * kh * kw`.
    pub(crate) fn k_len(&self) -> usize {
        self.cg() * self.taps()
    }

    /// For kernel offset `k` along axis `a`, the input index of every output
    /// index along that axis (`None` in the padding).
    fn axis_map(&self, a: usize, k: usize) -> Vec<Option<usize>> {
        (0..self.out[a])
            .map(|o| {
                let i =
                    (o * self.stride[a] + k * self.dilation[a]) as isize - self.padding[a] as isize;
                (i >= 0 && (i as usize) < self.size[a]).then_some(i as usize)
            })
            .collect()
    }

    /// Calls `f(row, column, input offset)` for every column-matrix entry of
    /// one group that reads the input (`row` over `cg * taps`, `column` over
    /// the output positions, the offset inside the group's channels).
    fn for_each_tap(&self, mut f: impl FnMut(usize, usize, usize)) {
        let [kd, kh, kw] = self.kernel;
        let [_, h, w] = self.size;
        let [_, oh, ow] = self.out;
        let maps: [Vec<Vec<Option<usize>>>; 3] = [
            (0..kd).map(|k| self.axis_map(0, k)).collect(),
            (0..kh).map(|k| self.axis_map(1, k)).collect(),
            (0..kw).map(|k| self.axis_map(2, k)).collect(),
        ];
        for ci in 0..self.cg() {
            for (z, mz) in maps[0].iter().enumerate() {
                for (y, my) in maps[1].iter().enumerate() {
                    for (x, mx) in maps[2].iter().enumerate() {
                        let row = ((ci * kd + z) * kh + y) * kw + x;
                        for (oz, iz) in mz.iter().enumerate() {
                            let Some(iz) = iz else { continue };
                            for (oy, iy) in my.iter().enumerate() {
                                let Some(iy) = iy else { continue };
                                let base = ((ci * self.size[0] + iz) * h + iy) * w;
                                let col = (oz * oh + oy) * ow;
                                for (ox, ix) in mx.iter().enumerate() {
                                    if let Some(ix) = ix {
                                        f(row, col + ox, base + ix);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// vol2col: one group's channels of one image (`x_grp`, starting at the
    /// group's first channel) into `cols [k_len, l]` (padding as zeros).
    fn vol2col<E: Float>(&self, x_grp: &[E], cols: &mut [E]) {
        let l = self.l();
        cols.fill(E::zero());
        self.for_each_tap(|r, c, i| cols[r * l + c] = x_grp[i]);
    }

    /// col2vol, the adjoint of [`vol2col`](Self::vol2col): adds each column
    /// entry onto the input position it was read from, in a fixed order.
    fn col2vol<E: Float>(&self, cols: &[E], gx_grp: &mut [E]) {
        let l = self.l();
        self.for_each_tap(|r, c, i| gx_grp[i] += cols[r * l + c]);
    }
}

/// The forward convolution: `y [n, o, od, oh, ow]` from `x [n, c, d, h, w]`,
/// `weight [o, c / groups, kd, kh, kw]` and an optional `bias [o]`, in a
/// pooled buffer; images in parallel.
///
/// # Panics
/// When a buffer's length does not match the geometry.
pub(crate) fn conv3d_forward<E: Float>(
    g: &Conv3dGeom,
    x: &[E],
    weight: &[E],
    bias: Option<&[E]>,
) -> Storage<E> {
    let (k_len, l, og, cg, vol) = (g.k_len(), g.l(), g.og(), g.cg(), g.vol());
    assert_eq!(x.len(), g.n * g.c * vol, "conv3d_forward: input");
    assert_eq!(weight.len(), g.o * k_len, "conv3d_forward: weight");
    let mut y = Storage::filled(g.n * g.o * l, E::zero());
    for_each_chunk_mut(&mut y, g.o * l, |b, y_img| {
        if let Some(bias) = bias {
            for (o, row) in y_img.chunks_mut(l).enumerate() {
                row.fill(bias[o]);
            }
        }
        let x_img = &x[b * g.c * vol..(b + 1) * g.c * vol];
        let mut cols = Storage::filled(k_len * l, E::zero());
        for grp in 0..g.groups {
            g.vol2col(&x_img[grp * cg * vol..(grp + 1) * cg * vol], &mut cols);
            gemm(
                og,
                k_len,
                l,
                Mat::row_major(&weight[grp * og * k_len..(grp + 1) * og * k_len], k_len),
                Mat::row_major(&cols, l),
                E::one(),
                &mut y_img[grp * og * l..(grp + 1) * og * l],
            );
        }
    });
    y
}

/// The gradient of the convolution with respect to its input (the
/// transposed convolution): `x_grad [n, c, d, h, w]` from
/// `y_grad [n, o, od, oh, ow]` and the weight, plus an optional
/// per-input-channel `bias [c]`; images in parallel.
///
/// # Panics
/// When a buffer's length does not match the geometry.
pub(crate) fn conv3d_backward_input<E: Float>(
    g: &Conv3dGeom,
    y_grad: &[E],
    weight: &[E],
    bias: Option<&[E]>,
) -> Storage<E> {
    let (k_len, l, og, cg, vol) = (g.k_len(), g.l(), g.og(), g.cg(), g.vol());
    assert_eq!(
        y_grad.len(),
        g.n * g.o * l,
        "conv3d_backward_input: gradient"
    );
    assert_eq!(weight.len(), g.o * k_len, "conv3d_backward_input: weight");
    let mut gx = Storage::filled(g.n * g.c * vol, E::zero());
    for_each_chunk_mut(&mut gx, g.c * vol, |b, gx_img| {
        if let Some(bias) = bias {
            for (c, p) in gx_img.chunks_mut(vol).enumerate() {
                p.fill(bias[c]);
            }
        }
        let gy_img = &y_grad[b * g.o * l..(b + 1) * g.o * l];
        let mut cols = Storage::filled(k_len * l, E::zero());
        for grp in 0..g.groups {
            gemm(
                k_len,
                og,
                l,
                Mat::transposed(&weight[grp * og * k_len..(grp + 1) * og * k_len], k_len),
                Mat::row_major(&gy_img[grp * og * l..(grp + 1) * og * l], l),
                E::zero(),
                &mut cols,
            );
            g.col2vol(&cols, &mut gx_img[grp * cg * vol..(grp + 1) * cg * vol]);
        }
    });
    gx
}

/// The gradient of the convolution with respect to its weight:
/// `weight_grad [o, c / groups, kd, kh, kw]` from `x` and `y_grad`, partial
/// sums over fixed chunks of images in parallel, added in chunk order.
///
/// # Panics
/// When a buffer's length does not match the geometry.
pub(crate) fn conv3d_backward_weight<E: Float>(
    g: &Conv3dGeom,
    x: &[E],
    y_grad: &[E],
) -> Storage<E> {
    let (k_len, l, og, cg, vol) = (g.k_len(), g.l(), g.og(), g.cg(), g.vol());
    assert_eq!(x.len(), g.n * g.c * vol, "conv3d_backward_weight: input");
    assert_eq!(
        y_grad.len(),
        g.n * g.o * l,
        "conv3d_backward_weight: gradient"
    );
    let wlen = g.o * k_len;
    let n_chunks = g.n.div_ceil(WEIGHT_GRAD_CHUNK);
    let mut partials = Storage::filled(n_chunks * wlen, E::zero());
    for_each_chunk_mut(&mut partials, wlen, |ch, part| {
        let mut cols = Storage::filled(k_len * l, E::zero());
        for b in ch * WEIGHT_GRAD_CHUNK..((ch + 1) * WEIGHT_GRAD_CHUNK).min(g.n) {
            let x_img = &x[b * g.c * vol..(b + 1) * g.c * vol];
            let gy_img = &y_grad[b * g.o * l..(b + 1) * g.o * l];
            for grp in 0..g.groups {
                g.vol2col(&x_img[grp * cg * vol..(grp + 1) * cg * vol], &mut cols);
                gemm(
                    og,
                    l,
                    k_len,
                    Mat::row_major(&gy_img[grp * og * l..(grp + 1) * og * l], l),
                    Mat::transposed(&cols, l),
                    E::one(),
                    &mut part[grp * og * k_len..(grp + 1) * og * k_len],
                );
            }
        }
    });
    let mut gw = Storage::filled(wlen, E::zero());
    for part in partials.chunks(wlen) {
        for (a, &b) in gw.iter_mut().zip(part) {
            *a += b;
        }
    }
    gw
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The convolution by its definition, one output at a time.
    fn naive(g: &Conv3dGeom, x: &[f64], w: &[f64]) -> Vec<f64> {
        let [d, h, wd] = g.size;
        let [_, oh, ow] = g.out;
        let [kd, kh, kw] = g.kernel;
        let (cg, og) = (g.cg(), g.og());
        let mut y = vec![0.0; g.n * g.o * g.l()];
        for b in 0..g.n {
            for o in 0..g.o {
                let grp = o / og;
                for (p, slot) in y[(b * g.o + o) * g.l()..][..g.l()].iter_mut().enumerate() {
                    let (oz, oy, ox) = (p / (oh * ow), p / ow % oh, p % ow);
                    for ci in 0..cg {
                        for z in 0..kd {
                            for yy in 0..kh {
                                for xx in 0..kw {
                                    let at = |a: usize, o: usize, k: usize| {
                                        (o * g.stride[a] + k * g.dilation[a]) as isize
                                            - g.padding[a] as isize
                                    };
                                    let (iz, iy, ix) = (at(0, oz, z), at(1, oy, yy), at(2, ox, xx));
                                    if iz < 0 || iy < 0 || ix < 0 {
                                        continue;
                                    }
                                    let (iz, iy, ix) = (iz as usize, iy as usize, ix as usize);
                                    if iz >= d || iy >= h || ix >= wd {
                                        continue;
                                    }
                                    let c = grp * cg + ci;
                                    let xv = x[(((b * g.c + c) * d + iz) * h + iy) * wd + ix];
                                    let wv = w[(((o * cg + ci) * kd + z) * kh + yy) * kw + xx];
                                    *slot += xv * wv;
                                }
                            }
                        }
                    }
                }
            }
        }
        y
    }

    #[test]
    fn forward_matches_the_definition() {
        let g = Conv3dGeom::new(
            [2, 4, 4, 5, 3],
            [6, 2, 2, 3, 2],
            [2, 1, 1],
            [1, 0, 1],
            [1, 2, 1],
            2,
        )
        .unwrap();
        let x: Vec<f64> = (0..2 * 4 * 60)
            .map(|i| ((i * 7) % 11) as f64 - 5.0)
            .collect();
        let w: Vec<f64> = (0..6 * 2 * 12)
            .map(|i| ((i * 5) % 7) as f64 - 3.0)
            .collect();
        let y = conv3d_forward(&g, &x, &w, None);
        assert_eq!(&y[..], &naive(&g, &x, &w)[..]);
    }
}
