//! Joining and splitting: cat, stack, split, split_sizes, chunk. The
//! gradient of `cat` narrows the output gradient back to each input; the
//! pieces of a split are narrows, whose gradients pad back.

use super::plan;
use crate::cpu::index::concat;
use crate::tensor::{norm_axis, numel, Device, Float, Tensor};

impl<E: Float, D: Device> Tensor<E, D> {
    /// Concatenates tensors along an existing axis. Every tensor has the
    /// same rank and the same size in every other dimension.
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
    /// ```
    #[track_caller]
    pub fn cat(tensors: &[&Self], axis: isize) -> Self {
        let shapes: Vec<&[usize]> = tensors.iter().map(|t| t.shape()).collect();
        let a = plan::check_cat(&shapes, axis);
        let first = tensors[0];
        if tensors.len() == 1 {
            return first.clone();
        }
        let outer = numel(&first.shape()[..a]);
        let inner = numel(&first.shape()[a + 1..]);
        let parts: Vec<(&[E], usize)> = tensors
            .iter()
            .map(|t| (t.as_slice(), t.shape()[a]))
            .collect();
        let data = concat(&parts, outer, inner);
        let lens: Vec<usize> = tensors.iter().map(|t| t.shape()[a]).collect();
        let mut shape = first.shape().to_vec();
        shape[a] = lens.iter().sum();
        Tensor::from_parts(data, shape.into(), None).record(
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

    /// Joins tensors of one shape along a new axis `axis` (which may be
    /// `rank`; negative counts from the end of the result).
    ///
    /// # Panics
    /// When `tensors` is empty or the shapes differ.
    ///
    /// ```
    /// use forge::Tensor;
    /// let a = Tensor::<f32>::zeros(&[2, 3]);
    /// assert_eq!(Tensor::stack(&[&a, &a, &a], 1).shape(), &[2, 3, 3]);
    /// ```
    #[track_caller]
    pub fn stack(tensors: &[&Self], axis: isize) -> Self {
        let shapes: Vec<&[usize]> = tensors.iter().map(|t| t.shape()).collect();
        let a = plan::check_stack(&shapes, axis);
        let parts: Vec<Self> = tensors.iter().map(|t| t.unsqueeze(a)).collect();
        let refs: Vec<&Self> = parts.iter().collect();
        Self::cat(&refs, a)
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
