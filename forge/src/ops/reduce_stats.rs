//! Variance and standard deviation over any set of axes, with a
//! `correction` (`torch.var`/`torch.std`: divide by `N - correction`).

use super::reduce::{reduce_axes, reduced_shape};
use super::shape::gather_strided;
use crate::base::Dims;
use crate::cpu::reduce::{kept_shape, var_rows};
use crate::cpu::Storage;
use crate::tensor::{numel, strides, Device, Float, Tensor};
use std::sync::Arc;

/// The data of `x` with the reduced `axes` moved last (the kept axes first,
/// each group in its original order), so that every output element owns one
/// contiguous row. Borrows when the axes are already trailing.
fn rows_last<'a, E: Float, D: Device>(x: &'a Tensor<E, D>, axes: &[usize]) -> Rows<'a, E> {
    let rank = x.rank();
    let k = axes.len();
    if axes.iter().enumerate().all(|(i, &a)| a == rank - k + i) {
        return Rows::Borrowed(x.as_slice());
    }
    let order: Vec<usize> = (0..rank)
        .filter(|a| !axes.contains(a))
        .chain(axes.iter().copied())
        .collect();
    let st = strides(x.shape());
    let shape: Vec<usize> = order.iter().map(|&a| x.shape[a]).collect();
    let src: Vec<usize> = order.iter().map(|&a| st[a]).collect();
    Rows::Owned(gather_strided(x.as_slice(), &shape, &src))
}

/// A tensor's data, or a reordered pooled copy of it.
enum Rows<'a, E: Copy> {
    Borrowed(&'a [E]),
    Owned(Storage<E>),
}

impl<E: Copy> std::ops::Deref for Rows<'_, E> {
    type Target = [E];
    fn deref(&self) -> &[E] {
        match self {
            Rows::Borrowed(s) => s,
            Rows::Owned(s) => s,
        }
    }
}

/// Reduction bookkeeping shared by var and std.
struct Plan {
    axes: Vec<usize>,
    dims: Vec<isize>,
    kept: Vec<usize>,
    shape: Vec<usize>,
    /// `max(N - correction, 0)` where N is the number of reduced elements.
    divisor: f64,
}

impl Plan {
    #[track_caller]
    fn new(op: &str, in_shape: &[usize], dims: &[isize], correction: usize, keepdim: bool) -> Self {
        let axes = reduce_axes(op, dims, in_shape.len());
        let n: usize = axes.iter().map(|&a| in_shape[a]).product();
        Plan {
            dims: axes.iter().map(|&a| a as isize).collect(),
            kept: kept_shape(in_shape, &axes),
            shape: reduced_shape(in_shape, &axes, keepdim),
            divisor: n.saturating_sub(correction) as f64,
            axes,
        }
    }

    /// The variances, in the `keepdim` layout.
    fn variances<E: Float, D: Device>(&self, x: &Tensor<E, D>, correction: usize) -> Storage<E> {
        let rows = rows_last(x, &self.axes);
        var_rows(&rows, numel(&self.kept), correction)
    }
}

