//! [`DataLoader`]: batches over a [`Dataset`], shuffled with a seed.

use super::{Collate, Dataset};
use crate::Rng;

/// Walks a dataset in batches.
///
/// Without [`shuffle`](DataLoader::shuffle), batches follow index order.
/// With it, every call to [`iter`](DataLoader::iter) draws a fresh
/// permutation from the loader's own [`Rng`], so successive epochs see
/// different orders, and two loaders built with the same seed produce the
/// same sequence of epochs. The last partial batch is kept unless
/// [`drop_last`](DataLoader::drop_last) is set.
///
/// ```
/// use forge::data::{DataLoader, InMemoryDataset};
/// use forge::Tensor;
/// let ds = InMemoryDataset::new(Tensor::<f32>::zeros(&[10, 3]), (0..10).collect()).unwrap();
/// let mut loader = DataLoader::new(&ds, 4).drop_last(true);
/// let sizes: Vec<usize> = loader.iter().map(|(x, _)| x.dim(0)).collect();
/// assert_eq!(sizes, vec![4, 4]);
/// ```
#[derive(Clone, Debug)]
pub struct DataLoader<'a, D: Dataset> {
    dataset: &'a D,
    batch_size: usize,
    rng: Option<Rng>,
    drop_last: bool,
}

impl<'a, D: Dataset> DataLoader<'a, D> {
    /// A loader giving batches of `batch_size` samples in index order.
    ///
    /// # Panics
    /// When `batch_size` is zero.
    ///
    /// ```
    /// use forge::data::{DataLoader, InMemoryDataset};
    /// let ds = InMemoryDataset::new(forge::Tensor::<f32>::zeros(&[5, 1]), vec![0; 5]).unwrap();
    /// assert_eq!(DataLoader::new(&ds, 2).num_batches(), 3);
    /// ```
    pub fn new(dataset: &'a D, batch_size: usize) -> Self {
        assert!(batch_size > 0, "DataLoader::new: batch_size must be > 0");
        DataLoader {
            dataset,
            batch_size,
            rng: None,
            drop_last: false,
        }
    }

    /// Shuffles every epoch with a generator seeded by `seed`.
    ///
    /// ```
    /// use forge::data::{DataLoader, InMemoryDataset};
    /// let ds = InMemoryDataset::new(forge::Tensor::<f32>::zeros(&[8, 1]), (0..8).collect()).unwrap();
    /// let order = |seed| -> Vec<i64> {
    ///     DataLoader::new(&ds, 8).shuffle(seed).iter().next().unwrap().1.to_vec()
    /// };
    /// assert_eq!(order(3), order(3));
    /// ```
    pub fn shuffle(mut self, seed: u64) -> Self {
        self.rng = Some(Rng::new(seed));
        self
    }

    /// Whether to drop the last batch when it has fewer than `batch_size`
    /// samples.
    ///
    /// ```
    /// use forge::data::{DataLoader, InMemoryDataset};
    /// let ds = InMemoryDataset::new(forge::Tensor::<f32>::zeros(&[5, 1]), vec![0; 5]).unwrap();
    /// assert_eq!(DataLoader::new(&ds, 2).drop_last(true).num_batches(), 2);
    /// ```
    pub fn drop_last(mut self, drop: bool) -> Self {
        self.drop_last = drop;
        self
    }

