//! Functional transforms on the tape, as `torch.func`: [`vjp`], [`jvp`]
//! (by double backward), [`grad`], [`jacobian`], [`hessian`], [`hvp`] and
//! [`per_sample_grads`].
//!
//! Each takes a function of tensors, calls it on fresh leaves made from
//! the given values (so the caller's tensors are never tracked by it), and
//! returns detached results. Every result is computed by backward passes
//! over one recorded graph, in a fixed order, so it is bit-identical for
//! any thread count.

use crate::tensor::{Float, Tensor};

/// Fresh leaves holding the values of `xs`.
fn leaves<E: Float>(xs: &[Tensor<E>]) -> Vec<Tensor<E>> {
    xs.iter().map(|t| t.detach().requires_grad()).collect()
}

/// The gradient of `g` for leaf `x`, or zeros when `x` did not reach it.
fn grad_or_zeros<E: Float>(g: &crate::Gradients<E>, x: &Tensor<E>) -> Tensor<E> {
    g.get(x)
        .map(|t| t.detach())
        .unwrap_or_else(|| Tensor::zeros(x.shape()))
}

/// A one-hot tensor of `shape` with a 1 at flat index `k`.
fn one_hot<E: Float>(shape: &[usize], k: usize) -> Tensor<E> {
    let mut v = vec![E::zero(); crate::tensor::numel(shape)];
    v[k] = E::one();
    Tensor::from_vec(v, shape)
}

fn concat_shape(a: &[usize], b: &[usize]) -> Vec<usize> {
    a.iter().chain(b).copied().collect()
}

/// The vector-Jacobian product: `f(inputs)` and, for each input,
/// `J_i^T v` (the gradient of `sum(f(inputs) * v)`), as
/// `torch.func.vjp(f, *inputs)[1](v)`.
///
/// # Panics
/// When `v`'s shape differs from the output's.
///
/// ```
/// use forge::Tensor;
/// let x = Tensor::<f64>::from_vec(vec![1.0, 2.0], &[2]);
/// let (y, g) = forge::tools::vjp(|x| &x[0] * &x[0], &[x], &Tensor::from_vec(vec![1.0, 10.0], &[2]));
/// assert_eq!(y.to_vec(), vec![1.0, 4.0]);
/// assert_eq!(g[0].to_vec(), vec![2.0, 40.0]);
/// ```
pub fn vjp<E: Float>(
    f: impl Fn(&[Tensor<E>]) -> Tensor<E>,
    inputs: &[Tensor<E>],
    v: &Tensor<E>,
) -> (Tensor<E>, Vec<Tensor<E>>) {
    let xs = leaves(inputs);
    let y = f(&xs);
    let g = y.backward_with(v, false);
    (
        y.detach(),
        xs.iter().map(|x| grad_or_zeros(&g, x)).collect(),
    )
}

/// The Jacobian-vector product: `f(inputs)` and `J t = sum_i J_i t_i`
/// (the output's directional derivative along the tangents), as
/// `torch.func.jvp(f, inputs, tangents)`.
///
/// forge is reverse-mode only, so this is the double-backward trick: the
/// vector-Jacobian product `g(u) = J^T u` is recorded for a tracked `u`,
/// and `J t` is the gradient of `sum(g(u) * t)` with respect to `u`. It
/// costs two backward passes, and works for every op, since every
/// backward rule is written in differentiable ops.
///
/// # Panics
/// When the number of tangents or a tangent's shape differs from the
/// inputs'.
///
/// ```
/// use forge::Tensor;
/// let x = Tensor::<f64>::from_vec(vec![1.0, 2.0], &[2]);
/// let t = Tensor::<f64>::from_vec(vec![1.0, 0.5], &[2]);
/// let (_, jt) = forge::tools::jvp(|x| x[0].square(), &[x], &[t]);
/// assert_eq!(jt.to_vec(), vec![2.0, 2.0]); // 2 x * t
/// ```
pub fn jvp<E: Float>(
    f: impl Fn(&[Tensor<E>]) -> Tensor<E>,
    inputs: &[Tensor<E>],
    tangents: &[Tensor<E>],
) -> (Tensor<E>, Tensor<E>) {
    assert_eq!(
        inputs.len(),
        tangents.len(),
        "jvp: {} inputs but {} tangents",
        inputs.len(),
        tangents.len()
    );
    for (x, t) in inputs.iter().zip(tangents) {
        assert_eq!(
            x.shape(),
            t.shape(),
            "jvp: tangent shape {:?} differs from input shape {:?}",
            t.shape(),
            x.shape()
        );
    }
    let xs = leaves(inputs);
    let y = f(&xs);
    let u = Tensor::<E>::zeros(y.shape()).requires_grad();
    let g = y.backward_with(&u, true);
    let mut s: Option<Tensor<E>> = None;
    for (x, t) in xs.iter().zip(tangents) {
        if let Some(gi) = g.get(x) {
            let term = (gi * t).sum();
            s = Some(match s {
                Some(acc) => &acc + &term,
                None => term,
            });
        }
    }
    let jt = match s {
        Some(s) if s.is_tracked() => grad_or_zeros(&s.backward(), &u),
        _ => Tensor::zeros(y.shape()),
    };
    (y.detach(), jt)
}

