//! Reductions over a set of axes.
//!
//! Every output element is folded over its inputs in ascending index order,
//! so the result does not depend on threading.

use super::elementwise::{map, widest, PAR_MIN};
use super::memory::Storage;
use super::threads::parallel_for;
use crate::base::{numel, Float};

/// The shape with `axes` set to 1 (the `keepdim` shape).
pub fn kept_shape(shape: &[usize], axes: &[usize]) -> Vec<usize> {
    shape
        .iter()
        .enumerate()
        .map(|(i, &d)| if axes.contains(&i) { 1 } else { d })
        .collect()
}

/// The shape merged into alternating blocks of kept and reduced
/// dimensions (size-1 dimensions dropped): `(size, reduced)` from the
/// outermost block in.
fn blocks(shape: &[usize], axes: &[usize]) -> Vec<(usize, bool)> {
    let mut out: Vec<(usize, bool)> = Vec::new();
    for (i, &d) in shape.iter().enumerate() {
        if d == 1 {
            continue;
        }
        let red = axes.contains(&i);
        match out.last_mut() {
            Some((size, r)) if *r == red => *size *= d,
            _ => out.push((d, red)),
        }
    }
    out
}

/// Folds `data` (of `shape`) over `axes` with `f(acc, x)` starting from
/// `init`, returning values in the `keepdim` layout, in a pooled buffer.
///
/// Every output element folds its inputs in ascending index order, so the
/// result does not depend on the loop shape or the thread count. The shape
/// is merged into alternating kept/reduced blocks and the input is read in
/// contiguous runs of the innermost block: reducing trailing dimensions
/// folds whole rows (split over the worker threads in fixed chunks of rows
/// when large); reducing leading or middle dimensions adds rows of the input
/// into rows of the output elementwise (a loop that vectorises). No
/// per-element index arithmetic is done.
pub fn fold_axes<T: Copy + Sync, A: Copy + Send + Sync>(
    data: &[T],
    shape: &[usize],
    axes: &[usize],
    init: A,
    f: impl Fn(A, T) -> A + Sync,
) -> Storage<A> {
    let n_out = numel(&kept_shape(shape, axes));
    if data.is_empty() {
        return Storage::filled(n_out, init);
    }
    let b = blocks(shape, axes);
    let Some(&(inner, inner_reduced)) = b.last() else {
        // Every dimension has size 1: one element, nothing to reduce.
        return map(data, |x| f(init, x));
    };
    if inner_reduced {
        // Rows of `inner` elements; each folds into one output element.
        if b.len() <= 2 {
            // [kept, reduced] or [reduced]: row r -> output r.
            return fold_rows(data, inner, init, &f);
        }
        let mut out = Storage::filled(n_out, init);
        for_each_run(&b, |src, dst| {
            let mut acc = out[dst];
            for &x in &data[src..src + inner] {
                acc = f(acc, x);
            }
            out[dst] = acc;
        });
        return out;
    }
    // Kept innermost block: rows of the input fold elementwise into rows of
    // the output.
    let mut out = Storage::filled(n_out, init);
    if b.len() == 2 {
        // [reduced, kept]: parallel over fixed column chunks.
        let rows = b[0].0;
        let out_ptr = SharedOut(out.as_mut_ptr());
        let chunks = inner.div_ceil(COL_CHUNK);
        let run = |c: usize| {
            let lo = c * COL_CHUNK;
            let hi = (lo + COL_CHUNK).min(inner);
            // SAFETY: chunk `c` owns output columns `lo..hi` alone, inside
            // the `inner`-element output, which outlives the loop.
            let o = unsafe { out_ptr.slice(lo, hi - lo) };
            // at the widest vector width: each column is still folded
            // row by row, in order (the same bits: see `widest`)
            widest(
                #[inline(always)]
                || {
                    for r in 0..rows {
                        let row = &data[r * inner + lo..r * inner + hi];
                        for (o, &x) in o.iter_mut().zip(row) {
                            *o = f(*o, x);
                        }
                    }
                },
            )
        };
        if data.len() >= PAR_MIN && chunks > 1 {
            parallel_for(chunks, run);
        } else {
            (0..chunks).for_each(run);
        }
        return out;
    }
    widest(
        #[inline(always)]
        || {
            for_each_run(&b, |src, dst| {
                for (o, &x) in out[dst..dst + inner]
                    .iter_mut()
                    .zip(&data[src..src + inner])
                {
                    *o = f(*o, x);
                }
            })
        },
    );
    out
}

