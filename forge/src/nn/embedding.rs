//! [`Embedding`]: a lookup table of learned vectors.

use super::forward::Forward;
use super::summary::record_output;
use crate::ops::embedding::embedding;
use crate::tensor::{Float, Rng, Tensor};
use forge_macros::Layer;

/// A table of `num_embeddings` vectors of size `embedding_dim`, looked up
/// by integer index (PyTorch's `nn.Embedding`). The gradient accumulates
/// over repeated indices; row `padding_idx` gets no gradient.
///
/// # Shapes
/// - `weight`: `[num_embeddings, embedding_dim]`
/// - input: integer indices of any shape; output `[*input, embedding_dim]`
///
/// ```
/// use forge::prelude::*;
/// let emb = forge::nn::Embedding::<f32>::new(10, 4, None, &mut Rng::new(0));
/// let idx = Tensor::<i64>::from_vec(vec![1, 2, 1], &[3]);
/// assert_eq!(emb.forward(idx).shape(), &[3, 4]);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct Embedding<E: Float = f32> {
    /// `[num_embeddings, embedding_dim]`.
    pub weight: Tensor<E>,
    /// The row that receives no gradient (and is initialised to zeros).
    #[skip]
    pub padding_idx: Option<usize>,
}

impl<E: Float> Embedding<E> {
    /// A trainable table initialised as PyTorch does: N(0, 1), with row
    /// `padding_idx` zeroed.
    ///
    /// # Panics
    /// When `padding_idx` is not below `num_embeddings`.
    ///
    /// ```
    /// let e = forge::nn::Embedding::<f64>::new(5, 3, Some(0), &mut forge::Rng::new(1));
    /// assert_eq!(&e.weight.to_vec()[..3], &[0.0, 0.0, 0.0]);
    /// ```
    pub fn new(
        num_embeddings: usize,
        embedding_dim: usize,
        padding_idx: Option<usize>,
        rng: &mut Rng,
    ) -> Self {
        if let Some(p) = padding_idx {
            shape_assert!(
                p < num_embeddings,
                "Embedding: padding_idx {p} is out of range for {num_embeddings} embeddings"
            );
        }
        let w = Tensor::<E>::normal(&[num_embeddings, embedding_dim], 0.0, 1.0, rng);
        let mut data = w.to_vec();
        if let Some(p) = padding_idx {
            data[p * embedding_dim..(p + 1) * embedding_dim].fill(E::zero());
        }
        Embedding {
            weight: Tensor::from_vec(data, &[num_embeddings, embedding_dim]).requires_grad(),
            padding_idx,
        }
    }
}

impl<E: Float> Forward<Tensor<i64>> for Embedding<E> {
    type Output = Tensor<E>;

    /// # Panics
    /// When an index is out of range; the message names the layer, the
    /// index and the table's shape.
    fn forward(&self, idx: Tensor<i64>) -> Tensor<E> {
        let n = self.weight.shape()[0] as i64;
        if let Some(&bad) = idx.as_slice().iter().find(|&&i| !(0..n).contains(&i)) {
            shape_panic!(
                "Embedding({n}, {}): index {bad} is out of range (weight shape {:?}, input shape {:?})",
                self.weight.shape()[1],
                self.weight.shape(),
                idx.shape()
            );
        }
        record_output(self, embedding(&self.weight, &idx, self.padding_idx))
    }
}
