//! Reductions over any set of axes.

use crate::base::norm_axes;
use crate::cpu::reduce::{fold_axes, kept_shape};
use crate::tensor::{Device, Float, Tensor};

/// Normalises and sorts reduction axes; an empty list means every axis.
#[track_caller]
pub(crate) fn reduce_axes(op: &str, dims: &[isize], rank: usize) -> Vec<usize> {
    if dims.is_empty() {
        return (0..rank).collect();
    }
    let mut axes = norm_axes(op, dims, rank);
    axes.sort_unstable();
    let before = axes.len();
    axes.dedup();
    shape_assert!(axes.len() == before, "{op}: repeated axis in {dims:?}");
    axes
}

/// The output shape of a reduction.
pub(crate) fn reduced_shape(shape: &[usize], axes: &[usize], keepdim: bool) -> Vec<usize> {
    if keepdim {
        kept_shape(shape, axes)
    } else {
        shape
            .iter()
            .enumerate()
            .filter(|(i, _)| !axes.contains(i))
            .map(|(_, &d)| d)
            .collect()
    }
}

impl<E: Float, D: Device> Tensor<E, D> {
    /// The sum of every element, as a 0-d tensor.
    ///
    /// ```
    /// assert_eq!(forge::Tensor::<f32>::ones(&[2, 3]).sum().item(), 6.0);
    /// ```
    #[track_caller]
    pub fn sum(&self) -> Self {
        self.sum_dim(&[], false)
    }

    /// The sum over `dims` (all dimensions when empty); `keepdim` keeps
    /// them as size 1.
    ///
    /// # Panics
    /// When an axis is out of range or repeated.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::ones(&[2, 3, 4]);
    /// assert_eq!(t.sum_dim(&[0, 2], true).shape(), &[1, 3, 1]);
    /// assert_eq!(t.sum_dim(&[-1], false).shape(), &[2, 3]);
    /// ```
    #[track_caller]
    pub fn sum_dim(&self, dims: &[isize], keepdim: bool) -> Self {
        let axes = reduce_axes("sum", dims, self.rank());
        let data = fold_axes(self.as_slice(), self.shape(), &axes, E::zero(), |a, x| {
            a + x
        });
        let shape = reduced_shape(self.shape(), &axes, keepdim);
        let kept = kept_shape(self.shape(), &axes);
        Tensor::from_parts(data, shape.into(), None).record("sum", vec![self.clone()], move |ctx| {
            vec![Some(ctx.grad.view(&kept).expand(ctx.inputs[0].shape()))]
        })
    }

    /// The mean of every element, as a 0-d tensor.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0, 6.0], &[4]);
    /// assert_eq!(t.mean().item(), 3.0);
    /// ```
    #[track_caller]
    pub fn mean(&self) -> Self {
        self.mean_dim(&[], false)
    }

    /// The mean over `dims` (all when empty).
    ///
    /// # Panics
    /// When an axis is out of range or repeated.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec(vec![1.0, 3.0, 5.0, 7.0], &[2, 2]);
    /// assert_eq!(t.mean_dim(&[1], false).to_vec(), vec![2.0, 6.0]);
    /// ```
    #[track_caller]
    pub fn mean_dim(&self, dims: &[isize], keepdim: bool) -> Self {
        let axes = reduce_axes("mean", dims, self.rank());
        let count: usize = axes.iter().map(|&a| self.shape[a]).product();
        self.sum_dim(dims, keepdim)
            .div_scalar(E::from_f64(count as f64))
    }
}
