//! [`DataLoader`]: batches over a [`Dataset`], shuffled with a seed, with
//! a position that a training checkpoint saves ([`LoaderState`]).

use super::{Collate, Dataset, DistributedSampler};
use crate::{ForgeError, Result, Rng};
use serde::{Deserialize, Serialize};
use std::sync::{Mutex, MutexGuard};

/// Walks a dataset in batches.
///
/// Without [`shuffle`](DataLoader::shuffle), batches follow index order.
/// With it, every call to [`iter`](DataLoader::iter) draws a fresh
/// permutation from the loader's own [`Rng`], so successive epochs see
/// different orders, and two loaders built with the same seed produce the
/// same sequence of epochs. The last partial batch is kept unless
/// [`drop_last`](DataLoader::drop_last) is set.
///
/// The loader knows where it is: the epoch, its permutation and how many
/// samples have been handed out ([`state`](DataLoader::state), readable
/// inside the loop since `iter` borrows the loader shared). A training
/// checkpoint saves it, and after [`set_state`](DataLoader::set_state)
/// the next `iter` finishes the interrupted epoch.
///
/// ```
/// use forge::data::{DataLoader, InMemoryDataset};
/// use forge::Tensor;
/// let ds = InMemoryDataset::new(Tensor::<f32>::zeros(&[10, 3]), (0..10).collect()).unwrap();
/// let loader = DataLoader::new(&ds, 4).drop_last(true);
/// let sizes: Vec<usize> = loader.iter().map(|(x, _)| x.dim(0)).collect();
/// assert_eq!(sizes, vec![4, 4]);
/// ```
#[derive(Debug)]
pub struct DataLoader<'a, D: Dataset> {
    dataset: &'a D,
    batch_size: usize,
    drop_last: bool,
    shuffled: bool,
    sampler: Option<DistributedSampler>,
    cursor: Mutex<Cursor>,
}

/// The mutable part of a loader, behind a lock so that `iter(&self)` can
/// advance it while the caller still reads the loader.
#[derive(Clone, Debug, Default)]
struct Cursor {
    state: LoaderState,
    /// Set by `set_state` on a mid-epoch state: the next `iter` finishes
    /// that epoch instead of starting a new one.
    resume: bool,
}

/// Where a [`DataLoader`] is: the shuffle generator, how many epochs have
/// begun, the current epoch's sample order, and how many of its samples
/// have been handed out. Saved in training checkpoints.
///
/// ```
/// use forge::data::{DataLoader, InMemoryDataset};
/// let ds = InMemoryDataset::new(forge::Tensor::<f32>::zeros(&[6, 1]), (0..6).collect()).unwrap();
/// let loader = DataLoader::new(&ds, 2).shuffle(1);
/// let mut it = loader.iter();
/// it.next();
/// let s = loader.state();
/// assert_eq!((s.epochs_started, s.position, s.order.len()), (1, 2, 6));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoaderState {
    /// The shuffle generator (`None` for a loader in index order).
    pub rng: Option<Rng>,
    /// How many epochs have begun (0 before the first `iter`).
    pub epochs_started: u64,
    /// The current epoch's sample indices, in the order they are handed out.
    pub order: Vec<usize>,
    /// How many of `order` have been handed out.
    pub position: usize,
}

impl LoaderState {
    /// Whether the current epoch has samples left.
    ///
    /// ```
    /// assert!(!forge::data::LoaderState::default().mid_epoch());
    /// ```
    pub fn mid_epoch(&self) -> bool {
        self.position < self.order.len()
    }
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
            drop_last: false,
            shuffled: false,
            sampler: None,
            cursor: Mutex::new(Cursor::default()),
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
        self.shuffled = true;
        self.cursor().state.rng = Some(Rng::new(seed));
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

