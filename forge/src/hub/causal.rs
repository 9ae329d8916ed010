//! [`CausalLm`]: what generation needs from a decoder.

use super::cache::KvCache;
use crate::tensor::{Float, Tensor};

/// A decoder-only language model that can decode incrementally with a
/// [`KvCache`]. Implemented by the hub's [`Llama`](super::Llama) and by
/// forge's own [`Gpt`](crate::models::gpt::Gpt) (which also holds
/// Hugging Face GPT-2 checkpoints, see [`load_gpt2`](super::load_gpt2));
/// [`generate`](super::generate) works with any of them.
///
/// ```
/// use forge::hub::CausalLm;
/// use forge::models::gpt::{Gpt, GptConfig};
/// use forge::prelude::*;
/// let cfg = GptConfig { vocab_size: 11, block_size: 8, n_layer: 1, n_head: 2, n_embd: 8, bias: true };
/// let gpt = Gpt::<f64>::new(cfg, &mut Rng::new(0));
/// let ids = Tensor::<i64>::from_vec(vec![1, 2, 3, 4], &[1, 4]);
/// // One token at a time through the cache gives the full pass's logits.
/// let full = gpt.logits(&ids);
/// let mut cache = gpt.new_cache();
/// let mut last = Vec::new();
/// for t in 0..4 {
///     let step = gpt.forward_cached(&ids.narrow(1, t, 1), None, &mut cache);
///     last = step.to_vec();
/// }
/// let want = full.narrow(1, 3, 1).to_vec();
/// assert!(last.iter().zip(&want).all(|(a, b)| (a - b).abs() < 1e-12));
/// ```
pub trait CausalLm<E: Float> {
    /// The number of distinct tokens (the logits' last dimension).
    fn vocab_size(&self) -> usize;

    /// The longest sequence the model can read (learned positions), or
    /// `usize::MAX` when positions are not bounded by a table.
    fn max_positions(&self) -> usize;

    /// An empty cache for this model.
    fn new_cache(&self) -> KvCache<E>;

    /// The logits `[B, T, vocab]` of `T` new tokens `ids` `[B, T]` of each
    /// sequence, after the tokens already in `cache` (which it extends).
    /// `valid` (`[B * T]`, row-major) marks padding with `false`: a padding
    /// token is never attended to and does not count as a position.
    ///
    /// # Panics
    /// When `ids` is not `[B, T]`, a token is out of range, `B` differs from
    /// the cache's, or the positions exceed [`max_positions`](Self::max_positions).
    fn forward_cached(
        &self,
        ids: &Tensor<i64>,
        valid: Option<&[bool]>,
        cache: &mut KvCache<E>,
    ) -> Tensor<E>;

    /// The logits `[B, 1, vocab]` of the last of the `T` new tokens of each
    /// sequence: what [`generate`](super::generate) reads. Models apply
    /// their head to that position only (a prompt's other positions need
    /// no logits; GPT-2 small's head over 50,257 words for a 32-token
    /// prompt was a tenth of a 64-token generation's work). Equal to the
    /// last position of [`forward_cached`](Self::forward_cached) to
    /// rounding (the head's product may sum in another order for one row
    /// than for several).
    ///
    /// ```
    /// use forge::hub::CausalLm;
    /// use forge::models::gpt::{Gpt, GptConfig};
    /// use forge::prelude::*;
    /// let cfg = GptConfig { vocab_size: 11, block_size: 8, n_layer: 1, n_head: 2, n_embd: 8, bias: true };
    /// let gpt = Gpt::<f64>::new(cfg, &mut Rng::new(0));
    /// let ids = Tensor::<i64>::from_vec(vec![1, 2, 3], &[1, 3]);
    /// let last = gpt.forward_cached_last(&ids, None, &mut gpt.new_cache());
    /// assert_eq!(last.shape(), &[1, 1, 11]);
    /// let want = gpt.logits(&ids).narrow(1, 2, 1).to_vec();
    /// assert!(last.to_vec().iter().zip(&want).all(|(a, b)| (a - b).abs() < 1e-12));
    /// ```
    ///
    /// # Panics
    /// As [`forward_cached`](Self::forward_cached).
    fn forward_cached_last(
        &self,
        ids: &Tensor<i64>,
        valid: Option<&[bool]>,
        cache: &mut KvCache<E>,
    ) -> Tensor<E> {
        let logits = self.forward_cached(ids, valid, cache);
        let t = logits.dim(1);
        logits.narrow(1, t - 1, 1)
    }

    /// The logits `[B, T, vocab]` of a whole sequence, without padding,
    /// through a fresh cache.
    ///
    /// # Panics
    /// As [`forward_cached`](Self::forward_cached).
    fn logits(&self, ids: &Tensor<i64>) -> Tensor<E> {
        self.forward_cached(ids, None, &mut self.new_cache())
    }
}
