//! Joining and splitting: cat, stack (any element type; `f32`/`f64`
//! tracked), split, split_sizes, chunk. The gradient of `cat` narrows the
//! output gradient back to each input; the pieces of a split are narrows,
//! whose gradients pad back.

use super::plan;
use crate::cpu::index::concat;
use crate::tensor::{norm_axis, numel, Device, Element, Float, Tensor};
use std::any::{Any, TypeId};

/// `tensors` as tensors of the float type `F` when `E` is `F`, else `None`.
fn as_float<'a, E: Element, F: Float, D: Device>(
    tensors: &[&'a Tensor<E, D>],
) -> Option<Vec<&'a Tensor<F, D>>> {
    if TypeId::of::<E>() != TypeId::of::<F>() {
        return None;
    }
    tensors
        .iter()
        .map(|&t| (t as &dyn Any).downcast_ref::<Tensor<F, D>>())
        .collect()
}

/// A tensor of the float type `F` back as the `Tensor<E, D>` it is.
fn from_float<E: Element, F: Float, D: Device>(t: Tensor<F, D>) -> Tensor<E, D> {
    *(Box::new(t) as Box<dyn Any>)
        .downcast::<Tensor<E, D>>()
        .unwrap_or_else(|_| unreachable!("as_float checked that the element types agree"))
}

/// The values of `tensors` joined along axis `a` (checked), untracked.
fn cat_values<E: Element, D: Device>(tensors: &[&Tensor<E, D>], a: usize) -> Tensor<E, D> {
    let first = tensors[0];
    let outer = numel(&first.shape()[..a]);
    let inner = numel(&first.shape()[a + 1..]);
    let parts: Vec<(&[E], usize)> = tensors
        .iter()
        .map(|t| (t.as_slice(), t.shape()[a]))
        .collect();
    let data = concat(&parts, outer, inner);
    let mut shape = first.shape().to_vec();
    shape[a] = tensors.iter().map(|t| t.shape()[a]).sum();
    Tensor::from_parts(data, shape.into(), None)
}

impl<E: Element, D: Device> Tensor<E, D> {
    /// Concatenates tensors along an existing axis. Every tensor has the
    /// same rank and the same size in every other dimension. Any element
    /// type (`f32`/`f64` tensors are recorded for autograd; the others,
    /// indices and masks, are never tracked).
    ///
    /// # Panics
    /// When `tensors` is empty or the shapes do not fit.
    ///
    /// ```
    /// use forge::Tensor;
    /// let a = Tensor::<f32>::zeros(&[2, 3]);
    /// let b = Tensor::<f32>::ones(&[2, 1]);
    /// let c = Tensor::cat(&[&a, &b], 1);
    /// assert_eq!(c.shape(), &[2, 4]);
    /// assert_eq!(c.to_vec()[3], 1.0);
    /// // Indices too.
    /// let i = Tensor::from_vec(vec![1i64, 2], &[2]);
    /// assert_eq!(Tensor::cat(&[&i, &i], 0).to_vec(), vec![1, 2, 1, 2]);
    /// ```
    #[track_caller]
    pub fn cat(tensors: &[&Self], axis: isize) -> Self {
        if let Some(ts) = as_float::<E, f32, D>(tensors) {
            return from_float(Tensor::cat_tracked(&ts, axis));
        }
        if let Some(ts) = as_float::<E, f64, D>(tensors) {
            return from_float(Tensor::cat_tracked(&ts, axis));
        }
        let shapes: Vec<&[usize]> = tensors.iter().map(|t| t.shape()).collect();
        let a = plan::check_cat(&shapes, axis);
        cat_values(tensors, a)
    }

    /// Joins tensors of one shape along a new axis `axis` (which may be
    /// `rank`; negative counts from the end of the result). Any element
    /// type, as [`cat`](Self::cat).
    ///
    /// # Panics
    /// When `tensors` is empty or the shapes differ.
    ///
    /// ```
    /// use forge::Tensor;
    /// let a = Tensor::<f32>::zeros(&[2, 3]);
    /// assert_eq!(Tensor::stack(&[&a, &a, &a], 1).shape(), &[2, 3, 3]);
    /// let m = Tensor::from_vec(vec![true, false], &[2]);
    /// assert_eq!(Tensor::stack(&[&m, &m], 0).shape(), &[2, 2]);
    /// ```
    #[track_caller]
    pub fn stack(tensors: &[&Self], axis: isize) -> Self {
        let shapes: Vec<&[usize]> = tensors.iter().map(|t| t.shape()).collect();
        let a = plan::check_stack(&shapes, axis) as usize;
        let parts: Vec<Self> = tensors.iter().map(|t| t.unsqueeze_any(a)).collect();
        let refs: Vec<&Self> = parts.iter().collect();
        Self::cat(&refs, a as isize)
    }

