//! Overwriting writes by index: `scatter` (from a source or a value),
//! `index_copy` and `index_fill`. Each backward rule is made of ops again
//! (the overwritten positions get no gradient through `self`; the source
//! gets the gradient read back with `gather` / `index_select`), so
//! gradients of every order work.

use super::plan;
use crate::cpu::index;
use crate::cpu::strided::signed_strides;
use crate::cpu::Storage;
use crate::tensor::{norm_axis, Device, Float, Tensor};

/// `torch.scatter`'s `reduce` for a tensor source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScatterReduce {
    /// Each target position takes the source value (the default; of
    /// repeated positions the last in the index's row-major order wins,
    /// where PyTorch leaves the choice unspecified).
    None,
    /// The source values are added (`reduce='add'`, as
    /// [`scatter_add`](Tensor::scatter_add)).
    Add,
}

/// Checks the shapes of a scatter with `torch.scatter`'s rules and returns
/// the axis and the indices.
#[track_caller]
fn check_scatter(
    op: &str,
    shape: &[usize],
    axis: isize,
    idx_shape: &[usize],
    idx: &[i64],
    src_shape: Option<&[usize]>,
) -> (usize, Vec<usize>) {
    let a = norm_axis(op, axis, shape.len());
    let r = shape.len();
    let fits = r > 0
        && idx_shape.len() == r
        && src_shape.is_none_or(|s| s.len() == r)
        && (0..r).all(|d| {
            src_shape.is_none_or(|s| idx_shape[d] <= s[d]) && (d == a || idx_shape[d] <= shape[d])
        });
    assert!(
        fits,
        "{op}: input {shape:?}, index {idx_shape:?} and source {:?} do not fit along axis {axis}",
        src_shape.unwrap_or(&[])
    );
    (a, plan::indices(op, idx, a, shape[a]))
}

impl<E: Float, D: Device> Tensor<E, D> {
    /// `torch.scatter(self, axis, idx, src)`: `self` with
    /// `out[i with i[axis] replaced by idx[i]] = src[i]` for every index `i`
    /// of `idx` (the shapes as [`scatter_add`](Self::scatter_add)).
    /// Differentiable in `self` (zero gradient at the written positions)
    /// and `src` (the output's gradient gathered back). With
    /// [`ScatterReduce::Add`] it is `scatter_add`.
    ///
    /// # Panics
    /// When the shapes do not fit or an index is out of range.
    ///
    /// ```
    /// use forge::{ops::ScatterReduce, Tensor};
    /// let t = Tensor::<f32>::zeros(&[2, 3]);
    /// let i = Tensor::<i64>::from_vec(vec![2, 0, 1, 2], &[2, 2]);
    /// let s = Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]);
    /// assert_eq!(t.scatter(1, &i, &s, ScatterReduce::None).to_vec(), vec![2.0, 0.0, 1.0, 0.0, 3.0, 4.0]);
    /// ```
    #[track_caller]
    pub fn scatter(
        &self,
        axis: isize,
        idx: &Tensor<i64, D>,
        src: &Self,
        reduce: ScatterReduce,
    ) -> Self {
        if reduce == ScatterReduce::Add {
            return self.scatter_add(axis, idx, src);
        }
        let (a, ix) = check_scatter(
            "scatter",
            self.shape(),
            axis,
            idx.shape(),
            idx.as_slice(),
            Some(src.shape()),
        );
        let mut data = Storage::from_slice(self.as_slice());
        index::scatter_with(
            &mut data,
            self.shape(),
            a,
            &ix,
            idx.shape(),
            src.as_slice(),
            src.shape(),
            |_, s| s,
        );
        let idx = idx.clone();
        Tensor::from_parts(data, self.shape.clone(), None).record(
            "scatter",
            vec![self.clone(), src.clone()],
            move |ctx| {
                let src = &ctx.inputs[1];
                let g_src = ctx.needs(1).then(|| {
                    let g = ctx.grad.gather(a as isize, &idx);
                    if g.shape() == src.shape() {
                        g
                    } else {
                        let st = signed_strides(src.shape());
                        g.strided_embed("strided_embed", src.shape(), 0, &st, E::zero())
                    }
                });
                vec![
                    ctx.needs(0)
                        .then(|| ctx.grad.scatter_value(a as isize, &idx, 0.0)),
                    g_src,
                ]
            },
        )
    }

