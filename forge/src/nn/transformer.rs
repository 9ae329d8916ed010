//! Transformer blocks with PyTorch's parameter names:
//! [`TransformerEncoderLayer`], [`TransformerDecoderLayer`] (post-norm,
//! PyTorch's default, or pre-norm), and the stacks [`TransformerEncoder`],
//! [`TransformerDecoder`].

use super::activation_kind::Activation;
use super::attention::MultiheadAttention;
use super::dropout::Dropout;
use super::forward::Forward;
use super::linear::Linear;
use super::norm::LayerNorm;
use super::summary::record_output;
use crate::tensor::{Float, Rng, Tensor};
use forge_macros::Layer;

/// The hyperparameters of a transformer block, with PyTorch's defaults
/// (`TransformerConfig::new(d_model, nhead)`).
///
/// ```
/// let c = forge::nn::TransformerConfig { norm_first: true, ..forge::nn::TransformerConfig::new(16, 4) };
/// assert_eq!(c.dim_feedforward, 2048);
/// assert_eq!(c.dropout, 0.1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TransformerConfig {
    /// The model width `E`.
    pub d_model: usize,
    /// The number of attention heads; divides `d_model`.
    pub nhead: usize,
    /// The hidden width of the feed-forward block (2048).
    pub dim_feedforward: usize,
    /// Dropout after attention, inside and after the feed-forward block (0.1).
    pub dropout: f64,
    /// The feed-forward activation (ReLU).
    pub activation: Activation,
    /// The layer norms' eps (1e-5).
    pub layer_norm_eps: f64,
    /// `[N, T, E]` inputs when true, `[T, N, E]` when false (false).
    pub batch_first: bool,
    /// Pre-norm (`x + f(norm(x))`) when true, post-norm (`norm(x + f(x))`) when false (false).
    pub norm_first: bool,
}

impl TransformerConfig {
    /// PyTorch's defaults for `d_model` and `nhead`.
    ///
    /// ```
    /// assert!(!forge::nn::TransformerConfig::new(8, 2).batch_first);
    /// ```
    pub fn new(d_model: usize, nhead: usize) -> Self {
        TransformerConfig {
            d_model,
            nhead,
            dim_feedforward: 2048,
            dropout: 0.1,
            activation: Activation::Relu,
            layer_norm_eps: 1e-5,
            batch_first: false,
            norm_first: false,
        }
    }

    fn norm<E: Float>(&self) -> LayerNorm<E> {
        let mut n = LayerNorm::new(&[self.d_model]);
        n.eps = self.layer_norm_eps;
        n
    }
}

/// Panics unless `x` is 3-D with `d_model` features.
fn check_input<E: Float>(layer: &str, what: &str, attn: &MultiheadAttention<E>, x: &Tensor<E>) {
    let e = attn.embed_dim();
    shape_assert!(
        x.rank() == 3 && x.dim(2) == e,
        "{layer}(d_model {e}): expected {what} of shape {}, got {:?}",
        if attn.batch_first {
            format!("[N, T, {e}]")
        } else {
            format!("[T, N, {e}]")
        },
        x.shape()
    );
}

/// Masks for [`TransformerEncoderLayer::forward_masked`] and the encoder
/// stack: `attn_mask` `[T, T]` is `true` where attention is not allowed,
/// `key_padding_mask` `[N, T]` is `true` at padded positions, `is_causal`
/// hides later positions.
///
/// ```
/// let m = forge::nn::EncoderMasks { is_causal: true, ..Default::default() };
/// assert!(m.attn_mask.is_none());
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct EncoderMasks<'a> {
    /// `[T, T]` (or `[N * nhead, T, T]`), `true` = not allowed.
    pub attn_mask: Option<&'a Tensor<bool>>,
    /// `[N, T]`, `true` = padded.
    pub key_padding_mask: Option<&'a Tensor<bool>>,
    /// Hide keys after each query.
    pub is_causal: bool,
}

