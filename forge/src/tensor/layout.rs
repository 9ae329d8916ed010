//! Strided layouts: a tensor may be a view of another tensor's storage,
//! an `offset` plus one stride per dimension, as in PyTorch.
//!
//! A tensor whose layout is `None` is *plain*: its storage holds exactly its
//! elements, row-major from index 0. Views (made by `slice`, `narrow`,
//! `select`, `permute`, `transpose`, `t`, `expand`, `unsqueeze`, `diagonal`
//! and the reshapes of views) carry a [`Strided`] layout and share the
//! storage of the tensor they view.
//!
//! Kernels read values through [`Tensor::as_slice`], the one contiguity
//! entry point: a plain tensor or a contiguous view (a row-major block at
//! some offset) is borrowed in place; any other view is copied into a
//! row-major buffer once, on the first read, and that copy is cached on the
//! view (and shared by its clones), so later reads do not copy again.
//!
//! Values never change after creation, so a view can only observe its
//! base's values. The two in-place paths (an optimizer's update and the
//! gradient accumulation of the backward pass) write only through
//! [`Tensor::values_mut`], which gives a buffer only to a plain tensor that
//! is the storage's sole owner: storage shared with a view is copied first
//! (copy-on-write), so a write through one handle never changes another.

use super::{numel, Device, Element, Tensor};
use crate::cpu::memory::Storage;
use crate::cpu::strided::strided_read;
use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};

/// The layout of a view: element `i` (a multi-index) lives at
/// `offset + sum_k i_k * strides[k]` of the storage.
pub(crate) struct Strided<E: Copy> {
    pub(crate) offset: usize,
    pub(crate) strides: Box<[isize]>,
    /// The strides are row-major for the shape (ignoring dimensions of size
    /// 0 or 1), so the elements are one block of the storage.
    contiguous: bool,
    /// The row-major copy of a non-contiguous view, made by the first read.
    dense: OnceLock<Arc<Storage<E>>>,
}

/// Row-major strides of `shape`, signed.
fn row_major(shape: &[usize]) -> Vec<isize> {
    let mut s = vec![0isize; shape.len()];
    let mut acc = 1isize;
    for d in (0..shape.len()).rev() {
        s[d] = acc;
        acc *= shape[d] as isize;
    }
    s
}

/// Whether `strides` are row-major for `shape`, ignoring dimensions of
/// size 1 (whose stride is never used) and any tensor with no elements.
fn is_row_major(shape: &[usize], strides: &[isize]) -> bool {
    if numel(shape) == 0 {
        return true;
    }
    let mut want = 1isize;
    for d in (0..shape.len()).rev() {
        if shape[d] != 1 {
            if strides[d] != want {
                return false;
            }
            want *= shape[d] as isize;
        }
    }
    true
}

/// The strides that view `(shape, strides)` as `new` without moving any
/// element, if there are such (PyTorch's rule for `view`): every run of
/// input dimensions that are contiguous with each other must be split or
/// merged into whole output dimensions.
fn reshape_strides(shape: &[usize], strides: &[isize], new: &[usize]) -> Option<Vec<isize>> {
    if numel(shape) == 0 || shape.iter().all(|&d| d == 1) {
        return Some(row_major(new));
    }
    let mut out = vec![0isize; new.len()];
    // Walk both shapes from the innermost dimension, one run of mutually
    // contiguous input dimensions at a time.
    let mut v = new.len();
    let mut base = *strides.last().unwrap_or(&1);
    let (mut run, mut covered) = (1usize, 1usize);
    for d in (0..shape.len()).rev() {
        run *= shape[d];
        let ends_run = d == 0 || (shape[d - 1] != 1 && strides[d - 1] != run as isize * base);
        if !ends_run {
            continue;
        }
        while v > 0 && (covered < run || new[v - 1] == 1) {
            out[v - 1] = covered as isize * base;
            covered *= new[v - 1];
            v -= 1;
        }
        if covered != run {
            return None;
        }
        if d > 0 {
            base = strides[d - 1];
            run = 1;
            covered = 1;
        }
    }
    (v == 0).then_some(out)
}

