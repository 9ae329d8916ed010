//! Indexing kernels: selecting, gathering and scattering along one axis,
//! and concatenation. Indices arrive validated (in range) as `usize`.

use super::memory::Storage;
use super::strided::{for_each_row, signed_strides};
use crate::base::numel;
use std::ops::Add;

/// Splits `shape` around `axis`: (product before, size at, product after).
pub fn split_at_axis(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    (
        numel(&shape[..axis]),
        shape[axis],
        numel(&shape[axis + 1..]),
    )
}

/// Picks the slices `idx` along `axis` of `src` (of `shape`), in order:
/// the output has `shape` with `shape[axis]` replaced by `idx.len()`.
pub fn index_select<E: Copy>(src: &[E], shape: &[usize], axis: usize, idx: &[usize]) -> Storage<E> {
    let (outer, n, inner) = split_at_axis(shape, axis);
    let mut out = Storage::with_capacity(outer * idx.len() * inner);
    for o in 0..outer {
        for &i in idx {
            let start = (o * n + i) * inner;
            out.extend_from_slice(&src[start..start + inner]);
        }
    }
    out
}

/// The adjoint of [`index_select`]: adds slice `p` of `src` (shaped like
/// `shape` with `idx.len()` at `axis`) into slice `idx[p]` of `dst`.
/// Repeated indices accumulate, in increasing `p`.
pub fn index_add<E: Copy + Add<Output = E>>(
    dst: &mut [E],
    shape: &[usize],
    axis: usize,
    idx: &[usize],
    src: &[E],
) {
    index_with(dst, shape, axis, idx, src, |d, s| d + s);
}

/// [`index_add`] with `combine(old, new)` in place of the sum (`index_copy`
/// keeps `new`; of repeated indices the last one wins).
pub fn index_with<E: Copy>(
    dst: &mut [E],
    shape: &[usize],
    axis: usize,
    idx: &[usize],
    src: &[E],
    combine: impl Fn(E, E) -> E,
) {
    let (outer, n, inner) = split_at_axis(shape, axis);
    let k = idx.len();
    for o in 0..outer {
        for (p, &i) in idx.iter().enumerate() {
            let d = (o * n + i) * inner;
            let s = (o * k + p) * inner;
            for (x, &y) in dst[d..d + inner].iter_mut().zip(&src[s..s + inner]) {
                *x = combine(*x, y);
            }
        }
    }
}

/// Strides of `shape` with the stride of `axis` set to zero, and that
/// stride: offsets that skip the indexed axis.
fn strides_without(shape: &[usize], axis: usize) -> (Vec<isize>, isize) {
    let mut s = signed_strides(shape);
    let a = s[axis];
    s[axis] = 0;
    (s, a)
}

/// `torch.gather`: `out[i] = src[i with i[axis] replaced by idx[i]]` for
/// every index `i` of `idx_shape` (same rank as `src_shape`, each other
/// dimension no larger).
pub fn gather<E: Copy>(
    src: &[E],
    src_shape: &[usize],
    axis: usize,
    idx: &[usize],
    idx_shape: &[usize],
) -> Storage<E> {
    let (ss, sa) = strides_without(src_shape, axis);
    let len = idx_shape.last().copied().unwrap_or(1);
    let step = ss.last().copied().unwrap_or(0);
    let mut out = Storage::with_capacity(idx.len());
    for_each_row(idx_shape, [&ss], [0], |[o]| {
        let p = out.len();
        for j in 0..len {
            let at = o + j as isize * step + idx[p + j] as isize * sa;
            out.push(src[at as usize]);
        }
    });
    out
}

/// `torch.scatter_add_`, the adjoint of [`gather`]: for every index `i` of
/// `idx_shape`, adds `src[i]` (read from `src`, of `src_shape`, which may be
/// larger than `idx_shape`) to `dst[i with i[axis] replaced by idx[i]]`.
/// Repeated targets accumulate in row-major order of `i`.
pub fn scatter_add<E: Copy + Add<Output = E>>(
    dst: &mut [E],
    dst_shape: &[usize],
    axis: usize,
    idx: &[usize],
    idx_shape: &[usize],
    src: &[E],
    src_shape: &[usize],
) {
    scatter_with(
        dst,
        dst_shape,
        axis,
        idx,
        idx_shape,
        src,
        src_shape,
        |d, s| d + s,
    );
}

