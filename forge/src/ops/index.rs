//! Indexing ops: slice, narrow, index_select/index_add, gather/scatter_add,
//! masked_fill and where. Each pair of adjoints (slice and embed,
//! index_select and index_add, gather and scatter_add) uses the other as its
//! backward rule, so gradients are differentiable again.

use super::plan;
use crate::cpu::broadcast::zip_broadcast;
use crate::cpu::index;
use crate::cpu::strided::signed_strides;
use crate::cpu::Storage;
use crate::tensor::{broadcast_shapes, norm_axis, Device, Float, Tensor};

impl<E: Float, D: Device> Tensor<E, D> {
    /// Python-style slicing along one axis, `x[start:end:step]`: negative
    /// `start`/`end` count from the end, and both are clamped to the size
    /// (an empty range gives a dimension of size 0).
    ///
    /// # Panics
    /// When the axis is out of range or `step` is 0.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec((0..6).map(|i| i as f32).collect(), &[6]);
    /// assert_eq!(t.slice(0, 1, 5, 2).to_vec(), vec![1.0, 3.0]);
    /// assert_eq!(t.slice(0, -2, 100, 1).to_vec(), vec![4.0, 5.0]);
    /// ```
    #[track_caller]
    pub fn slice(&self, axis: isize, start: isize, end: isize, step: usize) -> Self {
        match plan::slice(self.shape(), axis, start, end, step) {
            Some(v) => self.strided_view("slice", v.offset, &v.shape, &v.strides),
            None => self.clone(),
        }
    }

    /// The `len` elements starting at `start` along `axis`.
    ///
    /// # Panics
    /// When `start + len` exceeds the size of the axis.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec((0..6).map(|i| i as f32).collect(), &[2, 3]);
    /// assert_eq!(t.narrow(1, 1, 2).to_vec(), vec![1.0, 2.0, 4.0, 5.0]);
    /// ```
    #[track_caller]
    pub fn narrow(&self, axis: isize, start: usize, len: usize) -> Self {
        plan::check_narrow(self.shape(), axis, start, len);
        self.slice(axis, start as isize, (start + len) as isize, 1)
    }

    /// The slice at `index` along `axis`, with that dimension removed (as
    /// `torch.select`; negative `index` counts from the end). A view: shares
    /// the storage.
    ///
    /// # Panics
    /// When the axis or the index is out of range.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec((0..6).map(|i| i as f32).collect(), &[2, 3]);
    /// assert_eq!(t.select(1, -1).to_vec(), vec![2.0, 5.0]);
    /// assert!(t.select(0, 1).shares_data(&t));
    /// ```
    #[track_caller]
    pub fn select(&self, axis: isize, index: isize) -> Self {
        let a = norm_axis("select", axis, self.rank());
        let n = self.shape[a] as isize;
        shape_assert!(
            (-n..n).contains(&index),
            "select: index {index} out of range for dimension {a} of size {n} (shape {:?})",
            self.shape()
        );
        let i = if index < 0 { index + n } else { index } as usize;
        let mut shape = self.shape().to_vec();
        shape.remove(a);
        self.narrow(a as isize, i, 1).view(&shape)
    }

