//! `F.unfold` (im2col: the sliding blocks of an image as columns) and
//! `F.fold` (col2im: columns summed back onto an image). Each is the
//! other's adjoint, so each is the other's backward rule and gradients of
//! every order work.

use crate::cpu::conv::{fold, unfold, ConvGeom};
use crate::tensor::{Device, Float, Tensor};

/// The block geometry of `F.unfold` / `F.fold` (and `nn.Unfold` /
/// `nn.Fold`): `kernel_size`, `dilation` (default 1), `padding` (zeros,
/// default 0) and `stride` (default 1), each as (rows, columns).
///
/// ```
/// use forge::ops::Unfold;
/// let u = Unfold::new([3, 3]).padding([1, 1]).stride([2, 2]);
/// assert_eq!(u.dilation, [1, 1]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unfold {
    /// The block's size.
    pub kernel_size: [usize; 2],
    /// The spacing of the block's elements.
    pub dilation: [usize; 2],
    /// Zeros added on both sides of each spatial dimension.
    pub padding: [usize; 2],
    /// The step between blocks.
    pub stride: [usize; 2],
}

impl Unfold {
    /// Blocks of `kernel_size`, dilation 1, padding 0, stride 1.
    ///
    /// ```
    /// assert_eq!(forge::ops::Unfold::new([2, 2]).stride, [1, 1]);
    /// ```
    pub fn new(kernel_size: [usize; 2]) -> Self {
        Unfold {
            kernel_size,
            dilation: [1, 1],
            padding: [0, 0],
            stride: [1, 1],
        }
    }

    /// With this dilation.
    ///
    /// ```
    /// assert_eq!(forge::ops::Unfold::new([2, 2]).dilation([2, 1]).dilation, [2, 1]);
    /// ```
    pub fn dilation(mut self, dilation: [usize; 2]) -> Self {
        self.dilation = dilation;
        self
    }

    /// With this zero padding.
    ///
    /// ```
    /// assert_eq!(forge::ops::Unfold::new([2, 2]).padding([1, 0]).padding, [1, 0]);
    /// ```
    pub fn padding(mut self, padding: [usize; 2]) -> Self {
        self.padding = padding;
        self
    }

    /// With this stride.
    ///
    /// ```
    /// assert_eq!(forge::ops::Unfold::new([2, 2]).stride([2, 3]).stride, [2, 3]);
    /// ```
    pub fn stride(mut self, stride: [usize; 2]) -> Self {
        self.stride = stride;
        self
    }

    /// The geometry for images `[n, c, h, w]`, or a panic naming `op`.
    #[track_caller]
    fn geom(&self, op: &str, n: usize, c: usize, h: usize, w: usize) -> ConvGeom {
        let [kh, kw] = self.kernel_size;
        assert!(
            kh > 0 && kw > 0 && self.dilation.iter().chain(&self.stride).all(|&v| v > 0),
            "{op}: kernel_size, dilation and stride must be positive, got {self:?}"
        );
        ConvGeom::new(
            [n, c, h, w],
            [1, c, kh, kw],
            self.stride,
            self.padding,
            self.dilation,
            1,
        )
        .unwrap_or_else(|| panic!("{op}: image {h}x{w} with {self:?} has no complete block"))
    }
}

impl<E: Float, D: Device> Tensor<E, D> {
    /// `F.unfold`: the sliding blocks of `self` (`[N, C, H, W]`, or
    /// `[C, H, W]` unbatched) as columns, `[N, C * kh * kw, L]` with `L` the
    /// number of block positions (row-major over the output grid); row
    /// `c * kh * kw + i * kw + j` holds block element `(i, j)` of channel
    /// `c`. Differentiable (its gradient is [`fold`](Self::fold)).
    ///
    /// # Panics
    /// When the rank is not 3 or 4, a size is zero, or no block fits.
    ///
    /// ```
    /// use forge::{ops::Unfold, Tensor};
    /// let x = Tensor::<f32>::from_vec((0..9).map(|v| v as f32).collect(), &[1, 1, 3, 3]);
    /// let cols = x.unfold(&Unfold::new([2, 2]));
    /// assert_eq!(cols.shape(), &[1, 4, 4]);
    /// assert_eq!(cols.to_vec()[..4], [0.0, 1.0, 3.0, 4.0]);
    /// ```
    #[track_caller]
    pub fn unfold(&self, opts: &Unfold) -> Self {
        let s = self.shape();
        let (n, c, h, w) = match *s {
            [n, c, h, w] => (n, c, h, w),
            [c, h, w] => (1, c, h, w),
            _ => panic!("unfold: needs a 3-d or 4-d input, got shape {s:?}"),
        };
        let g = opts.geom("unfold", n, c, h, w);
        let data = unfold(&g, self.as_slice());
        let rows = c * g.kh * g.kw;
        let shape: Vec<usize> = if s.len() == 4 {
            vec![n, rows, (g.oh * g.ow)]
        } else {
            vec![rows, (g.oh * g.ow)]
        };
        let opts = *opts;
        Tensor::from_parts(data, shape.into(), None).record(
            "unfold",
            vec![self.clone()],
            move |ctx| {
                let x = &ctx.inputs[0];
                let r = x.rank();
                vec![Some(
                    ctx.grad.fold([x.shape()[r - 2], x.shape()[r - 1]], &opts),
                )]
            },
        )
    }

    /// `F.fold`: columns `[N, C * kh * kw, L]` (or `[C * kh * kw, L]`)
    /// summed back onto images of `output_size` (`[N, C, H, W]`), where
    /// overlapping blocks add up: the adjoint of [`unfold`](Self::unfold).
    /// `L` must be the number of block positions of that size.
    /// Differentiable (its gradient is `unfold`).
    ///
    /// # Panics
    /// When the rank is not 2 or 3, the rows are not a multiple of
    /// `kh * kw`, or `L` does not match the output size.
    ///
    /// ```
    /// use forge::{ops::Unfold, Tensor};
    /// let cols = Tensor::<f32>::ones(&[1, 4, 4]);
    /// let x = cols.fold([3, 3], &Unfold::new([2, 2]));
    /// assert_eq!(x.to_vec(), vec![1.0, 2.0, 1.0, 2.0, 4.0, 2.0, 1.0, 2.0, 1.0]);
    /// ```
    #[track_caller]
    pub fn fold(&self, output_size: [usize; 2], opts: &Unfold) -> Self {
        let s = self.shape();
        let (n, rows, l) = match *s {
            [n, rows, l] => (n, rows, l),
            [rows, l] => (1, rows, l),
            _ => panic!("fold: needs a 2-d or 3-d input, got shape {s:?}"),
        };
        let taps = opts.kernel_size[0] * opts.kernel_size[1];
        assert!(
            taps > 0 && rows % taps == 0,
            "fold: {rows} rows of shape {s:?} are not a multiple of the kernel's {taps} elements ({opts:?})"
        );
        let c = rows / taps;
        let [h, w] = output_size;
        let g = opts.geom("fold", n, c, h, w);
        assert!(
            (g.oh * g.ow) == l,
            "fold: {l} columns of shape {s:?} for {} blocks of an output {h}x{w} ({opts:?})",
            (g.oh * g.ow)
        );
        let data = fold(&g, self.as_slice());
        let shape: Vec<usize> = if s.len() == 3 {
            vec![n, c, h, w]
        } else {
            vec![c, h, w]
        };
        let opts = *opts;
        Tensor::from_parts(data, shape.into(), None).record(
            "fold",
            vec![self.clone()],
            move |ctx| vec![Some(ctx.grad.unfold(&opts))],
        )
    }
}
