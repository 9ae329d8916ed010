//! 3-d pooling (`max_pool3d`, `avg_pool3d`, `adaptive_avg_pool3d`,
//! `adaptive_max_pool3d` over `[N, C, D, H, W]`) and the max poolings that
//! also return their positions (PyTorch's `return_indices=True`).
//!
//! As in `pool.rs`: a max pooling is the gather of the input at its
//! windows' maximum positions (recorded as that gather, whose adjoint is a
//! scatter-add, whose adjoint is the gather again), and an average pooling
//! is linear, recorded with its adjoint as its rule and the pooling as the
//! adjoint's rule; both differentiate to any order.

use super::pool::{adaptive_windows, gather_record, GatherSpec};
use crate::cpu::pool::{gather, max_forward};
use crate::cpu::pool3d::{avg_backward, avg_forward, max_positions, Windows3};
use crate::cpu::Storage;
use crate::tensor::{Device, Float, Tensor};
use std::sync::Arc;

/// Windows, per-output divisors and the shapes of a 3-d average pooling.
struct AvgSpec<E> {
    win: Windows3,
    div: Vec<E>,
    in_shape: Vec<usize>,
    out_shape: Vec<usize>,
}

#[track_caller]
fn avg_apply<E: Float, D: Device>(x: &Tensor<E, D>, spec: Arc<AvgSpec<E>>) -> Tensor<E, D> {
    let data = avg_forward(&spec.win, x.as_slice(), &spec.div);
    Tensor::from_parts(data, spec.out_shape.clone().into(), None).record(
        "avg_pool3d",
        vec![x.clone()],
        move |ctx| vec![Some(avg_adjoint_apply(ctx.grad, spec.clone()))],
    )
}

#[track_caller]
fn avg_adjoint_apply<E: Float, D: Device>(g: &Tensor<E, D>, spec: Arc<AvgSpec<E>>) -> Tensor<E, D> {
    let data = avg_backward(&spec.win, g.as_slice(), &spec.div);
    Tensor::from_parts(data, spec.in_shape.clone().into(), None).record(
        "avg_pool3d_backward",
        vec![g.clone()],
        move |ctx| vec![Some(avg_apply(ctx.grad, spec.clone()))],
    )
}

/// The shape `[N, C, D, H, W]` of a 3-d pooling's input, checked.
fn dims5(op: &str, shape: &[usize]) -> [usize; 5] {
    shape.try_into().unwrap_or_else(|_| {
        shape_panic!("{op}: input {shape:?} must be 5-d [N, C, D, H, W]");
    })
}

/// A sliding 3-d pooling's windows, its arguments checked.
#[allow(clippy::too_many_arguments)]
fn sliding(
    op: &str,
    shape: &[usize],
    kernel: [usize; 3],
    stride: [usize; 3],
    padding: [usize; 3],
    dilation: [usize; 3],
    ceil_mode: bool,
) -> Windows3 {
    let x = dims5(op, shape);
    shape_assert!(
        !kernel.contains(&0),
        "{op}: kernel {kernel:?} must be positive"
    );
    shape_assert!(
        !stride.contains(&0),
        "{op}: stride {stride:?} must be positive"
    );
    shape_assert!(
        !dilation.contains(&0),
        "{op}: dilation {dilation:?} must be positive"
    );
    shape_assert!(
        kernel.iter().zip(&padding).all(|(&k, &p)| 2 * p <= k),
        "{op}: padding {padding:?} must be at most half the kernel {kernel:?}"
    );
    Windows3::sliding([x[2], x[3], x[4]], kernel, stride, padding, dilation, ceil_mode)
        .unwrap_or_else(|| {
            shape_panic!(
                "{op}: input {shape:?} padded by {padding:?} is smaller than the kernel {kernel:?} dilated by {dilation:?}"
            )
        })
}

fn out_shape(x: &[usize], win: &Windows3) -> Vec<usize> {
    let [d, h, w] = win.out();
    vec![x[0], x[1], d, h, w]
}

