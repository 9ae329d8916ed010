//! Strided copies between contiguous buffers: reading a strided view of a
//! buffer (slices, flips, diagonals) and its adjoint, writing a buffer into
//! a strided view of another (padding, the gradients of those reads).
//!
//! A view is an `offset` plus one signed stride per dimension of a shape:
//! element `i` of the view lives at `offset + sum_k i_k * strides[k]`.

use super::elementwise::{build_in, CHUNK};
use super::memory::Storage;
use crate::base::numel;

/// Calls `f` once per row of `shape` (every index of all dimensions but the
/// last; once for rank 0 and 1) with the offsets of that row's first element
/// in each of `N` buffers, walking `strides[k]` from `start[k]`.
/// Rows come in row-major order. Nothing is called when `shape` is empty.
pub fn for_each_row<const N: usize>(
    shape: &[usize],
    strides: [&[isize]; N],
    start: [isize; N],
    f: impl FnMut([isize; N]),
) {
    let rows = numel(shape) / shape.last().copied().unwrap_or(1).max(1);
    rows_in(shape, strides, start, 0..rows, f);
}

/// [`for_each_row`] over rows `range` only (row-major row numbers).
fn rows_in<const N: usize>(
    shape: &[usize],
    strides: [&[isize]; N],
    start: [isize; N],
    range: std::ops::Range<usize>,
    mut f: impl FnMut([isize; N]),
) {
    if numel(shape) == 0 || range.is_empty() {
        return;
    }
    let rank = shape.len();
    if rank <= 1 {
        f(start);
        return;
    }
    // The index and offsets of row `range.start`.
    let mut idx = vec![0usize; rank - 1];
    let mut off = start;
    let mut rem = range.start;
    for d in (0..rank - 1).rev() {
        idx[d] = rem % shape[d];
        rem /= shape[d];
        for k in 0..N {
            off[k] += idx[d] as isize * strides[k][d];
        }
    }
    for _ in range {
        f(off);
        let mut d = rank - 1;
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            for k in 0..N {
                off[k] += strides[k][d];
            }
            if idx[d] < shape[d] {
                break;
            }
            for k in 0..N {
                off[k] -= strides[k][d] * shape[d] as isize;
            }
            idx[d] = 0;
        }
    }
}

/// The length and stride of the innermost dimension (1 and 0 for rank 0).
fn inner(shape: &[usize], strides: &[isize]) -> (usize, isize) {
    (
        shape.last().copied().unwrap_or(1),
        strides.last().copied().unwrap_or(0),
    )
}

/// Copies the strided view `(offset, shape, strides)` of `src` into a new
/// contiguous buffer of `shape`, in parallel chunks of whole rows (about
/// 16K elements, from the shape only) when the view has at least 65,536
/// elements.
///
/// # Panics
/// When the view reaches outside `src`.
pub fn strided_read<E: Copy + Send + Sync>(
    src: &[E],
    offset: usize,
    shape: &[usize],
    strides: &[isize],
) -> Storage<E> {
    let n = numel(shape);
    let (len, step) = inner(shape, strides);
    // Whole rows per chunk, about `CHUNK` elements (from the shape only);
    // in parallel over chunks when large (`build_in`). A copy: any split
    // gives the same values.
    let rows_per_chunk = (CHUNK / len.max(1)).max(1);
    build_in(n, rows_per_chunk * len, |first, out| {
        let r0 = first / len.max(1);
        let rows = r0..r0 + out.len() / len.max(1);
        let mut pos = 0;
        rows_in(shape, [strides], [offset as isize], rows, |[o]| {
            let dst = &mut out[pos..pos + len];
            if step == 1 {
                let o = o as usize;
                for (d, &v) in dst.iter_mut().zip(&src[o..o + len]) {
                    d.write(v);
                }
            } else {
                for (j, d) in dst.iter_mut().enumerate() {
                    d.write(src[(o + j as isize * step) as usize]);
                }
            }
            pos += len;
        });
        assert_eq!(pos, out.len(), "strided_read: every row written");
    })
}

