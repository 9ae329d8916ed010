//! Shape arithmetic shared by the differentiable layout ops (on float
//! tensors) and their untracked twins on integer and boolean tensors:
//! every check and every panic message lives here once.

use crate::base::norm_axes;
use crate::cpu::strided::signed_strides;
use crate::tensor::{broadcast_shapes, norm_axis, numel};

/// A strided view of a contiguous buffer: element `i` of `shape` is at
/// `offset + sum_k i_k * strides[k]`.
pub(crate) struct View {
    pub offset: usize,
    pub shape: Vec<usize>,
    pub strides: Vec<isize>,
}

/// The target shape of `reshape`, with one `-1` inferred.
#[track_caller]
pub(crate) fn reshape(from: &[usize], to: &[isize]) -> Vec<usize> {
    let n = numel(from);
    let known: usize = to
        .iter()
        .filter(|&&d| d >= 0)
        .map(|&d| d as usize)
        .product();
    let unknown = to.iter().filter(|&&d| d < 0).count();
    shape_assert!(unknown <= 1, "reshape: more than one -1 in {to:?}");
    let shape: Vec<usize> = to
        .iter()
        .map(|&d| {
            if d >= 0 {
                d as usize
            } else {
                n.checked_div(known).unwrap_or(0)
            }
        })
        .collect();
    shape_assert!(
        numel(&shape) == n,
        "reshape: cannot view shape {from:?} ({n} elements) as {to:?}"
    );
    shape
}

/// `shape` without dimension `axis` if its size is 1.
#[track_caller]
pub(crate) fn squeeze(shape: &[usize], axis: isize) -> Vec<usize> {
    let a = norm_axis("squeeze", axis, shape.len());
    let mut out = shape.to_vec();
    if !shape.is_empty() && shape[a] == 1 {
        out.remove(a);
    }
    out
}

/// `shape` with a 1 inserted at `axis` (in `-rank-1..=rank`).
#[track_caller]
pub(crate) fn unsqueeze(shape: &[usize], axis: isize) -> Vec<usize> {
    let r = shape.len() as isize;
    shape_assert!(
        (-r - 1..=r).contains(&axis),
        "unsqueeze: axis {axis} is out of range {}..={r} for a tensor of rank {r}",
        -r - 1
    );
    let a = (if axis < 0 { axis + r + 1 } else { axis }) as usize;
    let mut out = shape.to_vec();
    out.insert(a, 1);
    out
}

/// `shape` with dimensions `start..=end` merged (`[1]` for a 0-d shape).
#[track_caller]
pub(crate) fn flatten(shape: &[usize], start: isize, end: isize) -> Vec<usize> {
    if shape.is_empty() {
        return vec![1];
    }
    let s = norm_axis("flatten", start, shape.len());
    let e = norm_axis("flatten", end, shape.len());
    shape_assert!(
        s <= e,
        "flatten: start axis {start} comes after end axis {end} for shape {shape:?}"
    );
    let mut out = shape[..s].to_vec();
    out.push(shape[s..=e].iter().product());
    out.extend_from_slice(&shape[e + 1..]);
    out
}

/// Checks that `from` broadcasts to `to` (for `expand`).
#[track_caller]
pub(crate) fn check_expand(from: &[usize], to: &[usize]) {
    shape_assert!(
        broadcast_shapes(from, to).as_deref() == Some(to),
        "expand: shape {from:?} cannot be broadcast to {to:?}"
    );
}

/// The view of `permute(dims)` and the inverse permutation.
#[track_caller]
pub(crate) fn permute(shape: &[usize], dims: &[isize]) -> (View, Vec<isize>) {
    let rank = shape.len();
    let p = norm_axes("permute", dims, rank);
    let mut seen = vec![false; rank];
    for &d in &p {
        seen[d] = true;
    }
    shape_assert!(
        p.len() == rank && seen.iter().all(|&s| s),
        "permute: {dims:?} is not a permutation of the axes of shape {shape:?}"
    );
    let st = signed_strides(shape);
    let mut inv = vec![0isize; rank];
    for (i, &d) in p.iter().enumerate() {
        inv[d] = i as isize;
    }
    let view = View {
        offset: 0,
        shape: p.iter().map(|&d| shape[d]).collect(),
        strides: p.iter().map(|&d| st[d]).collect(),
    };
    (view, inv)
}

