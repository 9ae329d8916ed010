//! Shapes, strides and broadcasting rules.

/// Row-major (C-contiguous) strides of a shape, in elements.
///
/// ```
/// assert_eq!(forge::tensor::strides(&[2, 3, 4]), vec![12, 4, 1]);
/// ```
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// The number of elements of a shape (1 for a scalar `[]`).
///
/// ```
/// assert_eq!(forge::tensor::numel(&[2, 3]), 6);
/// assert_eq!(forge::tensor::numel(&[]), 1);
/// ```
pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// The broadcast shape of two shapes under NumPy/PyTorch rules, or `None`
/// when they are incompatible.
///
/// ```
/// use forge::tensor::broadcast_shapes;
/// assert_eq!(broadcast_shapes(&[2, 1, 4], &[3, 1]), Some(vec![2, 3, 4]));
/// assert_eq!(broadcast_shapes(&[2], &[3]), None);
/// ```
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let db = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return None;
        };
    }
    Some(out)
}

/// Normalises a possibly negative axis (`-1` is the last) against a rank.
///
/// # Panics
/// When the axis is out of range, naming the op.
///
/// ```
/// assert_eq!(forge::tensor::norm_axis("sum", -1, 3), 2);
/// ```
#[track_caller]
pub fn norm_axis(op: &str, axis: isize, rank: usize) -> usize {
    let r = rank as isize;
    let a = if axis < 0 { axis + r } else { axis };
    if a < 0 || a >= r.max(1) && !(rank == 0 && a == 0) {
        panic!("{op}: axis {axis} is out of range for a tensor of rank {rank}");
    }
    a as usize
}

/// [`norm_axis`] for each of `axes`, in their order. A loop rather than an
/// iterator `map`: a closure would end the `#[track_caller]` chain, and an
/// out-of-range axis would be reported here instead of at the user's call.
#[track_caller]
pub(crate) fn norm_axes(op: &str, axes: &[isize], rank: usize) -> Vec<usize> {
    let mut out = Vec::with_capacity(axes.len());
    for &axis in axes {
        out.push(norm_axis(op, axis, rank));
    }
    out
}

/// What a shape or axes argument takes: a slice, array or `Vec` of
/// `usize`, `isize`, `i32` or `i64` (or a reference to one), so that
/// `x.reshape(y.shape())`, `x.reshape(&[2, -1])`, `Tensor::zeros(&dims)`
/// and `x.sum_dim(&[0, 1], false)` all take what is at hand. Sizes must be
/// non-negative where the op takes sizes (`reshape` alone infers one `-1`);
/// axes may be negative (counted from the end).
///
/// ```
/// use forge::Tensor;
/// let x = Tensor::<f32>::zeros(&[2, 3]);
/// let y = Tensor::<f32>::ones(&[3, 2]);
/// assert_eq!(y.reshape(x.shape()).shape(), &[2, 3]);
/// assert_eq!(y.reshape(&[-1]).shape(), &[6]);
/// let dims: Vec<usize> = vec![6, 1];
/// assert_eq!(Tensor::<f32>::zeros(&dims).shape(), &[6, 1]);
/// ```
pub trait Dims {
    /// The values as signed integers, in order.
    fn to_dims(&self) -> Vec<isize>;
}

macro_rules! dims_for {
    ($($t:ty),*) => {$(
        impl Dims for [$t] {
            fn to_dims(&self) -> Vec<isize> {
                self.iter().map(|&x| x as isize).collect()
            }
        }
        impl<const N: usize> Dims for [$t; N] {
            fn to_dims(&self) -> Vec<isize> {
                self.as_slice().to_dims()
            }
        }
        impl Dims for Vec<$t> {
            fn to_dims(&self) -> Vec<isize> {
                self.as_slice().to_dims()
            }
        }
    )*};
}
dims_for!(usize, isize, i32, i64);

impl<T: Dims + ?Sized> Dims for &T {
    fn to_dims(&self) -> Vec<isize> {
        (**self).to_dims()
    }
}

/// `dims` as sizes for `op`.
///
/// # Panics
/// When a size is negative; the message names `op` and the sizes.
#[track_caller]
pub(crate) fn sizes(op: &str, dims: &impl Dims) -> Vec<usize> {
    let d = dims.to_dims();
    shape_assert!(d.iter().all(|&x| x >= 0), "{op}: negative size in {d:?}");
    d.into_iter().map(|x| x as usize).collect()
}
