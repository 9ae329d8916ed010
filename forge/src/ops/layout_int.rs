//! Layout and indexing ops for `i64` tensors (indices, labels) and `bool`
//! tensors (masks): the same names, arguments, semantics and panics as the
//! differentiable float versions, without a tape (these element types are
//! never differentiated). For example, a `[B, T]` key-padding mask becomes
//! `[B, 1, 1, T]` with `unsqueeze`, and `[B, T]` labels flatten to `[B*T]`.
//!
//! `cat` and `stack` are one definition for every element type
//! (`ops/concat.rs`): a second, per-type definition would make every
//! unannotated `Tensor::cat(..)` call ambiguous.

use super::plan::{self, View};
use crate::base::Dims;
use crate::cpu::index;
use crate::cpu::strided::strided_read;
use crate::tensor::{numel, Device, Element, Tensor};

#[track_caller]
fn with_shape<E: Element, D: Device>(t: &Tensor<E, D>, shape: &[usize]) -> Tensor<E, D> {
    shape_assert!(
        numel(shape) == t.numel(),
        "view: cannot view shape {:?} as {:?}",
        t.shape(),
        shape
    );
    t.reshaped(shape)
}

#[track_caller]
fn read<E: Element, D: Device>(t: &Tensor<E, D>, v: View) -> Tensor<E, D> {
    t.view_of(v.offset, &v.shape, &v.strides)
        .unwrap_or_else(|| {
            let data = strided_read(t.as_slice(), v.offset, &v.shape, &v.strides);
            Tensor::from_parts(data, v.shape.into(), None)
        })
}

