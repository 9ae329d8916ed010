//! Running and whole-axis products and sums: `cumsum`, `cumprod`, `prod`.
//!
//! `cumsum`'s gradient is the reversed running sum of the gradient, and
//! that op's gradient is `cumsum` again, so every order is exact.
//! `cumprod` and `prod` differentiate correctly through zeros: their rules
//! use prefix and suffix products that leave the element itself out, never
//! a division by it.

use crate::base::norm_axis;
use crate::cpu::index::split_at_axis;
use crate::cpu::scan::{scan, ScanOp};
use crate::tensor::{Device, Float, Tensor};

impl<E: Float, D: Device> Tensor<E, D> {
    /// The running sum along `dim` (`torch.cumsum(input, dim)`):
    /// `out[i] = x[0] + ... + x[i]`. Vectorised over the dimensions after
    /// `dim`, parallel over the ones before it.
    ///
    /// # Panics
    /// When `dim` is out of range.
    ///
    /// ```
    /// use forge::Tensor;
    /// let t = Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]);
    /// assert_eq!(t.cumsum(1).to_vec(), vec![1.0, 3.0, 3.0, 7.0]);
    /// assert_eq!(t.cumsum(0).to_vec(), vec![1.0, 2.0, 4.0, 6.0]);
    /// ```
    #[track_caller]
    pub fn cumsum(&self, dim: isize) -> Self {
        let axis = norm_axis("cumsum", dim, self.rank());
        self.running_sum(axis, false)
    }

    /// The running sum from the first (or, `reverse`, the last) index; its
    /// gradient is the running sum the other way.
    fn running_sum(&self, axis: usize, reverse: bool) -> Self {
        if self.rank() == 0 {
            return self.mul_scalar(E::one());
        }
        let (outer, len, inner) = split_at_axis(self.shape(), axis);
        let data = scan(self.as_slice(), outer, len, inner, ScanOp::Sum, reverse);
        Tensor::from_parts(data, self.shape.clone(), None).record(
            "cumsum",
            vec![self.clone()],
            move |ctx| vec![Some(ctx.grad.running_sum(axis, !reverse))],
        )
    }

    /// The running product along `dim` (`torch.cumprod(input, dim)`):
    /// `out[i] = x[0] * ... * x[i]`. The gradient is exact with zeros in
    /// the input: `grad_i = sum_{j >= i} g_j prod_{k <= j, k != i} x_k`.
    ///
    /// # Panics
    /// When `dim` is out of range.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f64>::from_vec(vec![2.0, 0.0, 3.0], &[3]).requires_grad();
    /// let y = x.cumprod(0);
    /// assert_eq!(y.to_vec(), vec![2.0, 0.0, 0.0]);
    /// let g = y.sum().backward();
    /// // d/dx0 = 1 + x1 + x1 x2 = 1, d/dx1 = x0 + x0 x2 = 8, d/dx2 = x0 x1 = 0
    /// assert_eq!(g.get(&x).unwrap().to_vec(), vec![1.0, 8.0, 0.0]);
    /// ```
    #[track_caller]
    pub fn cumprod(&self, dim: isize) -> Self {
        let axis = norm_axis("cumprod", dim, self.rank());
        if self.rank() == 0 {
            return self.mul_scalar(E::one());
        }
        let (outer, len, inner) = split_at_axis(self.shape(), axis);
        let data = scan(self.as_slice(), outer, len, inner, ScanOp::Prod, false);
        Tensor::from_parts(data, self.shape.clone(), None).record(
            "cumprod",
            vec![self.clone()],
            move |ctx| {
                let x = &ctx.inputs[0];
                if ctx.create_graph {
                    return vec![Some(cumprod_grad_composed(x, ctx.grad, axis))];
                }
                let g = cumprod_grad_raw(x.as_slice(), ctx.grad.as_slice(), outer, len, inner);
                vec![Some(Tensor::from_vec_in(g, x.shape()))]
            },
        )
    }

    /// The product of all elements, a 0-d tensor (`torch.prod(input)`).
    /// The gradient is exact with zeros in the input.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f64>::from_vec(vec![2.0, 0.0, 3.0], &[3]).requires_grad();
    /// let p = x.prod();
    /// assert_eq!(p.item(), 0.0);
    /// assert_eq!(p.backward().get(&x).unwrap().to_vec(), vec![0.0, 6.0, 0.0]);
    /// ```
    pub fn prod(&self) -> Self {
        self.view(&[self.numel()]).prod_dim(0, false)
    }

