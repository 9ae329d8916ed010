//! Rearranging ops built from differentiable pieces: `roll` (two narrows
//! and a cat per rolled dimension), `repeat_interleave` (an
//! `index_select`, whose gradient is `index_add`) and `unbind` (narrows).

use crate::base::norm_axis;
use crate::tensor::{Device, Float, Tensor};

impl<E: Float, D: Device> Tensor<E, D> {
    /// Rolls the elements along each of `dims` by the matching entry of
    /// `shifts` (positive moves toward higher indices; elements that leave
    /// at one end come back at the other), as `torch.roll(input, shifts,
    /// dims)`. With `dims` empty the tensor is rolled as if flattened by
    /// `shifts[0]`.
    ///
    /// # Panics
    /// When a dimension is out of range, or `shifts` and `dims` differ in
    /// length (or, with `dims` empty, `shifts` is not one value).
    ///
    /// ```
    /// use forge::Tensor;
    /// let t = Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    /// assert_eq!(t.roll(&[1], &[1]).to_vec(), vec![3.0, 1.0, 2.0, 6.0, 4.0, 5.0]);
    /// assert_eq!(t.roll(&[-1], &[]).to_vec(), vec![2.0, 3.0, 4.0, 5.0, 6.0, 1.0]);
    /// assert_eq!(t.roll(&[1, 1], &[0, 1]).to_vec(), vec![6.0, 4.0, 5.0, 3.0, 1.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn roll(&self, shifts: &[isize], dims: &[isize]) -> Self {
        if dims.is_empty() {
            shape_assert!(
                shifts.len() == 1,
                "roll: {} shifts {shifts:?} without dims (need exactly 1)",
                shifts.len()
            );
            return self
                .view(&[self.numel()])
                .roll(shifts, &[0])
                .view(self.shape());
        }
        shape_assert!(
            shifts.len() == dims.len(),
            "roll: {} shifts {shifts:?} for {} dims {dims:?}",
            shifts.len(),
            dims.len()
        );
        let mut y = self.clone();
        for (&s, &d) in shifts.iter().zip(dims) {
            let axis = norm_axis("roll", d, self.rank());
            let n = self.shape()[axis] as isize;
            if n == 0 {
                continue;
            }
            let s = s.rem_euclid(n) as usize;
            if s == 0 {
                continue;
            }
            let n = n as usize;
            let a = axis as isize;
            y = Tensor::cat(&[&y.narrow(a, n - s, s), &y.narrow(a, 0, n - s)], a);
        }
        y
    }

    /// Repeats each element `repeats` times along `dim`, consecutively
    /// (`torch.repeat_interleave(input, repeats, dim)`); with `dim = None`
    /// the input is flattened first.
    ///
    /// # Panics
    /// When `dim` is out of range.
    ///
    /// ```
    /// use forge::Tensor;
    /// let t = Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]);
    /// assert_eq!(t.repeat_interleave(2, None).to_vec(), vec![1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0]);
    /// assert_eq!(t.repeat_interleave(2, Some(0)).to_vec(), vec![1.0, 2.0, 1.0, 2.0, 3.0, 4.0, 3.0, 4.0]);
    /// ```
    #[track_caller]
    pub fn repeat_interleave(&self, repeats: usize, dim: Option<isize>) -> Self {
        let n = match dim {
            None => self.numel(),
            Some(d) => self.shape()[norm_axis("repeat_interleave", d, self.rank())],
        };
        self.repeat_interleave_counts(&vec![repeats; n], dim)
    }

    /// Repeats element `i` along `dim` `repeats[i]` times, as
    /// `torch.repeat_interleave(input, repeats_tensor, dim)`; with
    /// `dim = None` the input is flattened first.
    ///
    /// # Panics
    /// When `dim` is out of range or `repeats` does not have one count per
    /// index of `dim`.
    ///
    /// ```
    /// use forge::Tensor;
    /// let t = Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0], &[3]);
    /// assert_eq!(t.repeat_interleave_counts(&[0, 2, 1], Some(0)).to_vec(), vec![2.0, 2.0, 3.0]);
    /// ```
    #[track_caller]
    pub fn repeat_interleave_counts(&self, repeats: &[usize], dim: Option<isize>) -> Self {
        let (x, axis) = match dim {
            None => (self.view(&[self.numel()]), 0),
            Some(d) => (self.clone(), norm_axis("repeat_interleave", d, self.rank())),
        };
        let n = if x.rank() == 0 { 1 } else { x.shape()[axis] };
        shape_assert!(
            repeats.len() == n,
            "repeat_interleave: {} repeat counts for dimension {dim:?} of size {n} (shape {:?})",
            repeats.len(),
            self.shape()
        );
        let idx: Vec<i64> = repeats
            .iter()
            .enumerate()
            .flat_map(|(i, &r)| std::iter::repeat_n(i as i64, r))
            .collect();
        let len = idx.len();
        x.index_select(axis as isize, &Tensor::from_vec(idx, &[len]))
    }

    /// The slices along `dim`, each without that dimension
    /// (`torch.unbind(input, dim)`); each is differentiable.
    ///
    /// # Panics
    /// When `dim` is out of range.
    ///
    /// ```
    /// use forge::Tensor;
    /// let t = Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    /// let cols = t.unbind(1);
    /// assert_eq!(cols.len(), 3);
    /// assert_eq!(cols[2].to_vec(), vec![3.0, 6.0]);
    /// ```
    #[track_caller]
    pub fn unbind(&self, dim: isize) -> Vec<Self> {
        let axis = norm_axis("unbind", dim, self.rank());
        shape_assert!(
            self.rank() > 0,
            "unbind: a 0-d tensor has no dimension to unbind"
        );
        let mut shape = self.shape().to_vec();
        shape.remove(axis);
        (0..self.shape()[axis])
            .map(|i| self.narrow(axis as isize, i, 1).view(&shape))
            .collect()
    }
}