macro_rules! int_layout {
    ($t:ty, $v:literal, $w:literal) => {
        impl<D: Device> Tensor<$t, D> {
            #[doc = concat!("[`reshape`](Tensor::<f32>::reshape) for `", stringify!($t), "` tensors (not tracked).")]
            ///
            /// # Panics
            /// When the element counts differ or more than one `-1` is given.
            ///
            /// ```
            #[doc = concat!("let t = forge::Tensor::<", stringify!($t), ">::full(&[2, 6], ", stringify!($v), ");")]
            /// assert_eq!(t.reshape(&[3, -1]).shape(), &[3, 4]);
            /// ```
            #[track_caller]
            pub fn reshape(&self, shape: impl Dims) -> Self {
                let shape = &shape.to_dims()[..];
                with_shape(self, &plan::reshape(self.shape(), shape))
            }

            #[doc = concat!("[`view`](Tensor::<f32>::view) for `", stringify!($t), "` tensors (not tracked).")]
            ///
            /// # Panics
            /// When the element counts differ.
            ///
            /// ```
            #[doc = concat!("let t = forge::Tensor::<", stringify!($t), ">::full(&[6], ", stringify!($v), ");")]
            /// assert_eq!(t.view(&[2, 3]).shape(), &[2, 3]);
            /// ```
            #[track_caller]
            pub fn view(&self, shape: impl Dims) -> Self {
                let shape = &crate::base::sizes("view", &shape)[..];
                with_shape(self, shape)
            }

            #[doc = concat!("[`squeeze`](Tensor::<f32>::squeeze) for `", stringify!($t), "` tensors (not tracked).")]
            ///
            /// # Panics
            /// When the axis is out of range.
            ///
            /// ```
            #[doc = concat!("let t = forge::Tensor::<", stringify!($t), ">::full(&[2, 1], ", stringify!($v), ");")]
            /// assert_eq!(t.squeeze(1).shape(), &[2]);
            /// ```
            #[track_caller]
            pub fn squeeze(&self, axis: isize) -> Self {
                with_shape(self, &plan::squeeze(self.shape(), axis))
            }

            #[doc = concat!("[`unsqueeze`](Tensor::<f32>::unsqueeze) for `", stringify!($t), "` tensors (not tracked).")]
            ///
            /// # Panics
            /// When the axis is outside `-rank-1..=rank`.
            ///
            /// ```
            #[doc = concat!("let t = forge::Tensor::<", stringify!($t), ">::full(&[2, 5], ", stringify!($v), ");")]
            /// assert_eq!(t.unsqueeze(1).unsqueeze(1).shape(), &[2, 1, 1, 5]);
            /// ```
            #[track_caller]
            pub fn unsqueeze(&self, axis: isize) -> Self {
                with_shape(self, &plan::unsqueeze(self.shape(), axis))
            }

            #[doc = concat!("[`flatten`](Tensor::<f32>::flatten) for `", stringify!($t), "` tensors (not tracked).")]
            ///
            /// # Panics
            /// When an axis is out of range or `start` comes after `end`.
            ///
            /// ```
            #[doc = concat!("let t = forge::Tensor::<", stringify!($t), ">::full(&[2, 3, 4], ", stringify!($v), ");")]
            /// assert_eq!(t.flatten(0, 1).shape(), &[6, 4]);
            /// ```
            #[track_caller]
            pub fn flatten(&self, start: isize, end: isize) -> Self {
                with_shape(self, &plan::flatten(self.shape(), start, end))
            }

            #[doc = concat!("[`expand`](Tensor::<f32>::expand) for `", stringify!($t), "` tensors (not tracked).")]
            ///
            /// # Panics
            /// When `self` cannot be broadcast to `shape`.
            ///
            /// ```
            #[doc = concat!("let t = forge::Tensor::<", stringify!($t), ">::from_vec(vec![", stringify!($v), ", ", stringify!($w), "], &[2, 1]);")]
            #[doc = concat!("assert_eq!(t.expand(&[2, 2]).to_vec(), vec![", stringify!($v), ", ", stringify!($v), ", ", stringify!($w), ", ", stringify!($w), "]);")]
            /// ```
            #[track_caller]
            pub fn expand(&self, shape: impl Dims) -> Self {
                let shape = &crate::base::sizes("expand", &shape)[..];
                plan::check_expand(self.shape(), shape);
                self.expanded(shape)
            }

            #[doc = concat!("[`permute`](Tensor::<f32>::permute) for `", stringify!($t), "` tensors (not tracked).")]
            ///
            /// # Panics
            /// When `dims` is not a permutation of the axes.
            ///
            /// ```
            #[doc = concat!("let t = forge::Tensor::<", stringify!($t), ">::from_vec(vec![", stringify!($v), ", ", stringify!($w), "], &[1, 2]);")]
            /// assert_eq!(t.permute(&[1, 0]).shape(), &[2, 1]);
            /// ```
            #[track_caller]
            pub fn permute(&self, dims: impl Dims) -> Self {
                let dims = &dims.to_dims()[..];
                read(self, plan::permute(self.shape(), dims).0)
            }

            #[doc = concat!("[`transpose`](Tensor::<f32>::transpose) for `", stringify!($t), "` tensors (not tracked).")]
            ///
            /// # Panics
            /// When an axis is out of range.
            ///
            /// ```
            #[doc = concat!("let t = forge::Tensor::<", stringify!($t), ">::from_vec(vec![", stringify!($v), ", ", stringify!($w), ", ", stringify!($w), ", ", stringify!($w), "], &[2, 2]);")]
            #[doc = concat!("assert_eq!(t.transpose(0, 1).to_vec(), vec![", stringify!($v), ", ", stringify!($w), ", ", stringify!($w), ", ", stringify!($w), "]);")]
            /// ```
            #[track_caller]
            pub fn transpose(&self, a: isize, b: isize) -> Self {
                self.permute(&plan::transpose(self.rank(), a, b))
            }

            #[doc = concat!("[`slice`](Tensor::<f32>::slice) for `", stringify!($t), "` tensors (not tracked).")]
            ///
            /// # Panics
            /// When the axis is out of range or `step` is 0.
            ///
            /// ```
            #[doc = concat!("let t = forge::Tensor::<", stringify!($t), ">::from_vec(vec![", stringify!($v), ", ", stringify!($w), ", ", stringify!($v), "], &[3]);")]
            #[doc = concat!("assert_eq!(t.slice(0, -2, 3, 1).to_vec(), vec![", stringify!($w), ", ", stringify!($v), "]);")]
            /// ```
            #[track_caller]
            pub fn slice(&self, axis: isize, start: isize, end: isize, step: usize) -> Self {
                match plan::slice(self.shape(), axis, start, end, step) {
                    Some(v) => read(self, v),
                    None => self.clone(),
                }
            }

            #[doc = concat!("[`narrow`](Tensor::<f32>::narrow) for `", stringify!($t), "` tensors (not tracked).")]
            ///
            /// # Panics
            /// When `start + len` exceeds the size of the axis.
            ///
            /// ```
            #[doc = concat!("let t = forge::Tensor::<", stringify!($t), ">::full(&[2, 5], ", stringify!($v), ");")]
            /// assert_eq!(t.narrow(1, 1, 3).shape(), &[2, 3]);
            /// ```
            #[track_caller]
            pub fn narrow(&self, axis: isize, start: usize, len: usize) -> Self {
                plan::check_narrow(self.shape(), axis, start, len);
                self.slice(axis, start as isize, (start + len) as isize, 1)
            }

            #[doc = concat!("[`index_select`](Tensor::<f32>::index_select) for `", stringify!($t), "` tensors (not tracked).")]
            ///
            /// # Panics
            /// When `idx` has rank above 1 or an index is out of range.
            ///
            /// ```
            /// use forge::Tensor;
            #[doc = concat!("let t = Tensor::<", stringify!($t), ">::from_vec(vec![", stringify!($v), ", ", stringify!($w), "], &[2]);")]
            /// let i = Tensor::<i64>::from_vec(vec![1, 1, 0], &[3]);
            #[doc = concat!("assert_eq!(t.index_select(0, &i).to_vec(), vec![", stringify!($w), ", ", stringify!($w), ", ", stringify!($v), "]);")]
            /// ```
            #[track_caller]
            pub fn index_select(&self, axis: isize, idx: &Tensor<i64, D>) -> Self {
                let (a, ix, shape) =
                    plan::index_select(self.shape(), axis, idx.shape(), idx.as_slice());
                let data = index::index_select(self.as_slice(), self.shape(), a, &ix);
                Tensor::from_parts(data, shape.into(), None)
            }
        }
    };
}

int_layout!(i64, 3, 7);
int_layout!(bool, true, false);
