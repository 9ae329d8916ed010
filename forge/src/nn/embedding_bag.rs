//! [`EmbeddingBag`]: `torch.nn.EmbeddingBag`, the layer form of
//! [`embedding_bag`].

use super::forward::Forward;
use super::summary::record_output;
use crate::ops::embedding_bag::{embedding_bag, BagMode};
use crate::tensor::{Float, Rng, Tensor};
use forge_macros::Layer;

/// An embedding table whose rows are reduced per bag
/// (`torch.nn.EmbeddingBag`), initialised N(0, 1) as PyTorch does.
///
/// # Shapes
/// - `weight`: `[num_embeddings, embedding_dim]`
/// - input `[B, L]` (one bag per row; [`Forward`]) or 1-d with offsets
///   ([`bags`](Self::bags)); output `[bags, embedding_dim]`
///
/// ```
/// use forge::nn::functional::BagMode;
/// use forge::prelude::*;
/// let bag = forge::nn::EmbeddingBag::<f32>::new(10, 4, BagMode::Sum, &mut Rng::new(0));
/// let y = bag.forward(Tensor::<i64>::from_vec(vec![1, 2, 3, 4, 5, 6], &[2, 3]));
/// assert_eq!(y.shape(), &[2, 4]);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct EmbeddingBag<E: Float = f32> {
    /// `[num_embeddings, embedding_dim]`.
    pub weight: Tensor<E>,
    /// How a bag is reduced.
    #[skip]
    pub mode: BagMode,
    /// The index left out of every bag (its row is initialised to zeros).
    #[skip]
    pub padding_idx: Option<usize>,
    /// Whether the last offset ends the last bag (PyTorch's
    /// `include_last_offset`).
    #[skip]
    pub include_last_offset: bool,
}

impl<E: Float> EmbeddingBag<E> {
    /// A trainable table with N(0, 1) entries, no padding index.
    ///
    /// # Panics
    /// When a size is zero.
    ///
    /// ```
    /// use forge::nn::functional::BagMode;
    /// let bag = forge::nn::EmbeddingBag::<f64>::new(5, 3, BagMode::Mean, &mut forge::Rng::new(1));
    /// assert_eq!(bag.weight.shape(), &[5, 3]);
    /// ```
    pub fn new(num_embeddings: usize, embedding_dim: usize, mode: BagMode, rng: &mut Rng) -> Self {
        assert!(
            num_embeddings > 0 && embedding_dim > 0,
            "EmbeddingBag: sizes ({num_embeddings}, {embedding_dim}) must be positive"
        );
        EmbeddingBag {
            weight: Tensor::normal(&[num_embeddings, embedding_dim], 0.0, 1.0, rng).requires_grad(),
            mode,
            padding_idx: None,
            include_last_offset: false,
        }
    }

    /// The bags of a 1-d `input` split by `offsets` (or of a `[B, L]` input
    /// with `offsets` `None`), each row scaled by `per_sample_weights` when
    /// given (mode `Sum` only).
    ///
    /// # Panics
    /// As [`embedding_bag`].
    ///
    /// ```
    /// use forge::nn::functional::BagMode;
    /// use forge::Tensor;
    /// let bag = forge::nn::EmbeddingBag::<f32>::new(4, 2, BagMode::Max, &mut forge::Rng::new(0));
    /// let input = Tensor::<i64>::from_vec(vec![0, 1, 2, 3], &[4]);
    /// let offsets = Tensor::<i64>::from_vec(vec![0, 1], &[2]);
    /// assert_eq!(bag.bags(&input, Some(&offsets), None).shape(), &[2, 2]);
    /// ```
    pub fn bags(
        &self,
        input: &Tensor<i64>,
        offsets: Option<&Tensor<i64>>,
        per_sample_weights: Option<&Tensor<E>>,
    ) -> Tensor<E> {
        let y = embedding_bag(
            input,
            &self.weight,
            offsets,
            self.mode,
            per_sample_weights,
            self.include_last_offset,
            self.padding_idx,
        );
        record_output(self, y)
    }
}

impl<E: Float> Forward<Tensor<i64>> for EmbeddingBag<E> {
    type Output = Tensor<E>;

    /// One bag per row of a `[B, L]` input.
    ///
    /// # Panics
    /// As [`embedding_bag`].
    fn forward(&self, input: Tensor<i64>) -> Tensor<E> {
        self.bags(&input, None, None)
    }
}