/// One encoder block (PyTorch's `nn.TransformerEncoderLayer`):
/// self-attention and a feed-forward block `linear2(dropout(act(linear1(x))))`,
/// each with a residual connection, dropout and a layer norm (after the
/// residual in post-norm, before the sublayer in pre-norm).
///
/// # Shapes
/// Input and output `[N, T, E]` (`batch_first`) or `[T, N, E]`.
///
/// ```
/// use forge::prelude::*;
/// use forge::nn::{TransformerConfig, TransformerEncoderLayer};
/// let cfg = TransformerConfig { dim_feedforward: 32, batch_first: true, ..TransformerConfig::new(8, 2) };
/// let layer = TransformerEncoderLayer::<f32>::new(cfg, &mut Rng::new(0));
/// assert_eq!(layer.forward(Tensor::ones(&[2, 5, 8])).shape(), &[2, 5, 8]);
/// assert!(layer.state_dict().contains_key("self_attn.out_proj.weight"));
/// ```
#[derive(Layer, Clone, Debug)]
pub struct TransformerEncoderLayer<E: Float = f32> {
    /// Self-attention.
    pub self_attn: MultiheadAttention<E>,
    /// `E -> dim_feedforward`.
    pub linear1: Linear<E>,
    /// Dropout inside the feed-forward block.
    pub dropout: Dropout,
    /// `dim_feedforward -> E`.
    pub linear2: Linear<E>,
    /// The norm of the attention sublayer.
    pub norm1: LayerNorm<E>,
    /// The norm of the feed-forward sublayer.
    pub norm2: LayerNorm<E>,
    /// Dropout after attention.
    pub dropout1: Dropout,
    /// Dropout after the feed-forward block.
    pub dropout2: Dropout,
    /// The feed-forward activation.
    #[skip]
    pub activation: Activation,
    /// Pre-norm when true.
    #[skip]
    pub norm_first: bool,
}

impl<E: Float> TransformerEncoderLayer<E> {
    /// A block initialised as PyTorch does (each sublayer's own default).
    ///
    /// # Panics
    /// When `nhead` does not divide `d_model`.
    ///
    /// ```
    /// let cfg = forge::nn::TransformerConfig::new(8, 2);
    /// let l = forge::nn::TransformerEncoderLayer::<f32>::new(cfg, &mut forge::Rng::new(0));
    /// assert_eq!(l.linear1.weight.shape(), &[2048, 8]);
    /// ```
    pub fn new(cfg: TransformerConfig, rng: &mut Rng) -> Self {
        let (e, f) = (cfg.d_model, cfg.dim_feedforward);
        TransformerEncoderLayer {
            self_attn: MultiheadAttention::new(e, cfg.nhead, cfg.dropout, cfg.batch_first, rng),
            linear1: Linear::new(e, f, rng),
            dropout: Dropout::from_rng(cfg.dropout, rng),
            linear2: Linear::new(f, e, rng),
            norm1: cfg.norm(),
            norm2: cfg.norm(),
            dropout1: Dropout::from_rng(cfg.dropout, rng),
            dropout2: Dropout::from_rng(cfg.dropout, rng),
            activation: cfg.activation,
            norm_first: cfg.norm_first,
        }
    }

    fn sa(&self, x: &Tensor<E>, m: &EncoderMasks<'_>) -> Tensor<E> {
        // inference without masks (or causal only): the fused kernel
        if m.attn_mask.is_none()
            && m.key_padding_mask.is_none()
            && let Some(y) = self.self_attn.self_attention_fused(x, m.is_causal)
        {
            return self.dropout1.forward(y);
        }
        let (y, _) = self
            .self_attn
            .attend(x, x, x, m.key_padding_mask, m.attn_mask, m.is_causal);
        self.dropout1.forward(y)
    }

    fn ff(&self, x: &Tensor<E>) -> Tensor<E> {
        let h = self.linear1.forward_activated(x.clone(), self.activation);
        self.dropout2
            .forward(self.linear2.forward(self.dropout.forward(h)))
    }

