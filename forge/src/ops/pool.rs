//! Pooling: max, average and adaptive pooling over the last two (2-d) or
//! the last (1-d) dimensions of NCHW / NCL inputs, floor mode.
//!
//! Max pooling picks each window's maximum and its position in one pass;
//! the positions are a constant (whose derivative is zero almost
//! everywhere), so the output is the *gather* of the input at those
//! positions, and is recorded as one; the gather's adjoint is a *scatter-add* and the scatter-add's
//! adjoint is the gather, so both rules are tensor ops again. Average pooling
//! is linear: its rule is its adjoint (spreading each output gradient over
//! its window), whose own rule is the forward pooling.

use crate::autograd::is_grad_enabled;
use crate::cpu::pool::{
    avg_backward, avg_forward, gather, max_forward, max_values, scatter_add, PoolWindows,
};
use crate::cpu::Storage;
use crate::tensor::{Device, Float, Tensor};
use std::sync::Arc;

/// Positions picked per output plane, and the shapes on either side.
pub(super) struct GatherSpec {
    pub(super) idx: Storage<usize>,
    pub(super) in_shape: Vec<usize>,
    pub(super) out_shape: Vec<usize>,
}

impl GatherSpec {
    fn in_plane(&self) -> usize {
        self.in_shape[2..].iter().product()
    }
    fn out_plane(&self) -> usize {
        self.out_shape[2..].iter().product()
    }
}

/// Windows, per-output divisors and the shapes of an average pooling.
struct AvgSpec<E> {
    win: PoolWindows,
    div: Vec<E>,
    in_shape: Vec<usize>,
    out_shape: Vec<usize>,
}

#[track_caller]
fn gather_apply<E: Float, D: Device>(x: &Tensor<E, D>, spec: Arc<GatherSpec>) -> Tensor<E, D> {
    let data = gather(x.as_slice(), &spec.idx, spec.in_plane(), spec.out_plane());
    gather_record(x, data, spec)
}

/// Records `data`, the gather of `x` at `spec`'s positions, as that gather.
#[track_caller]
pub(super) fn gather_record<E: Float, D: Device>(
    x: &Tensor<E, D>,
    data: Storage<E>,
    spec: Arc<GatherSpec>,
) -> Tensor<E, D> {
    Tensor::from_parts(data, spec.out_shape.clone().into(), None).record(
        "max_pool",
        vec![x.clone()],
        move |ctx| vec![Some(scatter_apply(ctx.grad, spec.clone()))],
    )
}

#[track_caller]
fn scatter_apply<E: Float, D: Device>(g: &Tensor<E, D>, spec: Arc<GatherSpec>) -> Tensor<E, D> {
    let planes = spec.in_shape[..2].iter().product();
    let data = scatter_add(
        g.as_slice(),
        &spec.idx,
        spec.in_plane(),
        spec.out_plane(),
        planes,
    );
    Tensor::from_parts(data, spec.in_shape.clone().into(), None).record(
        "max_pool_backward",
        vec![g.clone()],
        move |ctx| vec![Some(gather_apply(ctx.grad, spec.clone()))],
    )
}

#[track_caller]
fn avg_apply<E: Float, D: Device>(x: &Tensor<E, D>, spec: Arc<AvgSpec<E>>) -> Tensor<E, D> {
    let data = avg_forward(&spec.win, x.as_slice(), &spec.div);
    Tensor::from_parts(data, spec.out_shape.clone().into(), None).record(
        "avg_pool",
        vec![x.clone()],
        move |ctx| vec![Some(avg_adjoint_apply(ctx.grad, spec.clone()))],
    )
}

#[track_caller]
fn avg_adjoint_apply<E: Float, D: Device>(g: &Tensor<E, D>, spec: Arc<AvgSpec<E>>) -> Tensor<E, D> {
    let data = avg_backward(&spec.win, g.as_slice(), &spec.div);
    Tensor::from_parts(data, spec.in_shape.clone().into(), None).record(
        "avg_pool_backward",
        vec![g.clone()],
        move |ctx| vec![Some(avg_apply(ctx.grad, spec.clone()))],
    )
}

