//! Advanced indexing: `x[i0, i1, ...]` with integer index tensors
//! (`index`), its write (`index_put`, overwriting or accumulating),
//! boolean-mask indexing (`index_mask`, `x[mask]`) and `nonzero`. The
//! indexed leading dimensions are flattened into rows, so each op is an
//! `index_select` / `index_copy` / `index_add` of rows and its gradients
//! come from those.

use crate::cpu::broadcast::zip_broadcast;
use crate::tensor::{broadcast_shapes, Device, Float, Tensor};

/// The row of `shape[..k]` each broadcast index position names (negative
/// indices count from the end), and the broadcast index shape.
#[track_caller]
fn rows<D: Device>(
    op: &str,
    shape: &[usize],
    indices: &[&Tensor<i64, D>],
) -> (Vec<i64>, Vec<usize>) {
    let k = indices.len();
    let shapes: Vec<Vec<usize>> = indices.iter().map(|t| t.shape().to_vec()).collect();
    assert!(
        k >= 1 && k <= shape.len(),
        "{op}: {k} index tensors {shapes:?} for an input of shape {shape:?}"
    );
    let b = shapes
        .iter()
        .try_fold(Vec::new(), |acc, s| broadcast_shapes(&acc, s))
        .unwrap_or_else(|| panic!("{op}: index shapes {shapes:?} cannot be broadcast together"));
    let n: usize = b.iter().product();
    let mut lin = vec![0i64; n];
    for (d, t) in indices.iter().enumerate() {
        let size = shape[d] as i64;
        let e = zip_broadcast(t.as_slice(), t.shape(), &[0i64], &[], &b, |i, _| i);
        for (l, &i) in lin.iter_mut().zip(e.iter()) {
            assert!(
                (-size..size).contains(&i),
                "{op}: index {i} is out of range for dimension {d} of size {size} (input shape {shape:?})"
            );
            *l = *l * size + i.rem_euclid(size);
        }
    }
    (lin, b)
}