/// The gradient of a scalar function for each input, as
/// `torch.func.grad(f, argnums=(0, 1, ...))`.
///
/// # Panics
/// When `f` returns more than one element.
///
/// ```
/// use forge::Tensor;
/// let g = forge::tools::grad(|x| (&x[0] * &x[1]).sum(), &[Tensor::<f64>::scalar(3.0), Tensor::scalar(4.0)]);
/// assert_eq!((g[0].item(), g[1].item()), (4.0, 3.0));
/// ```
pub fn grad<E: Float>(
    f: impl Fn(&[Tensor<E>]) -> Tensor<E>,
    inputs: &[Tensor<E>],
) -> Vec<Tensor<E>> {
    let xs = leaves(inputs);
    let g = f(&xs).backward();
    xs.iter().map(|x| grad_or_zeros(&g, x)).collect()
}

/// The Jacobian of `f` for each input, of shape `output shape ++ input
/// shape`, as `torch.func.jacrev(f, argnums=(0, 1, ...))`: one backward
/// pass per output element, over one recorded graph.
///
/// ```
/// use forge::Tensor;
/// let x = Tensor::<f64>::from_vec(vec![1.0, 2.0], &[2]);
/// let j = forge::tools::jacobian(|x| x[0].square(), &[x]);
/// assert_eq!(j[0].shape(), &[2, 2]);
/// assert_eq!(j[0].to_vec(), vec![2.0, 0.0, 0.0, 4.0]);
/// ```
pub fn jacobian<E: Float>(
    f: impl Fn(&[Tensor<E>]) -> Tensor<E>,
    inputs: &[Tensor<E>],
) -> Vec<Tensor<E>> {
    let xs = leaves(inputs);
    let y = f(&xs);
    rows_of(&y, &xs)
}

/// For every element `k` of `y` (tracked), the gradient of `y[k]` for each
/// of `xs`, stacked into `y shape ++ x shape` per `x`.
fn rows_of<E: Float>(y: &Tensor<E>, xs: &[Tensor<E>]) -> Vec<Tensor<E>> {
    let mut data: Vec<Vec<E>> = xs
        .iter()
        .map(|x| Vec::with_capacity(y.numel() * x.numel()))
        .collect();
    for k in 0..y.numel() {
        let g = y.backward_with(&one_hot(y.shape(), k), false);
        for (d, x) in data.iter_mut().zip(xs) {
            match g.get(x) {
                Some(gx) => d.extend_from_slice(gx.as_slice()),
                None => d.extend(std::iter::repeat_n(E::zero(), x.numel())),
            }
        }
    }
    data.into_iter()
        .zip(xs)
        .map(|(d, x)| Tensor::from_vec(d, &concat_shape(y.shape(), x.shape())))
        .collect()
}

/// The Hessian of a scalar function: `h[i][j]` of shape `input i shape ++
/// input j shape` holds `d^2 f / dx_i dx_j`, as
/// `torch.func.hessian(f, argnums=(0, 1, ...))` (reverse over reverse:
/// the gradient is recorded, then differentiated once per element).
///
/// # Panics
/// When `f` returns more than one element.
///
/// ```
/// use forge::Tensor;
/// let x = Tensor::<f64>::from_vec(vec![1.0, 2.0], &[2]);
/// // f = |x|^4: H = 8 x x^T + 4 |x|^2 I
/// let h = forge::tools::hessian(|x| x[0].square().sum().square(), &[x]);
/// assert_eq!(h[0][0].to_vec(), vec![28.0, 16.0, 16.0, 52.0]);
/// ```
pub fn hessian<E: Float>(
    f: impl Fn(&[Tensor<E>]) -> Tensor<E>,
    inputs: &[Tensor<E>],
) -> Vec<Vec<Tensor<E>>> {
    let xs = leaves(inputs);
    let y = f(&xs);
    assert!(
        y.numel() == 1,
        "hessian: the function returned shape {:?}; it needs one element",
        y.shape()
    );
    let g = y.backward_with_graph();
    xs.iter()
        .map(|xi| match g.get(xi) {
            Some(gi) if gi.is_tracked() => rows_of(gi, &xs),
            _ => xs
                .iter()
                .map(|xj| Tensor::zeros(&concat_shape(xi.shape(), xj.shape())))
                .collect(),
        })
        .collect()
}