impl<E: Element, D: Device> Tensor<E, D> {
    /// A handle on `self`'s storage with another shape and layout, no tape
    /// node. A row-major layout at offset 0 that covers the whole storage
    /// becomes plain.
    pub(crate) fn restride(&self, offset: usize, shape: &[usize], strides: &[isize]) -> Self {
        debug_assert_eq!(shape.len(), strides.len());
        debug_assert!(strides.iter().all(|&s| s >= 0));
        debug_assert!(
            numel(shape) == 0
                || offset
                    + shape
                        .iter()
                        .zip(strides)
                        .map(|(&n, &s)| (n - 1) * s as usize)
                        .sum::<usize>()
                    < self.storage.len(),
            "restride: view {shape:?}/{strides:?} at {offset} outside {} values",
            self.storage.len()
        );
        let contiguous = is_row_major(shape, strides);
        let layout = if contiguous && offset == 0 && numel(shape) == self.storage.len() {
            None
        } else {
            Some(Arc::new(Strided {
                offset,
                strides: strides.into(),
                contiguous,
                dense: OnceLock::new(),
            }))
        };
        Tensor {
            storage: self.storage.clone(),
            shape: shape.into(),
            layout,
            node: None,
            _device: PhantomData,
        }
    }

    /// The strides of `self` in storage elements (row-major for a plain
    /// tensor).
    pub(crate) fn strides_signed(&self) -> Vec<isize> {
        match &self.layout {
            None => row_major(&self.shape),
            Some(l) => l.strides.to_vec(),
        }
    }

    /// The view `(offset, shape, strides)` of `self`, with `offset` and
    /// `strides` counted in `self`'s own row-major order, as a handle on
    /// `self`'s storage (no tape node). `None` when the view cannot be
    /// expressed on the storage: a negative stride (PyTorch has none; such
    /// views are copies), or a stride that does not map to a fixed step of
    /// `self`'s dimensions over the whole view.
    pub(crate) fn view_of(
        &self,
        offset: usize,
        shape: &[usize],
        strides: &[isize],
    ) -> Option<Self> {
        if strides.iter().any(|&s| s < 0) {
            return None;
        }
        let own = self.strides_signed();
        let base = self.layout.as_ref().map_or(0, |l| l.offset);
        if numel(shape) == 0 {
            return Some(self.restride(base, shape, &row_major(shape)));
        }
        // Split the offset and each stride into digits of `self`'s shape
        // (mixed radix); the view maps linearly onto `self`'s layout when
        // no walk along a view dimension carries from one digit to the
        // next.
        let digits = |mut x: usize| -> Vec<usize> {
            let mut out = vec![0; self.rank()];
            for d in (0..self.rank()).rev() {
                let n = self.shape[d].max(1);
                out[d] = x % n;
                x /= n;
            }
            if x == 0 {
                out
            } else {
                Vec::new()
            }
        };
        let start = digits(offset);
        if start.len() != self.rank() {
            return None;
        }
        let mut reach = start.clone();
        let mut abs_strides = Vec::with_capacity(shape.len());
        for (&n, &s) in shape.iter().zip(strides) {
            let c = digits(s as usize);
            if c.len() != self.rank() {
                if n <= 1 {
                    // Never stepped along: any stride will do.
                    abs_strides.push(0);
                    continue;
                }
                return None;
            }
            for (r, &ck) in reach.iter_mut().zip(&c) {
                *r += (n - 1) * ck;
            }
            abs_strides.push(c.iter().zip(&own).map(|(&ck, &t)| ck as isize * t).sum());
        }
        if reach
            .iter()
            .zip(self.shape.iter())
            .any(|(&r, &n)| r >= n.max(1))
        {
            return None;
        }
        let abs_offset = start
            .iter()
            .zip(&own)
            .map(|(&j, &t)| j as isize * t)
            .sum::<isize>() as usize
            + base;
        Some(self.restride(abs_offset, shape, &abs_strides))
    }