/// Output columns per parallel chunk of a leading-axes reduction.
const COL_CHUNK: usize = 1 << 12;

/// An output pointer shared by the chunks of one parallel loop.
struct SharedOut<A>(*mut A);
// SAFETY: every chunk writes a disjoint range of the output (see the
// callers), which outlives the loop.
unsafe impl<A: Send> Sync for SharedOut<A> {}

impl<A> SharedOut<A> {
    /// `len` elements from `at`.
    ///
    /// # Safety
    /// The range lies inside the output, and no other live reference
    /// covers it.
    #[allow(clippy::mut_from_ref)]
    unsafe fn slice(&self, at: usize, len: usize) -> &mut [A] {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.0.add(at), len) }
    }
}

/// Folds each `row`-element row of `data` into one output element, rows
/// split over the worker threads in fixed chunks when large.
fn fold_rows<T: Copy + Sync, A: Copy + Send + Sync>(
    data: &[T],
    row: usize,
    init: A,
    f: &(impl Fn(A, T) -> A + Sync),
) -> Storage<A> {
    let fold = |r: &[T]| {
        let mut acc = init;
        for &x in r {
            acc = f(acc, x);
        }
        acc
    };
    let rows = data.len() / row;
    let rows_per_chunk = (PAR_MIN / row).max(1);
    if data.len() < 2 * PAR_MIN || rows < 2 {
        let mut out = Storage::with_capacity(rows);
        out.extend(data.chunks_exact(row).map(fold));
        return out;
    }
    let mut out = Storage::filled(rows, init);
    let ptr = SharedOut(out.as_mut_ptr());
    parallel_for(rows.div_ceil(rows_per_chunk), |c| {
        let lo = c * rows_per_chunk;
        let hi = (lo + rows_per_chunk).min(rows);
        // SAFETY: chunk `c` owns output rows `lo..hi` alone.
        let o = unsafe { ptr.slice(lo, hi - lo) };
        for (o, r) in o.iter_mut().zip(data[lo * row..hi * row].chunks_exact(row)) {
            *o = fold(r);
        }
    });
    out
}

/// Calls `f(input_offset, output_offset)` for every contiguous run of the
/// innermost block, in input order, over merged `blocks` (at least one).
#[inline(always)]
fn for_each_run(b: &[(usize, bool)], mut f: impl FnMut(usize, usize)) {
    let outer = &b[..b.len() - 1];
    let (inner, inner_reduced) = b[b.len() - 1];
    // Output stride of each outer block (0 when reduced); input runs are
    // consecutive.
    let mut ostride = vec![0usize; outer.len()];
    let mut acc = if inner_reduced { 1 } else { inner };
    for (i, &(size, red)) in outer.iter().enumerate().rev() {
        if !red {
            ostride[i] = acc;
            acc *= size;
        }
    }
    let runs: usize = outer.iter().map(|&(s, _)| s).product();
    let mut idx = vec![0usize; outer.len()];
    let mut dst = 0usize;
    for r in 0..runs {
        f(r * inner, dst);
        let mut d = outer.len();
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            dst += ostride[d];
            if idx[d] < outer[d].0 {
                break;
            }
            dst -= ostride[d] * outer[d].0;
            idx[d] = 0;
        }
    }
}