    /// The slices `idx` (a 1-d list, repeats allowed) along `axis`, in
    /// order. The gradient adds back into the selected slices.
    ///
    /// # Panics
    /// When `idx` has rank above 1, or an index is out of range (naming the
    /// index and the size).
    ///
    /// ```
    /// use forge::Tensor;
    /// let t = Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]);
    /// let i = Tensor::<i64>::from_vec(vec![2, 0], &[2]);
    /// assert_eq!(t.index_select(0, &i).to_vec(), vec![5.0, 6.0, 1.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn index_select(&self, axis: isize, idx: &Tensor<i64, D>) -> Self {
        let (a, ix, shape) = plan::index_select(self.shape(), axis, idx.shape(), idx.as_slice());
        let data = index::index_select(self.as_slice(), self.shape(), a, &ix);
        let idx = idx.clone();
        Tensor::from_parts(data, shape.into(), None).record(
            "index_select",
            vec![self.clone()],
            move |ctx| {
                let x = &ctx.inputs[0];
                vec![Some(
                    Tensor::zeros_in(x.shape()).index_add(a as isize, &idx, ctx.grad),
                )]
            },
        )
    }

    /// `self` plus `src` added into the slices `idx` along `axis` (repeated
    /// indices accumulate): the adjoint of [`index_select`](Self::index_select).
    /// `src` has `self`'s shape with `idx.numel()` at `axis`. Differentiable
    /// in `self` and `src`.
    ///
    /// # Panics
    /// When the shapes do not fit or an index is out of range.
    ///
    /// ```
    /// use forge::Tensor;
    /// let t = Tensor::<f32>::zeros(&[3]);
    /// let i = Tensor::<i64>::from_vec(vec![2, 2], &[2]);
    /// let s = Tensor::<f32>::from_vec(vec![1.0, 4.0], &[2]);
    /// assert_eq!(t.index_add(0, &i, &s).to_vec(), vec![0.0, 0.0, 5.0]);
    /// ```
    #[track_caller]
    pub fn index_add(&self, axis: isize, idx: &Tensor<i64, D>, src: &Self) -> Self {
        let a = norm_axis("index_add", axis, self.rank());
        let mut want = self.shape().to_vec();
        if let Some(d) = want.get_mut(a) {
            *d = idx.numel();
        }
        shape_assert!(
            idx.rank() <= 1 && self.rank() > 0 && src.shape() == want.as_slice(),
            "index_add: input {:?}, index {:?} and source {:?} do not fit along axis {axis}",
            self.shape(),
            idx.shape(),
            src.shape()
        );
        let ix = plan::indices("index_add", idx.as_slice(), a, self.shape[a]);
        let mut data = Storage::from_slice(self.as_slice());
        index::index_add(&mut data, self.shape(), a, &ix, src.as_slice());
        let idx = idx.clone();
        Tensor::from_parts(data, self.shape.clone(), None).record(
            "index_add",
            vec![self.clone(), src.clone()],
            move |ctx| {
                vec![
                    ctx.needs(0).then(|| ctx.grad.clone()),
                    ctx.needs(1)
                        .then(|| ctx.grad.index_select(a as isize, &idx)),
                ]
            },
        )
    }

    /// `torch.gather`: `out[i] = self[i with i[axis] replaced by idx[i]]`.
    /// `idx` has the same rank as `self` and is no larger in any other
    /// dimension; the output has `idx`'s shape. Repeated indices accumulate
    /// in the gradient.
    ///
    /// # Panics
    /// When the shapes do not fit or an index is out of range.
    ///
    /// ```
    /// use forge::Tensor;
    /// let t = Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]);
    /// let i = Tensor::<i64>::from_vec(vec![1, 0], &[2, 1]);
    /// assert_eq!(t.gather(1, &i).to_vec(), vec![2.0, 3.0]);
    /// ```
    #[track_caller]
    pub fn gather(&self, axis: isize, idx: &Tensor<i64, D>) -> Self {
        let a = norm_axis("gather", axis, self.rank());
        let fits = idx.rank() == self.rank()
            && self.rank() > 0
            && (0..self.rank()).all(|d| d == a || idx.shape()[d] <= self.shape[d]);
        shape_assert!(
            fits,
            "gather: index of shape {:?} does not fit input of shape {:?} along axis {axis}",
            idx.shape(),
            self.shape()
        );
        let ix = plan::indices("gather", idx.as_slice(), a, self.shape[a]);
        let data = index::gather(self.as_slice(), self.shape(), a, &ix, idx.shape());
        let idx = idx.clone();
        Tensor::from_parts(data, idx.shape.clone(), None).record(
            "gather",
            vec![self.clone()],
            move |ctx| {
                let x = &ctx.inputs[0];
                vec![Some(
                    Tensor::zeros_in(x.shape()).scatter_add(a as isize, &idx, ctx.grad),
                )]
            },
        )
    }

    /// `torch.scatter_add`: `self` with `src[i]` added at
    /// `[i with i[axis] replaced by idx[i]]` for every index `i` of `idx`.
    /// All three have the same rank; `idx` is no larger than `src` in any
    /// dimension and no larger than `self` except along `axis`.
    /// Differentiable in `self` and `src`.
    ///
    /// # Panics
    /// When the shapes do not fit or an index is out of range.
    ///
    /// ```
    /// use forge::Tensor;
    /// let t = Tensor::<f32>::zeros(&[2, 3]);
    /// let i = Tensor::<i64>::from_vec(vec![2, 2, 0, 1], &[2, 2]);
    /// let s = Tensor::<f32>::ones(&[2, 2]);
    /// assert_eq!(t.scatter_add(1, &i, &s).to_vec(), vec![0.0, 0.0, 2.0, 1.0, 1.0, 0.0]);
    /// ```
    #[track_caller]
    pub fn scatter_add(&self, axis: isize, idx: &Tensor<i64, D>, src: &Self) -> Self {
        let a = norm_axis("scatter_add", axis, self.rank());
        let r = self.rank();
        let fits = r > 0
            && idx.rank() == r
            && src.rank() == r
            && (0..r).all(|d| {
                idx.shape()[d] <= src.shape()[d] && (d == a || idx.shape()[d] <= self.shape[d])
            });
        shape_assert!(
            fits,
            "scatter_add: input {:?}, index {:?} and source {:?} do not fit along axis {axis}",
            self.shape(),
            idx.shape(),
            src.shape()
        );
        let ix = plan::indices("scatter_add", idx.as_slice(), a, self.shape[a]);
        let mut data = Storage::from_slice(self.as_slice());
        index::scatter_add(
            &mut data,
            self.shape(),
            a,
            &ix,
            idx.shape(),
            src.as_slice(),
            src.shape(),
        );
        let idx = idx.clone();
        Tensor::from_parts(data, self.shape.clone(), None).record(
            "scatter_add",
            vec![self.clone(), src.clone()],
            move |ctx| {
                let src = &ctx.inputs[1];
                let g_src = ctx.needs(1).then(|| {
                    let g = ctx.grad.gather(a as isize, &idx);
                    if g.shape() == src.shape() {
                        g
                    } else {
                        // Elements of src that idx does not reach get zero.
                        let st = signed_strides(src.shape());
                        g.strided_embed("strided_embed", src.shape(), 0, &st, E::zero())
                    }
                });
                vec![ctx.needs(0).then(|| ctx.grad.clone()), g_src]
            },
        )
    }

    /// `value` where `mask` is true, `self` elsewhere; `mask` broadcasts to
    /// `self`'s shape. The gradient is zero where the mask is true.
    ///
    /// # Panics
    /// When `mask` does not broadcast to `self`'s shape.
    ///
    /// ```
    /// use forge::Tensor;
    /// let t = Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]);
    /// let m = Tensor::<bool>::from_vec(vec![false, true], &[2]);
    /// assert_eq!(t.masked_fill(&m, -1.0).to_vec(), vec![1.0, -1.0, 3.0, -1.0]);
    /// ```
    #[track_caller]
    pub fn masked_fill(&self, mask: &Tensor<bool, D>, value: f64) -> Self {
        shape_assert!(
            broadcast_shapes(mask.shape(), self.shape()).as_deref() == Some(self.shape()),
            "masked_fill: mask of shape {:?} does not broadcast to shape {:?}",
            mask.shape(),
            self.shape()
        );
        let v = E::from_f64(value);
        let data = zip_broadcast(
            self.as_slice(),
            self.shape(),
            mask.as_slice(),
            mask.shape(),
            self.shape(),
            |x, m| if m { v } else { x },
        );
        let mask = mask.clone();
        Tensor::from_parts(data, self.shape.clone(), None).record(
            "masked_fill",
            vec![self.clone()],
            move |ctx| vec![Some(ctx.grad.masked_fill(&mask, 0.0))],
        )
    }

    /// Elementwise `a` where `cond` is true and `b` elsewhere, the three
    /// broadcast together (`torch.where`). Differentiable in `a` and `b`.
    ///
    /// # Panics
    /// When the three shapes cannot be broadcast together.
    ///
    /// ```
    /// use forge::Tensor;
    /// let c = Tensor::<bool>::from_vec(vec![true, false, true], &[3]);
    /// let a = Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0], &[3]);
    /// let b = Tensor::<f32>::scalar(0.0);
    /// assert_eq!(Tensor::where_cond(&c, &a, &b).to_vec(), vec![1.0, 0.0, 3.0]);
    /// ```
    #[track_caller]
    pub fn where_cond(cond: &Tensor<bool, D>, a: &Self, b: &Self) -> Self {
        let shape = broadcast_shapes(a.shape(), b.shape())
            .and_then(|s| broadcast_shapes(cond.shape(), &s))
            .unwrap_or_else(|| {
                shape_panic!(
                    "where_cond: condition {:?}, a {:?} and b {:?} cannot be broadcast together",
                    cond.shape(),
                    a.shape(),
                    b.shape()
                )
            });
        let pairs = zip_broadcast(
            a.as_slice(),
            a.shape(),
            b.as_slice(),
            b.shape(),
            &shape,
            |x, y| (x, y),
        );
        let data = zip_broadcast(
            &pairs,
            &shape,
            cond.as_slice(),
            cond.shape(),
            &shape,
            |(x, y), c| if c { x } else { y },
        );
        let cond = cond.clone();
        Tensor::from_parts(data, shape.into(), None).record(
            "where",
            vec![a.clone(), b.clone()],
            move |ctx| {
                let (a, b) = (&ctx.inputs[0], &ctx.inputs[1]);
                vec![
                    ctx.needs(0).then(|| {
                        ctx.grad
                            .masked_fill(&cond.logical_not(), 0.0)
                            .sum_to(a.shape())
                    }),
                    ctx.needs(1)
                        .then(|| ctx.grad.masked_fill(&cond, 0.0).sum_to(b.shape())),
                ]
            },
        )
    }
}