fn out_shape(x: &[usize], win: &PoolWindows) -> Vec<usize> {
    vec![x[0], x[1], win.oh(), win.ow()]
}

/// Checks a sliding pooling's arguments (in the op's own dimensionality).
fn check_sliding(op: &str, shape: &[usize], rank: usize, kernel: &[usize], stride: &[usize]) {
    let layout = if rank == 4 {
        "[N, C, H, W]"
    } else {
        "[N, C, L]"
    };
    shape_assert!(
        shape.len() == rank,
        "{op}: input {shape:?} must be {rank}-d {layout}"
    );
    shape_assert!(
        !kernel.contains(&0),
        "{op}: kernel {kernel:?} must be positive"
    );
    shape_assert!(
        !stride.contains(&0),
        "{op}: stride {stride:?} must be positive"
    );
}

fn check_padding(op: &str, kernel: &[usize], padding: &[usize]) {
    shape_assert!(
        kernel.iter().zip(padding).all(|(&k, &p)| 2 * p <= k),
        "{op}: padding {padding:?} must be at most half the kernel {kernel:?}"
    );
}

fn windows(
    op: &str,
    shape: &[usize],
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
    ceil_mode: bool,
) -> PoolWindows {
    PoolWindows::sliding_with([shape[2], shape[3]], kernel, stride, padding, dilation, ceil_mode)
        .unwrap_or_else(|| {
            if dilation == [1, 1] {
                shape_panic!("{op}: input {shape:?} padded by {padding:?} is smaller than the kernel {kernel:?}")
            }
            shape_panic!(
                "{op}: input {shape:?} padded by {padding:?} is smaller than the kernel {kernel:?} dilated by {dilation:?}"
            )
        })
}

impl<E: Float, D: Device> Tensor<E, D> {
    #[track_caller]
    fn max_pool_windows(&self, win: PoolWindows) -> Self {
        if !(is_grad_enabled() && self.is_tracked()) {
            // Nothing will be recorded: the positions would never be read.
            let vals = max_values(&win, self.as_slice());
            return Tensor::from_parts(vals, out_shape(self.shape(), &win).into(), None)
                .seen("max_pool", [self]);
        }
        let (vals, idx) = max_forward(&win, self.as_slice());
        let spec = GatherSpec {
            idx,
            in_shape: self.shape().to_vec(),
            out_shape: out_shape(self.shape(), &win),
        };
        gather_record(self, vals, Arc::new(spec))
    }

    #[track_caller]
    fn avg_pool_windows(&self, win: PoolWindows, div: Option<E>) -> Self {
        let div = match div {
            Some(d) => vec![d; win.oh() * win.ow()],
            None => win
                .counts()
                .into_iter()
                .map(|c| E::from_f64(c as f64))
                .collect(),
        };
        self.avg_pool_divided(win, div)
    }

    #[track_caller]
    fn avg_pool_divided(&self, win: PoolWindows, div: Vec<E>) -> Self {
        let spec = AvgSpec {
            out_shape: out_shape(self.shape(), &win),
            in_shape: self.shape().to_vec(),
            win,
            div,
        };
        avg_apply(self, Arc::new(spec))
    }

    /// Views `[N, C, L]` as `[N, C, 1, L]`, applies `f`, and drops the unit
    /// height again.
    #[track_caller]
    fn as_2d(&self, f: impl FnOnce(&Self) -> Self) -> Self {
        let s = self.shape();
        let y = f(&self.view(&[s[0], s[1], 1, s[2]]));
        let ys = y.shape().to_vec();
        y.view(&[ys[0], ys[1], ys[3]])
    }

