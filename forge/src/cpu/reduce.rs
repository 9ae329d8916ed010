//! Reductions over a set of axes.
//!
//! Every output element is folded over its inputs in ascending index order,
//! so the result does not depend on threading.

use crate::base::{numel, strides, Float};

/// The shape with `axes` set to 1 (the `keepdim` shape).
///
/// ```
/// assert_eq!(forge::cpu::reduce::kept_shape(&[2, 3, 4], &[0, 2]), vec![1, 3, 1]);
/// ```
pub fn kept_shape(shape: &[usize], axes: &[usize]) -> Vec<usize> {
    shape
        .iter()
        .enumerate()
        .map(|(i, &d)| if axes.contains(&i) { 1 } else { d })
        .collect()
}

/// Folds `data` (of `shape`) over `axes` with `f(acc, x)` starting from
/// `init`, returning values in the `keepdim` layout.
///
/// ```
/// use forge::cpu::reduce::fold_axes;
/// let v = fold_axes(&[1.0f64, 2.0, 3.0, 4.0], &[2, 2], &[1], 0.0, |a, x| a + x);
/// assert_eq!(v, vec![3.0, 7.0]);
/// ```
pub fn fold_axes<T: Copy, A: Copy>(
    data: &[T],
    shape: &[usize],
    axes: &[usize],
    init: A,
    f: impl Fn(A, T) -> A,
) -> Vec<A> {
    let out_shape = kept_shape(shape, axes);
    let n_out = numel(&out_shape);
    let mut out = vec![init; n_out];
    if data.is_empty() {
        return out;
    }
    // Fast path: reducing a trailing block of axes = contiguous rows.
    let rank = shape.len();
    let k = axes.len();
    let trailing = (0..k).all(|i| axes.contains(&(rank - 1 - i)));
    if trailing {
        let row = numel(&shape[rank - k..]);
        for (o, chunk) in out.iter_mut().zip(data.chunks_exact(row.max(1))) {
            let mut acc = init;
            for &x in chunk {
                acc = f(acc, x);
            }
            *o = acc;
        }
        return out;
    }
    // Leading block of axes: fold rows of the output elementwise.
    let leading = (0..k).all(|i| axes.contains(&i));
    if leading {
        for chunk in data.chunks_exact(n_out) {
            for (o, &x) in out.iter_mut().zip(chunk) {
                *o = f(*o, x);
            }
        }
        return out;
    }
    let os = strides(&out_shape);
    let mut idx = vec![0usize; rank];
    let mut o = 0usize;
    for &x in data {
        out[o] = f(out[o], x);
        let mut d = rank;
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            if !axes.contains(&d) {
                o += os[d];
            }
            if idx[d] < shape[d] {
                break;
            }
            if !axes.contains(&d) {
                o -= os[d] * shape[d];
            }
            idx[d] = 0;
        }
    }
    out
}

/// The variance of each of the `n_rows` contiguous rows of `rows`, dividing
/// the sum of squared deviations by `max(len - correction, 0)` (two passes:
/// the mean, then the squared deviations, each summed in index order). Rows
/// with no elements give NaN, as PyTorch does.
///
/// ```
/// use forge::cpu::reduce::var_rows;
/// let v = var_rows(&[1.0f64, 2.0, 3.0, 4.0, 4.0, 4.0], 2, 1);
/// assert_eq!(v, vec![1.0, 0.0]);
/// ```
pub fn var_rows<E: Float>(rows: &[E], n_rows: usize, correction: usize) -> Vec<E> {
    let row = rows.len().checked_div(n_rows).unwrap_or(0);
    if row == 0 {
        return vec![E::nan(); n_rows];
    }
    let n = E::from_f64(row as f64);
    let div = E::from_f64(row.saturating_sub(correction) as f64);
    rows.chunks_exact(row)
        .map(|r| {
            let mut sum = E::zero();
            for &x in r {
                sum += x;
            }
            let mean = sum / n;
            let mut m2 = E::zero();
            for &x in r {
                let d = x - mean;
                m2 += d * d;
            }
            m2 / div
        })
        .collect()
}

/// For every position along `axis` of `data` (of `shape`), the index along
/// `axis` of the element that `better(candidate, best)` prefers; the first
/// one wins ties. The result has the shape with `axis` set to 1.
///
/// # Panics
/// When `shape[axis]` is 0.
///
/// ```
/// use forge::cpu::reduce::arg_best;
/// // argmax of each row of [[1, 5, 5], [7, 0, 2]]
/// let idx = arg_best(&[1.0f64, 5.0, 5.0, 7.0, 0.0, 2.0], &[2, 3], 1, |a, b| a > b);
/// assert_eq!(idx, vec![1, 0]);
/// ```
pub fn arg_best<T: Copy>(
    data: &[T],
    shape: &[usize],
    axis: usize,
    better: impl Fn(T, T) -> bool,
) -> Vec<i64> {
    let len = shape[axis];
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    assert!(
        len > 0 || outer * inner == 0,
        "arg_best: cannot reduce over an empty dimension of shape {shape:?}"
    );
    let mut out = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        let base = o * len * inner;
        for i in 0..inner {
            let mut best = data[base + i];
            let mut at = 0usize;
            for k in 1..len {
                let x = data[base + k * inner + i];
                if better(x, best) {
                    best = x;
                    at = k;
                }
            }
            out.push(at as i64);
        }
    }
    out
}