    /// Makes this loader one rank's of a data-parallel run: each epoch
    /// draws the permutation as before (the same on every rank when every
    /// rank uses the same shuffle seed) and walks only this rank's shard of
    /// it ([`DistributedSampler`]), in batches of
    /// [`batch_size`](Self::batch_size) (the per-rank batch: a global batch
    /// of `G` over `N` ranks is `G / N` per rank). Every rank gets the same
    /// number of batches.
    ///
    /// The [`state`](Self::state) keeps the whole permutation and the
    /// position within the shard, which are the same on every rank of a
    /// run in step: rank 0's saved state resumes every rank (of a run
    /// with the same number of ranks).
    ///
    /// ```
    /// use forge::data::{DataLoader, DistributedSampler, InMemoryDataset};
    /// let ds = InMemoryDataset::new(forge::Tensor::<f32>::zeros(&[8, 1]), (0..8).collect()).unwrap();
    /// let labels = |rank| -> Vec<i64> {
    ///     let l = DataLoader::new(&ds, 2).shuffle(7).distributed(DistributedSampler::new(rank, 2));
    ///     l.iter().flat_map(|(_, y)| y.to_vec()).collect()
    /// };
    /// let (a, b) = (labels(0), labels(1));
    /// assert_eq!(a.len(), 4);
    /// assert!(a.iter().all(|x| !b.contains(x))); // disjoint shards
    /// ```
    pub fn distributed(mut self, sampler: DistributedSampler) -> Self {
        self.sampler = Some(sampler);
        self
    }