/// Positions as an `i64` tensor of `shape`.
fn index_tensor<D: Device>(idx: &[usize], shape: &[usize]) -> Tensor<i64, D> {
    Tensor::from_vec_in(idx.iter().map(|&i| i as i64).collect(), shape)
}

impl<E: Float, D: Device> Tensor<E, D> {
    /// The gather of `self` at the 3-d windows' maximum positions, and the
    /// positions.
    #[track_caller]
    fn max_pool3d_windows(&self, win: &Windows3) -> (Self, Storage<usize>) {
        let idx = max_positions(win, self.as_slice());
        let out = out_shape(self.shape(), win);
        let (ip, op) = (win_vol(self.shape()), out[2..].iter().product());
        let vals = gather(self.as_slice(), &idx, ip, op);
        let spec = GatherSpec {
            idx: idx.clone(),
            in_shape: self.shape().to_vec(),
            out_shape: out,
        };
        (gather_record(self, vals, Arc::new(spec)), idx)
    }

    /// 3-d max pooling of `[N, C, D, H, W]` (floor mode, padding counts as
    /// -inf), as `torch.nn.functional.max_pool3d(x, kernel, stride,
    /// padding)`. The gradient flows to the first maximum of each window.
    ///
    /// # Panics
    /// When the input is not 5-d, a kernel size or stride is zero, the
    /// padding exceeds half the kernel, or the padded input is smaller than
    /// the kernel.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f32>::from_vec((0..8).map(|v| v as f32).collect(), &[1, 1, 2, 2, 2]);
    /// assert_eq!(x.max_pool3d([2, 2, 2], [2, 2, 2], [0, 0, 0]).to_vec(), vec![7.0]);
    /// ```
    #[track_caller]
    pub fn max_pool3d(&self, kernel: [usize; 3], stride: [usize; 3], padding: [usize; 3]) -> Self {
        self.max_pool3d_with(kernel, stride, padding, [1; 3], false)
    }

    /// 3-d max pooling with PyTorch's `dilation` (window positions that far
    /// apart) and `ceil_mode` (the output size rounds up, keeping a last
    /// partial window that starts inside the input or its left padding).
    ///
    /// # Panics
    /// As [`max_pool3d`](Self::max_pool3d), and when a dilation is zero.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f32>::from_vec((0..5).map(|v| v as f32).collect(), &[1, 1, 5, 1, 1]);
    /// let y = x.max_pool3d_with([2, 1, 1], [2, 1, 1], [0; 3], [1; 3], true);
    /// assert_eq!(y.to_vec(), vec![1.0, 3.0, 4.0]);
    /// ```
    #[track_caller]
    pub fn max_pool3d_with(
        &self,
        kernel: [usize; 3],
        stride: [usize; 3],
        padding: [usize; 3],
        dilation: [usize; 3],
        ceil_mode: bool,
    ) -> Self {
        let win = sliding(
            "max_pool3d",
            self.shape(),
            kernel,
            stride,
            padding,
            dilation,
            ceil_mode,
        );
        self.max_pool3d_windows(&win).0
    }

    /// [`max_pool3d_with`](Self::max_pool3d_with) with
    /// `return_indices=True`: also each maximum's flat position inside its
    /// `D x H x W` volume, as PyTorch returns it.
    ///
    /// # Panics
    /// As [`max_pool3d_with`](Self::max_pool3d_with).
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f32>::from_vec(vec![0.0, 9.0, 1.0, 2.0], &[1, 1, 1, 2, 2]);
    /// let (y, i) = x.max_pool3d_with_indices([1, 2, 2], [1, 2, 2], [0; 3], [1; 3], false);
    /// assert_eq!((y.to_vec(), i.to_vec()), (vec![9.0], vec![1]));
    /// ```
    #[track_caller]
    pub fn max_pool3d_with_indices(
        &self,
        kernel: [usize; 3],
        stride: [usize; 3],
        padding: [usize; 3],
        dilation: [usize; 3],
        ceil_mode: bool,
    ) -> (Self, Tensor<i64, D>) {
        let win = sliding(
            "max_pool3d",
            self.shape(),
            kernel,
            stride,
            padding,
            dilation,
            ceil_mode,
        );
        let (y, idx) = self.max_pool3d_windows(&win);
        let i = index_tensor(&idx, y.shape());
        (y, i)
    }

