//! The geometry of a 2-d convolution, shared by the direct kernels
//! (`conv_small.rs`) and the im2col + gemm kernels (`im2col.rs`).

/// The geometry of a 2-d convolution
/// `x [n, c, h, w] (*) weight [o, c / groups, kh, kw] -> y [n, o, oh, ow]`,
/// where input row `oy * stride - padding + i * dilation` meets kernel row `i`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ConvGeom {
    /// Batch size.
    pub n: usize,
    /// Input channels.
    pub c: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Output channels.
    pub o: usize,
    /// Kernel height.
    pub kh: usize,
    /// Kernel width.
    pub kw: usize,
    /// Output height.
    pub oh: usize,
    /// Output width.
    pub ow: usize,
    /// Stride (rows, columns).
    pub stride: [usize; 2],
    /// Zero padding on each side (rows, columns).
    pub padding: [usize; 2],
    /// Kernel dilation (rows, columns).
    pub dilation: [usize; 2],
    /// Channel groups.
    pub groups: usize,
}

/// `floor((len + 2 p - d (k - 1) - 1) / s) + 1`, or `None` when the padded
/// input is smaller than the dilated kernel.
fn conv_out_len(len: usize, k: usize, s: usize, p: usize, d: usize) -> Option<usize> {
    (len + 2 * p)
        .checked_sub(d * (k.max(1) - 1) + 1)
        .map(|v| v / s.max(1) + 1)
}

impl ConvGeom {
    /// The geometry of a convolution of an input of shape `x` with a weight
    /// of shape `wt` (both NCHW), with the output size given by
    /// [`conv_out_len`]. `None` when the output would be empty.
    pub(crate) fn new(
        x: [usize; 4],
        wt: [usize; 4],
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        groups: usize,
    ) -> Option<Self> {
        let oh = conv_out_len(x[2], wt[2], stride[0], padding[0], dilation[0])?;
        let ow = conv_out_len(x[3], wt[3], stride[1], padding[1], dilation[1])?;
        Some(ConvGeom {
            n: x[0],
            c: x[1],
            h: x[2],
            w: x[3],
            o: wt[0],
            kh: wt[2],
            kw: wt[3],
            oh,
            ow,
            stride,
            padding,
            dilation,
            groups,
        })
    }

    pub(super) fn cg(&self) -> usize {
        self.c / self.groups
    }

    pub(super) fn og(&self) -> usize {
        self.o / self.groups
    }

    /// Rows of one group's column matrix: `c / groups * kh * kw`.
    pub(super) fn k_len(&self) -> usize {
        self.cg() * self.kh * self.kw
    }

    /// Output positions per image: `oh * ow`.
    pub(super) fn l(&self) -> usize {
        self.oh * self.ow
    }
}

/// The examples that documented these kernels while they were public.
#[cfg(test)]
mod examples {
    #[test]
    fn conv_geom() {
        use crate::cpu::conv::ConvGeom;
        let g = ConvGeom::new([1, 3, 8, 8], [4, 3, 3, 3], [1, 1], [1, 1], [1, 1], 1).unwrap();
        assert_eq!((g.oh, g.ow), (8, 8));
    }

    #[test]
    fn conv_out_len() {
        assert_eq!(super::conv_out_len(7, 3, 2, 1, 1), Some(4));
        assert_eq!(super::conv_out_len(2, 5, 1, 0, 1), None);
    }

    #[test]
    fn new() {
        use crate::cpu::conv::ConvGeom;
        let g = ConvGeom::new([2, 4, 7, 8], [6, 2, 3, 2], [2, 1], [1, 0], [1, 2], 2).unwrap();
        assert_eq!((g.oh, g.ow), (4, 6));
    }
}