impl<E: Float, D: Device> Tensor<E, D> {
    /// PyTorch's advanced indexing `x[i0, i1, ..., ik-1]` with `k` integer
    /// index tensors for the first `k` dimensions: the indices broadcast
    /// together to a shape `B` (negative ones count from the end) and the
    /// output has shape `B` followed by the remaining dimensions of `self`.
    /// Differentiable (repeated positions accumulate their gradients).
    ///
    /// # Panics
    /// When there are no index tensors or more than dimensions, their shapes
    /// do not broadcast, or an index is out of range.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f32>::from_vec((0..6).map(|v| v as f32).collect(), &[2, 3]);
    /// let i = Tensor::<i64>::from_vec(vec![1, 0], &[2]);
    /// let j = Tensor::<i64>::from_vec(vec![-1, 1], &[2]);
    /// assert_eq!(x.index(&[&i, &j]).to_vec(), vec![5.0, 1.0]);
    /// assert_eq!(x.index(&[&i]).to_vec(), vec![3.0, 4.0, 5.0, 0.0, 1.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn index(&self, indices: &[&Tensor<i64, D>]) -> Self {
        let (lin, b) = rows("index", self.shape(), indices);
        let k = indices.len();
        let (rows_n, inner) = flat(self.shape(), k);
        let n = lin.len();
        let picked = self
            .reshape(&[rows_n, inner])
            .index_select(0, &Tensor::from_vec(lin, &[n]));
        let shape: Vec<isize> = b
            .iter()
            .chain(&self.shape()[k..])
            .map(|&d| d as isize)
            .collect();
        picked.reshape(&shape)
    }

    /// `torch.index_put(self, indices, values, accumulate)`: `self` with the
    /// positions `self[i0, ..., ik-1]` (as [`index`](Self::index)) set to
    /// `values`, or with `values` added when `accumulate` (repeated
    /// positions then add up; without it the last wins, where PyTorch
    /// leaves the choice unspecified). `values` broadcasts to the indexed
    /// shape. Differentiable in `self` and `values`.
    ///
    /// # Panics
    /// As [`index`](Self::index), or when `values` does not broadcast to the
    /// indexed shape.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f32>::zeros(&[2, 2]);
    /// let i = Tensor::<i64>::from_vec(vec![0, 0], &[2]);
    /// let j = Tensor::<i64>::from_vec(vec![1, 1], &[2]);
    /// let v = Tensor::<f32>::from_vec(vec![2.0, 3.0], &[2]);
    /// assert_eq!(x.index_put(&[&i, &j], &v, true).to_vec(), vec![0.0, 5.0, 0.0, 0.0]);
    /// assert_eq!(x.index_put(&[&i, &j], &v, false).to_vec(), vec![0.0, 3.0, 0.0, 0.0]);
    /// ```
    #[track_caller]
    pub fn index_put(&self, indices: &[&Tensor<i64, D>], values: &Self, accumulate: bool) -> Self {
        let (lin, b) = rows("index_put", self.shape(), indices);
        let k = indices.len();
        let (rows_n, inner) = flat(self.shape(), k);
        let target: Vec<usize> = b.iter().chain(&self.shape()[k..]).copied().collect();
        assert!(
            broadcast_shapes(values.shape(), &target).as_deref() == Some(target.as_slice()),
            "index_put: values of shape {:?} do not broadcast to the indexed shape {target:?} (input shape {:?})",
            values.shape(),
            self.shape()
        );
        let n = lin.len();
        let v = if values.shape() == target.as_slice() {
            values.clone()
        } else {
            values.expand(&target)
        }
        .reshape(&[n as isize, inner]);
        let lin = Tensor::from_vec(lin, &[n]);
        let x = self.reshape(&[rows_n, inner]);
        let out = if accumulate {
            x.index_add(0, &lin, &v)
        } else {
            x.index_copy(0, &lin, &v)
        };
        let shape: Vec<isize> = self.shape().iter().map(|&d| d as isize).collect();
        out.reshape(&shape)
    }

    /// Boolean-mask indexing `x[mask]`: `mask` has the shape of `self`'s
    /// first `mask.rank()` dimensions, and the output stacks the sub-tensors
    /// where it is true (row-major order) along a new first dimension.
    /// With `mask.shape() == self.shape()` it is
    /// [`masked_select`](Self::masked_select). Differentiable.
    ///
    /// # Panics
    /// When `mask` is 0-d or its shape is not a prefix of `self`'s.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f32>::from_vec((0..6).map(|v| v as f32).collect(), &[3, 2]);
    /// let m = Tensor::<bool>::from_vec(vec![true, false, true], &[3]);
    /// assert_eq!(x.index_mask(&m).to_vec(), vec![0.0, 1.0, 4.0, 5.0]);
    /// ```
    #[track_caller]
    pub fn index_mask(&self, mask: &Tensor<bool, D>) -> Self {
        let k = mask.rank();
        assert!(
            k >= 1 && self.shape().starts_with(mask.shape()),
            "index_mask: mask of shape {:?} must match the leading dimensions of shape {:?}",
            mask.shape(),
            self.shape()
        );
        let nz = mask.nonzero();
        let cols: Vec<Tensor<i64, D>> = (0..k)
            .map(|d| {
                let c: Vec<i64> = nz.as_slice().iter().skip(d).step_by(k).copied().collect();
                let n = c.len();
                Tensor::from_vec(c, &[n])
            })
            .collect();
        let refs: Vec<&Tensor<i64, D>> = cols.iter().collect();
        self.index(&refs)
    }
}

impl<D: Device> Tensor<bool, D> {
    /// `torch.nonzero`: the indices of the true elements, one row
    /// `[n, rank]` per element in row-major order.
    ///
    /// ```
    /// use forge::Tensor;
    /// let m = Tensor::<bool>::from_vec(vec![false, true, true, false], &[2, 2]);
    /// let nz = m.nonzero();
    /// assert_eq!(nz.shape(), &[2, 2]);
    /// assert_eq!(nz.to_vec(), vec![0, 1, 1, 0]);
    /// ```
    pub fn nonzero(&self) -> Tensor<i64, D> {
        let shape = self.shape();
        let r = shape.len();
        let mut out = Vec::new();
        let mut n = 0;
        for (flat, &b) in self.as_slice().iter().enumerate() {
            if b {
                let mut rest = flat;
                let start = out.len();
                out.resize(start + r, 0i64);
                for d in (0..r).rev() {
                    out[start + d] = (rest % shape[d]) as i64;
                    rest /= shape[d];
                }
                n += 1;
            }
        }
        Tensor::from_vec(out, &[n, r])
    }
}

/// `shape` split into (rows of the first `k` dimensions, elements after).
fn flat(shape: &[usize], k: usize) -> (isize, isize) {
    (
        shape[..k].iter().product::<usize>() as isize,
        shape[k..].iter().product::<usize>() as isize,
    )
}
