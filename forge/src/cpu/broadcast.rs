//! Binary kernels with NumPy broadcasting.

use super::elementwise::{map, zip, zip_cols, zip_rows};
use super::memory::Storage;
use crate::base::{numel, strides};

/// Strides of `shape` as seen from the broadcast shape `out` (0 on
/// broadcast dimensions, leading missing dimensions included).
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

/// How one operand of a broadcast maps onto the output: the patterns with
/// a contiguous fast path, or the general strided walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pattern {
    /// Same shape as the output.
    Full,
    /// One element.
    Scalar,
    /// A block of the output's trailing dimensions, repeated (a bias row).
    Row,
    /// The output's leading dimensions with the trailing ones of size 1:
    /// one value per row of `cols` elements.
    Col(usize),
    Other,
}

fn pattern(shape: &[usize], out: &[usize]) -> Pattern {
    let n: usize = shape.iter().product();
    if shape == out {
        return Pattern::Full;
    }
    if n == 1 {
        return Pattern::Scalar;
    }
    // Drop leading ones, then compare with the output's tail / head.
    let lead = shape.iter().take_while(|&&d| d == 1).count();
    let s = &shape[lead..];
    if s.len() <= out.len() && s == &out[out.len() - s.len()..] {
        return Pattern::Row;
    }
    let off = out.len() - shape.len();
    let trail = shape.iter().rev().take_while(|&&d| d == 1).count();
    let head = &shape[..shape.len() - trail];
    if out[off..off + head.len()] == *head && out[..off].iter().all(|&d| d == 1) {
        return Pattern::Col(numel(&out[off + head.len()..]));
    }
    Pattern::Other
}

/// `out = f(a, b)` where `a` and `b` are broadcast to `out_shape`, into a
/// pooled buffer. Same shapes, a scalar side, a repeated trailing block (a
/// bias row) and one value per row (a column) take contiguous loops with no
/// index arithmetic, parallel in fixed chunks when long; other broadcasts
/// walk the output with a counter over the outer dimensions and run the
/// innermost one as a tight loop.
pub fn zip_broadcast<A: Copy + Sync, B: Copy + Sync, C: Copy + Send>(
    a: &[A],
    a_shape: &[usize],
    b: &[B],
    b_shape: &[usize],
    out_shape: &[usize],
    f: impl Fn(A, B) -> C + Sync,
) -> Storage<C> {
    let n = numel(out_shape);
    if n == 0 {
        return Storage::with_capacity(0);
    }
    match (pattern(a_shape, out_shape), pattern(b_shape, out_shape)) {
        (Pattern::Full, Pattern::Full) => return zip(a, b, f),
        (Pattern::Full, Pattern::Scalar) => {
            let y = b[0];
            return map(a, |x| f(x, y));
        }
        (Pattern::Scalar, Pattern::Full) => {
            let x = a[0];
            return map(b, |y| f(x, y));
        }
        (Pattern::Full, Pattern::Row) => return zip_rows(a, b, f),
        (Pattern::Row, Pattern::Full) => return zip_rows(b, a, |y, x| f(x, y)),
        (Pattern::Full, Pattern::Col(cols)) => return zip_cols(a, b, cols, f),
        (Pattern::Col(cols), Pattern::Full) => return zip_cols(b, a, cols, |y, x| f(x, y)),
        _ => {}
    }
    let sa = broadcast_strides(a_shape, out_shape);
    let sb = broadcast_strides(b_shape, out_shape);
    let rank = out_shape.len();
    let mut out = Storage::with_capacity(n);
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
pub fn expand<A: Copy + Send + Sync>(
    a: &[A],
    a_shape: &[usize],
    out_shape: &[usize],
) -> Storage<A> {
    zip_broadcast(a, a_shape, &[0u8], &[], out_shape, |x, _| x)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference: per-element index arithmetic.
    fn naive(a: &[f64], sa: &[usize], b: &[f64], sb: &[usize], out: &[usize]) -> Vec<f64> {
        let (ta, tb) = (broadcast_strides(sa, out), broadcast_strides(sb, out));
        let os = strides(out);
        (0..numel(out))
            .map(|i| {
                let (mut ia, mut ib) = (0, 0);
                for d in 0..out.len() {
                    let k = i / os[d] % out[d];
                    ia += k * ta[d];
                    ib += k * tb[d];
                }
                a[ia] * 10.0 + b[ib]
            })
            .collect()
    }

    #[test]
    fn every_pattern_matches_the_index_arithmetic() {
        let cases: &[(&[usize], &[usize])] = &[
            (&[2, 3, 4], &[2, 3, 4]),
            (&[2, 3, 4], &[]),
            (&[1], &[2, 3, 4]),
            (&[2, 3, 4], &[4]),
            (&[2, 3, 4], &[1, 3, 4]),
            (&[3, 4], &[2, 3, 4]),
            (&[2, 3, 4], &[2, 3, 1]),
            (&[2, 3, 4], &[2, 1, 1]),
            (&[2, 1, 1], &[2, 3, 4]),
            (&[2, 3, 4], &[3, 1]),
            (&[2, 1, 4], &[1, 3, 1]),
            (&[1, 3, 4], &[2, 1, 4]),
            (&[5, 1], &[1, 6]),
            (&[1, 2, 3], &[2, 3]),
            (&[4, 2, 3], &[1, 1, 3]),
        ];
        for &(sa, sb) in cases {
            let out = crate::base::broadcast_shapes(sa, sb).unwrap();
            let a: Vec<f64> = (0..numel(sa)).map(|i| i as f64).collect();
            let b: Vec<f64> = (0..numel(sb)).map(|i| i as f64 * 0.5).collect();
            let got = zip_broadcast(&a, sa, &b, sb, &out, |x, y| x * 10.0 + y);
            assert_eq!(got.to_vec(), naive(&a, sa, &b, sb, &out), "{sa:?} {sb:?}");
        }
    }
}

/// The examples that documented these kernels while they were public.
#[cfg(test)]
mod examples {
    #[test]
    fn broadcast_strides() {
        assert_eq!(
            crate::cpu::broadcast::broadcast_strides(&[3, 1], &[2, 3, 4]),
            vec![0, 1, 0]
        );
    }

    #[test]
    fn zip_broadcast() {
        use crate::cpu::broadcast::zip_broadcast;
        let v = zip_broadcast(
            &[1.0f32, 2.0],
            &[2],
            &[10.0, 20.0, 30.0],
            &[3, 1],
            &[3, 2],
            |a, b| a + b,
        );
        assert_eq!(&v[..], &[11.0, 12.0, 21.0, 22.0, 31.0, 32.0]);
    }

    #[test]
    fn expand() {
        let v = crate::cpu::broadcast::expand(&[1.0f32, 2.0], &[2, 1], &[2, 3]);
        assert_eq!(&v[..], &[1.0, 1.0, 1.0, 2.0, 2.0, 2.0]);
    }
}