    /// The rank's sampler, when the loader is [`distributed`](Self::distributed).
    ///
    /// ```
    /// use forge::data::{DataLoader, DistributedSampler, InMemoryDataset};
    /// let ds = InMemoryDataset::new(forge::Tensor::<f32>::zeros(&[4, 1]), vec![0; 4]).unwrap();
    /// let l = DataLoader::new(&ds, 2).distributed(DistributedSampler::new(1, 2));
    /// assert_eq!(l.sampler().unwrap().rank(), 1);
    /// ```
    pub fn sampler(&self) -> Option<&DistributedSampler> {
        self.sampler.as_ref()
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
        let n = self.epoch_len();
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
            self.epoch_len()
        }
    }

    /// The samples an epoch walks before batching: the dataset's, or this
    /// rank's shard of it.
    fn epoch_len(&self) -> usize {
        let n = self.dataset.len();
        self.sampler.map_or(n, |s| s.num_samples(n))
    }

    /// How many samples of `state`'s epoch this loader walks: its order's
    /// length, or for a distributed loader (whose state keeps the whole
    /// permutation) the samples of this rank's shard.
    fn walk_len(&self, state: &LoaderState) -> usize {
        match self.sampler {
            None => state.order.len(),
            Some(_) => self.num_samples().min(state.order.len()),
        }
    }

    /// The `i`-th sample this loader hands out from `order`.
    fn sample_at(&self, order: &[usize], i: usize) -> usize {
        match self.sampler {
            None => order[i],
            Some(s) => order[(i * s.world_size() + s.rank()) % order.len()],
        }
    }

    /// Whether `state`'s epoch has samples left for this loader.
    fn mid_epoch(&self, state: &LoaderState) -> bool {
        state.position < self.walk_len(state)
    }

    fn cursor(&self) -> MutexGuard<'_, Cursor> {
        self.cursor.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Begins the next epoch in `c`: draws its order (advancing the
    /// shuffle generator) and resets the position.
    fn begin_epoch(&self, c: &mut Cursor) {
        let mut order: Vec<usize> = (0..self.dataset.len()).collect();
        if let Some(rng) = &mut c.state.rng {
            rng.shuffle(&mut order);
        }
        if self.sampler.is_none() {
            // A distributed loader keeps the whole permutation (see `walk_len`).
            order.truncate(self.num_samples());
        }
        c.state.order = order;
        c.state.position = 0;
        c.state.epochs_started += 1;
        c.resume = false;
    }

    /// Begins the next epoch and returns the samples it hands out, in
    /// order (a distributed loader's: its shard), advancing the shuffle
    /// generator exactly as [`iter`](DataLoader::iter) does.
    ///
    /// ```
    /// use forge::data::{DataLoader, InMemoryDataset};
    /// let ds = InMemoryDataset::new(forge::Tensor::<f32>::zeros(&[4, 1]), vec![0; 4]).unwrap();
    /// assert_eq!(DataLoader::new(&ds, 2).next_order(), vec![0, 1, 2, 3]);
    /// ```
    pub fn next_order(&self) -> Vec<usize> {
        let mut c = self.cursor();
        self.begin_epoch(&mut c);
        (0..self.walk_len(&c.state))
            .map(|i| self.sample_at(&c.state.order, i))
            .collect()
    }

    /// One epoch of batches. Each call begins a new epoch (with shuffling
    /// on, a new permutation), except the first call after
    /// [`set_state`](DataLoader::set_state) with a mid-epoch state, which
    /// hands out the rest of that epoch. Only the newest epoch's iterator
    /// yields: starting another ends the previous one.
    ///
    /// ```
    /// use forge::data::{DataLoader, InMemoryDataset};
    /// let ds = InMemoryDataset::new(forge::Tensor::<f32>::zeros(&[6, 1]), (0..6).collect()).unwrap();
    /// let loader = DataLoader::new(&ds, 3);
    /// let labels: Vec<Vec<i64>> = loader.iter().map(|(_, y)| y.to_vec()).collect();
    /// assert_eq!(labels, vec![vec![0, 1, 2], vec![3, 4, 5]]);
    /// ```
    pub fn iter(&self) -> Batches<'_, 'a, D> {
        let mut c = self.cursor();
        if !(c.resume && self.mid_epoch(&c.state)) {
            self.begin_epoch(&mut c);
        }
        c.resume = false;
        Batches {
            loader: self,
            epoch: c.state.epochs_started,
        }
    }

    /// How many epochs are complete: where a loop over epochs starts, also
    /// after a resume (an interrupted epoch is not complete, so the loop
    /// goes through it again and [`iter`](DataLoader::iter) hands out the
    /// rest of it).
    ///
    /// ```
    /// use forge::data::{DataLoader, InMemoryDataset};
    /// let ds = InMemoryDataset::new(forge::Tensor::<f32>::zeros(&[4, 1]), vec![0; 4]).unwrap();
    /// let loader = DataLoader::new(&ds, 2);
    /// for epoch in loader.epochs_done()..3 {
    ///     for (x, _) in loader.iter() { /* train */ }
    /// }
    /// assert_eq!(loader.epochs_done(), 3);
    /// ```
    pub fn epochs_done(&self) -> u64 {
        let c = self.cursor();
        c.state.epochs_started - u64::from(self.mid_epoch(&c.state))
    }

    /// Where the loader is (for a training checkpoint).
    ///
    /// ```
    /// use forge::data::{DataLoader, InMemoryDataset};
    /// let ds = InMemoryDataset::new(forge::Tensor::<f32>::zeros(&[4, 1]), vec![0; 4]).unwrap();
    /// assert_eq!(DataLoader::new(&ds, 2).state().epochs_started, 0);
    /// ```
    pub fn state(&self) -> LoaderState {
        self.cursor().state.clone()
    }

    /// Puts the loader where `state` says. When the state is mid-epoch the
    /// next [`iter`](DataLoader::iter) hands out the rest of that epoch,
    /// in the saved order; later epochs continue the saved generator, so
    /// the sequence of batches is the uninterrupted run's.
    ///
    /// # Errors
    /// [`ForgeError::State`] when the state does not fit this loader: an
    /// order longer than an epoch or with an index past the dataset, a
    /// position past the order, or shuffling on in one and off in the
    /// other. The loader is unchanged then.
    ///
    /// ```
    /// use forge::data::{DataLoader, InMemoryDataset};
    /// let ds = InMemoryDataset::new(forge::Tensor::<f32>::zeros(&[6, 1]), (0..6).collect()).unwrap();
    /// let a = DataLoader::new(&ds, 2).shuffle(5);
    /// let mut first = a.iter();
    /// first.next();
    /// let saved = a.state();
    /// let rest_a: Vec<Vec<i64>> = first.map(|(_, y)| y.to_vec()).collect();
    ///
    /// let b = DataLoader::new(&ds, 2).shuffle(5);
    /// b.set_state(saved).unwrap();
    /// let rest_b: Vec<Vec<i64>> = b.iter().map(|(_, y)| y.to_vec()).collect();
    /// assert_eq!(rest_a, rest_b);
    /// ```
    pub fn set_state(&self, state: LoaderState) -> Result<()> {
        self.check_state(&state)?;
        let mut c = self.cursor();
        c.resume = self.mid_epoch(&state);
        c.state = state;
        Ok(())
    }

    /// The checks of [`set_state`](Self::set_state), changing nothing.
    pub(crate) fn check_state(&self, state: &LoaderState) -> Result<()> {
        let n = self.dataset.len();
        let bad = |msg: String| Err(ForgeError::state("data loader", msg));
        if state.rng.is_some() != self.shuffled {
            let on = |b: bool| if b { "on" } else { "off" };
            return bad(format!(
                "shuffling is {} in the saved state and {} in this loader",
                on(state.rng.is_some()),
                on(self.shuffled)
            ));
        }
        // A distributed loader's state holds the whole permutation.
        let epoch = match self.sampler {
            None => self.num_samples(),
            Some(_) => n,
        };
        if state.order.len() > epoch {
            return bad(format!(
                "an epoch of {} samples, but this loader's epochs have {epoch}",
                state.order.len(),
            ));
        }
        if let Some(i) = state.order.iter().find(|&&i| i >= n) {
            return bad(format!("sample index {i} past the dataset's {n} samples"));
        }
        if state.position > self.walk_len(state) {
            return bad(format!(
                "position {} past the epoch's {} samples",
                state.position,
                self.walk_len(state)
            ));
        }
        Ok(())
    }
}

