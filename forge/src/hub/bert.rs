//! [`Bert`]: BERT encoders (`BertModel`) by Hugging Face's names.

use super::cache::split_heads;
use super::config::HfConfig;
use super::llama::{checked, linear};
use super::weights::HfWeights;
use crate::error::{ForgeError, Result};
use crate::nn::functional::scaled_dot_product_attention;
use crate::nn::Activation;
use crate::nn::{Embedding, Forward, Layer, LayerNorm, Linear};
use crate::tensor::{Float, Rng, Tensor};
use serde_json::json;
use std::path::Path;

/// The shape of a [`Bert`], from `config.json`.
///
/// ```
/// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/bert_pooler");
/// let c = forge::hub::BertConfig::from_hf(&forge::hub::HfConfig::from_dir(dir).unwrap()).unwrap();
/// assert_eq!((c.hidden_size, c.num_attention_heads), (16, 2));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct BertConfig {
    /// `vocab_size`.
    pub vocab_size: usize,
    /// `hidden_size`.
    pub hidden_size: usize,
    /// `num_hidden_layers`.
    pub num_hidden_layers: usize,
    /// `num_attention_heads`.
    pub num_attention_heads: usize,
    /// `intermediate_size`.
    pub intermediate_size: usize,
    /// `max_position_embeddings`.
    pub max_position_embeddings: usize,
    /// `type_vocab_size`.
    pub type_vocab_size: usize,
    /// `layer_norm_eps`.
    pub layer_norm_eps: f64,
}

impl BertConfig {
    /// Reads a `bert` `config.json`.
    ///
    /// # Errors
    /// Missing or malformed keys; [`ForgeError::Unsupported`] for
    /// `hidden_act` other than `gelu`, relative position embeddings or a
    /// decoder configuration.
    ///
    /// ```
    /// use forge::hub::{BertConfig, HfConfig};
    /// let c = HfConfig::from_json(r#"{"position_embedding_type": "relative_key"}"#, "c").unwrap();
    /// assert!(BertConfig::from_hf(&c).unwrap_err().to_string().contains("relative_key"));
    /// ```
    pub fn from_hf(c: &HfConfig) -> Result<Self> {
        c.only("hidden_act", &[json!("gelu")])?;
        c.only("position_embedding_type", &[json!("absolute")])?;
        c.only("is_decoder", &[json!(false)])?;
        c.only("add_cross_attention", &[json!(false)])?;
        let hidden_size = c.usize("hidden_size")?;
        let heads = c.usize("num_attention_heads")?;
        if heads == 0 || !hidden_size.is_multiple_of(heads) {
            return Err(ForgeError::invalid(
                "num_attention_heads",
                format!("{heads} heads do not divide hidden_size {hidden_size}"),
            ));
        }
        Ok(BertConfig {
            vocab_size: c.usize("vocab_size")?,
            hidden_size,
            num_hidden_layers: c.usize("num_hidden_layers")?,
            num_attention_heads: heads,
            intermediate_size: c.usize("intermediate_size")?,
            max_position_embeddings: c.usize("max_position_embeddings")?,
            type_vocab_size: c.usize_or("type_vocab_size", Some(2))?,
            layer_norm_eps: c.f64_or("layer_norm_eps", 1e-12)?,
        })
    }
}

impl BertConfig {
    /// BERT-base's shape (`bert-base-uncased`, Hugging Face's `BertConfig()`
    /// defaults): 12 layers of width 768 with 12 heads, MLP 3072 wide,
    /// vocabulary 30522, 512 positions, 2 token types, LayerNorm epsilon
    /// 1e-12.
    ///
    /// ```
    /// let c = forge::hub::BertConfig::bert_base();
    /// assert_eq!((c.num_hidden_layers, c.hidden_size, c.intermediate_size), (12, 768, 3072));
    /// ```
    pub fn bert_base() -> Self {
        BertConfig {
            vocab_size: 30522,
            hidden_size: 768,
            num_hidden_layers: 12,
            num_attention_heads: 12,
            intermediate_size: 3072,
            max_position_embeddings: 512,
            type_vocab_size: 2,
            layer_norm_eps: 1e-12,
        }
    }
}

