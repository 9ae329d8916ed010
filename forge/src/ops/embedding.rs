//! Embedding lookup: rows of a weight matrix picked by integer indices.
//!
//! The lookup (a row gather) and its adjoint (a row scatter-add, which
//! accumulates the gradient of repeated indices) are each other's backward
//! rule, so gradients of any order work. Outputs are pooled buffers.

use crate::cpu::Storage;
use crate::tensor::{Device, Float, Tensor};

/// Gathers rows `indices` of the `(V, dim)` matrix `w`; rows for index
/// `zero_row` come out as zeros. The backward scatter skips `grad_skip`.
#[track_caller]
fn gather_rows<E: Float, D: Device>(
    w: &Tensor<E, D>,
    indices: &Tensor<i64, D>,
    zero_row: Option<usize>,
    grad_skip: Option<usize>,
) -> Tensor<E, D> {
    let dim = w.shape()[1];
    let src = w.as_slice();
    let mut data = Storage::<E>::with_capacity(indices.numel() * dim);
    for &i in indices.as_slice() {
        let i = i as usize;
        if zero_row == Some(i) {
            for _ in 0..dim {
                data.push(E::zero());
            }
        } else {
            data.extend_from_slice(&src[i * dim..(i + 1) * dim]);
        }
    }
    let mut shape = indices.shape().to_vec();
    shape.push(dim);
    let idx = indices.clone();
    let rows = w.shape()[0];
    Tensor::from_parts(data, shape.into(), None).record("embedding", vec![w.clone()], move |ctx| {
        vec![Some(scatter_rows(ctx.grad, &idx, rows, grad_skip))]
    })
}

/// Adds row `k` of `g` (viewed as `(n, dim)`) into row `indices[k]` of a
/// `(rows, dim)` zero matrix, skipping index `skip`; in index order, so the
/// sums are deterministic.
#[track_caller]
fn scatter_rows<E: Float, D: Device>(
    g: &Tensor<E, D>,
    indices: &Tensor<i64, D>,
    rows: usize,
    skip: Option<usize>,
) -> Tensor<E, D> {
    let dim = *g.shape().last().unwrap_or(&1);
    let src = g.as_slice();
    let mut out = Storage::<E>::zeroed(rows * dim);
    for (k, &i) in indices.as_slice().iter().enumerate() {
        let i = i as usize;
        if skip == Some(i) {
            continue;
        }
        for (o, &v) in out[i * dim..(i + 1) * dim]
            .iter_mut()
            .zip(&src[k * dim..(k + 1) * dim])
        {
            *o += v;
        }
    }
    let idx = indices.clone();
    Tensor::from_parts(out, vec![rows, dim].into(), None).record(
        "embedding_backward",
        vec![g.clone()],
        move |ctx| vec![Some(gather_rows(ctx.grad, &idx, skip, skip))],
    )
}

/// Looks up rows of `weight` (`(num_embeddings, dim)`) at `indices` (any
/// shape); the result has shape `indices.shape() + [dim]`. The gradient of
/// `weight` accumulates over repeated indices; row `padding_idx` is looked
/// up normally but receives no gradient.
///
/// # Panics
/// When `weight` is not 2-D, or an index or `padding_idx` is out of range.
///
/// ```
/// use forge::nn::functional::embedding;
/// use forge::Tensor;
/// let w = Tensor::<f64>::from_vec(vec![0.0, 0.5, 1.0, 1.5, 2.0, 2.5], &[3, 2]).requires_grad();
/// let idx = Tensor::<i64>::from_vec(vec![2, 0, 2], &[3]);
/// let e = embedding(&w, &idx, None);
/// assert_eq!(e.to_vec(), vec![2.0, 2.5, 0.0, 0.5, 2.0, 2.5]);
/// let g = e.sum().backward();
/// assert_eq!(g.get(&w).unwrap().to_vec(), vec![1.0, 1.0, 0.0, 0.0, 2.0, 2.0]);
/// ```
#[track_caller]
pub fn embedding<E: Float, D: Device>(
    weight: &Tensor<E, D>,
    indices: &Tensor<i64, D>,
    padding_idx: Option<usize>,
) -> Tensor<E, D> {
    shape_assert!(
        weight.rank() == 2,
        "embedding: weight must be 2-D (num_embeddings, dim), got shape {:?}",
        weight.shape()
    );
    let n = weight.shape()[0];
    if let Some(p) = padding_idx {
        shape_assert!(
            p < n,
            "embedding: padding_idx {p} is out of range for {n} embeddings"
        );
    }
    for &i in indices.as_slice() {
        shape_assert!(
            (0..n as i64).contains(&i),
            "embedding: index {i} is out of range for {n} embeddings (weight shape {:?})",
            weight.shape()
        );
    }
    gather_rows(weight, indices, None, padding_idx)
}
