//! [`DistributedSampler`]: each rank's shard of an epoch.

/// Which samples of each epoch one rank of a data-parallel run sees, as
/// PyTorch's `DistributedSampler`: every rank draws the same (seeded)
/// permutation of the dataset, pads it by repeating its first samples to a
/// multiple of the world size (or drops the tail with
/// [`drop_last`](Self::drop_last)), and takes every `world_size`-th sample
/// from its rank on. Shards are disjoint, together they cover the epoch,
/// and every rank gets the same number of samples, hence of batches.
///
/// With a per-rank batch of `B`, the union of the ranks' `k`-th batches is
/// the `k`-th batch of `world_size * B` a single process would take from
/// the same permutation, so averaging the ranks' mean-loss gradients gives
/// the single-process gradient of that batch.
///
/// Give it to a loader with [`DataLoader::distributed`](super::DataLoader::distributed);
/// every rank's loader must be built with the same shuffle seed.
///
/// ```
/// use forge::data::DistributedSampler;
/// let order: Vec<usize> = (0..10).collect();
/// let shards: Vec<Vec<usize>> = (0..3).map(|r| DistributedSampler::new(r, 3).shard(&order)).collect();
/// assert_eq!(shards[0], [0, 3, 6, 9]);
/// assert_eq!(shards[1], [1, 4, 7, 0]); // padded with the first sample
/// assert_eq!(shards[2], [2, 5, 8, 1]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DistributedSampler {
    rank: usize,
    world_size: usize,
    drop_last: bool,
}

impl DistributedSampler {
    /// The sampler of rank `rank` in a world of `world_size` ranks (for
    /// a communicator `c`: `DistributedSampler::new(c.rank(), c.size())`).
    ///
    /// # Panics
    /// When `world_size` is zero or `rank >= world_size`.
    ///
    /// ```
    /// let s = forge::data::DistributedSampler::new(1, 4);
    /// assert_eq!((s.rank(), s.world_size()), (1, 4));
    /// ```
    pub fn new(rank: usize, world_size: usize) -> Self {
        assert!(
            world_size > 0 && rank < world_size,
            "DistributedSampler::new: rank {rank} is not in a world of {world_size}"
        );
        DistributedSampler {
            rank,
            world_size,
            drop_last: false,
        }
    }

    /// Drops the last `len % world_size` samples of each permutation
    /// instead of padding (so no sample is seen twice in an epoch).
    ///
    /// ```
    /// use forge::data::DistributedSampler;
    /// let s = DistributedSampler::new(1, 3).drop_last(true);
    /// assert_eq!(s.shard(&[5, 6, 7, 8]), [6]);
    /// ```
    pub fn drop_last(mut self, drop: bool) -> Self {
        self.drop_last = drop;
        self
    }

    /// This rank.
    ///
    /// ```
    /// assert_eq!(forge::data::DistributedSampler::new(2, 3).rank(), 2);
    /// ```
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    ///
    /// ```
    /// assert_eq!(forge::data::DistributedSampler::new(0, 3).world_size(), 3);
    /// ```
    pub fn world_size(&self) -> usize {
        self.world_size
    }

    /// The number of samples each rank sees per epoch of a dataset of
    /// `len` samples.
    ///
    /// ```
    /// use forge::data::DistributedSampler;
    /// assert_eq!(DistributedSampler::new(0, 4).num_samples(10), 3);
    /// assert_eq!(DistributedSampler::new(0, 4).drop_last(true).num_samples(10), 2);
    /// ```
    pub fn num_samples(&self, len: usize) -> usize {
        if self.drop_last {
            len / self.world_size
        } else {
            len.div_ceil(self.world_size)
        }
    }

    /// This rank's shard of one epoch's `order` (the permutation every
    /// rank drew).
    ///
    /// ```
    /// use forge::data::DistributedSampler;
    /// assert_eq!(DistributedSampler::new(0, 2).shard(&[9, 8, 7, 6]), [9, 7]);
    /// assert!(DistributedSampler::new(1, 2).shard(&[]).is_empty());
    /// ```
    pub fn shard(&self, order: &[usize]) -> Vec<usize> {
        let per_rank = self.num_samples(order.len());
        (0..per_rank)
            .map(|i| {
                let at = i * self.world_size + self.rank;
                // Padding repeats the order from its start.
                order[at % order.len()]
            })
            .collect()
    }
}