    /// `self` broadcast to `shape` (checked by the caller) as a view with
    /// stride 0 along the broadcast dimensions, no tape node.
    pub(crate) fn expanded(&self, shape: &[usize]) -> Self {
        let own = row_major(&self.shape);
        let lead = shape.len() - self.rank();
        let strides: Vec<isize> = (0..shape.len())
            .map(|i| {
                if i < lead || (self.shape[i - lead] == 1 && shape[i] != 1) {
                    0
                } else {
                    own[i - lead]
                }
            })
            .collect();
        self.view_of(0, shape, &strides)
            .expect("a broadcast is a view of any layout")
    }

    /// `self` viewed as `shape` (same element count) with no tape node: a
    /// handle on the same storage when the layout allows it (always for a
    /// plain or contiguous tensor), otherwise on the row-major copy of the
    /// view (made once, see [`as_slice`](Self::as_slice)).
    pub(crate) fn reshaped(&self, shape: &[usize]) -> Self {
        debug_assert_eq!(numel(shape), self.numel());
        let offset = self.layout.as_ref().map_or(0, |l| l.offset);
        match reshape_strides(&self.shape, &self.strides_signed(), shape) {
            Some(strides) => self.restride(offset, shape, &strides),
            None => self.dense().restride(0, shape, &row_major(shape)),
        }
    }

    /// `self` as a plain tensor (no tape node), sharing the storage when it
    /// already is plain, or the view's cached row-major copy; a contiguous
    /// view at an offset is copied.
    fn dense(&self) -> Self {
        let storage = match &self.layout {
            None => return self.restride(0, &self.shape, &row_major(&self.shape)),
            Some(l) if !l.contiguous => {
                self.as_slice();
                l.dense.get().expect("as_slice fills the cache").clone()
            }
            Some(_) => Arc::new(Storage::from_slice(self.as_slice())),
        };
        Tensor {
            storage,
            shape: self.shape.clone(),
            layout: None,
            node: None,
            _device: PhantomData,
        }
    }

    /// The elements in row-major order, borrowed: the contiguity entry
    /// point of every kernel. A non-contiguous view is copied once, on the
    /// first call, and the copy is kept with the view.
    pub(crate) fn values(&self) -> &[E] {
        match &self.layout {
            None => &self.storage,
            Some(l) if l.contiguous => &self.storage[l.offset..l.offset + numel(&self.shape)],
            Some(l) => l.dense.get_or_init(|| {
                Arc::new(strided_read(
                    &self.storage,
                    l.offset,
                    &self.shape,
                    &l.strides,
                ))
            }),
        }
    }

    /// The values of a matmul operand of rank >= 2 and whether they are
    /// stored transposed: when `allow` and `self` is a row-major stack of
    /// matrices with its last two dimensions swapped (a `t()` or
    /// `transpose(-2, -1)` view), the stored block, read in place, and
    /// `true`; otherwise [`as_slice`](Self::as_slice) and `false`.
    pub(crate) fn matrix_operand(&self, allow: bool) -> (&[E], bool) {
        let r = self.rank();
        if let (true, true, Some(l)) = (allow, r >= 2, &self.layout) {
            let mut stored = self.shape.to_vec();
            stored.swap(r - 2, r - 1);
            let mut want = row_major(&stored);
            want.swap(r - 2, r - 1);
            let swapped = (0..r).all(|d| self.shape[d] == 1 || l.strides[d] == want[d]);
            if !l.contiguous && swapped {
                return (&self.storage[l.offset..l.offset + self.numel()], true);
            }
        }
        (self.as_slice(), false)
    }

    /// The values for an in-place write, when nothing else can see them:
    /// `self` is plain and the only handle on its storage (no view, clone
    /// or tape node shares it). `None` otherwise; the caller then writes a
    /// copy (copy-on-write), so no write is ever seen through a view.
    pub(crate) fn values_mut(&mut self) -> Option<&mut [E]> {
        if self.layout.is_some() {
            return None;
        }
        Arc::get_mut(&mut self.storage).map(|s| &mut s[..])
    }

    /// Whether the elements lie row-major in one block of the storage (as
    /// `torch.Tensor.is_contiguous`). Every tensor an op computes is; views
    /// such as a [`t`](Self::t) or an [`expand`](Self::expand) are not.
    ///
    /// ```
    /// let x = forge::Tensor::<f32>::zeros(&[2, 3]);
    /// assert!(x.is_contiguous());
    /// assert!(!x.t().is_contiguous());
    /// assert!(x.narrow(0, 1, 1).is_contiguous());
    /// ```
    pub fn is_contiguous(&self) -> bool {
        self.layout.as_ref().is_none_or(|l| l.contiguous)
    }

