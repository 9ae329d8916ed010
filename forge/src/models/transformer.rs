//! [`Seq2SeqTransformer`]: an encoder-decoder transformer ("Attention Is
//! All You Need") for sequence-to-sequence tasks, with one token embedding
//! shared by the source, the target and the output projection (tied),
//! sinusoidal positions, and greedy decoding.
//!
//! Built from [`TransformerEncoder`] and [`TransformerDecoder`] (PyTorch's
//! `nn.Transformer` blocks and names), so its state dict reads
//! `embedding.weight`, `encoder.layers.0.self_attn.in_proj_weight`, ...,
//! `decoder.layers.0.multihead_attn.out_proj.weight`, `positions.pe`.

use crate::nn::record_output;
use crate::nn::Layer;
use crate::nn::{
    DecoderMasks, Embedding, EncoderMasks, Forward, PositionalEncoding, TransformerConfig,
    TransformerDecoder, TransformerEncoder,
};
use crate::no_grad;
use crate::tensor::{Float, Rng, Tensor};

/// The shape of a [`Seq2SeqTransformer`].
///
/// ```
/// let c = forge::models::transformer::Seq2SeqConfig::new(12, 32, 4);
/// assert_eq!((c.num_encoder_layers, c.dim_feedforward), (2, 128));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Seq2SeqConfig {
    /// Tokens shared by source and target.
    pub vocab_size: usize,
    /// The model width.
    pub d_model: usize,
    /// Attention heads (divides `d_model`).
    pub nhead: usize,
    /// Encoder blocks.
    pub num_encoder_layers: usize,
    /// Decoder blocks.
    pub num_decoder_layers: usize,
    /// The feed-forward width.
    pub dim_feedforward: usize,
    /// Dropout in the blocks and after the position encoding.
    pub dropout: f64,
    /// The longest source or target sequence.
    pub max_len: usize,
}

impl Seq2SeqConfig {
    /// Two encoder and two decoder blocks, feed-forward width `4 d_model`,
    /// no dropout, sequences of up to 256 tokens.
    ///
    /// ```
    /// let c = forge::models::transformer::Seq2SeqConfig::new(10, 16, 2);
    /// assert_eq!(c.max_len, 256);
    /// ```
    pub fn new(vocab_size: usize, d_model: usize, nhead: usize) -> Self {
        Seq2SeqConfig {
            vocab_size,
            d_model,
            nhead,
            num_encoder_layers: 2,
            num_decoder_layers: 2,
            dim_feedforward: 4 * d_model,
            dropout: 0.0,
            max_len: 256,
        }
    }
}

/// An encoder-decoder transformer with a shared, tied embedding.
///
/// `forward((src, tgt))` embeds both sequences with the same table (scaled
/// by `sqrt(d_model)`), adds sinusoidal positions, encodes the source,
/// decodes the target with a causal mask over the memory, and projects
/// onto the embedding table: `logits = dec @ embedding.weight^T`.
///
/// # Shapes
/// `src` `[N, S]`, `tgt` `[N, T]` token ids; logits `[N, T, vocab_size]`.
///
/// ```
/// use forge::models::transformer::{Seq2SeqConfig, Seq2SeqTransformer};
/// use forge::prelude::*;
/// let m = Seq2SeqTransformer::<f32>::new(Seq2SeqConfig::new(10, 16, 2), &mut Rng::new(0));
/// let src = Tensor::<i64>::from_vec(vec![3, 4, 5, 6], &[2, 2]);
/// let tgt = Tensor::<i64>::from_vec(vec![1, 2, 1, 2, 1, 2], &[2, 3]);
/// assert_eq!(m.forward((src, tgt)).shape(), &[2, 3, 10]);
/// assert!(m.state_dict().contains_key("decoder.layers.1.multihead_attn.in_proj_weight"));
/// assert!(!m.state_dict().keys().any(|k| k.contains("generator")));
/// ```
#[derive(Layer, Clone, Debug)]
pub struct Seq2SeqTransformer<E: Float = f32> {
    /// `[vocab_size, d_model]`: source and target embedding and output
    /// projection.
    pub embedding: Embedding<E>,
    /// The sinusoidal table (frozen) and the dropout after it.
    pub positions: PositionalEncoding<E>,
    /// The encoder stack (with a final LayerNorm).
    pub encoder: TransformerEncoder<E>,
    /// The decoder stack (with a final LayerNorm).
    pub decoder: TransformerDecoder<E>,
    /// The shape.
    #[skip]
    pub config: Seq2SeqConfig,
}