/// The variance of each of the `n_rows` contiguous rows of `rows`, dividing
/// the sum of squared deviations by `max(len - correction, 0)` (two passes:
/// the mean, then the squared deviations, each summed in index order). Rows
/// with no elements give NaN, as PyTorch does.
pub fn var_rows<E: Float>(rows: &[E], n_rows: usize, correction: usize) -> Storage<E> {
    let row = rows.len().checked_div(n_rows).unwrap_or(0);
    if row == 0 {
        return Storage::filled(n_rows, E::nan());
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
pub fn arg_best<T: Copy>(
    data: &[T],
    shape: &[usize],
    axis: usize,
    better: impl Fn(T, T) -> bool,
) -> Storage<i64> {
    let len = shape[axis];
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    assert!(
        len > 0 || outer * inner == 0,
        "arg_best: cannot reduce over an empty dimension of shape {shape:?}"
    );
    let mut out = Storage::with_capacity(outer * inner);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::strides;
    use crate::cpu::class::{pin_thread, Class};

    /// Reference: per-element index arithmetic, inputs in ascending order.
    fn naive(data: &[f64], shape: &[usize], axes: &[usize]) -> Vec<f64> {
        let out_shape = kept_shape(shape, axes);
        let (is, os) = (strides(shape), strides(&out_shape));
        let mut out = vec![0.5; numel(&out_shape)];
        for (i, &x) in data.iter().enumerate() {
            let o: usize = (0..shape.len())
                .filter(|d| !axes.contains(d))
                .map(|d| i / is[d] % shape[d] * os[d])
                .sum();
            // Not associative on purpose: the order of the fold shows.
            out[o] = out[o] * 0.75 + x;
        }
        out
    }

    #[test]
    fn every_axis_set_matches_the_index_arithmetic() {
        let _threads = crate::cpu::threads::lock_thread_count();
        let shapes: &[&[usize]] = &[&[3, 4, 5], &[2, 1, 3, 4], &[70, 2, 600], &[300, 700], &[5]];
        for &shape in shapes {
            let n = numel(shape);
            let data: Vec<f64> = (0..n).map(|i| ((i * 37) % 101) as f64 - 50.0).collect();
            let rank = shape.len();
            for mask in 0..(1u32 << rank) {
                let axes: Vec<usize> = (0..rank).filter(|&d| mask & (1 << d) != 0).collect();
                let want = naive(&data, shape, &axes);
                // the loops run at the widest width the class in force
                // allows (`widest`): the same values in each
                for class in [Class::Portable, Class::Avx2, Class::Avx512] {
                    let prev = pin_thread(Some(class));
                    for threads in [1, 2] {
                        crate::cpu::set_num_threads(threads);
                        let got = fold_axes(&data, shape, &axes, 0.5, |a, x| a * 0.75 + x);
                        assert_eq!(
                            got.to_vec(),
                            want,
                            "{shape:?} over {axes:?}, {threads} threads, {class:?}"
                        );
                    }
                    pin_thread(prev);
                }
            }
        }
    }
}

/// The examples that documented these kernels while they were public.
#[cfg(test)]
mod examples {
    #[test]
    fn kept_shape() {
        assert_eq!(
            crate::cpu::reduce::kept_shape(&[2, 3, 4], &[0, 2]),
            vec![1, 3, 1]
        );
    }

    #[test]
    fn fold_axes() {
        use crate::cpu::reduce::fold_axes;
        let v = fold_axes(&[1.0f64, 2.0, 3.0, 4.0], &[2, 2], &[1], 0.0, |a, x| a + x);
        assert_eq!(&v[..], &[3.0, 7.0]);
        let v = fold_axes(&[1.0f64, 2.0, 3.0, 4.0], &[2, 2], &[0], 0.0, |a, x| a + x);
        assert_eq!(&v[..], &[4.0, 6.0]);
    }

    #[test]
    fn var_rows() {
        use crate::cpu::reduce::var_rows;
        let v = var_rows(&[1.0f64, 2.0, 3.0, 4.0, 4.0, 4.0], 2, 1);
        assert_eq!(&v[..], &[1.0, 0.0]);
    }

    #[test]
    fn arg_best() {
        use crate::cpu::reduce::arg_best;
        // argmax of each row of [[1, 5, 5], [7, 0, 2]]
        let idx = arg_best(&[1.0f64, 5.0, 5.0, 7.0, 0.0, 2.0], &[2, 3], 1, |a, b| a > b);
        assert_eq!(&idx[..], &[1, 0]);
    }
}