    /// The step in storage elements between neighbours along each
    /// dimension (as `torch.Tensor.stride()`).
    ///
    /// ```
    /// let x = forge::Tensor::<f32>::zeros(&[2, 3]);
    /// assert_eq!(x.stride(), vec![3, 1]);
    /// assert_eq!(x.t().stride(), vec![1, 3]);
    /// assert_eq!(x.unsqueeze(0).expand(&[4, 2, 3]).stride()[0], 0);
    /// ```
    pub fn stride(&self) -> Vec<usize> {
        self.strides_signed().iter().map(|&s| s as usize).collect()
    }

    /// Where the first element lives in the storage (as
    /// `torch.Tensor.storage_offset()`): 0 unless `self` is a view.
    ///
    /// ```
    /// let x = forge::Tensor::<f32>::zeros(&[2, 3]);
    /// assert_eq!(x.storage_offset(), 0);
    /// assert_eq!(x.narrow(0, 1, 1).storage_offset(), 3);
    /// ```
    pub fn storage_offset(&self) -> usize {
        self.layout.as_ref().map_or(0, |l| l.offset)
    }

    /// `self` when it [is contiguous](Self::is_contiguous); otherwise a
    /// row-major copy of the view (as `torch.Tensor.contiguous`). The copy
    /// is the one [`as_slice`](Self::as_slice) caches, so it is made at most
    /// once per view. Gradients flow through unchanged.
    ///
    /// ```
    /// let x = forge::Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]);
    /// let t = x.t();
    /// assert!(!t.is_contiguous());
    /// let c = t.contiguous();
    /// assert!(c.is_contiguous());
    /// assert_eq!(c.to_vec(), vec![1.0, 3.0, 2.0, 4.0]);
    /// ```
    #[track_caller]
    pub fn contiguous(&self) -> Self {
        if self.is_contiguous() {
            return self.clone();
        }
        self.dense()
            .record("contiguous", vec![self.clone()], |ctx| {
                vec![Some(ctx.grad.clone())]
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reshape_strides_follow_pytorch_view_rules() {
        // A transposed [3, 2] (strides 1, 3): merging the two dims needs a copy.
        assert_eq!(reshape_strides(&[3, 2], &[1, 3], &[6]), None);
        // Splitting one dimension of a transpose keeps its stride pattern.
        assert_eq!(
            reshape_strides(&[4, 2], &[1, 4], &[2, 2, 2]),
            Some(vec![2, 1, 4])
        );
        // Inserting dimensions of size 1 into any view: the size-1
        // dimension's stride is never used to address, and is what
        // PyTorch gives (`torch.arange(6.).reshape(2, 3).t().view(3, 1, 2)
        // .stride()` is `(1, 6, 3)` in torch 2.15).
        assert_eq!(
            reshape_strides(&[3, 2], &[1, 3], &[3, 1, 2]),
            Some(vec![1, 6, 3])
        );
        // A narrowed row block [2, 3] of a [4, 3] (strides 3, 1) flattens.
        assert_eq!(reshape_strides(&[2, 3], &[3, 1], &[6]), Some(vec![1]));
        // A narrowed column block [4, 2] of a [4, 3] does not.
        assert_eq!(reshape_strides(&[4, 2], &[3, 1], &[8]), None);
        // Expanded dimensions (stride 0) can be split but not merged.
        assert_eq!(
            reshape_strides(&[4, 3], &[0, 1], &[2, 2, 3]),
            Some(vec![0, 0, 1])
        );
        assert_eq!(reshape_strides(&[4, 3], &[0, 1], &[12]), None);
    }

    #[test]
    fn row_major_ignores_unit_dimensions() {
        assert!(is_row_major(&[2, 1, 3], &[3, 99, 1]));
        assert!(!is_row_major(&[2, 3], &[1, 2]));
        assert!(is_row_major(&[0, 3], &[7, 7]));
    }
}