/// Word, position and token-type embeddings, summed and normalised.
///
/// ```
/// # let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/bert_pooler");
/// let m = forge::hub::Bert::<f32>::from_dir(dir).unwrap();
/// assert_eq!(m.embeddings.word_embeddings.weight.shape(), &[120, 16]);
/// ```
#[derive(Layer, Clone, Debug)]
#[allow(non_snake_case)]
pub struct BertEmbeddings<E: Float = f32> {
    /// `[vocab, hidden]`.
    pub word_embeddings: Embedding<E>,
    /// `[max_positions, hidden]`.
    pub position_embeddings: Embedding<E>,
    /// `[type_vocab, hidden]`.
    pub token_type_embeddings: Embedding<E>,
    /// The LayerNorm after the sum (Hugging Face's name).
    pub LayerNorm: LayerNorm<E>,
}

/// A dense layer followed by a residual LayerNorm (`attention.output`,
/// `output`).
///
/// ```
/// # let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/bert_pooler");
/// let m = forge::hub::Bert::<f32>::from_dir(dir).unwrap();
/// assert_eq!(m.encoder.layer[0].output.dense.weight.shape(), &[16, 24]);
/// ```
#[derive(Layer, Clone, Debug)]
#[allow(non_snake_case)]
pub struct BertOutput<E: Float = f32> {
    /// The projection.
    pub dense: Linear<E>,
    /// Applied to `dense(x) + residual`.
    pub LayerNorm: LayerNorm<E>,
}

/// The query, key and value projections (`attention.self`).
///
/// ```
/// # let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/bert_pooler");
/// let m = forge::hub::Bert::<f32>::from_dir(dir).unwrap();
/// assert_eq!(m.encoder.layer[0].attention.self_.query.weight.shape(), &[16, 16]);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct BertSelfAttention<E: Float = f32> {
    /// `[hidden, hidden]`.
    pub query: Linear<E>,
    /// `[hidden, hidden]`.
    pub key: Linear<E>,
    /// `[hidden, hidden]`.
    pub value: Linear<E>,
}

/// Self-attention and its output (`attention`). Its path segment `self_`
/// is Hugging Face's `self`, a Rust keyword: loading maps the one to the
/// other.
///
/// ```
/// use forge::nn::Layer;
/// # let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/bert_pooler");
/// let m = forge::hub::Bert::<f32>::from_dir(dir).unwrap();
/// assert!(m.state_dict().contains_key("encoder.layer.0.attention.self_.query.weight"));
/// ```
#[derive(Layer, Clone, Debug)]
pub struct BertAttention<E: Float = f32> {
    /// The projections.
    pub self_: BertSelfAttention<E>,
    /// The output projection and residual LayerNorm.
    pub output: BertOutput<E>,
}

/// One post-LN encoder layer.
///
/// ```
/// # let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/bert_pooler");
/// let m = forge::hub::Bert::<f32>::from_dir(dir).unwrap();
/// assert_eq!(m.encoder.layer[0].intermediate.dense.weight.shape(), &[24, 16]);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct BertLayer<E: Float = f32> {
    /// Self-attention.
    pub attention: BertAttention<E>,
    /// The first MLP projection (`intermediate.dense`), wrapped as Hugging
    /// Face nests it.
    pub intermediate: BertIntermediate<E>,
    /// The second MLP projection and residual LayerNorm.
    pub output: BertOutput<E>,
}

/// `intermediate`: the MLP's widening projection (GELU follows).
///
/// ```
/// # let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/bert_pooler");
/// let m = forge::hub::Bert::<f32>::from_dir(dir).unwrap();
/// assert_eq!(m.encoder.layer.len(), 2);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct BertIntermediate<E: Float = f32> {
    /// `[intermediate, hidden]`.
    pub dense: Linear<E>,
}

/// The encoder layers (`encoder.layer.{i}`).
///
/// ```
/// # let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/bert_pooler");
/// let m = forge::hub::Bert::<f32>::from_dir(dir).unwrap();
/// assert_eq!(m.encoder.layer.len(), m.config.num_hidden_layers);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct BertEncoder<E: Float = f32> {
    /// The layers.
    pub layer: Vec<BertLayer<E>>,
}

/// The pooler: `tanh(dense(h[:, 0]))`.
///
/// ```
/// # let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/bert_pooler");
/// let m = forge::hub::Bert::<f32>::from_dir(dir).unwrap();
/// assert!(m.pooler.is_some());
/// ```
#[derive(Layer, Clone, Debug)]
pub struct BertPooler<E: Float = f32> {
    /// `[hidden, hidden]`.
    pub dense: Linear<E>,
}