    /// The batch size.
    ///
    /// ```
    /// use forge::data::{DataLoader, InMemoryDataset};
    /// let ds = InMemoryDataset::new(forge::Tensor::<f32>::zeros(&[5, 1]), vec![0; 5]).unwrap();
    /// assert_eq!(DataLoader::new(&ds, 2).batch_size(), 2);
    /// ```
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// The dataset this loader walks.
    ///
    /// ```
    /// use forge::data::{DataLoader, Dataset, InMemoryDataset};
    /// let ds = InMemoryDataset::new(forge::Tensor::<f32>::zeros(&[5, 1]), vec![0; 5]).unwrap();
    /// assert_eq!(DataLoader::new(&ds, 2).dataset().len(), 5);
    /// ```
    pub fn dataset(&self) -> &'a D {
        self.dataset
    }

    /// The number of batches one epoch yields.
    ///
    /// ```
    /// use forge::data::{DataLoader, InMemoryDataset};
    /// let ds = InMemoryDataset::new(forge::Tensor::<f32>::zeros(&[0, 1]), vec![]).unwrap();
    /// assert_eq!(DataLoader::new(&ds, 2).num_batches(), 0);
    /// ```
    pub fn num_batches(&self) -> usize {
        let n = self.dataset.len();
        if self.drop_last {
            n / self.batch_size
        } else {
            n.div_ceil(self.batch_size)
        }
    }

    /// The number of samples one epoch yields (fewer than the dataset's
    /// when the last partial batch is dropped).
    ///
    /// ```
    /// use forge::data::{DataLoader, InMemoryDataset};
    /// let ds = InMemoryDataset::new(forge::Tensor::<f32>::zeros(&[5, 1]), vec![0; 5]).unwrap();
    /// assert_eq!(DataLoader::new(&ds, 2).drop_last(true).num_samples(), 4);
    /// ```
    pub fn num_samples(&self) -> usize {
        if self.drop_last {
            self.num_batches() * self.batch_size
        } else {
            self.dataset.len()
        }
    }

    /// The sample order of the next epoch, advancing the shuffle generator
    /// exactly as [`iter`](DataLoader::iter) does.
    ///
    /// ```
    /// use forge::data::{DataLoader, InMemoryDataset};
    /// let ds = InMemoryDataset::new(forge::Tensor::<f32>::zeros(&[4, 1]), vec![0; 4]).unwrap();
    /// assert_eq!(DataLoader::new(&ds, 2).next_order(), vec![0, 1, 2, 3]);
    /// ```
    pub fn next_order(&mut self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.dataset.len()).collect();
        if let Some(rng) = &mut self.rng {
            rng.shuffle(&mut order);
        }
        order.truncate(self.num_samples());
        order
    }

    /// One epoch of batches. With shuffling on, each call draws a new
    /// permutation.
    ///
    /// ```
    /// use forge::data::{DataLoader, InMemoryDataset};
    /// let ds = InMemoryDataset::new(forge::Tensor::<f32>::zeros(&[6, 1]), (0..6).collect()).unwrap();
    /// let mut loader = DataLoader::new(&ds, 3);
    /// let labels: Vec<Vec<i64>> = loader.iter().map(|(_, y)| y.to_vec()).collect();
    /// assert_eq!(labels, vec![vec![0, 1, 2], vec![3, 4, 5]]);
    /// ```
    pub fn iter(&mut self) -> Batches<'a, D> {
        Batches {
            dataset: self.dataset,
            order: self.next_order(),
            batch_size: self.batch_size,
            pos: 0,
        }
    }
}

/// One epoch of batches from a [`DataLoader`].
///
/// ```
/// use forge::data::{DataLoader, InMemoryDataset};
/// let ds = InMemoryDataset::new(forge::Tensor::<f32>::zeros(&[5, 1]), vec![0; 5]).unwrap();
/// assert_eq!(DataLoader::new(&ds, 2).iter().len(), 3);
/// ```
#[derive(Debug)]
pub struct Batches<'a, D: Dataset> {
    dataset: &'a D,
    order: Vec<usize>,
    batch_size: usize,
    pos: usize,
}

impl<D: Dataset> Iterator for Batches<'_, D> {
    type Item = <D::Item as Collate>::Batch;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.order.len() {
            return None;
        }
        let end = (self.pos + self.batch_size).min(self.order.len());
        let batch = self.dataset.get_batch(&self.order[self.pos..end]);
        self.pos = end;
        Some(batch)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = (self.order.len() - self.pos).div_ceil(self.batch_size);
        (n, Some(n))
    }
}

impl<D: Dataset> ExactSizeIterator for Batches<'_, D> {}