    /// 3-d average pooling of `[N, C, D, H, W]` (floor mode), as
    /// `torch.nn.functional.avg_pool3d(x, kernel, stride, padding,
    /// count_include_pad=...)`: with `count_include_pad` every window is
    /// divided by `kd * kh * kw`, otherwise by its number of input elements.
    ///
    /// # Panics
    /// As [`max_pool3d`](Self::max_pool3d).
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f64>::ones(&[1, 1, 2, 2, 2]);
    /// let y = x.avg_pool3d([2, 2, 2], [2, 2, 2], [1, 1, 1], true);
    /// assert_eq!(y.as_slice()[0], 1.0 / 8.0); // one real element of 8
    /// ```
    #[track_caller]
    pub fn avg_pool3d(
        &self,
        kernel: [usize; 3],
        stride: [usize; 3],
        padding: [usize; 3],
        count_include_pad: bool,
    ) -> Self {
        self.avg_pool3d_with(kernel, stride, padding, false, count_include_pad, None)
    }

    /// 3-d average pooling with every option of
    /// `torch.nn.functional.avg_pool3d`: `ceil_mode` and `divisor_override`
    /// (every window sum divided by that number). Without an override a
    /// window is divided by its part inside the padded input when
    /// `count_include_pad`, else by its number of input elements.
    ///
    /// # Panics
    /// As [`max_pool3d`](Self::max_pool3d), and when `divisor_override` is 0.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f64>::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0], &[1, 1, 1, 1, 5]);
    /// let y = x.avg_pool3d_with([1, 1, 2], [1, 1, 2], [0; 3], true, true, None);
    /// assert_eq!(y.to_vec(), vec![1.5, 3.5, 5.0]);
    /// let y = x.avg_pool3d_with([1, 1, 2], [1, 1, 2], [0; 3], false, true, Some(4));
    /// assert_eq!(y.to_vec(), vec![0.75, 1.75]);
    /// ```
    #[track_caller]
    pub fn avg_pool3d_with(
        &self,
        kernel: [usize; 3],
        stride: [usize; 3],
        padding: [usize; 3],
        ceil_mode: bool,
        count_include_pad: bool,
        divisor_override: Option<usize>,
    ) -> Self {
        let op = "avg_pool3d";
        let win = sliding(op, self.shape(), kernel, stride, padding, [1; 3], ceil_mode);
        shape_assert!(
            divisor_override != Some(0),
            "{op}: divisor_override must be positive"
        );
        let div: Vec<E> = match divisor_override {
            Some(d) => vec![E::from_f64(d as f64); win.out().iter().product()],
            None if count_include_pad => to_e(win.padded_counts()),
            None => to_e(win.counts()),
        };
        self.avg_pool3d_divided(win, div)
    }

    #[track_caller]
    fn avg_pool3d_divided(&self, win: Windows3, div: Vec<E>) -> Self {
        let spec = AvgSpec {
            out_shape: out_shape(self.shape(), &win),
            in_shape: self.shape().to_vec(),
            win,
            div,
        };
        avg_apply(self, Arc::new(spec))
    }

    /// Adaptive 3-d average pooling of `[N, C, D, H, W]` to
    /// `[N, C, od, oh, ow]`, as `torch.nn.functional.adaptive_avg_pool3d`:
    /// output `i` of an axis averages `[floor(i L / o), ceil((i + 1) L / o))`.
    ///
    /// # Panics
    /// When the input is not 5-d, or an input or output size is zero.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f32>::from_vec((0..8).map(|v| v as f32).collect(), &[1, 1, 2, 2, 2]);
    /// assert_eq!(x.adaptive_avg_pool3d([1, 1, 1]).to_vec(), vec![3.5]);
    /// ```
    #[track_caller]
    pub fn adaptive_avg_pool3d(&self, output: [usize; 3]) -> Self {
        let win = adaptive3("adaptive_avg_pool3d", self.shape(), output);
        let div = to_e(win.counts());
        self.avg_pool3d_divided(win, div)
    }

