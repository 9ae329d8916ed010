//! Vector norms and what is built on them: `linalg.vector_norm` / `norm`,
//! `F.normalize`, `F.cosine_similarity`, `F.pairwise_distance`.
//!
//! The 2-norm is one op whose gradient `g x / ||x||` is zero where the norm
//! is zero (as PyTorch's, instead of 0/0); the others compose
//! differentiable reductions (`abs`, `sum_dim`, `max_dim`, `powf`).

use super::reduce::{reduce_axes, reduced_shape};
use crate::cpu::reduce::kept_shape;
use crate::tensor::{Device, Float, Tensor};

impl<E: Float, D: Device> Tensor<E, D> {
    /// The `ord`-norm over `dims` (all dimensions when empty), as
    /// `torch.linalg.vector_norm(x, ord, dim, keepdim)`: `ord` may be any
    /// positive number (`(sum |x|^ord)^(1/ord)`), `f64::INFINITY` (largest
    /// `|x|`), `f64::NEG_INFINITY` (smallest `|x|`) or 0 (the number of
    /// non-zeros, with no gradient). The 2-norm's gradient is 0 where the
    /// norm is 0.
    ///
    /// # Panics
    /// When an axis is out of range or repeated, or `ord` is negative
    /// (other than `-inf`) or NaN.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f64>::from_vec(vec![3.0, -4.0, 0.0, 1.0], &[2, 2]);
    /// assert_eq!(x.vector_norm(2.0, &[1], false).to_vec(), vec![5.0, 1.0]);
    /// assert_eq!(x.vector_norm(1.0, &[], false).item(), 8.0);
    /// assert_eq!(x.vector_norm(f64::INFINITY, &[0], true).to_vec(), vec![3.0, 4.0]);
    /// assert_eq!(x.vector_norm(0.0, &[], false).item(), 3.0);
    /// ```
    #[track_caller]
    pub fn vector_norm(&self, ord: f64, dims: &[isize], keepdim: bool) -> Self {
        shape_assert!(
            ord >= 0.0 || ord == f64::NEG_INFINITY,
            "vector_norm: ord {ord} must be >= 0, inf or -inf"
        );
        if ord == 2.0 {
            return self.norm2(dims, keepdim);
        }
        if ord == 1.0 {
            return self.abs().sum_dim(dims, keepdim);
        }
        if ord == f64::INFINITY {
            return self.abs().max_dim(dims, keepdim);
        }
        if ord == f64::NEG_INFINITY {
            return self.abs().min_dim(dims, keepdim);
        }
        if ord == 0.0 {
            let nonzero = self.map(|v| if v != E::zero() { E::one() } else { E::zero() });
            return nonzero.sum_dim(dims, keepdim).detach();
        }
        self.abs().powf(ord).sum_dim(dims, keepdim).powf(1.0 / ord)
    }

    /// The 2-norm of all elements, a 0-d tensor (`torch.norm(x)`, the
    /// Frobenius norm of any shape).
    ///
    /// ```
    /// let x = forge::Tensor::<f32>::from_vec(vec![3.0, 4.0], &[2]);
    /// assert_eq!(x.norm().item(), 5.0);
    /// ```
    pub fn norm(&self) -> Self {
        self.norm2(&[], false)
    }

    /// `sqrt(sum x^2)` over `dims`, gradient `g x / n` (0 where `n` = 0).
    #[track_caller]
    fn norm2(&self, dims: &[isize], keepdim: bool) -> Self {
        let axes = reduce_axes("vector_norm", dims, self.rank());
        let kept = kept_shape(self.shape(), &axes);
        let out_shape = reduced_shape(self.shape(), &axes, keepdim);
        let n = crate::no_grad(|| self.square().sum_dim(dims, true).sqrt());
        let saved = n.clone();
        let dims = dims.to_vec();
        n.view(&out_shape)
            .record("vector_norm", vec![self.clone()], move |ctx| {
                let x = &ctx.inputs[0];
                let n = if ctx.create_graph {
                    x.norm2(&dims, true)
                } else {
                    saved.clone()
                };
                let zero = saved.eq_scalar(E::zero());
                let g = ctx.grad.view(&kept).div(&n.masked_fill(&zero, 1.0));
                vec![Some(x.mul(&g.masked_fill(&zero, 0.0)))]
            })
    }
}

