//! Maxima and minima over any set of axes: the values (`max`, `max_dim`,
//! `min`, `min_dim`, differentiable like `torch.amax`/`torch.amin`) and the
//! indices (`argmax`, `argmax_dim`, `argmin`, `argmin_dim`, not
//! differentiable).

use super::reduce::{reduce_axes, reduced_shape};
use crate::cpu::broadcast::zip_broadcast;
use crate::cpu::reduce::{arg_best, fold_axes, kept_shape};
use crate::tensor::{norm_axis, Device, Element, Float, Tensor};
use std::sync::Arc;

/// Which extremum a reduction looks for.
#[derive(Clone, Copy)]
enum Extreme {
    Max,
    Min,
}

impl Extreme {
    fn name(self) -> &'static str {
        match self {
            Extreme::Max => "max",
            Extreme::Min => "min",
        }
    }

    /// The running extremum after seeing `x`. NaN wins and then stays, as
    /// in PyTorch.
    fn pick<E: Float>(self, acc: E, x: E) -> E {
        let better = match self {
            Extreme::Max => x > acc,
            Extreme::Min => x < acc,
        };
        if better || x.is_nan() {
            x
        } else {
            acc
        }
    }

    /// Whether `x` replaces the best value so far in an arg-reduction: it
    /// must be strictly better (so the first index wins ties), and NaN
    /// counts as the extremum, as in PyTorch's `argmax`/`argmin`.
    fn beats<E: Element>(self, x: E, best: E) -> bool {
        let nan = |v: E| v.partial_cmp(&v).is_none();
        if nan(best) {
            return false;
        }
        nan(x)
            || match self {
                Extreme::Max => x > best,
                Extreme::Min => x < best,
            }
    }
}

impl<E: Float, D: Device> Tensor<E, D> {
    #[track_caller]
    fn extreme_dim(&self, dims: &[isize], keepdim: bool, which: Extreme) -> Self {
        let name = which.name();
        let axes = reduce_axes(name, dims, self.rank());
        for &a in &axes {
            shape_assert!(
                self.shape[a] > 0,
                "{name}: cannot reduce over dimension {a} of size 0 in shape {:?}",
                self.shape()
            );
        }
        let init = match which {
            Extreme::Max => E::neg_infinity(),
            Extreme::Min => E::infinity(),
        };
        let values = Arc::new(fold_axes(
            self.as_slice(),
            self.shape(),
            &axes,
            init,
            |a, x| which.pick(a, x),
        ));
        let kept = kept_shape(self.shape(), &axes);
        let shape = reduced_shape(self.shape(), &axes, keepdim);
        let saved = values.clone();
        Tensor::from_parts(values, shape.into(), None).record(
            name,
            vec![self.clone()],
            move |ctx| {
                // The weights are piecewise constant in x (zero derivative almost
                // everywhere), so computing them raw keeps the rule differentiable.
                let w = tie_weights(&ctx.inputs[0], &saved, &kept, &axes);
                vec![Some(w.mul(&ctx.grad.view(&kept)))]
            },
        )
    }

    /// The largest element, as a 0-d tensor (`torch.amax` over every
    /// dimension). The gradient goes to the largest element; when several
    /// elements tie it is split equally among them. NaN propagates.
    ///
    /// # Panics
    /// When the tensor has no elements.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f64>::from_vec(vec![1.0, 4.0, -2.0, 4.0], &[2, 2]).requires_grad();
    /// let m = x.max();
    /// assert_eq!(m.item(), 4.0);
    /// let g = m.backward();
    /// assert_eq!(g.get(&x).unwrap().to_vec(), vec![0.0, 0.5, 0.0, 0.5]);
    /// ```
    #[track_caller]
    pub fn max(&self) -> Self {
        self.max_dim(&[], false)
    }

    /// The smallest element, as a 0-d tensor (`torch.amin` over every
    /// dimension). The gradient is split equally among tied minima.
    ///
    /// # Panics
    /// When the tensor has no elements.
    ///
    /// ```
    /// let x = forge::Tensor::<f32>::from_vec(vec![3.0, -1.0, 2.0], &[3]);
    /// assert_eq!(x.min().item(), -1.0);
    /// ```
    #[track_caller]
    pub fn min(&self) -> Self {
        self.min_dim(&[], false)
    }

    /// The maximum over `dims` (all dimensions when empty; negative axes
    /// count from the end), like `torch.amax`; `keepdim` keeps the reduced
    /// dimensions with size 1. The gradient goes to the unique maximum of
    /// each slice, split equally among ties.
    ///
    /// # Panics
    /// When an axis is out of range or repeated, or a reduced dimension has
    /// size 0.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f32>::from_vec(vec![1.0, 5.0, 2.0, 7.0, 0.0, 3.0], &[2, 3]);
    /// assert_eq!(x.max_dim(&[1], false).to_vec(), vec![5.0, 7.0]);
    /// assert_eq!(x.max_dim(&[0], true).shape(), &[1, 3]);
    /// assert_eq!(x.max_dim(&[0], true).to_vec(), vec![7.0, 5.0, 3.0]);
    /// ```
    #[track_caller]
    pub fn max_dim(&self, dims: &[isize], keepdim: bool) -> Self {
        self.extreme_dim(dims, keepdim, Extreme::Max)
    }