/// The Hessian-vector product of a scalar function: for each input `i`,
/// `sum_j H_ij v_j`, as `torch.func` `jvp(grad(f), inputs, v)` (computed
/// in reverse mode: the gradient of `sum_j <grad_j f, v_j>`).
///
/// # Panics
/// When `f` returns more than one element, or the number or shapes of `v`
/// differ from the inputs'.
///
/// ```
/// use forge::Tensor;
/// let x = Tensor::<f64>::from_vec(vec![1.0, 2.0], &[2]);
/// let v = Tensor::<f64>::from_vec(vec![1.0, 0.0], &[2]);
/// let hv = forge::tools::hvp(|x| x[0].square().sum().square(), &[x], &[v]);
/// assert_eq!(hv[0].to_vec(), vec![28.0, 16.0]);
/// ```
pub fn hvp<E: Float>(
    f: impl Fn(&[Tensor<E>]) -> Tensor<E>,
    inputs: &[Tensor<E>],
    v: &[Tensor<E>],
) -> Vec<Tensor<E>> {
    assert_eq!(
        inputs.len(),
        v.len(),
        "hvp: {} inputs but {} vectors",
        inputs.len(),
        v.len()
    );
    let xs = leaves(inputs);
    let y = f(&xs);
    assert!(
        y.numel() == 1,
        "hvp: the function returned shape {:?}; it needs one element",
        y.shape()
    );
    let g = y.backward_with_graph();
    let mut s: Option<Tensor<E>> = None;
    for (x, vi) in xs.iter().zip(v) {
        assert_eq!(
            x.shape(),
            vi.shape(),
            "hvp: vector shape {:?} differs from input shape {:?}",
            vi.shape(),
            x.shape()
        );
        if let Some(gi) = g.get(x) {
            let term = (gi * vi).sum();
            s = Some(match s {
                Some(acc) => &acc + &term,
                None => term,
            });
        }
    }
    match s {
        Some(s) if s.is_tracked() => {
            let h = s.backward();
            xs.iter().map(|x| grad_or_zeros(&h, x)).collect()
        }
        _ => xs.iter().map(|x| Tensor::zeros(x.shape())).collect(),
    }
}

/// Per-sample gradients: for each sample `b` of a batch, the gradient of
/// `f(params, sample b)` for every parameter, stacked into `[batch, param
/// shape]` per parameter: `torch.func.vmap(torch.func.grad(f), in_dims=(None, 0))`.
///
/// `batch` holds tensors whose first dimension is the batch; `f` receives
/// the parameters and each batch tensor's sample `b` with its first
/// dimension kept (size 1), so it is the same function as for a batch.
/// Samples run one after another in order, each with its own graph.
///
/// # Panics
/// When `batch` is empty, a batch tensor has rank 0, the batch tensors'
/// first dimensions differ, or `f` returns more than one element.
///
/// ```
/// use forge::Tensor;
/// let w = Tensor::<f64>::from_vec(vec![1.0, 1.0], &[2]);
/// let x = Tensor::<f64>::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]);
/// // loss_b = sum(x_b * w): its gradient for w is x_b.
/// let g = forge::tools::per_sample_grads(|p, s| (&s[0] * &p[0]).sum(), &[w], &[x.clone()]);
/// assert_eq!(g[0].shape(), &[3, 2]);
/// assert_eq!(g[0].to_vec(), x.to_vec());
/// ```
pub fn per_sample_grads<E: Float>(
    f: impl Fn(&[Tensor<E>], &[Tensor<E>]) -> Tensor<E>,
    params: &[Tensor<E>],
    batch: &[Tensor<E>],
) -> Vec<Tensor<E>> {
    assert!(!batch.is_empty(), "per_sample_grads: no batch tensors");
    let n = batch[0]
        .shape()
        .first()
        .copied()
        .expect("per_sample_grads: a batch tensor has rank 0");
    for t in batch {
        assert!(
            t.shape().first() == Some(&n),
            "per_sample_grads: batch tensors of shapes {:?} and {:?} differ in their first dimension",
            batch[0].shape(),
            t.shape()
        );
    }
    let mut out: Vec<Vec<E>> = params
        .iter()
        .map(|p| Vec::with_capacity(n * p.numel()))
        .collect();
    for b in 0..n {
        let sample: Vec<Tensor<E>> = batch
            .iter()
            .map(|t| {
                let row = t.numel() / n;
                let mut shape = t.shape().to_vec();
                shape[0] = 1;
                Tensor::from_vec(t.as_slice()[b * row..(b + 1) * row].to_vec(), &shape)
            })
            .collect();
        let xs = leaves(params);
        let y = f(&xs, &sample);
        assert!(
            y.numel() == 1,
            "per_sample_grads: the function returned shape {:?}; it needs one element",
            y.shape()
        );
        let g = y.backward();
        for (o, x) in out.iter_mut().zip(&xs) {
            o.extend_from_slice(grad_or_zeros(&g, x).as_slice());
        }
    }
    out.into_iter()
        .zip(params)
        .map(|(d, p)| Tensor::from_vec(d, &concat_shape(&[n], p.shape())))
        .collect()
}