/// The permutation of `transpose(a, b)`.
#[track_caller]
pub(crate) fn transpose(rank: usize, a: isize, b: isize) -> Vec<isize> {
    let (a, b) = (
        norm_axis("transpose", a, rank),
        norm_axis("transpose", b, rank),
    );
    let mut p: Vec<isize> = (0..rank as isize).collect();
    p.swap(a, b);
    p
}

/// The view of `x[start:end:step]` along `axis` (Python clamping), or
/// `None` when it is the whole tensor.
#[track_caller]
pub(crate) fn slice(
    shape: &[usize],
    axis: isize,
    start: isize,
    end: isize,
    step: usize,
) -> Option<View> {
    shape_assert!(!shape.is_empty(), "slice: cannot slice a 0-d tensor");
    let a = norm_axis("slice", axis, shape.len());
    shape_assert!(
        step > 0,
        "slice: step must be positive (axis {axis} of shape {shape:?})"
    );
    let n = shape[a] as isize;
    let clamp = |v: isize| (if v < 0 { v + n } else { v }).clamp(0, n) as usize;
    let (s, e) = (clamp(start), clamp(end));
    let len = if e > s { (e - s).div_ceil(step) } else { 0 };
    if s == 0 && len == n as usize && step == 1 {
        return None;
    }
    let mut strides = signed_strides(shape);
    let offset = s * strides[a] as usize;
    strides[a] *= step as isize;
    let mut out = shape.to_vec();
    out[a] = len;
    Some(View {
        offset,
        shape: out,
        strides,
    })
}

/// Checks `narrow(axis, start, len)` and returns the normalised axis.
#[track_caller]
pub(crate) fn check_narrow(shape: &[usize], axis: isize, start: usize, len: usize) -> usize {
    let a = norm_axis("narrow", axis, shape.len());
    let n = shape.get(a).copied().unwrap_or(1);
    shape_assert!(
        start.checked_add(len).is_some_and(|e| e <= n),
        "narrow: start {start} + length {len} exceeds size {n} of dimension {axis} (shape {shape:?})"
    );
    a
}

/// Checks that every index lies in `0..size` and converts them.
#[track_caller]
pub(crate) fn indices(op: &str, idx: &[i64], axis: usize, size: usize) -> Vec<usize> {
    // a loop, not a closure: the panic must stay in the #[track_caller] chain
    let mut out = Vec::with_capacity(idx.len());
    for &i in idx {
        if i < 0 || i as u64 >= size as u64 {
            shape_panic!("{op}: index {i} is out of range for dimension {axis} of size {size}");
        }
        out.push(i as usize);
    }
    out
}

/// Checks `index_select` and returns the axis, the indices and the output
/// shape.
#[track_caller]
pub(crate) fn index_select(
    shape: &[usize],
    axis: isize,
    idx_shape: &[usize],
    idx: &[i64],
) -> (usize, Vec<usize>, Vec<usize>) {
    let a = norm_axis("index_select", axis, shape.len());
    shape_assert!(
        idx_shape.len() <= 1 && !shape.is_empty(),
        "index_select: index of shape {idx_shape:?} must be 1-d (input shape {shape:?})"
    );
    let ix = indices("index_select", idx, a, shape[a]);
    let mut out = shape.to_vec();
    out[a] = ix.len();
    (a, ix, out)
}

/// Checks the shapes given to `cat` and returns the axis.
#[track_caller]
pub(crate) fn check_cat(shapes: &[&[usize]], axis: isize) -> usize {
    shape_assert!(!shapes.is_empty(), "cat: no tensors to concatenate");
    let first = shapes[0];
    let rank = first.len();
    shape_assert!(rank > 0, "cat: cannot concatenate 0-d tensors");
    let a = norm_axis("cat", axis, rank);
    for s in shapes {
        let fits = s.len() == rank && (0..rank).all(|d| d == a || s[d] == first[d]);
        shape_assert!(
            fits,
            "cat: shapes {first:?} and {s:?} differ outside axis {axis}"
        );
    }
    a
}

/// Checks the shapes given to `stack` and returns the new axis.
#[track_caller]
pub(crate) fn check_stack(shapes: &[&[usize]], axis: isize) -> isize {
    shape_assert!(!shapes.is_empty(), "stack: no tensors to stack");
    for s in shapes {
        shape_assert!(
            *s == shapes[0],
            "stack: shapes {:?} and {s:?} differ",
            shapes[0]
        );
    }
    norm_axis("stack", axis, shapes[0].len() + 1) as isize
}