/// [`scatter_add`] with `combine(old, new)` in place of the sum (the
/// overwriting `scatter` keeps `new`). Positions are visited in `idx`'s
/// row-major order, so of repeated positions the last one wins.
#[allow(clippy::too_many_arguments)]
pub fn scatter_with<E: Copy>(
    dst: &mut [E],
    dst_shape: &[usize],
    axis: usize,
    idx: &[usize],
    idx_shape: &[usize],
    src: &[E],
    src_shape: &[usize],
    combine: impl Fn(E, E) -> E,
) {
    let (ds, da) = strides_without(dst_shape, axis);
    let ss = signed_strides(src_shape);
    let len = idx_shape.last().copied().unwrap_or(1);
    let dstep = ds.last().copied().unwrap_or(0);
    let sstep = ss.last().copied().unwrap_or(0);
    let mut p = 0;
    for_each_row(idx_shape, [&ds, &ss], [0, 0], |[od, os]| {
        for j in 0..len {
            let at = (od + j as isize * dstep + idx[p + j] as isize * da) as usize;
            let from = (os + j as isize * sstep) as usize;
            dst[at] = combine(dst[at], src[from]);
        }
        p += len;
    });
}

/// Concatenates blocks along an axis: `parts` holds each input's data and
/// its size along the axis; `outer` and `inner` are the products of the
/// dimensions before and after the axis (equal for every part).
pub fn concat<E: Copy>(parts: &[(&[E], usize)], outer: usize, inner: usize) -> Storage<E> {
    let total: usize = parts.iter().map(|(_, n)| n).sum();
    let mut out = Storage::with_capacity(outer * total * inner);
    for o in 0..outer {
        for &(data, n) in parts {
            let block = n * inner;
            out.extend_from_slice(&data[o * block..(o + 1) * block]);
        }
    }
    out
}

/// The examples that documented these kernels while they were public.
#[cfg(test)]
mod examples {
    #[test]
    fn split_at_axis() {
        assert_eq!(crate::cpu::index::split_at_axis(&[2, 3, 4], 1), (2, 3, 4));
    }

    #[test]
    fn index_select() {
        use crate::cpu::index::index_select;
        // rows 2, 0, 2 of a 3x2 matrix
        let v = index_select(&[1, 2, 3, 4, 5, 6], &[3, 2], 0, &[2, 0, 2]);
        assert_eq!(&v[..], &[5, 6, 1, 2, 5, 6]);
    }

    #[test]
    fn index_add() {
        use crate::cpu::index::index_add;
        let mut dst = [0.0; 3];
        index_add(&mut dst, &[3], 0, &[2, 0, 2], &[1.0, 2.0, 3.0]);
        assert_eq!(dst, [2.0, 0.0, 4.0]);
    }

    #[test]
    fn gather() {
        use crate::cpu::index::gather;
        // per row, pick columns [1, 1] and [0, 2] of a 2x3 matrix
        let v = gather(&[1, 2, 3, 4, 5, 6], &[2, 3], 1, &[1, 1, 0, 2], &[2, 2]);
        assert_eq!(&v[..], &[2, 2, 4, 6]);
    }

    #[test]
    fn scatter_add() {
        use crate::cpu::index::scatter_add;
        let mut dst = [0.0; 3];
        scatter_add(&mut dst, &[3], 0, &[2, 2, 0], &[3], &[1.0, 2.0, 3.0], &[3]);
        assert_eq!(dst, [3.0, 0.0, 3.0]);
    }

    #[test]
    fn concat() {
        use crate::cpu::index::concat;
        // a 2x1 and a 2x2 matrix side by side (axis 1):
        let v = concat(&[(&[1, 2][..], 1), (&[3, 4, 5, 6][..], 2)], 2, 1);
        assert_eq!(&v[..], &[1, 3, 4, 2, 5, 6]);
    }
}
