//! Strided copies between contiguous buffers: reading a strided view of a
//! buffer (slices, flips, diagonals) and its adjoint, writing a buffer into
//! a strided view of another (padding, the gradients of those reads).
//!
//! A view is an `offset` plus one signed stride per dimension of a shape:
//! element `i` of the view lives at `offset + sum_k i_k * strides[k]`.

use super::memory::Storage;
use crate::base::numel;

/// Calls `f` once per row of `shape` (every index of all dimensions but the
/// last; once for rank 0 and 1) with the offsets of that row's first element
/// in each of `N` buffers, walking `strides[k]` from `start[k]`.
/// Rows come in row-major order. Nothing is called when `shape` is empty.
///
/// ```
/// let mut rows = Vec::new();
/// forge::cpu::strided::for_each_row(&[2, 3], [&[3, 1]], [0], |[o]| rows.push(o));
/// assert_eq!(rows, vec![0, 3]);
/// ```
pub fn for_each_row<const N: usize>(
    shape: &[usize],
    strides: [&[isize]; N],
    start: [isize; N],
    mut f: impl FnMut([isize; N]),
) {
    let n = numel(shape);
    if n == 0 {
        return;
    }
    let rank = shape.len();
    if rank <= 1 {
        f(start);
        return;
    }
    let inner = shape[rank - 1];
    let mut idx = vec![0usize; rank - 1];
    let mut off = start;
    for _ in 0..n / inner {
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
/// contiguous buffer of `shape`.
///
/// # Panics
/// When the view reaches outside `src`.
///
/// ```
/// use forge::cpu::strided::strided_read;
/// // Every second element of [0..6), reversed.
/// assert_eq!(&strided_read(&[0, 1, 2, 3, 4, 5], 5, &[3], &[-2])[..], &[5, 3, 1]);
/// ```
pub fn strided_read<E: Copy>(
    src: &[E],
    offset: usize,
    shape: &[usize],
    strides: &[isize],
) -> Storage<E> {
    let mut out = Storage::with_capacity(numel(shape));
    let (len, step) = inner(shape, strides);
    for_each_row(shape, [strides], [offset as isize], |[o]| {
        if step == 1 {
            let o = o as usize;
            out.extend_from_slice(&src[o..o + len]);
        } else {
            out.extend((0..len).map(|j| src[(o + j as isize * step) as usize]));
        }
    });
    out
}

/// Writes the contiguous `src` (of `shape`) into the strided view
/// `(offset, shape, strides)` of `dst`: the adjoint of [`strided_read`]
/// when the view's positions are distinct.
///
/// # Panics
/// When `src` does not have `shape`'s element count or the view reaches
/// outside `dst`.
///
/// ```
/// use forge::cpu::strided::strided_write;
/// let mut dst = [0; 6];
/// strided_write(&mut dst, 1, &[2], &[3], &[7, 8]);
/// assert_eq!(dst, [0, 7, 0, 0, 8, 0]);
/// ```
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
///
/// ```
/// assert_eq!(forge::cpu::strided::signed_strides(&[2, 3]), vec![3, 1]);
/// ```
pub fn signed_strides(shape: &[usize]) -> Vec<isize> {
    crate::base::strides(shape)
        .into_iter()
        .map(|s| s as isize)
        .collect()
}