impl<D: Dataset> Clone for DataLoader<'_, D> {
    /// A loader at the same place (same generator state, epoch and
    /// position).
    fn clone(&self) -> Self {
        DataLoader {
            dataset: self.dataset,
            batch_size: self.batch_size,
            drop_last: self.drop_last,
            shuffled: self.shuffled,
            sampler: self.sampler,
            cursor: Mutex::new(self.cursor().clone()),
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
pub struct Batches<'l, 'a, D: Dataset> {
    loader: &'l DataLoader<'a, D>,
    /// The epoch this iterator walks; it stops when another begins.
    epoch: u64,
}

impl<D: Dataset> Batches<'_, '_, D> {
    /// The next batch's sample indices, advancing the loader's position.
    fn next_indices(&mut self) -> Option<Vec<usize>> {
        let mut c = self.loader.cursor();
        if c.state.epochs_started != self.epoch || !self.loader.mid_epoch(&c.state) {
            return None;
        }
        let start = c.state.position;
        let end = (start + self.loader.batch_size).min(self.loader.walk_len(&c.state));
        c.state.position = end;
        Some(
            (start..end)
                .map(|i| self.loader.sample_at(&c.state.order, i))
                .collect(),
        )
    }
}

impl<D: Dataset> Iterator for Batches<'_, '_, D> {
    type Item = <D::Item as Collate>::Batch;

    fn next(&mut self) -> Option<Self::Item> {
        let indices = self.next_indices()?;
        Some(self.loader.dataset.get_batch(&indices))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let c = self.loader.cursor();
        let n = if c.state.epochs_started == self.epoch {
            (self.loader.walk_len(&c.state) - c.state.position).div_ceil(self.loader.batch_size)
        } else {
            0
        };
        (n, Some(n))
    }
}

impl<D: Dataset> ExactSizeIterator for Batches<'_, '_, D> {}