    /// The block with masks.
    ///
    /// # Panics
    /// When an input is not 3-D with `d_model` features (the message names
    /// the layer and the shapes), or a mask has the wrong shape (see
    /// [`MultiheadAttention::attend`]).
    ///
    /// ```
    /// use forge::prelude::*;
    /// use forge::nn::{EncoderMasks, TransformerConfig, TransformerEncoderLayer};
    /// let cfg = TransformerConfig { dim_feedforward: 16, dropout: 0.0, ..TransformerConfig::new(4, 1) };
    /// let l = TransformerEncoderLayer::<f64>::new(cfg, &mut Rng::new(0));
    /// let x = Tensor::normal(&[3, 1, 4], 0.0, 1.0, &mut Rng::new(1));
    /// let m = EncoderMasks { is_causal: true, ..Default::default() };
    /// let y = l.forward_masked(&x, m);
    /// // The first position sees only itself, so it ignores later inputs.
    /// let mut x2 = x.to_vec();
    /// x2[8] = 100.0;
    /// let y2 = l.forward_masked(&Tensor::from_vec(x2, &[3, 1, 4]), m);
    /// assert_eq!(&y.to_vec()[..4], &y2.to_vec()[..4]);
    /// ```
    pub fn forward_masked(&self, x: &Tensor<E>, masks: EncoderMasks<'_>) -> Tensor<E> {
        check_input("TransformerEncoderLayer", "input", &self.self_attn, x);
        let y = if self.norm_first {
            let x = x.add(&self.sa(&self.norm1.forward(x.clone()), &masks));
            x.add(&self.ff(&self.norm2.forward(x.clone())))
        } else {
            // the residual adds inside the norms' passes outside autograd
            let x = self.norm1.forward_residual(self.sa(x, &masks), x);
            let f = self.ff(&x);
            self.norm2.forward_residual(f, &x)
        };
        record_output(self, y)
    }
}

impl<E: Float> Forward<Tensor<E>> for TransformerEncoderLayer<E> {
    type Output = Tensor<E>;
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        self.forward_masked(&x, EncoderMasks::default())
    }
}

/// Masks for [`TransformerDecoderLayer::forward_masked`]: the target's
/// self-attention masks (`tgt_*`, as [`EncoderMasks`]) and the cross
/// attention's masks over the memory (`memory_*`).
///
/// ```
/// let m = forge::nn::DecoderMasks { tgt_is_causal: true, ..Default::default() };
/// assert!(m.memory_key_padding_mask.is_none());
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct DecoderMasks<'a> {
    /// `[T, T]`, `true` = not allowed.
    pub tgt_mask: Option<&'a Tensor<bool>>,
    /// `[N, T]`, `true` = padded target position.
    pub tgt_key_padding_mask: Option<&'a Tensor<bool>>,
    /// Hide later target positions.
    pub tgt_is_causal: bool,
    /// `[T, S]`, `true` = not allowed.
    pub memory_mask: Option<&'a Tensor<bool>>,
    /// `[N, S]`, `true` = padded memory position.
    pub memory_key_padding_mask: Option<&'a Tensor<bool>>,
}

/// One decoder block (PyTorch's `nn.TransformerDecoderLayer`): masked
/// self-attention, attention over the encoder's memory, and the
/// feed-forward block, each with residual, dropout and layer norm.
///
/// # Shapes
/// Target `[N, T, E]` and memory `[N, S, E]` (`batch_first`), or
/// `[T, N, E]` and `[S, N, E]`; output shaped like the target.
///
/// ```
/// use forge::prelude::*;
/// use forge::nn::{TransformerConfig, TransformerDecoderLayer};
/// let cfg = TransformerConfig { dim_feedforward: 32, batch_first: true, ..TransformerConfig::new(8, 2) };
/// let layer = TransformerDecoderLayer::<f32>::new(cfg, &mut Rng::new(0));
/// let y = layer.forward((Tensor::ones(&[2, 5, 8]), Tensor::ones(&[2, 7, 8])));
/// assert_eq!(y.shape(), &[2, 5, 8]);
/// assert!(layer.state_dict().contains_key("multihead_attn.in_proj_weight"));
/// ```
#[derive(Layer, Clone, Debug)]
pub struct TransformerDecoderLayer<E: Float = f32> {
    /// Self-attention over the target.
    pub self_attn: MultiheadAttention<E>,
    /// Attention of the target over the memory.
    pub multihead_attn: MultiheadAttention<E>,
    /// `E -> dim_feedforward`.
    pub linear1: Linear<E>,
    /// Dropout inside the feed-forward block.
    pub dropout: Dropout,
    /// `dim_feedforward -> E`.
    pub linear2: Linear<E>,
    /// The norm of the self-attention sublayer.
    pub norm1: LayerNorm<E>,
    /// The norm of the cross-attention sublayer.
    pub norm2: LayerNorm<E>,
    /// The norm of the feed-forward sublayer.
    pub norm3: LayerNorm<E>,
    /// Dropout after self-attention.
    pub dropout1: Dropout,
    /// Dropout after cross-attention.
    pub dropout2: Dropout,
    /// Dropout after the feed-forward block.
    pub dropout3: Dropout,
    /// The feed-forward activation.
    #[skip]
    pub activation: Activation,
    /// Pre-norm when true.
    #[skip]
    pub norm_first: bool,
}

