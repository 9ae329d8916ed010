//! Shape ops that the core needs: reshape, broadcast (`expand`) and its
//! adjoint `sum_to`, transpose and permute.

use crate::base::Dims;
use crate::cpu::reduce::fold_axes;
use crate::cpu::Storage;
use crate::tensor::{broadcast_shapes, norm_axis, numel, Device, Float, Tensor};

impl<E: Float, D: Device> Tensor<E, D> {
    /// The same data in a new shape with the same number of elements. One
    /// dimension may be `-1` (inferred). Copies nothing.
    ///
    /// # Panics
    /// When the element counts differ or more than one `-1` is given.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::zeros(&[2, 6]);
    /// assert_eq!(t.reshape(&[3, -1]).shape(), &[3, 4]);
    /// ```
    #[track_caller]
    pub fn reshape(&self, shape: impl Dims) -> Self {
        let shape = &shape.to_dims()[..];
        self.view(&super::plan::reshape(self.shape(), shape))
    }

    /// Reshape to an exact `usize` shape (no inference).
    ///
    /// # Panics
    /// When the element counts differ.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::zeros(&[6]);
    /// assert_eq!(t.view(&[2, 3]).shape(), &[2, 3]);
    /// ```
    #[track_caller]
    pub fn view(&self, shape: impl Dims) -> Self {
        let shape = &crate::base::sizes("view", &shape)[..];
        shape_assert!(
            numel(shape) == self.numel(),
            "view: cannot view shape {:?} as {:?}",
            self.shape(),
            shape
        );
        if shape == self.shape() {
            return self.clone();
        }
        self.reshaped(shape)
            .record("reshape", vec![self.clone()], |ctx| {
                vec![Some(ctx.grad.view(ctx.inputs[0].shape()))]
            })
    }

    /// Broadcasts to `shape` (NumPy rules) as a view with stride 0 along the
    /// broadcast dimensions (`torch.expand`): nothing is copied until a
    /// kernel reads it. The gradient sums over the broadcast dimensions.
    ///
    /// # Panics
    /// When `self` cannot be broadcast to `shape`.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec(vec![1.0, 2.0], &[2, 1]);
    /// assert_eq!(t.expand(&[2, 3]).to_vec(), vec![1.0, 1.0, 1.0, 2.0, 2.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn expand(&self, shape: impl Dims) -> Self {
        let shape = &crate::base::sizes("expand", &shape)[..];
        shape_assert!(
            broadcast_shapes(self.shape(), shape).as_deref() == Some(shape),
            "expand: shape {:?} cannot be broadcast to {:?}",
            self.shape(),
            shape
        );
        if shape == self.shape() {
            return self.clone();
        }
        self.expanded(shape)
            .record("expand", vec![self.clone()], |ctx| {
                vec![Some(ctx.grad.sum_to(ctx.inputs[0].shape()))]
            })
    }

    /// Sums over the dimensions along which `shape` would be broadcast to
    /// `self`'s shape: the adjoint of [`expand`](Self::expand).
    ///
    /// # Panics
    /// When `shape` does not broadcast to `self`'s shape.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::ones(&[2, 3]);
    /// assert_eq!(t.sum_to(&[1, 3]).to_vec(), vec![2.0, 2.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn sum_to(&self, shape: &[usize]) -> Self {
        if shape == self.shape() {
            return self.clone();
        }
        shape_assert!(
            broadcast_shapes(shape, self.shape()).as_deref() == Some(self.shape()),
            "sum_to: shape {:?} does not broadcast to {:?}",
            shape,
            self.shape()
        );
        let lead = self.rank() - shape.len();
        let axes: Vec<usize> = (0..self.rank())
            .filter(|&i| i < lead || (shape[i - lead] == 1 && self.shape[i] != 1))
            .collect();
        let data = fold_axes(self.as_slice(), self.shape(), &axes, E::zero(), |a, x| {
            a + x
        });
        Tensor::from_parts(data, shape.into(), None).record("sum_to", vec![self.clone()], |ctx| {
            vec![Some(ctx.grad.expand(ctx.inputs[0].shape()))]
        })
    }

    /// Reorders the dimensions: output dimension `i` is input dimension
    /// `dims[i]` (negative axes allowed). A view: shares the storage, copies
    /// nothing.
    ///
    /// # Panics
    /// When `dims` is not a permutation of the axes.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec((0..6).map(|i| i as f32).collect(), &[2, 3]);
    /// assert_eq!(t.permute(&[1, 0]).to_vec(), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    /// ```
    #[track_caller]
    pub fn permute(&self, dims: impl Dims) -> Self {
        let dims = &dims.to_dims()[..];
        let (view, inv) = super::plan::permute(self.shape(), dims);
        if inv.iter().enumerate().all(|(i, &d)| i as isize == d) {
            return self.clone();
        }
        // A permutation's strides are all non-negative and compose with any
        // layout: the result is always a view.
        let out = self
            .view_of(view.offset, &view.shape, &view.strides)
            .expect("a permutation is a view of any layout");
        out.record("permute", vec![self.clone()], move |ctx| {
            vec![Some(ctx.grad.permute(&inv))]
        })
    }

    /// Swaps two dimensions.
    ///
    /// # Panics
    /// When an axis is out of range.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::zeros(&[2, 3, 4]);
    /// assert_eq!(t.transpose(0, -1).shape(), &[4, 3, 2]);
    /// ```
    #[track_caller]
    pub fn transpose(&self, a: isize, b: isize) -> Self {
        let rank = self.rank();
        let (a, b) = (
            norm_axis("transpose", a, rank),
            norm_axis("transpose", b, rank),
        );
        let mut p: Vec<isize> = (0..rank as isize).collect();
        p.swap(a, b);
        self.permute(&p)
    }

    /// The transpose of a matrix (the last two dimensions swapped).
    ///
    /// # Panics
    /// When the rank is below 2.
    ///
    /// ```
    /// assert_eq!(forge::Tensor::<f32>::zeros(&[2, 3]).t().shape(), &[3, 2]);
    /// ```
    #[track_caller]
    pub fn t(&self) -> Self {
        shape_assert!(
            self.rank() >= 2,
            "t: tensor of shape {:?} has rank below 2",
            self.shape()
        );
        self.transpose(-2, -1)
    }
}

/// Copies elements read with `src_strides` into a contiguous buffer of
/// `out_shape` (in parallel chunks of whole rows when large: see
/// [`strided_read`](crate::cpu::strided::strided_read)).
pub(crate) fn gather_strided<E: Copy + Send + Sync>(
    src: &[E],
    out_shape: &[usize],
    src_strides: &[usize],
) -> Storage<E> {
    let strides: Vec<isize> = src_strides.iter().map(|&s| s as isize).collect();
    crate::cpu::strided::strided_read(src, 0, out_shape, &strides)
}
