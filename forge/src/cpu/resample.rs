//! Sparse linear maps along one axis: the kernel of `interpolate` (each
//! output index reads a few input indices with fixed weights) and of its
//! gradient (the transposed map, which gathers instead of scattering so it
//! parallelises without atomics).
//!
//! Work is split into fixed chunks of whole rows (the row length is the
//! product of the dimensions after the axis); every output element is a sum
//! over its taps in a fixed order, so results are the same for any thread
//! count.

use super::elementwise::{build_in, CHUNK};
use super::memory::Storage;
use std::ops::{Add, Mul};

/// A sparse `out_len x in_len` matrix in compressed rows: output index `o`
/// reads input indices `src[start[o]..start[o + 1]]` with weights
/// `weight[start[o]..start[o + 1]]`, in that order.
#[derive(Clone, Debug, PartialEq)]
pub struct AxisMap<E> {
    in_len: usize,
    start: Vec<usize>,
    src: Vec<usize>,
    weight: Vec<E>,
}

impl<E: Copy> AxisMap<E> {
    /// A map from `in_len` input indices, with rows as described on the type.
    ///
    /// # Panics
    /// When `start` is not increasing from 0 to `src.len()`, `src` and
    /// `weight` differ in length, or a source index is `>= in_len`.
    pub fn new(in_len: usize, start: Vec<usize>, src: Vec<usize>, weight: Vec<E>) -> Self {
        assert!(
            start.first() == Some(&0)
                && start.last() == Some(&src.len())
                && start.windows(2).all(|w| w[0] <= w[1])
                && src.len() == weight.len()
                && src.iter().all(|&s| s < in_len),
            "AxisMap::new: malformed rows (in_len {in_len}, {} row starts, {} taps)",
            start.len(),
            src.len()
        );
        AxisMap {
            in_len,
            start,
            src,
            weight,
        }
    }

    /// The number of input indices (used by the tests).
    #[cfg(test)]
    pub fn in_len(&self) -> usize {
        self.in_len
    }

    /// The number of output indices.
    pub fn out_len(&self) -> usize {
        self.start.len() - 1
    }

    /// Whether the map is the identity: as many outputs as inputs, each
    /// reading its own index once with weight `one`.
    pub fn is_identity(&self, one: E) -> bool
    where
        E: PartialEq,
    {
        self.out_len() == self.in_len
            && self.src.len() == self.in_len
            && self.start.iter().enumerate().all(|(i, &s)| s == i)
            && self.src.iter().enumerate().all(|(i, &s)| s == i)
            && self.weight.iter().all(|&w| w == one)
    }

    /// The transposed map (`in_len x out_len`): input index `i` lists the
    /// output indices that read it, in increasing order of output index
    /// (and tap order within one output), so its sums are in a fixed order.
    pub fn transpose(&self) -> Self {
        let out_len = self.out_len();
        let mut count = vec![0usize; self.in_len + 1];
        for &s in &self.src {
            count[s + 1] += 1;
        }
        for i in 0..self.in_len {
            count[i + 1] += count[i];
        }
        let start = count.clone();
        let mut fill = count;
        let mut src = vec![0usize; self.src.len()];
        let mut weight = self.weight.clone();
        for o in 0..out_len {
            for t in self.start[o]..self.start[o + 1] {
                let i = self.src[t];
                src[fill[i]] = o;
                weight[fill[i]] = self.weight[t];
                fill[i] += 1;
            }
        }
        AxisMap {
            in_len: out_len,
            start,
            src,
            weight,
        }
    }
}