impl<E: Float> TransformerDecoderLayer<E> {
    /// A block initialised as PyTorch does.
    ///
    /// # Panics
    /// When `nhead` does not divide `d_model`.
    ///
    /// ```
    /// let cfg = forge::nn::TransformerConfig::new(8, 2);
    /// let l = forge::nn::TransformerDecoderLayer::<f32>::new(cfg, &mut forge::Rng::new(0));
    /// assert_eq!(l.norm3.normalized_shape, vec![8]);
    /// ```
    pub fn new(cfg: TransformerConfig, rng: &mut Rng) -> Self {
        let (e, f) = (cfg.d_model, cfg.dim_feedforward);
        let mha = |rng: &mut Rng| {
            MultiheadAttention::new(e, cfg.nhead, cfg.dropout, cfg.batch_first, rng)
        };
        TransformerDecoderLayer {
            self_attn: mha(rng),
            multihead_attn: mha(rng),
            linear1: Linear::new(e, f, rng),
            dropout: Dropout::from_rng(cfg.dropout, rng),
            linear2: Linear::new(f, e, rng),
            norm1: cfg.norm(),
            norm2: cfg.norm(),
            norm3: cfg.norm(),
            dropout1: Dropout::from_rng(cfg.dropout, rng),
            dropout2: Dropout::from_rng(cfg.dropout, rng),
            dropout3: Dropout::from_rng(cfg.dropout, rng),
            activation: cfg.activation,
            norm_first: cfg.norm_first,
        }
    }

    fn sa(&self, x: &Tensor<E>, m: &DecoderMasks<'_>) -> Tensor<E> {
        let (y, _) =
            self.self_attn
                .attend(x, x, x, m.tgt_key_padding_mask, m.tgt_mask, m.tgt_is_causal);
        self.dropout1.forward(y)
    }

    fn mha(&self, x: &Tensor<E>, mem: &Tensor<E>, m: &DecoderMasks<'_>) -> Tensor<E> {
        let (y, _) = self.multihead_attn.attend(
            x,
            mem,
            mem,
            m.memory_key_padding_mask,
            m.memory_mask,
            false,
        );
        self.dropout2.forward(y)
    }

    fn ff(&self, x: &Tensor<E>) -> Tensor<E> {
        let h = self.linear1.forward_activated(x.clone(), self.activation);
        self.dropout3
            .forward(self.linear2.forward(self.dropout.forward(h)))
    }