/// A BERT encoder (`BertModel`), with or without the pooler.
///
/// ```
/// use forge::hub::Bert;
/// use forge::Tensor;
/// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/bert_pooler");
/// let bert = Bert::<f32>::from_dir(dir).unwrap();
/// let ids = Tensor::<i64>::from_vec(vec![5, 6, 7, 0], &[1, 4]);
/// let mask = Tensor::<bool>::from_vec(vec![true, true, true, false], &[1, 4]);
/// let h = bert.encode(&ids, Some(&mask), None);
/// assert_eq!(h.shape(), &[1, 4, 16]);
/// assert_eq!(bert.pool(&h).unwrap().shape(), &[1, 16]);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct Bert<E: Float = f32> {
    /// The embeddings.
    pub embeddings: BertEmbeddings<E>,
    /// The layers.
    pub encoder: BertEncoder<E>,
    /// The pooler, when the checkpoint has one.
    pub pooler: Option<BertPooler<E>>,
    /// The configuration it was loaded with.
    #[skip]
    pub config: BertConfig,
}

impl<E: Float> Bert<E> {
    /// Loads a Hugging Face folder whose `model_type` is `bert` (names with
    /// or without the `bert.` prefix of task models; heads other than the
    /// pooler are refused).
    ///
    /// # Errors
    /// [`ForgeError::Unsupported`] for another `model_type`, an option
    /// forge does not implement or tensors left over; missing tensors or
    /// keys; [`ForgeError::Shape`] for a tensor of the wrong shape.
    ///
    /// ```
    /// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/gpt2_tiny");
    /// let e = forge::hub::Bert::<f32>::from_dir(dir).unwrap_err();
    /// assert!(e.to_string().contains("gpt2"), "{e}");
    /// ```
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        let c = HfConfig::from_dir(dir)?;
        let kind = c.model_type()?;
        if kind != "bert" {
            return Err(ForgeError::unsupported(
                format!("model_type {kind:?}"),
                format!("{}: Bert loads bert", c.origin().display()),
            ));
        }
        let config = BertConfig::from_hf(&c)?;
        let mut w = HfWeights::from_dir(dir)?;
        let prefix = if w.contains("bert.embeddings.word_embeddings.weight") {
            "bert."
        } else {
            ""
        };
        w.discard(&format!("{prefix}embeddings.position_ids"));
        let m = Self::from_weights(config, &mut w, prefix)?;
        w.finish()?;
        Ok(m)
    }

    /// A randomly initialised encoder of shape `config`, as Hugging Face
    /// initialises `BertModel`: Linear and embedding weights N(0, 0.02),
    /// biases 0, LayerNorms weight 1 and bias 0; with a pooler when
    /// `pooler` is true.
    ///
    /// # Panics
    /// When `num_attention_heads` is zero or does not divide `hidden_size`.
    ///
    /// ```
    /// use forge::hub::{Bert, BertConfig};
    /// use forge::prelude::*;
    /// let mut c = BertConfig::bert_base();
    /// (c.vocab_size, c.hidden_size, c.num_hidden_layers, c.intermediate_size) = (50, 8, 1, 16);
    /// c.num_attention_heads = 2;
    /// let bert = Bert::<f32>::new(c, false, &mut Rng::new(0));
    /// assert_eq!(bert.forward(Tensor::from_vec(vec![1, 2, 3], &[1, 3])).shape(), &[1, 3, 8]);
    /// ```
    pub fn new(config: BertConfig, pooler: bool, rng: &mut Rng) -> Self {
        let h = config.hidden_size;
        let heads = config.num_attention_heads;
        assert!(
            heads > 0 && h.is_multiple_of(heads),
            "Bert::new: {heads} heads do not divide hidden_size {h}"
        );
        let ln = || {
            let mut l = LayerNorm::<E>::new(&[h]);
            l.eps = config.layer_norm_eps;
            l
        };
        let normal = |shape: &[usize], rng: &mut Rng| {
            Tensor::<E>::normal(shape, 0.0, 0.02, rng).requires_grad()
        };
        let dense = |out: usize, inp: usize, rng: &mut Rng| -> Linear<E> {
            Linear::from_weights(
                normal(&[out, inp], rng),
                Some(Tensor::zeros(&[out]).requires_grad()),
            )
            .expect("a [out, in] weight and an [out] bias")
        };
        let emb = |n: usize, rng: &mut Rng| Embedding {
            weight: normal(&[n, h], rng),
            padding_idx: None,
            int8: None,
        };
        let embeddings = BertEmbeddings {
            word_embeddings: emb(config.vocab_size, rng),
            position_embeddings: emb(config.max_position_embeddings, rng),
            token_type_embeddings: emb(config.type_vocab_size, rng),
            LayerNorm: ln(),
        };
        let inter = config.intermediate_size;
        let layer = (0..config.num_hidden_layers)
            .map(|_| BertLayer {
                attention: BertAttention {
                    self_: BertSelfAttention {
                        query: dense(h, h, rng),
                        key: dense(h, h, rng),
                        value: dense(h, h, rng),
                    },
                    output: BertOutput {
                        dense: dense(h, h, rng),
                        LayerNorm: ln(),
                    },
                },
                intermediate: BertIntermediate {
                    dense: dense(inter, h, rng),
                },
                output: BertOutput {
                    dense: dense(h, inter, rng),
                    LayerNorm: ln(),
                },
            })
            .collect();
        let pooler = pooler.then(|| BertPooler {
            dense: dense(h, h, rng),
        });
        Bert {
            embeddings,
            encoder: BertEncoder { layer },
            pooler,
            config,
        }
    }

    fn from_weights(config: BertConfig, w: &mut HfWeights, p: &str) -> Result<Self> {
        let c = &config;
        let h = c.hidden_size;
        let ln = |w: &mut HfWeights, name: &str| -> Result<LayerNorm<E>> {
            let mut l = LayerNorm::new(&[h]);
            l.eps = c.layer_norm_eps;
            l.weight = Some(checked(w, &format!("{name}.weight"), &[h])?);
            l.bias = Some(checked(w, &format!("{name}.bias"), &[h])?);
            Ok(l)
        };
        let emb = |w: &mut HfWeights, name: &str, n: usize| -> Result<Embedding<E>> {
            Ok(Embedding {
                weight: checked(w, &format!("{p}embeddings.{name}.weight"), &[n, h])?,
                padding_idx: None,
                int8: None,
            })
        };
        let dense = |w: &mut HfWeights, name: &str, out: usize, inp: usize| -> Result<Linear<E>> {
            let l = linear(w, name, true)?;
            if l.weight.shape() != [out, inp] {
                return Err(ForgeError::Shape {
                    name: format!("{name}.weight"),
                    expected: vec![out, inp],
                    found: l.weight.shape().to_vec(),
                });
            }
            Ok(l)
        };
        let embeddings = BertEmbeddings {
            word_embeddings: emb(w, "word_embeddings", c.vocab_size)?,
            position_embeddings: emb(w, "position_embeddings", c.max_position_embeddings)?,
            token_type_embeddings: emb(w, "token_type_embeddings", c.type_vocab_size)?,
            LayerNorm: ln(w, &format!("{p}embeddings.LayerNorm"))?,
        };
        let mut layer = Vec::new();
        for i in 0..c.num_hidden_layers {
            let q = format!("{p}encoder.layer.{i}");
            layer.push(BertLayer {
                attention: BertAttention {
                    self_: BertSelfAttention {
                        query: dense(w, &format!("{q}.attention.self.query"), h, h)?,
                        key: dense(w, &format!("{q}.attention.self.key"), h, h)?,
                        value: dense(w, &format!("{q}.attention.self.value"), h, h)?,
                    },
                    output: BertOutput {
                        dense: dense(w, &format!("{q}.attention.output.dense"), h, h)?,
                        LayerNorm: ln(w, &format!("{q}.attention.output.LayerNorm"))?,
                    },
                },
                intermediate: BertIntermediate {
                    dense: dense(
                        w,
                        &format!("{q}.intermediate.dense"),
                        c.intermediate_size,
                        h,
                    )?,
                },
                output: BertOutput {
                    dense: dense(w, &format!("{q}.output.dense"), h, c.intermediate_size)?,
                    LayerNorm: ln(w, &format!("{q}.output.LayerNorm"))?,
                },
            });
        }
        let pooler = if w.contains(&format!("{p}pooler.dense.weight")) {
            Some(BertPooler {
                dense: dense(w, &format!("{p}pooler.dense"), h, h)?,
            })
        } else {
            None
        };
        Ok(Bert {
            embeddings,
            encoder: BertEncoder { layer },
            pooler,
            config,
        })
    }

    /// The last hidden state `[B, T, hidden]` of token ids `[B, T]`.
    /// `attention_mask` `[B, T]` is false for padding (keys never
    /// attended to; all real when `None`); `token_type_ids` default to 0.
    ///
    /// # Panics
    /// When `ids` is not `[B, T]` with `T <= max_position_embeddings`, the
    /// mask or types have another shape, or an id is out of range.
    ///
    /// ```
    /// # let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/bert_pooler");
    /// let bert = forge::hub::Bert::<f64>::from_dir(dir).unwrap();
    /// let ids = forge::Tensor::<i64>::from_vec(vec![5, 6], &[1, 2]);
    /// assert_eq!(bert.encode(&ids, None, None).shape(), &[1, 2, 16]);
    /// ```
    pub fn encode(
        &self,
        ids: &Tensor<i64>,
        attention_mask: Option<&Tensor<bool>>,
        token_type_ids: Option<&Tensor<i64>>,
    ) -> Tensor<E> {
        let c = &self.config;
        assert!(
            ids.rank() == 2 && ids.dim(1) <= c.max_position_embeddings,
            "Bert: expected token ids [B, T] with T <= {}, got {:?}",
            c.max_position_embeddings,
            ids.shape()
        );
        let (b, t) = (ids.dim(0), ids.dim(1));
        for (what, s) in [
            ("attention_mask", attention_mask.map(|m| m.shape())),
            ("token_type_ids", token_type_ids.map(|m| m.shape())),
        ] {
            if let Some(s) = s {
                assert!(
                    s == [b, t],
                    "Bert: {what} of shape {s:?} for ids of shape [{b}, {t}]"
                );
            }
        }
        let e = &self.embeddings;
        let pos = Tensor::<i64>::from_vec((0..t as i64).collect(), &[1, t]);
        let types = match token_type_ids {
            Some(tt) => tt.clone(),
            None => Tensor::zeros(&[b, t]),
        };
        let x = e
            .word_embeddings
            .forward(ids.clone())
            .add(&e.position_embeddings.forward(pos))
            .add(&e.token_type_embeddings.forward(types));
        let mut x = e.LayerNorm.forward(x);
        // the inference path (`bert_infer.rs`) when nothing records
        if self.infer_applies(&x) {
            let keys = attention_mask.map(|m| m.to_vec());
            return self.encode_layers_infer(x.contiguous(), keys.as_deref());
        }
        let mask = attention_mask.map(|m| m.reshape(&[b as isize, 1, 1, t as isize]));
        let heads = c.num_attention_heads;
        for l in &self.encoder.layer {
            let s = &l.attention.self_;
            let q = split_heads(&s.query.forward(x.clone()), heads);
            let k = split_heads(&s.key.forward(x.clone()), heads);
            let v = split_heads(&s.value.forward(x.clone()), heads);
            let y = scaled_dot_product_attention(&q, &k, &v, mask.as_ref(), false)
                .permute(&[0, 2, 1, 3])
                .reshape(&[b as isize, t as isize, c.hidden_size as isize]);
            let o = &l.attention.output;
            x = o.LayerNorm.forward(o.dense.forward(y).add(&x));
            let m = l
                .intermediate
                .dense
                .forward_activated(x.clone(), Activation::Gelu);
            x = l
                .output
                .LayerNorm
                .forward(l.output.dense.forward(m).add(&x));
        }
        x
    }

    /// The pooler's output `[B, hidden]` (`tanh(dense(h[:, 0]))`) of a last
    /// hidden state `[B, T, hidden]`, `None` without a pooler.
    ///
    /// ```
    /// # let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/bert_nopooler_sharded");
    /// let bert = forge::hub::Bert::<f32>::from_dir(dir).unwrap();
    /// let h = bert.encode(&forge::Tensor::from_vec(vec![3], &[1, 1]), None, None);
    /// assert!(bert.pool(&h).is_none());
    /// ```
    pub fn pool(&self, hidden: &Tensor<E>) -> Option<Tensor<E>> {
        let p = self.pooler.as_ref()?;
        Some(p.dense.forward(hidden.narrow(1, 0, 1).squeeze(1)).tanh())
    }
}

impl<E: Float> Forward<Tensor<i64>> for Bert<E> {
    type Output = Tensor<E>;

    /// [`encode`](Bert::encode) without padding or token types.
    fn forward(&self, ids: Tensor<i64>) -> Tensor<E> {
        crate::nn::record_output(self, self.encode(&ids, None, None))
    }
}