/// Applies `map` along the middle axis of `x` viewed as
/// `[outer, map.in_len(), inner]`: the result is
/// `[outer, map.out_len(), inner]` with
/// `out[a, o, b] = sum_t weight[t] * x[a, src[t], b]` over the taps `t` of
/// row `o` (zero for a row without taps). Parallel over fixed chunks of
/// whole rows when large.
///
/// # Panics
/// When `x.len() != outer * map.in_len() * inner`.
pub fn apply<E>(x: &[E], outer: usize, inner: usize, map: &AxisMap<E>) -> Storage<E>
where
    E: Copy + Send + Sync + Default + Add<Output = E> + Mul<Output = E>,
{
    let (in_len, out_len) = (map.in_len, map.out_len());
    assert_eq!(
        x.len(),
        outer * in_len * inner,
        "resample::apply: {} values for [{outer}, {in_len}, {inner}]",
        x.len()
    );
    let n = outer * out_len * inner;
    let rows_per_chunk = (CHUNK / inner.max(1)).max(1);
    build_in(n, rows_per_chunk * inner.max(1), |offset, out| {
        if inner == 0 {
            return;
        }
        for (r, row) in out.chunks_mut(inner).enumerate() {
            let g = offset / inner + r;
            let (a, o) = (g / out_len, g % out_len);
            let base = a * in_len * inner;
            let taps = map.start[o]..map.start[o + 1];
            if taps.is_empty() {
                for v in row.iter_mut() {
                    v.write(E::default());
                }
                continue;
            }
            let first = taps.start;
            let (w, s) = (map.weight[first], map.src[first]);
            let line = &x[base + s * inner..base + (s + 1) * inner];
            for (v, &xv) in row.iter_mut().zip(line) {
                v.write(w * xv);
            }
            // SAFETY: every element of `row` was written just above.
            let row: &mut [E] = unsafe { &mut *(row as *mut [_] as *mut [E]) };
            for t in first + 1..taps.end {
                let (w, s) = (map.weight[t], map.src[t]);
                let line = &x[base + s * inner..base + (s + 1) * inner];
                for (v, &xv) in row.iter_mut().zip(line) {
                    *v = *v + w * xv;
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {

    /// Formerly a doc example (the `cpu` module is private).
    #[test]
    fn example_0() {
        use crate::cpu::resample::AxisMap;
        // out[0] = x[0], out[1] = 0.5 x[0] + 0.5 x[1]
        let m = AxisMap::new(2, vec![0, 1, 3], vec![0, 0, 1], vec![1.0f64, 0.5, 0.5]);
        assert_eq!(m.out_len(), 2);
    }

    /// Formerly a doc example (the `cpu` module is private).
    #[test]
    fn example_1() {
        use crate::cpu::resample::AxisMap;
        let m = AxisMap::new(1, vec![0, 1], vec![0], vec![2.0f32]);
        assert_eq!(m.in_len(), 1);
    }

    /// Formerly a doc example (the `cpu` module is private).
    #[test]
    fn example_2() {
        use crate::cpu::resample::AxisMap;
        assert_eq!(
            AxisMap::new(3, vec![0], vec![], Vec::<f32>::new()).in_len(),
            3
        );
    }

    /// Formerly a doc example (the `cpu` module is private).
    #[test]
    fn example_3() {
        use crate::cpu::resample::AxisMap;
        assert_eq!(
            AxisMap::new(3, vec![0], vec![], Vec::<f32>::new()).out_len(),
            0
        );
    }

    /// Formerly a doc example (the `cpu` module is private).
    #[test]
    fn example_4() {
        use crate::cpu::resample::AxisMap;
        assert!(AxisMap::new(2, vec![0, 1, 2], vec![0, 1], vec![1.0f32, 1.0]).is_identity(1.0));
        assert!(!AxisMap::new(2, vec![0, 1, 2], vec![1, 0], vec![1.0f32, 1.0]).is_identity(1.0));
    }

    /// Formerly a doc example (the `cpu` module is private).
    #[test]
    fn example_5() {
        use crate::cpu::resample::AxisMap;
        let m = AxisMap::new(2, vec![0, 1, 3], vec![0, 0, 1], vec![1.0f64, 0.5, 0.5]);
        let t = m.transpose();
        assert_eq!((t.in_len(), t.out_len()), (2, 2));
        assert_eq!(t.transpose(), m);
    }

    /// Formerly a doc example (the `cpu` module is private).
    #[test]
    fn example_6() {
        use crate::cpu::resample::{apply, AxisMap};
        let m = AxisMap::new(2, vec![0, 1, 3], vec![0, 0, 1], vec![1.0f64, 0.5, 0.5]);
        // two rows of length 1 along the axis: x = [[2], [4]]
        assert_eq!(&apply(&[2.0, 4.0], 1, 1, &m)[..], &[2.0, 3.0]);
    }
    use super::*;

    fn naive(x: &[f64], outer: usize, inner: usize, m: &AxisMap<f64>) -> Vec<f64> {
        let (il, ol) = (m.in_len(), m.out_len());
        let mut out = vec![0.0; outer * ol * inner];
        for a in 0..outer {
            for o in 0..ol {
                for t in m.start[o]..m.start[o + 1] {
                    for b in 0..inner {
                        out[(a * ol + o) * inner + b] +=
                            m.weight[t] * x[(a * il + m.src[t]) * inner + b];
                    }
                }
            }
        }
        out
    }

    #[test]
    fn apply_and_transpose_match_dense_products_for_any_thread_count() {
        // A 3 -> 5 map with a row without taps and a repeated source.
        let m = AxisMap::new(
            3,
            vec![0, 2, 2, 3, 5, 6],
            vec![0, 1, 2, 2, 0, 1],
            vec![0.25, 0.75, 1.0, 0.5, 0.5, -2.0],
        );
        let (outer, inner) = (7, 40_000 / 3);
        let x: Vec<f64> = (0..outer * 3 * inner)
            .map(|i| (i % 97) as f64 * 0.1)
            .collect();
        let _guard = crate::cpu::threads::lock_thread_count();
        crate::cpu::set_num_threads(1);
        let one = apply(&x, outer, inner, &m).to_vec();
        crate::cpu::set_num_threads(2);
        let two = apply(&x, outer, inner, &m).to_vec();
        assert_eq!(one, two);
        assert_eq!(one, naive(&x, outer, inner, &m));
        // <m x, y> == <x, m^T y>
        let y: Vec<f64> = (0..outer * 5 * inner).map(|i| (i % 13) as f64).collect();
        let mty = apply(&y, outer, inner, &m.transpose()).to_vec();
        let lhs: f64 = one.iter().zip(&y).map(|(a, b)| a * b).sum();
        let rhs: f64 = x.iter().zip(&mty).map(|(a, b)| a * b).sum();
        assert!((lhs - rhs).abs() <= 1e-9 * lhs.abs());
    }
}