    /// The minimum over `dims` (all dimensions when empty), like
    /// `torch.amin`. The gradient goes to the minimum of each slice, split
    /// equally among ties.
    ///
    /// # Panics
    /// When an axis is out of range or repeated, or a reduced dimension has
    /// size 0.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f32>::from_vec(vec![1.0, 5.0, 2.0, 7.0, 0.0, 3.0], &[2, 3]);
    /// assert_eq!(x.min_dim(&[-1], true).to_vec(), vec![1.0, 0.0]);
    /// ```
    #[track_caller]
    pub fn min_dim(&self, dims: &[isize], keepdim: bool) -> Self {
        self.extreme_dim(dims, keepdim, Extreme::Min)
    }
}

/// `1 / (number of extrema in the slice)` where `x` equals the slice's
/// extremum `ext` (given in the `keepdim` layout `kept`), 0 elsewhere.
#[track_caller]
fn tie_weights<E: Float, D: Device>(
    x: &Tensor<E, D>,
    ext: &[E],
    kept: &[usize],
    axes: &[usize],
) -> Tensor<E, D> {
    let hit = zip_broadcast(x.as_slice(), x.shape(), ext, kept, x.shape(), |v, m| {
        if v == m {
            E::one()
        } else {
            E::zero()
        }
    });
    let count = fold_axes(&hit, x.shape(), axes, E::zero(), |a, h| a + h);
    let w = zip_broadcast(&hit, x.shape(), &count, kept, x.shape(), |h, c| h / c);
    Tensor::from_parts(w, x.shape.clone(), None)
}

impl<E: Element, D: Device> Tensor<E, D> {
    #[track_caller]
    fn arg_extreme(&self, which: Extreme, op: &str) -> Tensor<i64, D> {
        shape_assert!(
            self.numel() > 0,
            "{op}: tensor of shape {:?} has no elements",
            self.shape()
        );
        let idx = arg_best(self.as_slice(), &[self.numel()], 0, |x, b| {
            which.beats(x, b)
        });
        Tensor::from_parts(idx, Vec::<usize>::new().into(), None)
    }

    #[track_caller]
    fn arg_extreme_dim(
        &self,
        axis: isize,
        keepdim: bool,
        which: Extreme,
        op: &str,
    ) -> Tensor<i64, D> {
        let ax = norm_axis(op, axis, self.rank());
        if self.rank() == 0 {
            return Tensor::from_parts(Arc::new(vec![0]), Vec::<usize>::new().into(), None);
        }
        shape_assert!(
            self.shape[ax] > 0,
            "{op}: cannot reduce over dimension {ax} of size 0 in shape {:?}",
            self.shape()
        );
        let idx = arg_best(self.as_slice(), self.shape(), ax, |x, b| which.beats(x, b));
        let shape = reduced_shape(self.shape(), &[ax], keepdim);
        Tensor::from_parts(idx, shape.into(), None)
    }

    /// The flat (row-major) index of the largest element, as a 0-d `i64`
    /// tensor. The first index wins ties; NaN counts as the largest value,
    /// as in `torch.argmax`. Not differentiable.
    ///
    /// # Panics
    /// When the tensor has no elements.
    ///
    /// ```
    /// let x = forge::Tensor::<f32>::from_vec(vec![1.0, 9.0, 3.0, 9.0], &[2, 2]);
    /// assert_eq!(x.argmax().item(), 1);
    /// ```
    #[track_caller]
    pub fn argmax(&self) -> Tensor<i64, D> {
        self.arg_extreme(Extreme::Max, "argmax")
    }

    /// The flat index of the smallest element, as a 0-d `i64` tensor (first
    /// index on ties, NaN counts as the smallest). Not differentiable.
    ///
    /// # Panics
    /// When the tensor has no elements.
    ///
    /// ```
    /// let x = forge::Tensor::<f32>::from_vec(vec![1.0, -9.0, 3.0, -9.0], &[2, 2]);
    /// assert_eq!(x.argmin().item(), 1);
    /// ```
    #[track_caller]
    pub fn argmin(&self) -> Tensor<i64, D> {
        self.arg_extreme(Extreme::Min, "argmin")
    }

    /// The index along `axis` of the largest element of each slice
    /// (`torch.argmax(x, dim, keepdim)`): first index on ties, NaN counts as
    /// the largest. Not differentiable.
    ///
    /// # Panics
    /// When the axis is out of range or has size 0.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f32>::from_vec(vec![1.0, 5.0, 5.0, 7.0, 0.0, 3.0], &[2, 3]);
    /// assert_eq!(x.argmax_dim(1, false).to_vec(), vec![1, 0]);
    /// assert_eq!(x.argmax_dim(0, true).shape(), &[1, 3]);
    /// assert_eq!(x.argmax_dim(0, true).to_vec(), vec![1, 0, 0]);
    /// ```
    #[track_caller]
    pub fn argmax_dim(&self, axis: isize, keepdim: bool) -> Tensor<i64, D> {
        self.arg_extreme_dim(axis, keepdim, Extreme::Max, "argmax_dim")
    }

    /// The index along `axis` of the smallest element of each slice
    /// (`torch.argmin(x, dim, keepdim)`): first index on ties, NaN counts as
    /// the smallest. Not differentiable.
    ///
    /// # Panics
    /// When the axis is out of range or has size 0.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f32>::from_vec(vec![1.0, 5.0, 1.0, 7.0, 0.0, 3.0], &[2, 3]);
    /// assert_eq!(x.argmin_dim(-1, false).to_vec(), vec![0, 1]);
    /// ```
    #[track_caller]
    pub fn argmin_dim(&self, axis: isize, keepdim: bool) -> Tensor<i64, D> {
        self.arg_extreme_dim(axis, keepdim, Extreme::Min, "argmin_dim")
    }
}