    /// The product along `dim` (`torch.prod(input, dim, keepdim)`);
    /// `keepdim` keeps it as size 1. The gradient of element `i` is the
    /// product of the others (prefix times suffix products, exact with
    /// zeros).
    ///
    /// # Panics
    /// When `dim` is out of range.
    ///
    /// ```
    /// use forge::Tensor;
    /// let t = Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]);
    /// assert_eq!(t.prod_dim(1, false).to_vec(), vec![2.0, 12.0]);
    /// assert_eq!(t.prod_dim(0, true).shape(), &[1, 2]);
    /// ```
    #[track_caller]
    pub fn prod_dim(&self, dim: isize, keepdim: bool) -> Self {
        let axis = norm_axis("prod_dim", dim, self.rank());
        if self.rank() == 0 {
            return self.mul_scalar(E::one());
        }
        let (outer, len, inner) = split_at_axis(self.shape(), axis);
        let x = self.as_slice();
        let mut out = vec![E::one(); outer * inner];
        for a in 0..outer {
            let acc = &mut out[a * inner..(a + 1) * inner];
            for k in 0..len {
                let row = &x[(a * len + k) * inner..(a * len + k + 1) * inner];
                for (o, &v) in acc.iter_mut().zip(row) {
                    *o *= v;
                }
            }
        }
        let mut kept = self.shape().to_vec();
        kept[axis] = 1;
        let mut shape = kept.clone();
        if !keepdim {
            shape.remove(axis);
        }
        Tensor::from_vec_in(out, &shape).record("prod", vec![self.clone()], move |ctx| {
            let x = &ctx.inputs[0];
            let g = ctx.grad.view(&kept);
            let others = exclusive_cumprod(x, axis, false).mul(&exclusive_cumprod(x, axis, true));
            vec![Some(others.mul(&g))]
        })
    }
}

/// The product of the elements before each index along `axis` (after it,
/// when `reverse`), 1 for the first: written in tensor ops.
fn exclusive_cumprod<E: Float, D: Device>(
    x: &Tensor<E, D>,
    axis: usize,
    reverse: bool,
) -> Tensor<E, D> {
    let n = x.shape()[axis];
    if n == 0 {
        return x.clone();
    }
    let a = axis as isize;
    let x = if reverse { x.flip(&[a]) } else { x.clone() };
    let mut pads = vec![(0, 0); x.rank() - axis];
    pads[x.rank() - 1 - axis] = (1, 0);
    let shifted = x.cumprod(a).narrow(a, 0, n - 1).pad(&pads, 1.0);
    if reverse {
        shifted.flip(&[a])
    } else {
        shifted
    }
}

/// `cumprod`'s gradient on slices, per column of each block: with the
/// exclusive prefix products `P_i = prod_{k<i} x_k` and the reverse
/// recurrence `S_i = g_i + x_{i+1} S_{i+1}`, `grad_i = P_i S_i` (no
/// division, so zeros are exact).
fn cumprod_grad_raw<E: Float>(x: &[E], g: &[E], outer: usize, len: usize, inner: usize) -> Vec<E> {
    let mut out = vec![E::zero(); x.len()];
    if x.is_empty() {
        return out;
    }
    let mut s = vec![E::zero(); len];
    for a in 0..outer {
        for j in 0..inner {
            let at = |k: usize| (a * len + k) * inner + j;
            s[len - 1] = g[at(len - 1)];
            for k in (0..len - 1).rev() {
                s[k] = g[at(k)] + x[at(k + 1)] * s[k + 1];
            }
            let mut p = E::one();
            for (k, &sk) in s.iter().enumerate() {
                out[at(k)] = p * sk;
                p *= x[at(k)];
            }
        }
    }
    out
}

/// `cumprod`'s gradient in tensor ops (differentiable again; `O(n^2)` per
/// line): `grad_i = P_i sum_{j >= i} g_j prod_{i<k<=j} x_k`, the inner
/// products read off the running product of an `n x n` matrix that holds
/// `x_j` above the diagonal and 1 elsewhere.
fn cumprod_grad_composed<E: Float, D: Device>(
    x: &Tensor<E, D>,
    g: &Tensor<E, D>,
    axis: usize,
) -> Tensor<E, D> {
    let a = axis as isize;
    let last = x.rank() as isize - 1;
    let n = x.shape()[axis];
    let (xt, gt) = (x.transpose(a, last), g.transpose(a, last));
    let mut square = xt.shape().to_vec();
    square.push(n);
    let rank = square.len() as isize;
    let xj = xt.unsqueeze(-2).expand(&square);
    let below =
        Tensor::<bool, D>::from_vec_in((0..n * n).map(|k| k % n <= k / n).collect(), &[n, n]);
    let before_diagonal =
        Tensor::<bool, D>::from_vec_in((0..n * n).map(|k| k % n < k / n).collect(), &[n, n]);
    // m[i, j] = prod_{i<k<=j} x_k for j > i, 1 for j <= i.
    let m = xj.masked_fill(&below, 1.0).cumprod(rank - 1);
    let s = m
        .mul(&gt.unsqueeze(-2))
        .masked_fill(&before_diagonal, 0.0)
        .sum_dim(&[-1], false);
    exclusive_cumprod(&xt, xt.rank() - 1, false)
        .mul(&s)
        .transpose(a, last)
}