/// Writes the contiguous `src` (of `shape`) into the strided view
/// `(offset, shape, strides)` of `dst`: the adjoint of [`strided_read`]
/// when the view's positions are distinct.
///
/// # Panics
/// When `src` does not have `shape`'s element count or the view reaches
/// outside `dst`.
pub fn strided_write<E: Copy>(
    dst: &mut [E],
    offset: usize,
    shape: &[usize],
    strides: &[isize],
    src: &[E],
) {
    assert_eq!(
        src.len(),
        numel(shape),
        "strided_write: {} values for shape {shape:?}",
        src.len()
    );
    let (len, step) = inner(shape, strides);
    let mut pos = 0;
    for_each_row(shape, [strides], [offset as isize], |[o]| {
        if step == 1 {
            let o = o as usize;
            dst[o..o + len].copy_from_slice(&src[pos..pos + len]);
        } else {
            for j in 0..len {
                dst[(o + j as isize * step) as usize] = src[pos + j];
            }
        }
        pos += len;
    });
}

/// Row-major strides of `shape` as signed integers.
pub fn signed_strides(shape: &[usize]) -> Vec<isize> {
    crate::base::strides(shape)
        .into_iter()
        .map(|s| s as isize)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The view's element `i` by index arithmetic alone.
    fn naive(src: &[f32], offset: usize, shape: &[usize], strides: &[isize]) -> Vec<f32> {
        (0..numel(shape))
            .map(|mut i| {
                let mut at = offset as isize;
                for d in (0..shape.len()).rev() {
                    at += (i % shape[d]) as isize * strides[d];
                    i /= shape[d];
                }
                src[at as usize]
            })
            .collect()
    }

    #[test]
    fn parallel_reads_match_index_arithmetic_for_any_thread_count() {
        let _threads = crate::cpu::threads::lock_thread_count();
        let src: Vec<f32> = (0..2 * 3 * 97 * 131).map(|i| i as f32).collect();
        // [2, 3, 97, 131] permuted to [97, 2, 131, 3] (rows of 3, strided),
        // the same with the last two axes kept (rows of 131, contiguous),
        // and a flip of the outer axis with rows longer than a chunk.
        let views: [(usize, Vec<usize>, Vec<isize>); 3] = [
            (0, vec![97, 2, 131, 3], vec![131, 3 * 97 * 131, 1, 97 * 131]),
            (0, vec![97, 2, 3, 131], vec![131, 3 * 97 * 131, 97 * 131, 1]),
            (src.len() - 38_109, vec![2, 38_109], vec![-38_109, 1]),
        ];
        for (offset, shape, strides) in &views {
            let want = naive(&src, *offset, shape, strides);
            for threads in [1, 2, 3] {
                crate::cpu::set_num_threads(threads);
                let got = strided_read(&src, *offset, shape, strides);
                assert!(got[..] == want[..], "{shape:?} at {threads} threads");
            }
        }
    }
}

/// The examples that documented these kernels while they were public.
#[cfg(test)]
mod examples {
    #[test]
    fn for_each_row() {
        let mut rows = Vec::new();
        crate::cpu::strided::for_each_row(&[2, 3], [&[3, 1]], [0], |[o]| rows.push(o));
        assert_eq!(rows, vec![0, 3]);
    }

    #[test]
    fn strided_read() {
        use crate::cpu::strided::strided_read;
        // Every second element of [0..6), reversed.
        assert_eq!(
            &strided_read(&[0, 1, 2, 3, 4, 5], 5, &[3], &[-2])[..],
            &[5, 3, 1]
        );
    }

    #[test]
    fn strided_write() {
        use crate::cpu::strided::strided_write;
        let mut dst = [0; 6];
        strided_write(&mut dst, 1, &[2], &[3], &[7, 8]);
        assert_eq!(dst, [0, 7, 0, 0, 8, 0]);
    }

    #[test]
    fn signed_strides() {
        assert_eq!(crate::cpu::strided::signed_strides(&[2, 3]), vec![3, 1]);
    }
}
