//! Binary kernels with NumPy broadcasting.

use crate::base::{numel, strides};

/// Strides of `shape` as seen from the broadcast shape `out` (0 on
/// broadcast dimensions, leading missing dimensions included).
///
/// ```
/// assert_eq!(forge::cpu::broadcast::broadcast_strides(&[3, 1], &[2, 3, 4]), vec![0, 1, 0]);
/// ```
pub fn broadcast_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let s = strides(shape);
    let off = out.len() - shape.len();
    (0..out.len())
        .map(|i| {
            if i < off || shape[i - off] == 1 {
                0
            } else {
                s[i - off]
            }
        })
        .collect()
}

/// `out = f(a, b)` where `a` and `b` are broadcast to `out_shape`.
///
/// ```
/// use forge::cpu::broadcast::zip_broadcast;
/// let v = zip_broadcast(&[1.0f32, 2.0], &[2], &[10.0, 20.0, 30.0], &[3, 1], &[3, 2], |a, b| a + b);
/// assert_eq!(v, vec![11.0, 12.0, 21.0, 22.0, 31.0, 32.0]);
/// ```
pub fn zip_broadcast<A: Copy, B: Copy, C: Copy + Default>(
    a: &[A],
    a_shape: &[usize],
    b: &[B],
    b_shape: &[usize],
    out_shape: &[usize],
    f: impl Fn(A, B) -> C,
) -> Vec<C> {
    let n = numel(out_shape);
    if a_shape == out_shape && b_shape == out_shape {
        return a.iter().zip(b).map(|(&x, &y)| f(x, y)).collect();
    }
    if b.len() == 1 && a_shape == out_shape {
        let y = b[0];
        return a.iter().map(|&x| f(x, y)).collect();
    }
    if a.len() == 1 && b_shape == out_shape {
        let x = a[0];
        return b.iter().map(|&y| f(x, y)).collect();
    }
    let sa = broadcast_strides(a_shape, out_shape);
    let sb = broadcast_strides(b_shape, out_shape);
    let rank = out_shape.len();
    let mut out = Vec::with_capacity(n);
    if n == 0 {
        return out;
    }
    // Walk the outer dimensions with a counter; run the innermost one as a
    // tight loop with its two strides.
    let inner = out_shape[rank - 1];
    let (ia, ib) = (sa[rank - 1], sb[rank - 1]);
    let mut idx = vec![0usize; rank];
    let (mut oa, mut ob) = (0usize, 0usize);
    for _ in 0..n / inner {
        match (ia, ib) {
            (1, 1) => out.extend(
                a[oa..oa + inner]
                    .iter()
                    .zip(&b[ob..ob + inner])
                    .map(|(&x, &y)| f(x, y)),
            ),
            (1, 0) => {
                let y = b[ob];
                out.extend(a[oa..oa + inner].iter().map(|&x| f(x, y)))
            }
            (0, 1) => {
                let x = a[oa];
                out.extend(b[ob..ob + inner].iter().map(|&y| f(x, y)))
            }
            _ => out.extend((0..inner).map(|j| f(a[oa + j * ia], b[ob + j * ib]))),
        }
        // advance the outer counter
        let mut d = rank - 1;
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            oa += sa[d];
            ob += sb[d];
            if idx[d] < out_shape[d] {
                break;
            }
            oa -= sa[d] * out_shape[d];
            ob -= sb[d] * out_shape[d];
            idx[d] = 0;
        }
    }
    out
}

/// Materialises `a` broadcast to `out_shape`.
///
/// ```
/// let v = forge::cpu::broadcast::expand(&[1.0f32, 2.0], &[2, 1], &[2, 3]);
/// assert_eq!(v, vec![1.0, 1.0, 1.0, 2.0, 2.0, 2.0]);
/// ```
pub fn expand<A: Copy + Default>(a: &[A], a_shape: &[usize], out_shape: &[usize]) -> Vec<A> {
    let ones = vec![0u8; 1];
    zip_broadcast(a, a_shape, &ones, &[], out_shape, |x, _| x)
}
