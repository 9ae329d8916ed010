//! 3-d pooling kernels over the last three dimensions of a stack of
//! `d x h x w` volumes: the window of each output is a box
//! `axes[0][oz] x axes[1][oy] x axes[2][ox]` of input positions (clipped to
//! the input, so padding never appears in a window), stepped by the
//! dilation. Max pooling returns each window's maximum position
//! ([`max_positions`]; the values and gradients then move with
//! `pool::gather` / `pool::scatter_add`), average pooling sums a window and
//! divides by a per-output divisor ([`avg_forward`], adjoint
//! [`avg_backward`]). Volumes are processed in parallel, each by one call in
//! a fixed order, so results do not depend on the thread count.

use super::buffers::{build_planes, fill_init};
use super::memory::Storage;
use super::pool::PoolWindows;
use crate::base::Float;

/// The windows of a 3-d pooling of `size` volumes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Windows3 {
    /// Input size (depth, height, width).
    pub size: [usize; 3],
    /// Half-open input ranges of each output index, per axis; each range
    /// starts at a window position.
    pub axes: [Vec<(usize, usize)>; 3],
    /// The step between window positions per axis (1 except for a dilated
    /// max pooling).
    pub dilation: [usize; 3],
    /// The count-include-pad extent of each output index per axis: the
    /// window's part inside the padded input (empty for adaptive windows).
    pub padded: [Vec<usize>; 3],
}

impl Windows3 {
    /// Sliding windows with PyTorch's output sizes (floor or ceil mode, the
    /// last window starting inside the input or its left padding); `None`
    /// when the padded input is smaller than the dilated kernel or a size is
    /// zero. Each axis is built by the 2-d pooling's axis rule.
    pub(crate) fn sliding(
        size: [usize; 3],
        kernel: [usize; 3],
        stride: [usize; 3],
        padding: [usize; 3],
        dilation: [usize; 3],
        ceil_mode: bool,
    ) -> Option<Self> {
        let axis = |a: usize| {
            let win = PoolWindows::sliding_with(
                [size[a], 1],
                [kernel[a], 1],
                [stride[a], 1],
                [padding[a], 0],
                [dilation[a], 1],
                ceil_mode,
            )?;
            let padded = win.padded_counts([kernel[a], 1], [stride[a], 1], [padding[a], 0]);
            Some((win.rows, padded))
        };
        let (d, pd) = axis(0)?;
        let (h, ph) = axis(1)?;
        let (w, pw) = axis(2)?;
        Some(Windows3 {
            size,
            axes: [d, h, w],
            dilation,
            padded: [pd, ph, pw],
        })
    }

    /// PyTorch's adaptive bins `[floor(i len / out), ceil((i + 1) len / out))`
    /// per axis.
    pub(crate) fn adaptive(size: [usize; 3], out: [usize; 3]) -> Self {
        let axis = |a: usize| {
            (0..out[a])
                .map(|i| ((i * size[a]) / out[a], ((i + 1) * size[a]).div_ceil(out[a])))
                .collect()
        };
        Windows3 {
            size,
            axes: [axis(0), axis(1), axis(2)],
            dilation: [1; 3],
            padded: [vec![], vec![], vec![]],
        }
    }

    /// Output size (depth, height, width).
    pub(crate) fn out(&self) -> [usize; 3] {
        [self.axes[0].len(), self.axes[1].len(), self.axes[2].len()]
    }

    fn in_vol(&self) -> usize {
        self.size.iter().product()
    }

    fn out_vol(&self) -> usize {
        self.out().iter().product()
    }

    /// The number of input elements of every (undilated) window, in output
    /// order.
    pub(crate) fn counts(&self) -> Vec<usize> {
        self.product_over(|a, i| self.axes[a][i].1 - self.axes[a][i].0)
    }

    /// The count-include-pad divisors of sliding windows, in output order.
    pub(crate) fn padded_counts(&self) -> Vec<usize> {
        self.product_over(|a, i| self.padded[a][i])
    }

    fn product_over(&self, f: impl Fn(usize, usize) -> usize) -> Vec<usize> {
        let [od, oh, ow] = self.out();
        let mut v = Vec::with_capacity(od * oh * ow);
        for z in 0..od {
            for y in 0..oh {
                for x in 0..ow {
                    v.push(f(0, z) * f(1, y) * f(2, x));
                }
            }
        }
        v
    }