impl<E: Float> Seq2SeqTransformer<E> {
    /// A model with PyTorch's initialisation for the blocks and N(0,
    /// 1/d_model) for the shared embedding (so that the tied projection
    /// starts with unit-scale logits).
    ///
    /// # Panics
    /// When `nhead` does not divide `d_model` or a size is zero.
    ///
    /// ```
    /// use forge::models::transformer::{Seq2SeqConfig, Seq2SeqTransformer};
    /// use forge::prelude::*;
    /// let m = Seq2SeqTransformer::<f32>::new(Seq2SeqConfig::new(10, 16, 2), &mut Rng::new(0));
    /// assert_eq!(m.embedding.weight.shape(), &[10, 16]);
    /// ```
    pub fn new(config: Seq2SeqConfig, rng: &mut Rng) -> Self {
        let c = config;
        assert!(
            c.vocab_size > 0 && c.d_model > 0 && c.nhead > 0 && c.d_model.is_multiple_of(c.nhead),
            "Seq2SeqTransformer: need positive sizes and nhead dividing d_model, got {c:?}"
        );
        let block = TransformerConfig {
            dim_feedforward: c.dim_feedforward,
            dropout: c.dropout,
            batch_first: true,
            ..TransformerConfig::new(c.d_model, c.nhead)
        };
        let mut embedding = Embedding::new(c.vocab_size, c.d_model, None, rng);
        embedding.weight = Tensor::normal(
            &[c.vocab_size, c.d_model],
            0.0,
            1.0 / (c.d_model as f64).sqrt(),
            rng,
        )
        .requires_grad();
        Seq2SeqTransformer {
            embedding,
            positions: PositionalEncoding::new(c.d_model, c.max_len, c.dropout, true, rng),
            encoder: TransformerEncoder::new(block, c.num_encoder_layers, true, rng),
            decoder: TransformerDecoder::new(block, c.num_decoder_layers, true, rng),
            config,
        }
    }

    fn embed(&self, ids: &Tensor<i64>) -> Tensor<E> {
        let scale = E::from_f64((self.config.d_model as f64).sqrt());
        self.positions
            .forward(self.embedding.forward(ids.clone()).mul_scalar(scale))
    }

    /// The encoder's output `[N, S, d_model]` for source ids `[N, S]`.
    ///
    /// # Panics
    /// When `src` is not 2-D, longer than `max_len`, or holds an
    /// out-of-range id.
    ///
    /// ```
    /// use forge::models::transformer::{Seq2SeqConfig, Seq2SeqTransformer};
    /// use forge::prelude::*;
    /// let m = Seq2SeqTransformer::<f32>::new(Seq2SeqConfig::new(10, 8, 2), &mut Rng::new(0));
    /// assert_eq!(m.encode(&Tensor::from_vec(vec![1, 2, 3], &[1, 3])).shape(), &[1, 3, 8]);
    /// ```
    pub fn encode(&self, src: &Tensor<i64>) -> Tensor<E> {
        self.check_ids("source", src);
        self.encoder
            .forward_masked(&self.embed(src), EncoderMasks::default())
    }

