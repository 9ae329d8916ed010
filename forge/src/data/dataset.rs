//! The [`Dataset`] trait, batch assembly ([`Collate`]) and
//! [`InMemoryDataset`].

use crate::{Element, ForgeError, Result, Tensor};

/// Items that can be stacked into a batch.
///
/// `(Tensor<E>, i64)` samples (an input and a class label) collate into
/// `(Tensor<E> [B, ...], Tensor<i64> [B])`.
///
/// ```
/// use forge::data::Collate;
/// use forge::Tensor;
/// let a = (Tensor::<f32>::from_vec(vec![1.0, 2.0], &[2]), 3i64);
/// let b = (Tensor::<f32>::from_vec(vec![4.0, 5.0], &[2]), 7i64);
/// let (x, y) = <(Tensor<f32>, i64)>::collate(vec![a, b]);
/// assert_eq!(x.shape(), &[2, 2]);
/// assert_eq!(y.to_vec(), vec![3, 7]);
/// ```
pub trait Collate: Sized {
    /// What a batch of these items is.
    type Batch;

    /// Stacks `items` (in order) into one batch.
    ///
    /// # Panics
    /// When `items` is empty or the items do not have one common shape.
    fn collate(items: Vec<Self>) -> Self::Batch;
}

impl<E: Element> Collate for (Tensor<E>, i64) {
    type Batch = (Tensor<E>, Tensor<i64>);

    fn collate(items: Vec<Self>) -> Self::Batch {
        assert!(!items.is_empty(), "collate: no items");
        let item_shape = items[0].0.shape().to_vec();
        let mut data = Vec::with_capacity(items.len() * items[0].0.numel());
        let mut labels = Vec::with_capacity(items.len());
        for (x, y) in &items {
            assert!(
                x.shape() == item_shape.as_slice(),
                "collate: item shapes {:?} and {:?} differ",
                item_shape,
                x.shape()
            );
            data.extend_from_slice(x.as_slice());
            labels.push(*y);
        }
        let mut shape = vec![items.len()];
        shape.extend_from_slice(&item_shape);
        (
            Tensor::from_vec(data, &shape),
            Tensor::from_vec(labels, &[items.len()]),
        )
    }
}

/// A collection of samples addressed by index, as PyTorch's map-style
/// `Dataset`.
///
/// Implement `len` and `get`; [`get_batch`](Dataset::get_batch) has a
/// default that collates `get` results and can be overridden with a faster
/// copy. Datasets are `Sync` so loaders may be shared between threads.
///
/// ```
/// use forge::data::Dataset;
/// use forge::Tensor;
///
/// /// The numbers 0..n as one-element inputs labelled by parity.
/// struct Parity(usize);
/// impl Dataset for Parity {
///     type Item = (Tensor<f32>, i64);
///     fn len(&self) -> usize { self.0 }
///     fn get(&self, i: usize) -> Self::Item {
///         (Tensor::from_vec(vec![i as f32], &[1]), (i % 2) as i64)
///     }
/// }
/// let (x, y) = Parity(10).get_batch(&[3, 4]);
/// assert_eq!(x.to_vec(), vec![3.0, 4.0]);
/// assert_eq!(y.to_vec(), vec![1, 0]);
/// ```
pub trait Dataset: Sync {
    /// One sample.
    type Item: Collate;

    /// The number of samples.
    fn len(&self) -> usize;

    /// Whether there are no samples.
    ///
    /// ```
    /// use forge::data::{Dataset, InMemoryDataset};
    /// let ds = InMemoryDataset::new(forge::Tensor::<f32>::zeros(&[0, 3]), vec![]).unwrap();
    /// assert!(ds.is_empty());
    /// ```
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The sample at `index`.
    ///
    /// # Panics
    /// When `index >= len()`.
    fn get(&self, index: usize) -> Self::Item;

    /// The samples at `indices`, stacked into one batch in that order.
    ///
    /// # Panics
    /// When `indices` is empty or an index is out of range.
    fn get_batch(&self, indices: &[usize]) -> <Self::Item as Collate>::Batch {
        Collate::collate(indices.iter().map(|&i| self.get(i)).collect())
    }
}

/// Samples held in memory: inputs as one `[N, ...]` tensor and one `i64`
/// label per sample.
///
/// ```
/// use forge::data::{Dataset, InMemoryDataset};
/// use forge::Tensor;
/// let x = Tensor::<f32>::from_fn(&[3, 2, 2], |i| i as f32);
/// let ds = InMemoryDataset::new(x, vec![0, 1, 2]).unwrap();
/// let (img, label) = ds.get(1);
/// assert_eq!(img.shape(), &[2, 2]);
/// assert_eq!(img.to_vec(), vec![4.0, 5.0, 6.0, 7.0]);
/// assert_eq!(label, 1);
/// ```
#[derive(Clone, Debug)]
pub struct InMemoryDataset<E: Element = f32> {
    inputs: Tensor<E>,
    labels: Vec<i64>,
}