    /// `torch.scatter(self, axis, idx, value)`: `self` with `value` written
    /// at `[i with i[axis] replaced by idx[i]]` for every index `i` of `idx`.
    /// The gradient is zero at the written positions.
    ///
    /// # Panics
    /// When the shapes do not fit or an index is out of range.
    ///
    /// ```
    /// use forge::Tensor;
    /// let t = Tensor::<f32>::ones(&[2, 2]);
    /// let i = Tensor::<i64>::from_vec(vec![1, 0], &[2, 1]);
    /// assert_eq!(t.scatter_value(1, &i, 5.0).to_vec(), vec![1.0, 5.0, 5.0, 1.0]);
    /// ```
    #[track_caller]
    pub fn scatter_value(&self, axis: isize, idx: &Tensor<i64, D>, value: f64) -> Self {
        let (a, ix) = check_scatter(
            "scatter",
            self.shape(),
            axis,
            idx.shape(),
            idx.as_slice(),
            None,
        );
        let fill = vec![E::from_f64(value); idx.numel()];
        let mut data = Storage::from_slice(self.as_slice());
        index::scatter_with(
            &mut data,
            self.shape(),
            a,
            &ix,
            idx.shape(),
            &fill,
            idx.shape(),
            |_, s| s,
        );
        let idx = idx.clone();
        Tensor::from_parts(data, self.shape.clone(), None).record(
            "scatter",
            vec![self.clone()],
            move |ctx| vec![Some(ctx.grad.scatter_value(a as isize, &idx, 0.0))],
        )
    }

    /// `torch.index_copy`: `self` with slice `idx[p]` along `axis` replaced
    /// by slice `p` of `src` (`self`'s shape with `idx.numel()` at `axis`);
    /// of repeated indices the last wins. Differentiable in `self` (zero
    /// gradient on the replaced slices) and `src` (the output's gradient at
    /// the slices it went to).
    ///
    /// # Panics
    /// When the shapes do not fit or an index is out of range.
    ///
    /// ```
    /// use forge::Tensor;
    /// let t = Tensor::<f32>::zeros(&[3, 2]);
    /// let i = Tensor::<i64>::from_vec(vec![2, 0], &[2]);
    /// let s = Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]);
    /// assert_eq!(t.index_copy(0, &i, &s).to_vec(), vec![3.0, 4.0, 0.0, 0.0, 1.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn index_copy(&self, axis: isize, idx: &Tensor<i64, D>, src: &Self) -> Self {
        let a = norm_axis("index_copy", axis, self.rank());
        let mut want = self.shape().to_vec();
        if let Some(d) = want.get_mut(a) {
            *d = idx.numel();
        }
        assert!(
            idx.rank() <= 1 && self.rank() > 0 && src.shape() == want.as_slice(),
            "index_copy: input {:?}, index {:?} and source {:?} do not fit along axis {axis}",
            self.shape(),
            idx.shape(),
            src.shape()
        );
        let ix = plan::indices("index_copy", idx.as_slice(), a, self.shape[a]);
        let mut data = Storage::from_slice(self.as_slice());
        index::index_with(&mut data, self.shape(), a, &ix, src.as_slice(), |_, s| s);
        let idx = idx.clone();
        Tensor::from_parts(data, self.shape.clone(), None).record(
            "index_copy",
            vec![self.clone(), src.clone()],
            move |ctx| {
                vec![
                    ctx.needs(0)
                        .then(|| ctx.grad.index_fill(a as isize, &idx, 0.0)),
                    ctx.needs(1)
                        .then(|| ctx.grad.index_select(a as isize, &idx)),
                ]
            },
        )
    }

    /// `torch.index_fill`: `self` with the slices `idx` along `axis` set to
    /// `value`. The gradient is zero on those slices.
    ///
    /// # Panics
    /// When `idx` has rank above 1 or an index is out of range.
    ///
    /// ```
    /// use forge::Tensor;
    /// let t = Tensor::<f32>::ones(&[2, 3]);
    /// let i = Tensor::<i64>::from_vec(vec![0, 2], &[2]);
    /// assert_eq!(t.index_fill(1, &i, -1.0).to_vec(), vec![-1.0, 1.0, -1.0, -1.0, 1.0, -1.0]);
    /// ```
    #[track_caller]
    pub fn index_fill(&self, axis: isize, idx: &Tensor<i64, D>, value: f64) -> Self {
        let a = norm_axis("index_fill", axis, self.rank());
        assert!(
            idx.rank() <= 1 && self.rank() > 0,
            "index_fill: index of shape {:?} must be 1-d (input shape {:?})",
            idx.shape(),
            self.shape()
        );
        let ix = plan::indices("index_fill", idx.as_slice(), a, self.shape[a]);
        let mut src_shape = self.shape().to_vec();
        src_shape[a] = ix.len();
        let fill = vec![E::from_f64(value); src_shape.iter().product()];
        let mut data = Storage::from_slice(self.as_slice());
        index::index_with(&mut data, self.shape(), a, &ix, &fill, |_, s| s);
        let idx = idx.clone();
        Tensor::from_parts(data, self.shape.clone(), None).record(
            "index_fill",
            vec![self.clone()],
            move |ctx| vec![Some(ctx.grad.index_fill(a as isize, &idx, 0.0))],
        )
    }
}
