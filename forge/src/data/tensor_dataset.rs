//! [`TensorDataset`]: samples as rows of a tuple of tensors, PyTorch's
//! `TensorDataset`; [`Collate`] for tuples of tensors.

use super::{Collate, Dataset};
use crate::{Element, ForgeError, Result, Tensor};

/// Stacks equally shaped tensors into one `[n, ...]` tensor.
///
/// # Panics
/// When the shapes differ (names both).
fn stack<'t, E: Element>(items: impl ExactSizeIterator<Item = &'t Tensor<E>>) -> Tensor<E> {
    let n = items.len();
    let mut shape: Option<Vec<usize>> = None;
    let mut data = Vec::new();
    for t in items {
        match &shape {
            None => {
                data.reserve(n * t.numel());
                shape = Some(t.shape().to_vec());
            }
            Some(s) => assert!(
                s.as_slice() == t.shape(),
                "collate: item shapes {:?} and {:?} differ",
                s,
                t.shape()
            ),
        }
        data.extend_from_slice(t.as_slice());
    }
    let mut full = vec![n];
    full.extend(shape.unwrap_or_default());
    Tensor::from_vec(data, &full)
}

/// The rows `indices` of `t` (`[N, ...]`), as `[indices.len(), ...]`.
///
/// # Panics
/// When an index is out of range.
fn rows<E: Element>(t: &Tensor<E>, indices: &[usize]) -> Tensor<E> {
    let n = t.shape()[0];
    let k = t.shape()[1..].iter().product::<usize>();
    let src = t.as_slice();
    let mut data = Vec::with_capacity(indices.len() * k);
    for &i in indices {
        assert!(
            i < n,
            "TensorDataset: index {i} out of range for {n} samples"
        );
        data.extend_from_slice(&src[i * k..(i + 1) * k]);
    }
    let mut shape = vec![indices.len()];
    shape.extend_from_slice(&t.shape()[1..]);
    Tensor::from_vec(data, &shape)
}

/// One row of `t` (`[N, ...]`), shaped `[...]`.
fn row<E: Element>(t: &Tensor<E>, i: usize) -> Tensor<E> {
    let r = rows(t, &[i]);
    let shape = t.shape()[1..].to_vec();
    Tensor::from_vec(r.to_vec(), &shape)
}

/// A tuple of tensors that [`TensorDataset`] can hold: `(Tensor<A>,)`,
/// `(Tensor<A>, Tensor<B>)`, ... up to six, of any element types.
///
/// ```
/// use forge::data::TensorTuple;
/// use forge::Tensor;
/// let t = (Tensor::<f32>::zeros(&[3, 2]), Tensor::<i64>::zeros(&[3]));
/// assert_eq!(t.first_dims(), vec![Some(3), Some(3)]);
/// ```
pub trait TensorTuple: Sized + Sync {
    /// Each tensor's first dimension (`None` for a scalar).
    fn first_dims(&self) -> Vec<Option<usize>>;
    /// Each tensor detached from the graph.
    fn detached(&self) -> Self;
    /// Row `i` of each tensor.
    fn row(&self, i: usize) -> Self;
    /// Rows `indices` of each tensor, stacked.
    fn rows(&self, indices: &[usize]) -> Self;
}

macro_rules! tuple_impls {
    ($( ($($T:ident $idx:tt),+) )*) => {$(
        impl<$($T: Element),+> Collate for ($(Tensor<$T>,)+) {
            type Batch = ($(Tensor<$T>,)+);

            /// Stacks each position of the tuples: items `(x [..], y [..])`
            /// give `(x [B, ..], y [B, ..])`.
            fn collate(items: Vec<Self>) -> Self::Batch {
                assert!(!items.is_empty(), "collate: no items");
                ($(stack(items.iter().map(|it| &it.$idx)),)+)
            }
        }

        impl<$($T: Element),+> TensorTuple for ($(Tensor<$T>,)+) {
            fn first_dims(&self) -> Vec<Option<usize>> {
                vec![$(self.$idx.shape().first().copied()),+]
            }
            fn detached(&self) -> Self {
                ($(self.$idx.detach(),)+)
            }
            fn row(&self, i: usize) -> Self {
                ($(row(&self.$idx, i),)+)
            }
            fn rows(&self, indices: &[usize]) -> Self {
                ($(rows(&self.$idx, indices),)+)
            }
        }
    )*};
}