/// `x / max(||x||_p, eps)` along `dim` (`F.normalize(input, p, dim, eps)`;
/// PyTorch's defaults are p = 2, dim = 1, eps = 1e-12).
///
/// # Panics
/// As [`Tensor::vector_norm`].
///
/// ```
/// use forge::nn::functional::normalize;
/// use forge::Tensor;
/// let x = Tensor::<f64>::from_vec(vec![3.0, 4.0, 0.0, 0.0], &[2, 2]);
/// assert_eq!(normalize(&x, 2.0, 1, 1e-12).to_vec(), vec![0.6, 0.8, 0.0, 0.0]);
/// ```
#[track_caller]
pub fn normalize<E: Float, D: Device>(
    input: &Tensor<E, D>,
    p: f64,
    dim: isize,
    eps: f64,
) -> Tensor<E, D> {
    input.div(&input.vector_norm(p, &[dim], true).clamp(Some(eps), None))
}

/// The cosine of the angle between `x1` and `x2` along `dim`, the two
/// broadcast together (`F.cosine_similarity(x1, x2, dim, eps)`; PyTorch's
/// defaults are dim = 1, eps = 1e-8): `sum((x1 / max(|x1|, eps)) * (x2 /
/// max(|x2|, eps)))`, each vector divided by its norm first (PyTorch's
/// order, which keeps the result in [-1, 1]).
///
/// # Panics
/// When the shapes do not broadcast or `dim` is out of range.
///
/// ```
/// use forge::nn::functional::cosine_similarity;
/// use forge::Tensor;
/// let a = Tensor::<f64>::from_vec(vec![1.0, 0.0, 1.0, 1.0], &[2, 2]);
/// let b = Tensor::<f64>::from_vec(vec![0.0, 2.0, 3.0, 3.0], &[2, 2]);
/// let c = cosine_similarity(&a, &b, 1, 1e-8).to_vec();
/// assert!(c[0].abs() < 1e-15 && (c[1] - 1.0).abs() < 1e-15);
/// ```
#[track_caller]
pub fn cosine_similarity<E: Float, D: Device>(
    x1: &Tensor<E, D>,
    x2: &Tensor<E, D>,
    dim: isize,
    eps: f64,
) -> Tensor<E, D> {
    let unit = |x: &Tensor<E, D>| x.div(&x.vector_norm(2.0, &[dim], true).clamp(Some(eps), None));
    unit(x1).mul(&unit(x2)).sum_dim(&[dim], false)
}

/// The `p`-norm of `x1 - x2 + eps` along the last dimension
/// (`F.pairwise_distance(x1, x2, p, eps, keepdim)`; PyTorch's defaults are
/// p = 2, eps = 1e-6, keepdim = false).
///
/// # Panics
/// When the shapes do not broadcast.
///
/// ```
/// use forge::nn::functional::pairwise_distance;
/// use forge::Tensor;
/// let a = Tensor::<f64>::from_vec(vec![0.0, 0.0, 1.0, 1.0], &[2, 2]);
/// let b = Tensor::<f64>::from_vec(vec![3.0, 4.0, 1.0, 1.0], &[2, 2]);
/// let d = pairwise_distance(&a, &b, 2.0, 0.0, false).to_vec();
/// assert_eq!(d, vec![5.0, 0.0]);
/// ```
#[track_caller]
pub fn pairwise_distance<E: Float, D: Device>(
    x1: &Tensor<E, D>,
    x2: &Tensor<E, D>,
    p: f64,
    eps: f64,
    keepdim: bool,
) -> Tensor<E, D> {
    x1.sub(x2)
        .add_scalar(E::from_f64(eps))
        .vector_norm(p, &[-1], keepdim)
}
