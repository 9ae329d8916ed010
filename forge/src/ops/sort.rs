//! Sorting along one axis: `sort`, `argsort` and `topk`, as PyTorch's.
//!
//! The permutation is computed on raw values (it is piecewise constant, so
//! it has no gradient) and the values are [`Tensor::gather`]ed with it:
//! the gradient is gather's (a scatter-add into the sorted positions), and
//! differentiable again.
//!
//! Order: ascending puts NaN last, descending puts NaN first (as PyTorch).
//! Every sort is **stable**: equal elements keep their original order, in
//! either direction (PyTorch's `stable=True`). `topk` breaks ties the same
//! way (the lower index first); PyTorch leaves its tie order unspecified.

use crate::base::norm_axis;
use crate::cpu::index::split_at_axis;
use crate::tensor::{Device, Float, Tensor};
use std::cmp::Ordering;

/// Ascending total order with NaN greatest (NaNs equal to each other).
fn ascending<E: Float>(a: E, b: E) -> Ordering {
    a.partial_cmp(&b)
        .unwrap_or_else(|| a.is_nan().cmp(&b.is_nan()))
}

/// For each line along the axis, the first `k` positions of the stable
/// order (`descending` or not), then (unless `sorted`) those positions in
/// increasing index order. Output shape: the input's with the axis `k`.
fn line_order<E: Float>(
    x: &[E],
    shape: &[usize],
    axis: usize,
    k: usize,
    descending: bool,
    sorted: bool,
) -> Vec<i64> {
    let (outer, len, inner) = split_at_axis(shape, axis);
    let mut out = vec![0i64; outer * k * inner];
    let mut order: Vec<usize> = Vec::with_capacity(len);
    for a in 0..outer {
        for b in 0..inner {
            let at = |i: usize| x[(a * len + i) * inner + b];
            order.clear();
            order.extend(0..len);
            if descending {
                order.sort_by(|&i, &j| ascending(at(j), at(i)));
            } else {
                order.sort_by(|&i, &j| ascending(at(i), at(j)));
            }
            let chosen = &mut order[..k];
            if !sorted {
                chosen.sort_unstable();
            }
            for (r, &i) in chosen.iter().enumerate() {
                out[(a * k + r) * inner + b] = i as i64;
            }
        }
    }
    out
}

impl<E: Float, D: Device> Tensor<E, D> {
    /// Sorts along `dim`, as PyTorch's `torch.sort(input, dim, descending,
    /// stable=True)`: returns the sorted values and, for each, its index
    /// along `dim` in the input. Stable in both directions (equal elements
    /// keep their order); NaN sorts as the largest value. Differentiable in
    /// the values (the gradient is scattered back to the original
    /// positions).
    ///
    /// # Panics
    /// When `dim` is out of range.
    ///
    /// ```
    /// use forge::Tensor;
    /// let t = Tensor::<f32>::from_vec(vec![3.0, 1.0, 2.0, 1.0], &[4]);
    /// let (v, i) = t.sort(0, false);
    /// assert_eq!(v.to_vec(), vec![1.0, 1.0, 2.0, 3.0]);
    /// assert_eq!(i.to_vec(), vec![1, 3, 2, 0]);
    /// let (v, i) = t.sort(-1, true);
    /// assert_eq!(v.to_vec(), vec![3.0, 2.0, 1.0, 1.0]);
    /// assert_eq!(i.to_vec(), vec![0, 2, 1, 3]);
    /// ```
    #[track_caller]
    pub fn sort(&self, dim: isize, descending: bool) -> (Self, Tensor<i64, D>) {
        let idx = self.argsort(dim, descending);
        (self.take_along(dim, &idx), idx)
    }

    /// The indices that sort along `dim` (stable, NaN largest), as
    /// `torch.argsort(input, dim, descending, stable=True)`.
    ///
    /// # Panics
    /// When `dim` is out of range.
    ///
    /// ```
    /// use forge::Tensor;
    /// let t = Tensor::<f64>::from_vec(vec![0.5, -1.0, 2.0, 0.0], &[2, 2]);
    /// assert_eq!(t.argsort(1, false).to_vec(), vec![1, 0, 1, 0]);
    /// // each column, largest first: [0.5, 2.0] -> [1, 0], [-1.0, 0.0] -> [1, 0]
    /// assert_eq!(t.argsort(0, true).to_vec(), vec![1, 1, 0, 0]);
    /// ```
    #[track_caller]
    pub fn argsort(&self, dim: isize, descending: bool) -> Tensor<i64, D> {
        let axis = norm_axis("argsort", dim, self.rank());
        if self.rank() == 0 {
            return Tensor::from_vec(vec![0], &[]);
        }
        let len = self.shape()[axis];
        let data = line_order(self.as_slice(), self.shape(), axis, len, descending, true);
        Tensor::from_vec(data, self.shape())
    }

    /// The `k` largest (or, with `largest = false`, smallest) elements
    /// along `dim` and their indices, as `torch.topk(input, k, dim,
    /// largest, sorted)`. With `sorted` they come in order (largest first,
    /// or smallest first); without, in increasing index order. Ties go to
    /// the lower index first (PyTorch leaves the order of ties
    /// unspecified); NaN counts as the largest value. Differentiable in the
    /// values.
    ///
    /// # Panics
    /// When `dim` is out of range or `k` exceeds the size of `dim` (is not
    /// 1 for a 0-d tensor).
    ///
    /// ```
    /// use forge::Tensor;
    /// let t = Tensor::<f32>::from_vec(vec![1.0, 5.0, 3.0, 4.0], &[4]);
    /// let (v, i) = t.topk(2, 0, true, true);
    /// assert_eq!(v.to_vec(), vec![5.0, 4.0]);
    /// assert_eq!(i.to_vec(), vec![1, 3]);
    /// let (v, i) = t.topk(2, -1, false, false);
    /// assert_eq!((v.to_vec(), i.to_vec()), (vec![1.0, 3.0], vec![0, 2]));
    /// ```
    #[track_caller]
    pub fn topk(
        &self,
        k: usize,
        dim: isize,
        largest: bool,
        sorted: bool,
    ) -> (Self, Tensor<i64, D>) {
        let axis = norm_axis("topk", dim, self.rank());
        let len = if self.rank() == 0 {
            1
        } else {
            self.shape()[axis]
        };
        shape_assert!(
            k <= len,
            "topk: k = {k} is larger than dimension {dim} of shape {:?}",
            self.shape()
        );
        if self.rank() == 0 {
            shape_assert!(k == 1, "topk: k = {k} for a 0-d tensor (must be 1)");
            return (self.clone(), Tensor::from_vec(vec![0], &[]));
        }
        let data = line_order(self.as_slice(), self.shape(), axis, k, largest, sorted);
        let mut shape = self.shape().to_vec();
        shape[axis] = k;
        let idx = Tensor::from_vec(data, &shape);
        (self.take_along(dim, &idx), idx)
    }

    /// `gather` that also accepts a 0-d tensor (and an empty index).
    fn take_along(&self, dim: isize, idx: &Tensor<i64, D>) -> Self {
        if self.rank() == 0 {
            return self.clone();
        }
        self.gather(dim, idx)
    }
}