tuple_impls! {
    (A 0)
    (A 0, B 1)
    (A 0, B 1, C 2)
    (A 0, B 1, C 2, D 3)
    (A 0, B 1, C 2, D 3, F 4)
    (A 0, B 1, C 2, D 3, F 4, G 5)
}

/// Samples as the rows of one or more tensors sharing their first
/// dimension, of any element types: PyTorch's `TensorDataset`. Inputs and
/// class labels, inputs and regression targets, or more:
///
/// ```
/// use forge::prelude::*;
/// let x = Tensor::<f32>::from_fn(&[10, 3], |i| i as f32);
/// let y = Tensor::<f32>::from_fn(&[10, 1], |i| i as f32);   // regression targets
/// let ds = TensorDataset::new((x, y)).unwrap();
/// let loader = DataLoader::new(&ds, 4);
/// let (xb, yb) = loader.iter().next().unwrap();
/// assert_eq!((xb.shape(), yb.shape()), (&[4, 3][..], &[4, 1][..]));
///
/// let labels = Tensor::<i64>::from_vec((0..10).collect(), &[10]); // class labels
/// let ds = TensorDataset::new((Tensor::<f32>::zeros(&[10, 3]), labels)).unwrap();
/// let (_, yb) = DataLoader::new(&ds, 4).iter().next().unwrap();
/// assert_eq!(yb.to_vec(), vec![0, 1, 2, 3]);
/// ```
#[derive(Clone, Debug)]
pub struct TensorDataset<T> {
    tensors: T,
    len: usize,
}

impl<T: TensorTuple> TensorDataset<T> {
    /// A dataset over the rows of `tensors` (a tuple; write `(x,)` for one
    /// tensor). The tensors are detached from the graph.
    ///
    /// # Errors
    /// [`ForgeError::Invalid`] when a tensor is a scalar or the first
    /// dimensions differ; the message names every length
    /// (`TensorDataset: tensor 0 has 10 samples but tensor 1 has 9`).
    ///
    /// ```
    /// use forge::data::TensorDataset;
    /// use forge::Tensor;
    /// let e = TensorDataset::new((Tensor::<f32>::zeros(&[10, 2]), Tensor::<i64>::zeros(&[9]))).unwrap_err();
    /// assert!(e.to_string().contains("tensor 0 has 10 samples but tensor 1 has 9"));
    /// ```
    pub fn new(tensors: T) -> Result<Self> {
        let dims = tensors.first_dims();
        if let Some(i) = dims.iter().position(Option::is_none) {
            return Err(ForgeError::invalid(format!("TensorDataset.{i}"), format!(
                "TensorDataset: tensor {i} is a scalar; each tensor needs a first dimension (the samples)"
            )));
        }
        let dims: Vec<usize> = dims.into_iter().flatten().collect();
        if let Some(j) = dims.iter().position(|&d| d != dims[0]) {
            return Err(ForgeError::invalid(
                format!("TensorDataset.{j}"),
                format!(
                    "TensorDataset: tensor 0 has {} samples but tensor {j} has {}",
                    dims[0], dims[j]
                ),
            ));
        }
        Ok(TensorDataset {
            tensors: tensors.detached(),
            len: dims[0],
        })
    }

    /// The tensors, `[N, ...]` each.
    ///
    /// ```
    /// use forge::data::TensorDataset;
    /// let ds = TensorDataset::new((forge::Tensor::<f32>::zeros(&[2, 4]),)).unwrap();
    /// assert_eq!(ds.tensors().0.shape(), &[2, 4]);
    /// ```
    pub fn tensors(&self) -> &T {
        &self.tensors
    }
}

impl<T: TensorTuple + Collate<Batch = T>> Dataset for TensorDataset<T> {
    type Item = T;

    fn len(&self) -> usize {
        self.len
    }

    fn get(&self, index: usize) -> T {
        assert!(
            index < self.len,
            "TensorDataset::get: index {index} out of range for {} samples",
            self.len
        );
        self.tensors.row(index)
    }

    fn get_batch(&self, indices: &[usize]) -> T {
        assert!(!indices.is_empty(), "TensorDataset::get_batch: no indices");
        self.tensors.rows(indices)
    }
}