    /// `self` with a new axis of size 1 at `a` (in range), sharing its
    /// data; a float tensor keeps its place on the tape.
    fn unsqueeze_any(&self, a: usize) -> Self {
        if let Some(t) = (self as &dyn Any).downcast_ref::<Tensor<f32, D>>() {
            return from_float(t.unsqueeze(a as isize));
        }
        if let Some(t) = (self as &dyn Any).downcast_ref::<Tensor<f64, D>>() {
            return from_float(t.unsqueeze(a as isize));
        }
        let mut shape = self.shape().to_vec();
        shape.insert(a, 1);
        self.reshaped(&shape)
    }
}

impl<E: Float, D: Device> Tensor<E, D> {
    /// [`cat`](Self::cat) for a float type, recorded on the tape.
    #[track_caller]
    fn cat_tracked(tensors: &[&Self], axis: isize) -> Self {
        let shapes: Vec<&[usize]> = tensors.iter().map(|t| t.shape()).collect();
        let a = plan::check_cat(&shapes, axis);
        let first = tensors[0];
        if tensors.len() == 1 {
            return first.clone();
        }
        let lens: Vec<usize> = tensors.iter().map(|t| t.shape()[a]).collect();
        cat_values(tensors, a).record(
            "cat",
            tensors.iter().map(|&t| t.clone()).collect(),
            move |ctx| {
                let mut start = 0;
                lens.iter()
                    .enumerate()
                    .map(|(i, &n)| {
                        let g = ctx.needs(i).then(|| ctx.grad.narrow(a as isize, start, n));
                        start += n;
                        g
                    })
                    .collect()
            },
        )
    }

    /// Splits into pieces of `size` along `axis`; the last piece is smaller
    /// when `size` does not divide the dimension.
    ///
    /// # Panics
    /// When `size` is 0 or the axis is out of range.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::zeros(&[5, 2]);
    /// let parts = t.split(2, 0);
    /// let sizes: Vec<usize> = parts.iter().map(|p| p.dim(0)).collect();
    /// assert_eq!(sizes, vec![2, 2, 1]);
    /// ```
    #[track_caller]
    pub fn split(&self, size: usize, axis: isize) -> Vec<Self> {
        shape_assert!(size > 0, "split: piece size must be positive");
        shape_assert!(self.rank() > 0, "split: cannot split a 0-d tensor");
        let n = self.shape()[norm_axis("split", axis, self.rank())];
        let mut sizes = vec![size; n / size];
        if !n.is_multiple_of(size) || n == 0 {
            sizes.push(n % size);
        }
        self.split_sizes(&sizes, axis)
    }

    /// Splits into consecutive pieces of the given sizes along `axis`.
    ///
    /// # Panics
    /// When the sizes do not add up to the dimension.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::zeros(&[2, 6]);
    /// let parts = t.split_sizes(&[1, 3, 2], 1);
    /// assert_eq!(parts[1].shape(), &[2, 3]);
    /// ```
    #[track_caller]
    pub fn split_sizes(&self, sizes: &[usize], axis: isize) -> Vec<Self> {
        shape_assert!(self.rank() > 0, "split_sizes: cannot split a 0-d tensor");
        let n = self.shape()[norm_axis("split_sizes", axis, self.rank())];
        shape_assert!(
            sizes.iter().sum::<usize>() == n,
            "split_sizes: sizes {sizes:?} do not add up to size {n} of dimension {axis} (shape {:?})",
            self.shape()
        );
        let mut start = 0;
        sizes
            .iter()
            .map(|&len| {
                let piece = self.narrow(axis, start, len);
                start += len;
                piece
            })
            .collect()
    }

    /// Splits into `n` pieces of (at most) equal size along `axis`, as
    /// `torch.chunk`: pieces have `ceil(dim / n)` elements, so fewer than
    /// `n` pieces may come back.
    ///
    /// # Panics
    /// When `n` is 0 or the axis is out of range.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::zeros(&[6]);
    /// assert_eq!(t.chunk(3, 0).len(), 3);
    /// assert_eq!(forge::Tensor::<f32>::zeros(&[5]).chunk(4, 0).len(), 3);
    /// ```
    #[track_caller]
    pub fn chunk(&self, n: usize, axis: isize) -> Vec<Self> {
        shape_assert!(n > 0, "chunk: number of chunks must be positive");
        shape_assert!(self.rank() > 0, "chunk: cannot split a 0-d tensor");
        let d = self.shape()[norm_axis("chunk", axis, self.rank())];
        self.split(d.div_ceil(n).max(1), axis)
    }
}