    /// Adaptive 3-d max pooling of `[N, C, D, H, W]` to `[N, C, od, oh, ow]`,
    /// as `torch.nn.functional.adaptive_max_pool3d`, with the bins of
    /// [`adaptive_avg_pool3d`](Self::adaptive_avg_pool3d).
    ///
    /// # Panics
    /// When the input is not 5-d, or an input or output size is zero.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f32>::from_vec((0..8).map(|v| v as f32).collect(), &[1, 1, 2, 2, 2]);
    /// assert_eq!(x.adaptive_max_pool3d([2, 1, 1]).to_vec(), vec![3.0, 7.0]);
    /// ```
    #[track_caller]
    pub fn adaptive_max_pool3d(&self, output: [usize; 3]) -> Self {
        let win = adaptive3("adaptive_max_pool3d", self.shape(), output);
        self.max_pool3d_windows(&win).0
    }

    /// [`adaptive_max_pool2d`](Self::adaptive_max_pool2d) with
    /// `return_indices=True`: also each maximum's flat position inside its
    /// `H x W` plane (`i64`), as PyTorch returns it.
    ///
    /// # Panics
    /// When the input is not 4-d, or an input or output size is zero.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f32>::from_vec(vec![1.0, 2.0, 6.0, 3.0], &[1, 1, 2, 2]);
    /// let (y, i) = x.adaptive_max_pool2d_with_indices([1, 2]);
    /// assert_eq!((y.to_vec(), i.to_vec()), (vec![6.0, 3.0], vec![2, 3]));
    /// ```
    #[track_caller]
    pub fn adaptive_max_pool2d_with_indices(&self, output: [usize; 2]) -> (Self, Tensor<i64, D>) {
        let win = adaptive_windows("adaptive_max_pool2d", self.shape(), 4, &output);
        let (vals, idx) = max_forward(&win, self.as_slice());
        let s = self.shape();
        let out = vec![s[0], s[1], output[0], output[1]];
        let i = index_tensor(&idx, &out);
        let spec = GatherSpec {
            idx,
            in_shape: s.to_vec(),
            out_shape: out,
        };
        (gather_record(self, vals, Arc::new(spec)), i)
    }

    /// [`adaptive_max_pool1d`](Self::adaptive_max_pool1d) with
    /// `return_indices=True`: also each maximum's position along `L` (`i64`).
    ///
    /// # Panics
    /// When the input is not 3-d, or an input or output size is zero.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f64>::from_vec(vec![1.0, 3.0, 2.0, 0.0], &[1, 1, 4]);
    /// let (y, i) = x.adaptive_max_pool1d_with_indices(2);
    /// assert_eq!((y.to_vec(), i.to_vec()), (vec![3.0, 2.0], vec![1, 2]));
    /// ```
    #[track_caller]
    pub fn adaptive_max_pool1d_with_indices(&self, output: usize) -> (Self, Tensor<i64, D>) {
        adaptive_windows("adaptive_max_pool1d", self.shape(), 3, &[output]);
        let s = self.shape();
        let (y, i) = self
            .view(&[s[0], s[1], 1, s[2]])
            .adaptive_max_pool2d_with_indices([1, output]);
        (y.view(&[s[0], s[1], output]), i.view(&[s[0], s[1], output]))
    }
}

/// Checks an adaptive 3-d pooling's input and builds its bins.
fn adaptive3(op: &str, shape: &[usize], output: [usize; 3]) -> Windows3 {
    let x = dims5(op, shape);
    shape_assert!(
        !output.contains(&0),
        "{op}: output size {output:?} must be positive"
    );
    shape_assert!(
        !x[2..].contains(&0),
        "{op}: input {shape:?} has an empty spatial dimension"
    );
    Windows3::adaptive([x[2], x[3], x[4]], output)
}

fn win_vol(shape: &[usize]) -> usize {
    shape[2..].iter().product()
}

fn to_e<E: Float>(v: Vec<usize>) -> Vec<E> {
    v.into_iter().map(|c| E::from_f64(c as f64)).collect()
}