impl<E: Float, D: Device> Tensor<E, D> {
    /// The variance over `dims` (all dimensions when empty), dividing the
    /// sum of squared deviations from the mean by `N - correction`
    /// (`correction = 1` is the unbiased estimate, `0` the population
    /// variance), like `torch.var(x, dims, correction=c, keepdim=k)`.
    ///
    /// # Panics
    /// When an axis is out of range or repeated.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f64>::from_vec(vec![1.0, 2.0, 3.0, 4.0, 4.0, 4.0], &[2, 3]);
    /// assert_eq!(x.var_dim(&[1], 1, false).to_vec(), vec![1.0, 0.0]);
    /// assert_eq!(x.var_dim(&[0], 0, true).shape(), &[1, 3]);
    /// assert_eq!(x.var_dim(&[0], 0, true).to_vec(), vec![2.25, 1.0, 0.25]);
    /// ```
    #[track_caller]
    pub fn var_dim(&self, dims: impl Dims, correction: usize, keepdim: bool) -> Self {
        let dims = &dims.to_dims()[..];
        let plan = Plan::new("var", self.shape(), dims, correction, keepdim);
        let data = plan.variances(self, correction);
        let shape = plan.shape.clone();
        Tensor::from_parts(data, shape.into(), None).record("var", vec![self.clone()], move |ctx| {
            // d var / dx = 2 (x - mean) / (N - c); exact for every x
            // because the deviations sum to zero, so the rule is also
            // right under differentiation.
            let x = &ctx.inputs[0];
            let centered = x.sub(&x.mean_dim(&plan.dims, true));
            let scale = E::from_f64(2.0 / plan.divisor);
            vec![Some(
                centered.mul(&ctx.grad.view(&plan.kept).mul_scalar(scale)),
            )]
        })
    }

    /// The standard deviation over `dims` (all dimensions when empty):
    /// `sqrt(var_dim(dims, correction, keepdim))`, like `torch.std`. Where
    /// the deviation is 0 the gradient is 0, as in PyTorch.
    ///
    /// # Panics
    /// When an axis is out of range or repeated.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f64>::from_vec(vec![1.0, 3.0, 5.0, 5.0], &[2, 2]);
    /// assert_eq!(x.std_dim(&[-1], 0, false).to_vec(), vec![1.0, 0.0]);
    /// ```
    #[track_caller]
    pub fn std_dim(&self, dims: impl Dims, correction: usize, keepdim: bool) -> Self {
        let dims = &dims.to_dims()[..];
        let plan = Plan::new("std", self.shape(), dims, correction, keepdim);
        let data: Vec<E> = plan
            .variances(self, correction)
            .into_iter()
            .map(|v| v.sqrt())
            .collect();
        let data = Arc::new(data);
        let saved = Tensor::<E, D>::from_parts(data.clone(), plan.kept.clone().into(), None);
        let shape = plan.shape.clone();
        Tensor::from_parts(data, shape.into(), None).record("std", vec![self.clone()], move |ctx| {
            // d std / dx = (x - mean) / ((N - c) std), and 0 where std = 0.
            let x = &ctx.inputs[0];
            let s = if ctx.create_graph {
                x.std_dim(&plan.dims, correction, true)
            } else {
                saved.clone()
            };
            let g = ctx.grad.view(&plan.kept);
            let g_over_s = if s.as_slice().iter().any(|v| v.is_zero()) {
                // Constant masks: divide by 1 where std = 0, then zero it.
                let zero_at = s.map(|v| if v.is_zero() { E::one() } else { E::zero() });
                let keep = zero_at.map(|z| E::one() - z);
                g.mul(&keep).div(&s.add(&zero_at))
            } else {
                g.div(&s)
            };
            let centered = x.sub(&x.mean_dim(&plan.dims, true));
            let scale = E::from_f64(1.0 / plan.divisor);
            vec![Some(centered.mul(&g_over_s.mul_scalar(scale)))]
        })
    }

    /// The variance of every element, as a 0-d tensor (divide by
    /// `N - correction`).
    ///
    /// ```
    /// let x = forge::Tensor::<f64>::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]);
    /// assert_eq!(x.var(0).item(), 1.25);
    /// ```
    #[track_caller]
    pub fn var(&self, correction: usize) -> Self {
        self.var_dim(&[] as &[isize], correction, false)
    }

    /// The standard deviation of every element, as a 0-d tensor.
    ///
    /// ```
    /// let x = forge::Tensor::<f64>::from_vec(vec![1.0, 3.0], &[2]);
    /// assert_eq!(x.std(0).item(), 1.0);
    /// assert_eq!(x.std(1).item(), 2f64.sqrt());
    /// ```
    #[track_caller]
    pub fn std(&self, correction: usize) -> Self {
        self.std_dim(&[] as &[isize], correction, false)
    }
}
