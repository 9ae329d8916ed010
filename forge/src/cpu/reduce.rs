//! Reductions over a set of axes.
//!
//! Every output element is folded over its inputs in ascending index order,
//! so the result does not depend on threading.

use crate::tensor::{numel, strides};

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
