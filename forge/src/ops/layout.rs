//! Layout ops: squeeze, unsqueeze, flatten, flip, repeat, constant pad,
//! tril/triu and diagonal. Each is a view, a strided copy or a composition
//! of differentiable ops, so every gradient is differentiable again.

use super::plan;
use crate::base::norm_axes;
use crate::cpu::strided::signed_strides;
use crate::tensor::{norm_axis, Device, Float, Tensor};

impl<E: Float, D: Device> Tensor<E, D> {
    /// Removes dimension `axis` if its size is 1; otherwise returns the
    /// tensor unchanged (as `torch.squeeze(dim)`).
    ///
    /// # Panics
    /// When the axis is out of range.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::zeros(&[2, 1, 3]);
    /// assert_eq!(t.squeeze(1).shape(), &[2, 3]);
    /// assert_eq!(t.squeeze(0).shape(), &[2, 1, 3]);
    /// ```
    #[track_caller]
    pub fn squeeze(&self, axis: isize) -> Self {
        self.view(&plan::squeeze(self.shape(), axis))
    }

    /// Removes every dimension of size 1.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::zeros(&[1, 2, 1, 3]);
    /// assert_eq!(t.squeeze_all().shape(), &[2, 3]);
    /// ```
    #[track_caller]
    pub fn squeeze_all(&self) -> Self {
        let shape: Vec<usize> = self.shape().iter().copied().filter(|&d| d != 1).collect();
        self.view(&shape)
    }

    /// Inserts a dimension of size 1 at `axis`, which may be `rank`
    /// (negative counts from the end: `-1` appends).
    ///
    /// # Panics
    /// When the axis is outside `-rank-1..=rank`.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::zeros(&[2, 3]);
    /// assert_eq!(t.unsqueeze(0).shape(), &[1, 2, 3]);
    /// assert_eq!(t.unsqueeze(-1).shape(), &[2, 3, 1]);
    /// ```
    #[track_caller]
    pub fn unsqueeze(&self, axis: isize) -> Self {
        self.view(&plan::unsqueeze(self.shape(), axis))
    }

    /// Merges dimensions `start..=end` into one (a 0-d tensor becomes
    /// shape `[1]`, as in PyTorch).
    ///
    /// # Panics
    /// When an axis is out of range or `start` comes after `end`.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::zeros(&[2, 3, 4, 5]);
    /// assert_eq!(t.flatten(1, 2).shape(), &[2, 12, 5]);
    /// assert_eq!(t.flatten(0, -1).shape(), &[120]);
    /// ```
    #[track_caller]
    pub fn flatten(&self, start: isize, end: isize) -> Self {
        self.view(&plan::flatten(self.shape(), start, end))
    }

    /// Reverses the order of the elements along each axis in `dims`.
    ///
    /// # Panics
    /// When an axis is out of range or repeated.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]);
    /// assert_eq!(t.flip(&[1]).to_vec(), vec![2.0, 1.0, 4.0, 3.0]);
    /// assert_eq!(t.flip(&[0, 1]).to_vec(), vec![4.0, 3.0, 2.0, 1.0]);
    /// ```
    #[track_caller]
    pub fn flip(&self, dims: &[isize]) -> Self {
        let mut axes = norm_axes("flip", dims, self.rank());
        axes.sort_unstable();
        axes.dedup();
        shape_assert!(
            axes.len() == dims.len(),
            "flip: repeated axis in {dims:?} for shape {:?}",
            self.shape()
        );
        if self.rank() == 0 || self.numel() == 0 {
            return self.clone();
        }
        let mut strides = signed_strides(self.shape());
        let mut offset = 0usize;
        for &a in &axes {
            offset += (self.shape[a] - 1) * strides[a] as usize;
            strides[a] = -strides[a];
        }
        self.strided_view("flip", offset, self.shape(), &strides)
    }