impl<E: Element> InMemoryDataset<E> {
    /// A dataset from inputs `[N, ...]` (rank at least 1) and `N` labels.
    ///
    /// # Errors
    /// [`ForgeError::Invalid`] when the inputs are a scalar or their first
    /// dimension differs from the number of labels (the message names both
    /// counts).
    ///
    /// ```
    /// use forge::data::InMemoryDataset;
    /// use forge::Tensor;
    /// assert!(InMemoryDataset::new(Tensor::<f32>::zeros(&[2, 4]), vec![0, 1]).is_ok());
    /// let e = InMemoryDataset::new(Tensor::<f32>::zeros(&[2, 4]), vec![0]).unwrap_err();
    /// assert!(e.to_string().contains("2 inputs (shape [2, 4]) but 1 labels"));
    /// ```
    pub fn new(inputs: Tensor<E>, labels: Vec<i64>) -> Result<Self> {
        if inputs.rank() == 0 {
            return Err(ForgeError::invalid(
                "InMemoryDataset.inputs",
                "InMemoryDataset: the inputs are a scalar; they need a first dimension (the samples)",
            ));
        }
        if inputs.shape()[0] != labels.len() {
            return Err(ForgeError::invalid(
                "InMemoryDataset.labels",
                format!(
                    "InMemoryDataset: {} inputs (shape {:?}) but {} labels",
                    inputs.shape()[0],
                    inputs.shape(),
                    labels.len()
                ),
            ));
        }
        Ok(InMemoryDataset {
            inputs: inputs.detach(),
            labels,
        })
    }

    /// All inputs, `[N, ...]`.
    ///
    /// ```
    /// use forge::data::InMemoryDataset;
    /// let ds = InMemoryDataset::new(forge::Tensor::<f32>::zeros(&[2, 4]), vec![0, 1]).unwrap();
    /// assert_eq!(ds.inputs().shape(), &[2, 4]);
    /// ```
    pub fn inputs(&self) -> &Tensor<E> {
        &self.inputs
    }

    /// All labels, one per sample.
    ///
    /// ```
    /// use forge::data::InMemoryDataset;
    /// let ds = InMemoryDataset::new(forge::Tensor::<f32>::zeros(&[2, 4]), vec![5, 6]).unwrap();
    /// assert_eq!(ds.labels(), &[5, 6]);
    /// ```
    pub fn labels(&self) -> &[i64] {
        &self.labels
    }

    /// The shape of one sample's input (the inputs' shape without `N`).
    ///
    /// ```
    /// use forge::data::InMemoryDataset;
    /// let ds = InMemoryDataset::new(forge::Tensor::<f32>::zeros(&[2, 1, 3]), vec![0, 1]).unwrap();
    /// assert_eq!(ds.item_shape(), &[1, 3]);
    /// ```
    pub fn item_shape(&self) -> &[usize] {
        &self.inputs.shape()[1..]
    }

    /// The first `n` samples (all of them when `n >= len`), as a new
    /// dataset. Handy for quick runs.
    ///
    /// ```
    /// use forge::data::{Dataset, InMemoryDataset};
    /// let ds = InMemoryDataset::new(forge::Tensor::<f32>::zeros(&[5, 2]), vec![0; 5]).unwrap();
    /// assert_eq!(ds.take(3).len(), 3);
    /// ```
    pub fn take(&self, n: usize) -> Self {
        let n = n.min(self.labels.len());
        let indices: Vec<usize> = (0..n).collect();
        if n == 0 {
            let mut shape = vec![0];
            shape.extend_from_slice(self.item_shape());
            return InMemoryDataset {
                inputs: Tensor::from_vec(Vec::new(), &shape),
                labels: Vec::new(),
            };
        }
        let (inputs, labels) = self.get_batch(&indices);
        InMemoryDataset {
            inputs,
            labels: labels.to_vec(),
        }
    }

    fn item_numel(&self) -> usize {
        self.item_shape().iter().product()
    }
}

impl<E: Element> Dataset for InMemoryDataset<E> {
    type Item = (Tensor<E>, i64);

    fn len(&self) -> usize {
        self.labels.len()
    }

    fn get(&self, index: usize) -> Self::Item {
        assert!(
            index < self.len(),
            "InMemoryDataset::get: index {index} out of range for {} samples",
            self.len()
        );
        let k = self.item_numel();
        let data = self.inputs.as_slice()[index * k..(index + 1) * k].to_vec();
        (
            Tensor::from_vec(data, self.item_shape()),
            self.labels[index],
        )
    }

    fn get_batch(&self, indices: &[usize]) -> (Tensor<E>, Tensor<i64>) {
        assert!(
            !indices.is_empty(),
            "InMemoryDataset::get_batch: no indices"
        );
        let k = self.item_numel();
        let src = self.inputs.as_slice();
        let mut data = Vec::with_capacity(indices.len() * k);
        let mut labels = Vec::with_capacity(indices.len());
        for &i in indices {
            assert!(
                i < self.len(),
                "InMemoryDataset::get_batch: index {i} out of range for {} samples",
                self.len()
            );
            data.extend_from_slice(&src[i * k..(i + 1) * k]);
            labels.push(self.labels[i]);
        }
        let mut shape = vec![indices.len()];
        shape.extend_from_slice(self.item_shape());
        (
            Tensor::from_vec(data, &shape),
            Tensor::from_vec(labels, &[indices.len()]),
        )
    }
}