    /// Calls `f(k, positions)` for each output `k` of a volume with the
    /// flat input positions of its window, in row-major order.
    fn for_each_window(&self, mut f: impl FnMut(usize, &mut dyn Iterator<Item = usize>)) {
        let [_, h, w] = self.size;
        let [dz, dy, dx] = self.dilation;
        let mut k = 0;
        for &(z0, z1) in &self.axes[0] {
            for &(y0, y1) in &self.axes[1] {
                for &(x0, x1) in &self.axes[2] {
                    let mut it = (z0..z1).step_by(dz).flat_map(move |z| {
                        (y0..y1).step_by(dy).flat_map(move |y| {
                            (x0..x1).step_by(dx).map(move |x| (z * h + y) * w + x)
                        })
                    });
                    f(k, &mut it);
                    k += 1;
                }
            }
        }
    }
}

/// For each output of each volume of `x`, the position inside the volume
/// of its window's maximum (the first one on ties; the first NaN wins; an
/// empty window yields position 0), in a pooled buffer.
pub(crate) fn max_positions<E: Float>(win: &Windows3, x: &[E]) -> Storage<usize> {
    let (iv, ov) = (win.in_vol(), win.out_vol());
    let vols = x.len() / iv.max(1);
    build_planes(vols, ov, iv.max(ov), |p, out| {
        let vol = &x[p * iv..(p + 1) * iv];
        win.for_each_window(|k, pos| {
            let mut best: Option<(usize, E)> = None;
            for i in pos {
                let v = vol[i];
                best = match best {
                    Some((_, bv)) if !(v > bv || (v.is_nan() && !bv.is_nan())) => best,
                    _ => Some((i, v)),
                };
            }
            out[k].write(best.map_or(0, |(i, _)| i));
        });
    })
}

/// Average pooling: each output is its window's sum divided by `div[k]`
/// (one divisor per output position of a volume), in a pooled buffer.
pub(crate) fn avg_forward<E: Float>(win: &Windows3, x: &[E], div: &[E]) -> Storage<E> {
    let (iv, ov) = (win.in_vol(), win.out_vol());
    let vols = x.len() / iv.max(1);
    build_planes(vols, ov, iv.max(ov), |p, out| {
        let vol = &x[p * iv..(p + 1) * iv];
        win.for_each_window(|k, pos| {
            let s = pos.fold(E::zero(), |s, i| s + vol[i]);
            out[k].write(s / div[k]);
        });
    })
}

/// The adjoint of [`avg_forward`]: every input in output `k`'s window
/// receives `g[k] / div[k]`, outputs in increasing order; in a pooled
/// buffer.
pub(crate) fn avg_backward<E: Float>(win: &Windows3, g: &[E], div: &[E]) -> Storage<E> {
    let (iv, ov) = (win.in_vol(), win.out_vol());
    let vols = g.len() / ov.max(1);
    build_planes(vols, iv, iv.max(ov), |p, vol| {
        let vol = fill_init(vol, E::zero());
        let gp = &g[p * ov..(p + 1) * ov];
        win.for_each_window(|k, pos| {
            let v = gp[k] / div[k];
            for i in pos {
                vol[i] += v;
            }
        });
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sliding_windows_follow_pytorch_sizes() {
        // Depth 5, kernel 2, stride 2, ceil mode: 3 windows, the last [4, 5).
        let w =
            Windows3::sliding([5, 4, 4], [2, 2, 2], [2, 2, 2], [0, 1, 0], [1, 1, 1], true).unwrap();
        assert_eq!(w.out(), [3, 3, 2]);
        assert_eq!(w.axes[0][2], (4, 5));
        assert_eq!(w.padded[0], vec![2, 2, 1]);
    }

    #[test]
    fn max_and_avg_of_one_box() {
        let w = Windows3::sliding([2, 2, 2], [2, 2, 2], [2, 2, 2], [0; 3], [1; 3], false).unwrap();
        let x: Vec<f64> = vec![1.0, 5.0, 2.0, 5.0, 0.0, -1.0, 3.0, 4.0];
        assert_eq!(&max_positions(&w, &x)[..], &[1]);
        assert_eq!(&avg_forward(&w, &x, &[8.0])[..], &[19.0 / 8.0]);
        assert_eq!(&avg_backward(&w, &[8.0], &[8.0])[..], &[1.0; 8]);
    }
}