    /// The block with masks.
    ///
    /// # Panics
    /// When an input is not 3-D with `d_model` features (the message names
    /// the layer and the shapes), or a mask has the wrong shape (see
    /// [`MultiheadAttention::attend`]).
    ///
    /// ```
    /// use forge::prelude::*;
    /// use forge::nn::{DecoderMasks, TransformerConfig, TransformerDecoderLayer};
    /// let cfg = TransformerConfig { dim_feedforward: 16, batch_first: true, ..TransformerConfig::new(4, 2) };
    /// let l = TransformerDecoderLayer::<f32>::new(cfg, &mut Rng::new(0));
    /// let m = DecoderMasks { tgt_is_causal: true, ..Default::default() };
    /// let y = l.forward_masked(&Tensor::ones(&[1, 3, 4]), &Tensor::ones(&[1, 6, 4]), m);
    /// assert_eq!(y.shape(), &[1, 3, 4]);
    /// ```
    pub fn forward_masked(
        &self,
        tgt: &Tensor<E>,
        memory: &Tensor<E>,
        masks: DecoderMasks<'_>,
    ) -> Tensor<E> {
        check_input("TransformerDecoderLayer", "target", &self.self_attn, tgt);
        check_input("TransformerDecoderLayer", "memory", &self.self_attn, memory);
        let x = tgt;
        let y = if self.norm_first {
            let x = x.add(&self.sa(&self.norm1.forward(x.clone()), &masks));
            let x = x.add(&self.mha(&self.norm2.forward(x.clone()), memory, &masks));
            x.add(&self.ff(&self.norm3.forward(x.clone())))
        } else {
            let x = self.norm1.forward(x.add(&self.sa(x, &masks)));
            let x = self.norm2.forward(x.add(&self.mha(&x, memory, &masks)));
            self.norm3.forward(x.add(&self.ff(&x)))
        };
        record_output(self, y)
    }
}

impl<E: Float> Forward<(Tensor<E>, Tensor<E>)> for TransformerDecoderLayer<E> {
    type Output = Tensor<E>;
    /// `(target, memory)` without masks.
    fn forward(&self, (tgt, memory): (Tensor<E>, Tensor<E>)) -> Tensor<E> {
        self.forward_masked(&tgt, &memory, DecoderMasks::default())
    }
}

/// A stack of encoder blocks with an optional final layer norm (PyTorch's
/// `nn.TransformerEncoder`; paths `layers.0.self_attn.in_proj_weight`, ...,
/// `norm.weight`).
///
/// ```
/// use forge::prelude::*;
/// use forge::nn::{TransformerConfig, TransformerEncoder};
/// let cfg = TransformerConfig { dim_feedforward: 16, ..TransformerConfig::new(8, 2) };
/// let enc = TransformerEncoder::<f32>::new(cfg, 3, true, &mut Rng::new(0));
/// assert_eq!(enc.layers.len(), 3);
/// assert!(enc.state_dict().contains_key("layers.2.norm2.bias"));
/// assert_eq!(enc.forward(Tensor::ones(&[5, 2, 8])).shape(), &[5, 2, 8]);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct TransformerEncoder<E: Float = f32> {
    /// The blocks, applied in order.
    pub layers: Vec<TransformerEncoderLayer<E>>,
    /// The final norm (PyTorch's `norm` argument), if any.
    pub norm: Option<LayerNorm<E>>,
}

impl<E: Float> TransformerEncoder<E> {
    /// `num_layers` independently initialised blocks, and a final layer
    /// norm when `final_norm` (use it with pre-norm blocks).
    ///
    /// ```
    /// let cfg = forge::nn::TransformerConfig::new(4, 1);
    /// let e = forge::nn::TransformerEncoder::<f32>::new(cfg, 2, false, &mut forge::Rng::new(0));
    /// assert!(e.norm.is_none());
    /// ```
    pub fn new(cfg: TransformerConfig, num_layers: usize, final_norm: bool, rng: &mut Rng) -> Self {
        TransformerEncoder {
            layers: (0..num_layers)
                .map(|_| TransformerEncoderLayer::new(cfg, rng))
                .collect(),
            norm: final_norm.then(|| cfg.norm()),
        }
    }

    /// Every block with the same masks, then the final norm.
    ///
    /// ```
    /// use forge::prelude::*;
    /// use forge::nn::{EncoderMasks, TransformerConfig, TransformerEncoder};
    /// let cfg = TransformerConfig { dim_feedforward: 8, ..TransformerConfig::new(4, 2) };
    /// let e = TransformerEncoder::<f32>::new(cfg, 2, false, &mut Rng::new(0));
    /// let pad = Tensor::<bool>::from_vec(vec![false, false, true], &[1, 3]);
    /// let m = EncoderMasks { key_padding_mask: Some(&pad), ..Default::default() };
    /// assert_eq!(e.forward_masked(&Tensor::ones(&[3, 1, 4]), m).shape(), &[3, 1, 4]);
    /// ```
    pub fn forward_masked(&self, x: &Tensor<E>, masks: EncoderMasks<'_>) -> Tensor<E> {
        let mut x = x.clone();
        for l in &self.layers {
            x = l.forward_masked(&x, masks);
        }
        let y = match &self.norm {
            Some(n) => n.forward(x),
            None => x,
        };
        record_output(self, y)
    }
}