    /// Tiles the tensor: `reps[i]` copies along dimension `i`, as PyTorch's
    /// `Tensor.repeat`. When `reps` is longer than the rank, the tensor is
    /// first viewed with leading dimensions of size 1.
    ///
    /// # Panics
    /// When `reps` has fewer entries than the tensor has dimensions.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec(vec![1.0, 2.0], &[2]);
    /// assert_eq!(t.repeat(&[2, 2]).shape(), &[2, 4]);
    /// assert_eq!(t.repeat(&[3]).to_vec(), vec![1.0, 2.0, 1.0, 2.0, 1.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn repeat(&self, reps: &[usize]) -> Self {
        shape_assert!(
            reps.len() >= self.rank(),
            "repeat: {} repeat counts {reps:?} for a tensor of shape {:?} (need at least {})",
            reps.len(),
            self.shape(),
            self.rank()
        );
        let lead = reps.len() - self.rank();
        let sizes: Vec<usize> = (0..reps.len())
            .map(|i| if i < lead { 1 } else { self.shape[i - lead] })
            .collect();
        // View as [1, s0, 1, s1, ...], broadcast to [r0, s0, r1, s1, ...]
        // and merge each pair: tile i covers r_i * s_i.
        let pairs: Vec<usize> = sizes.iter().flat_map(|&s| [1, s]).collect();
        let tiled: Vec<usize> = sizes.iter().zip(reps).flat_map(|(&s, &r)| [r, s]).collect();
        let out: Vec<usize> = sizes.iter().zip(reps).map(|(&s, &r)| s * r).collect();
        self.view(&pairs).expand(&tiled).view(&out)
    }

    /// Constant padding, as `torch.nn.functional.pad(x, pad, value=value)`:
    /// `pads[0]` is `(before, after)` for the last dimension, `pads[1]` for
    /// the one before it, and so on.
    ///
    /// # Panics
    /// When more pairs than dimensions are given.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec(vec![1.0, 2.0], &[1, 2]);
    /// let p = t.pad(&[(1, 0), (0, 1)], 9.0);
    /// assert_eq!(p.shape(), &[2, 3]);
    /// assert_eq!(p.to_vec(), vec![9.0, 1.0, 2.0, 9.0, 9.0, 9.0]);
    /// ```
    #[track_caller]
    pub fn pad(&self, pads: &[(usize, usize)], value: f64) -> Self {
        let rank = self.rank();
        shape_assert!(
            pads.len() <= rank,
            "pad: {} pairs {pads:?} for a tensor of shape {:?}",
            pads.len(),
            self.shape()
        );
        if pads.iter().all(|&p| p == (0, 0)) {
            return self.clone();
        }
        let mut shape = self.shape().to_vec();
        for (k, &(lo, hi)) in pads.iter().enumerate() {
            shape[rank - 1 - k] += lo + hi;
        }
        let strides = signed_strides(&shape);
        let offset: usize = pads
            .iter()
            .enumerate()
            .map(|(k, &(lo, _))| lo * strides[rank - 1 - k] as usize)
            .sum();
        self.strided_embed("pad", &shape, offset, &strides, E::from_f64(value))
    }

    /// The lower triangle of the last two dimensions: element `(i, j)` is
    /// kept when `j - i <= k` and set to zero otherwise (`k = 0` keeps the
    /// main diagonal, `k < 0` drops diagonals below it).
    ///
    /// # Panics
    /// When the rank is below 2.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::ones(&[2, 2]);
    /// assert_eq!(t.tril(0).to_vec(), vec![1.0, 0.0, 1.0, 1.0]);
    /// ```
    #[track_caller]
    pub fn tril(&self, k: isize) -> Self {
        self.triangle("tril", |i, j| j - i > k)
    }

    /// The upper triangle of the last two dimensions: element `(i, j)` is
    /// kept when `j - i >= k` and set to zero otherwise.
    ///
    /// # Panics
    /// When the rank is below 2.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::ones(&[2, 2]);
    /// assert_eq!(t.triu(1).to_vec(), vec![0.0, 1.0, 0.0, 0.0]);
    /// ```
    #[track_caller]
    pub fn triu(&self, k: isize) -> Self {
        self.triangle("triu", |i, j| j - i < k)
    }

    /// Zeroes the elements `(i, j)` of the last two dimensions where
    /// `drop(i, j)`; the gradient is zero there too.
    #[track_caller]
    fn triangle(&self, op: &str, drop: impl Fn(isize, isize) -> bool) -> Self {
        shape_assert!(
            self.rank() >= 2,
            "{op}: tensor of shape {:?} has rank below 2",
            self.shape()
        );
        let (n, m) = (self.shape[self.rank() - 2], self.shape[self.rank() - 1]);
        let mask = Tensor::<bool, D>::from_fn(&[n, m], |p| {
            drop((p / m.max(1)) as isize, (p % m.max(1)) as isize)
        });
        self.masked_fill(&mask, 0.0)
    }

    /// The diagonal of the planes spanned by `dim1` and `dim2`, as
    /// `torch.diagonal`: those two dimensions are removed and the diagonal
    /// becomes a new last dimension. `offset > 0` takes a diagonal above
    /// the main one, `offset < 0` below it.
    ///
    /// # Panics
    /// When an axis is out of range or `dim1 == dim2`.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec((0..6).map(|i| i as f32).collect(), &[2, 3]);
    /// assert_eq!(t.diagonal(0, 0, 1).to_vec(), vec![0.0, 4.0]);
    /// assert_eq!(t.diagonal(1, 0, 1).to_vec(), vec![1.0, 5.0]);
    /// assert_eq!(t.diagonal(-1, 0, 1).to_vec(), vec![3.0]);
    /// ```
    #[track_caller]
    pub fn diagonal(&self, offset: isize, dim1: isize, dim2: isize) -> Self {
        let rank = self.rank();
        let a = norm_axis("diagonal", dim1, rank);
        let b = norm_axis("diagonal", dim2, rank);
        shape_assert!(
            a != b && rank >= 2,
            "diagonal: dimensions {dim1} and {dim2} of shape {:?} must be two different axes",
            self.shape()
        );
        let st = signed_strides(self.shape());
        let (na, nb) = (self.shape[a] as isize, self.shape[b] as isize);
        let len = if offset >= 0 {
            na.min(nb - offset)
        } else {
            (na + offset).min(nb)
        }
        .max(0) as usize;
        let start = if len == 0 {
            0
        } else if offset >= 0 {
            offset as usize * st[b] as usize
        } else {
            (-offset) as usize * st[a] as usize
        };
        let mut shape = Vec::with_capacity(rank - 1);
        let mut strides = Vec::with_capacity(rank - 1);
        for d in (0..rank).filter(|&d| d != a && d != b) {
            shape.push(self.shape[d]);
            strides.push(st[d]);
        }
        shape.push(len);
        strides.push(st[a] + st[b]);
        self.strided_view("diagonal", start, &shape, &strides)
    }
}