    /// The logits `[N, T, vocab_size]` for target ids `[N, T]` given the
    /// encoder's `memory`: causal self-attention over the target, full
    /// attention over the memory, the tied projection.
    ///
    /// # Panics
    /// As [`encode`](Self::encode), for the target.
    ///
    /// ```
    /// use forge::models::transformer::{Seq2SeqConfig, Seq2SeqTransformer};
    /// use forge::prelude::*;
    /// let m = Seq2SeqTransformer::<f32>::new(Seq2SeqConfig::new(10, 8, 2), &mut Rng::new(0));
    /// let mem = m.encode(&Tensor::from_vec(vec![1, 2, 3], &[1, 3]));
    /// assert_eq!(m.decode(&Tensor::from_vec(vec![4, 5], &[1, 2]), &mem).shape(), &[1, 2, 10]);
    /// ```
    pub fn decode(&self, tgt: &Tensor<i64>, memory: &Tensor<E>) -> Tensor<E> {
        self.check_ids("target", tgt);
        let masks = DecoderMasks {
            tgt_is_causal: true,
            ..Default::default()
        };
        let y = self.decoder.forward_masked(&self.embed(tgt), memory, masks);
        self.embedding.attend(&y)
    }

    /// Greedy decoding: encodes `src` (`[N, S]`) once, then starts every
    /// target with `bos` and appends the argmax token `max_len` times.
    /// Returns `[N, max_len]` (without the `bos`). Runs without a tape.
    ///
    /// # Panics
    /// As [`encode`](Self::encode); or when `max_len + 1` exceeds the
    /// model's `max_len`.
    ///
    /// ```
    /// use forge::models::transformer::{Seq2SeqConfig, Seq2SeqTransformer};
    /// use forge::prelude::*;
    /// let m = Seq2SeqTransformer::<f32>::new(Seq2SeqConfig::new(10, 8, 2), &mut Rng::new(0));
    /// let out = m.greedy_decode(&Tensor::from_vec(vec![1, 2, 3, 4, 5, 6], &[2, 3]), 0, 4);
    /// assert_eq!(out.shape(), &[2, 4]);
    /// ```
    pub fn greedy_decode(&self, src: &Tensor<i64>, bos: i64, max_len: usize) -> Tensor<i64> {
        no_grad(|| {
            let memory = self.encode(src);
            let n = src.shape()[0];
            let v = self.config.vocab_size;
            let mut rows: Vec<Vec<i64>> = vec![vec![bos]; n];
            for _ in 0..max_len {
                let t = rows[0].len();
                let tgt = Tensor::from_vec(rows.concat(), &[n, t]);
                let logits = self.decode(&tgt, &memory);
                let data = logits.as_slice();
                for (i, row) in rows.iter_mut().enumerate() {
                    let last = &data[(i * t + t - 1) * v..(i * t + t) * v];
                    let mut best = 0;
                    for (j, x) in last.iter().enumerate() {
                        if x > &last[best] {
                            best = j;
                        }
                    }
                    row.push(best as i64);
                }
            }
            let out: Vec<i64> = rows.iter().flat_map(|r| r[1..].iter().copied()).collect();
            Tensor::from_vec(out, &[n, max_len])
        })
    }

    fn check_ids(&self, what: &str, ids: &Tensor<i64>) {
        assert!(
            ids.rank() == 2 && ids.shape()[1] >= 1 && ids.shape()[1] <= self.config.max_len,
            "Seq2SeqTransformer: expected {what} ids [N, T] with 1 <= T <= max_len {}, got {:?}",
            self.config.max_len,
            ids.shape()
        );
    }
}

impl<E: Float> Forward<(Tensor<i64>, Tensor<i64>)> for Seq2SeqTransformer<E> {
    type Output = Tensor<E>;

    /// `(src, tgt)` ids to logits (teacher forcing).
    fn forward(&self, (src, tgt): (Tensor<i64>, Tensor<i64>)) -> Tensor<E> {
        record_output(self, self.decode(&tgt, &self.encode(&src)))
    }
}