impl<E: Float> Forward<Tensor<E>> for TransformerEncoder<E> {
    type Output = Tensor<E>;
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        self.forward_masked(&x, EncoderMasks::default())
    }
}

/// A stack of decoder blocks with an optional final layer norm (PyTorch's
/// `nn.TransformerDecoder`).
///
/// ```
/// use forge::prelude::*;
/// use forge::nn::{TransformerConfig, TransformerDecoder};
/// let cfg = TransformerConfig { dim_feedforward: 16, ..TransformerConfig::new(8, 2) };
/// let dec = TransformerDecoder::<f32>::new(cfg, 2, true, &mut Rng::new(0));
/// let y = dec.forward((Tensor::ones(&[5, 2, 8]), Tensor::ones(&[4, 2, 8])));
/// assert_eq!(y.shape(), &[5, 2, 8]);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct TransformerDecoder<E: Float = f32> {
    /// The blocks, applied in order.
    pub layers: Vec<TransformerDecoderLayer<E>>,
    /// The final norm, if any.
    pub norm: Option<LayerNorm<E>>,
}

impl<E: Float> TransformerDecoder<E> {
    /// `num_layers` independently initialised blocks, and a final layer
    /// norm when `final_norm`.
    ///
    /// ```
    /// let cfg = forge::nn::TransformerConfig::new(4, 1);
    /// let d = forge::nn::TransformerDecoder::<f32>::new(cfg, 1, true, &mut forge::Rng::new(0));
    /// assert!(d.norm.is_some());
    /// ```
    pub fn new(cfg: TransformerConfig, num_layers: usize, final_norm: bool, rng: &mut Rng) -> Self {
        TransformerDecoder {
            layers: (0..num_layers)
                .map(|_| TransformerDecoderLayer::new(cfg, rng))
                .collect(),
            norm: final_norm.then(|| cfg.norm()),
        }
    }

    /// Every block with the same memory and masks, then the final norm.
    ///
    /// ```
    /// use forge::prelude::*;
    /// use forge::nn::{DecoderMasks, TransformerConfig, TransformerDecoder};
    /// let cfg = TransformerConfig { dim_feedforward: 8, ..TransformerConfig::new(4, 2) };
    /// let d = TransformerDecoder::<f32>::new(cfg, 2, false, &mut Rng::new(0));
    /// let m = DecoderMasks { tgt_is_causal: true, ..Default::default() };
    /// let y = d.forward_masked(&Tensor::ones(&[3, 1, 4]), &Tensor::ones(&[2, 1, 4]), m);
    /// assert_eq!(y.shape(), &[3, 1, 4]);
    /// ```
    pub fn forward_masked(
        &self,
        tgt: &Tensor<E>,
        memory: &Tensor<E>,
        masks: DecoderMasks<'_>,
    ) -> Tensor<E> {
        let mut x = tgt.clone();
        for l in &self.layers {
            x = l.forward_masked(&x, memory, masks);
        }
        let y = match &self.norm {
            Some(n) => n.forward(x),
            None => x,
        };
        record_output(self, y)
    }
}