    /// 2-d max pooling of `[N, C, H, W]` (floor mode, padding counts as
    /// -inf), as `torch.nn.functional.max_pool2d`. The gradient flows to the
    /// first maximum of each window.
    ///
    /// # Panics
    /// When the input is not 4-d, a kernel size or stride is zero, the
    /// padding exceeds half the kernel, or the padded input is smaller than
    /// the kernel.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f32>::from_vec((0..16).map(|v| v as f32).collect(), &[1, 1, 4, 4]);
    /// let y = x.max_pool2d([2, 2], [2, 2], [0, 0]);
    /// assert_eq!(y.to_vec(), vec![5.0, 7.0, 13.0, 15.0]);
    /// ```
    #[track_caller]
    pub fn max_pool2d(&self, kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2]) -> Self {
        self.max_pool2d_with(kernel, stride, padding, [1, 1], false)
    }

    /// 2-d max pooling with every option of
    /// `torch.nn.functional.max_pool2d`: window positions `dilation` apart,
    /// and `ceil_mode` (the output size rounds up, so a last partial window
    /// is kept when it starts inside the input or its left padding).
    ///
    /// # Panics
    /// As [`max_pool2d`](Self::max_pool2d), and when a dilation is zero.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f32>::from_vec((0..5).map(|v| v as f32).collect(), &[1, 1, 1, 5]);
    /// // Windows {0, 2} and {2, 4}.
    /// assert_eq!(x.max_pool2d_with([1, 2], [1, 2], [0, 0], [1, 2], false).to_vec(), vec![2.0, 4.0]);
    /// // Ceil mode keeps the last element in a window of its own.
    /// assert_eq!(x.max_pool2d_with([1, 2], [1, 2], [0, 0], [1, 1], true).to_vec(), vec![1.0, 3.0, 4.0]);
    /// ```
    #[track_caller]
    pub fn max_pool2d_with(
        &self,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        ceil_mode: bool,
    ) -> Self {
        let op = "max_pool2d";
        check_sliding(op, self.shape(), 4, &kernel, &stride);
        shape_assert!(
            !dilation.contains(&0),
            "{op}: dilation {dilation:?} must be positive"
        );
        check_padding(op, &kernel, &padding);
        let win = windows(
            op,
            self.shape(),
            kernel,
            stride,
            padding,
            dilation,
            ceil_mode,
        );
        self.max_pool_windows(win)
    }

    /// 2-d average pooling of `[N, C, H, W]` (floor mode), as
    /// `torch.nn.functional.avg_pool2d`. With `count_include_pad` every
    /// window is divided by `kh * kw`; otherwise by its number of
    /// non-padding elements.
    ///
    /// # Panics
    /// As [`max_pool2d`](Self::max_pool2d).
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f64>::ones(&[1, 1, 3, 3]);
    /// let incl = x.avg_pool2d([3, 3], [1, 1], [1, 1], true);
    /// let excl = x.avg_pool2d([3, 3], [1, 1], [1, 1], false);
    /// assert_eq!(incl.as_slice()[0], 4.0 / 9.0); // corner: 4 real of 9
    /// assert_eq!(excl.as_slice()[0], 1.0);
    /// ```
    #[track_caller]
    pub fn avg_pool2d(
        &self,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        count_include_pad: bool,
    ) -> Self {
        self.avg_pool2d_with(kernel, stride, padding, false, count_include_pad, None)
    }

    /// 2-d average pooling with every option of
    /// `torch.nn.functional.avg_pool2d`: `ceil_mode` (as in
    /// [`max_pool2d_with`](Self::max_pool2d_with)) and `divisor_override`
    /// (every window sum divided by that number). Without an override, a
    /// window is divided by its part inside the padded input when
    /// `count_include_pad` (`kh * kw` except for a ceil-mode window running
    /// past the padding), else by its number of input elements.
    ///
    /// # Panics
    /// As [`max_pool2d`](Self::max_pool2d), and when `divisor_override` is 0.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f64>::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0], &[1, 1, 1, 5]);
    /// let y = x.avg_pool2d_with([1, 2], [1, 2], [0, 0], true, true, None);
    /// assert_eq!(y.to_vec(), vec![1.5, 3.5, 5.0]);
    /// let y = x.avg_pool2d_with([1, 2], [1, 2], [0, 0], false, true, Some(4));
    /// assert_eq!(y.to_vec(), vec![0.75, 1.75]);
    /// ```
    #[track_caller]
    pub fn avg_pool2d_with(
        &self,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        ceil_mode: bool,
        count_include_pad: bool,
        divisor_override: Option<usize>,
    ) -> Self {
        let op = "avg_pool2d";
        check_sliding(op, self.shape(), 4, &kernel, &stride);
        check_padding(op, &kernel, &padding);
        shape_assert!(
            divisor_override != Some(0),
            "{op}: divisor_override must be positive"
        );
        let win = windows(op, self.shape(), kernel, stride, padding, [1, 1], ceil_mode);
        let div = match divisor_override {
            Some(d) => vec![E::from_f64(d as f64); win.oh() * win.ow()],
            None if count_include_pad => win
                .padded_counts(kernel, stride, padding)
                .into_iter()
                .map(|c| E::from_f64(c as f64))
                .collect(),
            None => win
                .counts()
                .into_iter()
                .map(|c| E::from_f64(c as f64))
                .collect(),
        };
        self.avg_pool_divided(win, div)
    }

    /// Adaptive 2-d average pooling of `[N, C, H, W]` to `[N, C, oh, ow]`,
    /// as `torch.nn.functional.adaptive_avg_pool2d`: output `i` averages the
    /// rows `[floor(i H / oh), ceil((i + 1) H / oh))` (bins may overlap).
    ///
    /// # Panics
    /// When the input is not 4-d, or an input or output size is zero.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0, 6.0], &[1, 1, 2, 2]);
    /// assert_eq!(x.adaptive_avg_pool2d([1, 1]).to_vec(), vec![3.0]);
    /// ```
    #[track_caller]
    pub fn adaptive_avg_pool2d(&self, output: [usize; 2]) -> Self {
        let win = adaptive_windows("adaptive_avg_pool2d", self.shape(), 4, &output);
        self.avg_pool_windows(win, None)
    }

    /// Adaptive 2-d max pooling of `[N, C, H, W]` to `[N, C, oh, ow]`, as
    /// `torch.nn.functional.adaptive_max_pool2d`, with the bins of
    /// [`adaptive_avg_pool2d`](Self::adaptive_avg_pool2d).
    ///
    /// # Panics
    /// When the input is not 4-d, or an input or output size is zero.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0, 6.0], &[1, 1, 2, 2]);
    /// assert_eq!(x.adaptive_max_pool2d([1, 2]).to_vec(), vec![3.0, 6.0]);
    /// ```
    #[track_caller]
    pub fn adaptive_max_pool2d(&self, output: [usize; 2]) -> Self {
        let win = adaptive_windows("adaptive_max_pool2d", self.shape(), 4, &output);
        self.max_pool_windows(win)
    }

    /// 1-d max pooling of `[N, C, L]`, as `torch.nn.functional.max_pool1d`.
    ///
    /// # Panics
    /// As [`max_pool2d`](Self::max_pool2d), for a 3-d input.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f32>::from_vec(vec![1.0, 3.0, 2.0, 0.0, 5.0], &[1, 1, 5]);
    /// assert_eq!(x.max_pool1d(2, 2, 0).to_vec(), vec![3.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn max_pool1d(&self, kernel: usize, stride: usize, padding: usize) -> Self {
        let op = "max_pool1d";
        check_sliding(op, self.shape(), 3, &[kernel], &[stride]);
        check_padding(op, &[kernel], &[padding]);
        let s = self.shape();
        PoolWindows::sliding([1, s[2]], [1, kernel], [1, stride], [0, padding]).unwrap_or_else(
            || {
                shape_panic!(
                    "{op}: input {s:?} padded by {padding} is smaller than the kernel {kernel}"
                )
            },
        );
        self.as_2d(|x| x.max_pool2d([1, kernel], [1, stride], [0, padding]))
    }

    /// 1-d average pooling of `[N, C, L]`, as
    /// `torch.nn.functional.avg_pool1d`.
    ///
    /// # Panics
    /// As [`avg_pool2d`](Self::avg_pool2d), for a 3-d input.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f64>::from_vec(vec![1.0, 3.0, 2.0, 0.0], &[1, 1, 4]);
    /// assert_eq!(x.avg_pool1d(2, 2, 0, true).to_vec(), vec![2.0, 1.0]);
    /// ```
    #[track_caller]
    pub fn avg_pool1d(
        &self,
        kernel: usize,
        stride: usize,
        padding: usize,
        count_include_pad: bool,
    ) -> Self {
        let op = "avg_pool1d";
        check_sliding(op, self.shape(), 3, &[kernel], &[stride]);
        check_padding(op, &[kernel], &[padding]);
        let s = self.shape();
        PoolWindows::sliding([1, s[2]], [1, kernel], [1, stride], [0, padding]).unwrap_or_else(
            || {
                shape_panic!(
                    "{op}: input {s:?} padded by {padding} is smaller than the kernel {kernel}"
                )
            },
        );
        self.as_2d(|x| x.avg_pool2d([1, kernel], [1, stride], [0, padding], count_include_pad))
    }

    /// Adaptive 1-d average pooling of `[N, C, L]` to `[N, C, output]`.
    ///
    /// # Panics
    /// When the input is not 3-d, or an input or output size is zero.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f64>::from_vec(vec![1.0, 3.0, 2.0, 0.0], &[1, 1, 4]);
    /// assert_eq!(x.adaptive_avg_pool1d(2).to_vec(), vec![2.0, 1.0]);
    /// ```
    #[track_caller]
    pub fn adaptive_avg_pool1d(&self, output: usize) -> Self {
        adaptive_windows("adaptive_avg_pool1d", self.shape(), 3, &[output]);
        self.as_2d(|x| x.adaptive_avg_pool2d([1, output]))
    }

    /// Adaptive 1-d max pooling of `[N, C, L]` to `[N, C, output]`.
    ///
    /// # Panics
    /// When the input is not 3-d, or an input or output size is zero.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f64>::from_vec(vec![1.0, 3.0, 2.0, 0.0], &[1, 1, 4]);
    /// assert_eq!(x.adaptive_max_pool1d(2).to_vec(), vec![3.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn adaptive_max_pool1d(&self, output: usize) -> Self {
        adaptive_windows("adaptive_max_pool1d", self.shape(), 3, &[output]);
        self.as_2d(|x| x.adaptive_max_pool2d([1, output]))
    }
}

/// Checks an adaptive pooling's input and builds its bins (for a 3-d input,
/// the bins of the `[N, C, 1, L]` view).
pub(super) fn adaptive_windows(
    op: &str,
    shape: &[usize],
    rank: usize,
    output: &[usize],
) -> PoolWindows {
    let layout = if rank == 4 {
        "[N, C, H, W]"
    } else {
        "[N, C, L]"
    };
    shape_assert!(
        shape.len() == rank,
        "{op}: input {shape:?} must be {rank}-d {layout}"
    );
    shape_assert!(
        !output.contains(&0),
        "{op}: output size {output:?} must be positive"
    );
    shape_assert!(
        !shape[2..].contains(&0),
        "{op}: input {shape:?} has an empty spatial dimension"
    );
    if rank == 4 {
        PoolWindows::adaptive([shape[2], shape[3]], [output[0], output[1]])
    } else {
        PoolWindows::adaptive([1, shape[2]], [1, output[0]])
    }
}