impl<E: Float> Forward<(Tensor<E>, Tensor<E>)> for TransformerDecoder<E> {
    type Output = Tensor<E>;
    /// `(target, memory)` without masks.
    fn forward(&self, (tgt, memory): (Tensor<E>, Tensor<E>)) -> Tensor<E> {
        self.forward_masked(&tgt, &memory, DecoderMasks::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::Layer;

    /// A layer of `cfg` with a random in-projection bias (the default is
    /// zeros, which would hide a missing bias).
    fn layer<E: Float>(cfg: TransformerConfig) -> TransformerEncoderLayer<E> {
        let mut l = TransformerEncoderLayer::<E>::new(cfg, &mut Rng::new(3));
        let e3 = 3 * cfg.d_model;
        l.self_attn.in_proj_bias = Some(Tensor::normal(&[e3], 0.0, 0.5, &mut Rng::new(9)));
        l
    }

    /// The encoder layer's self-attention path (one in-projection and the
    /// fused `qkv_attention` kernel) against `attend`'s (forced by an
    /// all-false key padding mask, which hides nothing): equal up to
    /// rounding in f64, batch first or not, post- and pre-norm, causal or
    /// not; outside autograd the outputs, under autograd the outputs and
    /// the gradients of the input and of every parameter.
    #[test]
    fn fused_self_attention_matches_the_attend_path() {
        let close = |got: &[f64], want: &[f64], what: &str| {
            assert_eq!(got.len(), want.len(), "{what}");
            for (a, b) in got.iter().zip(want) {
                assert!(
                    (a - b).abs() <= 1e-12 * (1.0 + b.abs()),
                    "{what}: {a} vs {b}"
                );
            }
        };
        for batch_first in [true, false] {
            for norm_first in [false, true] {
                for is_causal in [false, true] {
                    let cfg = TransformerConfig {
                        dim_feedforward: 24,
                        dropout: 0.0,
                        batch_first,
                        norm_first,
                        ..TransformerConfig::new(16, 4)
                    };
                    let l = layer::<f64>(cfg);
                    let x = Tensor::<f64>::normal(&[3, 5, 16], 0.0, 1.0, &mut Rng::new(4))
                        .requires_grad();
                    let (n, s) = if batch_first { (3, 5) } else { (5, 3) };
                    let pad = Tensor::<bool>::from_vec(vec![false; n * s], &[n, s]);
                    let fused = EncoderMasks {
                        is_causal,
                        ..Default::default()
                    };
                    let plain = EncoderMasks {
                        key_padding_mask: Some(&pad),
                        ..fused
                    };
                    let what = format!(
                        "batch_first {batch_first} norm_first {norm_first} causal {is_causal}"
                    );
                    assert!(l.self_attn.self_attention_fused(&x, is_causal).is_some());
                    let (yf, yp) = (l.forward_masked(&x, fused), l.forward_masked(&x, plain));
                    close(&yf.to_vec(), &yp.to_vec(), &what);
                    let no_grad = |m| crate::no_grad(|| l.forward_masked(&x, m)).to_vec();
                    close(
                        &no_grad(fused),
                        &no_grad(plain),
                        &format!("{what}, no_grad"),
                    );
                    let w = Tensor::<f64>::normal(yf.shape(), 0.0, 1.0, &mut Rng::new(5));
                    let (gf, gp) = (yf.mul(&w).sum().backward(), yp.mul(&w).sum().backward());
                    let grad = |g: &crate::autograd::Gradients<f64>, t: &Tensor<f64>| {
                        g.get(t).expect("a gradient").to_vec()
                    };
                    close(&grad(&gf, &x), &grad(&gp, &x), &format!("{what}, dx"));
                    let params = l.named_parameters();
                    assert!(params.len() >= 10, "{} parameters", params.len());
                    for (name, p) in params {
                        close(&grad(&gf, &p), &grad(&gp, &p), &format!("{what}, d{name}"));
                    }
                }
            }
        }
    }

    /// The fused inference path gives the same bits at 1 and 2 threads
    /// (f32, enough batch rows and heads to split).
    #[test]
    fn fused_inference_bits_do_not_depend_on_threads() {
        let cfg = TransformerConfig {
            dim_feedforward: 128,
            dropout: 0.0,
            batch_first: true,
            ..TransformerConfig::new(64, 4)
        };
        let l = layer::<f32>(cfg);
        let x = Tensor::<f32>::normal(&[8, 48, 64], 0.0, 1.0, &mut Rng::new(4));
        let bits = |threads| {
            crate::cpu::set_num_threads(threads);
            crate::no_grad(|| l.forward(x.clone()))
                .to_vec()
                .iter()
                .map(|v| v.to_bits())
                .collect::<Vec<_>>()
        };
        let one = bits(1);
        assert!(one == bits(2), "1 and 2 threads differ");
        crate::cpu::set_num_threads(1);
    }
}
