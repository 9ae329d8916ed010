//! [`Llama`]: Llama-family decoders (`LlamaForCausalLM`) by Hugging Face's
//! names: RMSNorm, rotary positions, SwiGLU, grouped-query attention.

use super::cache::{grouped_attention, rotary, split_heads, KvCache};
use super::causal::CausalLm;
use super::config::HfConfig;
use super::weights::HfWeights;
use crate::error::{ForgeError, Result};
use crate::nn::record_output;
use crate::nn::{Embedding, Forward, Layer, Linear, RmsNorm};
use crate::tensor::{Float, Tensor};
use serde_json::json;
use std::path::Path;

/// The shape of a [`Llama`], from `config.json`.
///
/// ```
/// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/llama_gqa_tied");
/// let c = forge::hub::HfConfig::from_dir(dir).unwrap();
/// let l = forge::hub::LlamaConfig::from_hf(&c).unwrap();
/// assert_eq!((l.num_attention_heads, l.num_key_value_heads), (4, 2));
/// assert_eq!(l.rope_theta, 500000.0);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct LlamaConfig {
    /// `vocab_size`.
    pub vocab_size: usize,
    /// `hidden_size`.
    pub hidden_size: usize,
    /// `intermediate_size` (the SwiGLU width).
    pub intermediate_size: usize,
    /// `num_hidden_layers`.
    pub num_hidden_layers: usize,
    /// `num_attention_heads`.
    pub num_attention_heads: usize,
    /// `num_key_value_heads` (defaults to `num_attention_heads`).
    pub num_key_value_heads: usize,
    /// `head_dim` (defaults to `hidden_size / num_attention_heads`).
    pub head_dim: usize,
    /// `rms_norm_eps`.
    pub rms_norm_eps: f64,
    /// `rope_theta` (top level, or in `rope_parameters`).
    pub rope_theta: f64,
    /// `max_position_embeddings`.
    pub max_position_embeddings: usize,
    /// `attention_bias`: biases on the q, k, v and o projections.
    pub attention_bias: bool,
    /// `mlp_bias`: biases on the gate, up and down projections.
    pub mlp_bias: bool,
    /// `tie_word_embeddings`: the head is the token embedding.
    pub tie_word_embeddings: bool,
}

impl LlamaConfig {
    /// Reads the keys of a `llama` (or `qwen2`, `mistral` without sliding
    /// windows) `config.json`.
    ///
    /// # Errors
    /// [`ForgeError::MissingKey`] / [`ForgeError::Invalid`] for a missing
    /// or malformed key; [`ForgeError::Unsupported`] for an option forge
    /// does not implement (`hidden_act` other than `silu`, rope scaling, a
    /// sliding window, tensor-parallel pretraining splits).
    ///
    /// ```
    /// use forge::hub::{HfConfig, LlamaConfig};
    /// let c = HfConfig::from_json(r#"{"model_type": "llama", "vocab_size": 8, "hidden_size": 4,
    ///   "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
    ///   "rope_scaling": {"rope_type": "yarn"}}"#, "config.json").unwrap();
    /// let e = LlamaConfig::from_hf(&c).unwrap_err();
    /// assert!(e.to_string().contains("rope_scaling"), "{e}");
    /// ```
    pub fn from_hf(c: &HfConfig) -> Result<Self> {
        c.only("hidden_act", &[json!("silu")])?;
        c.only("pretraining_tp", &[json!(1)])?;
        c.only("use_sliding_window", &[json!(false)])?;
        c.only("sliding_window", &[])?;
        if let Some(v) = c.get("rope_scaling") {
            return Err(ForgeError::unsupported(
                format!("rope_scaling = {v}"),
                format!(
                    "{}: forge implements the default rotary embedding",
                    c.origin().display()
                ),
            ));
        }
        let mut rope_theta = c.f64_or("rope_theta", 10000.0)?;
        if let Some(p) = c.get("rope_parameters") {
            match p.get("rope_type").and_then(|t| t.as_str()) {
                None | Some("default") => {}
                Some(t) => {
                    return Err(ForgeError::unsupported(
                        format!("rope_parameters.rope_type = {t}"),
                        format!(
                            "{}: forge implements rope_type \"default\"",
                            c.origin().display()
                        ),
                    ))
                }
            }
            if let Some(t) = p.get("rope_theta").and_then(|t| t.as_f64()) {
                rope_theta = t;
            }
        }
        let hidden_size = c.usize("hidden_size")?;
        let heads = c.usize("num_attention_heads")?;
        if heads == 0 || (c.get("head_dim").is_none() && !hidden_size.is_multiple_of(heads)) {
            return Err(ForgeError::invalid(
                "num_attention_heads",
                format!("{heads} heads for hidden_size {hidden_size}"),
            ));
        }
        let kv = c.usize_or("num_key_value_heads", Some(heads))?;
        if kv == 0 || !heads.is_multiple_of(kv) {
            return Err(ForgeError::invalid(
                "num_key_value_heads",
                format!("{kv} key/value heads do not divide {heads} attention heads"),
            ));
        }
        let head_dim = c.usize_or("head_dim", Some(hidden_size / heads))?;
        if head_dim == 0 || !head_dim.is_multiple_of(2) {
            return Err(ForgeError::invalid(
                "head_dim",
                format!("{head_dim} is not a positive even number"),
            ));
        }
        Ok(LlamaConfig {
            vocab_size: c.usize("vocab_size")?,
            hidden_size,
            intermediate_size: c.usize("intermediate_size")?,
            num_hidden_layers: c.usize("num_hidden_layers")?,
            num_attention_heads: heads,
            num_key_value_heads: kv,
            head_dim,
            rms_norm_eps: c.f64_or("rms_norm_eps", 1e-6)?,
            rope_theta,
            max_position_embeddings: c.usize_or("max_position_embeddings", Some(usize::MAX))?,
            attention_bias: c.bool_or("attention_bias", false)?,
            mlp_bias: c.bool_or("mlp_bias", false)?,
            tie_word_embeddings: c.bool_or("tie_word_embeddings", false)?,
        })
    }
}

/// The attention of a [`LlamaLayer`] (`self_attn`).
///
/// ```
/// # let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/llama_gqa_tied");
/// let m = forge::hub::Llama::<f32>::from_dir(dir).unwrap();
/// assert_eq!(m.model.layers[0].self_attn.k_proj.weight.shape(), &[8, 16]);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct LlamaAttention<E: Float = f32> {
    /// `[heads * head_dim, hidden]`.
    pub q_proj: Linear<E>,
    /// `[kv_heads * head_dim, hidden]`.
    pub k_proj: Linear<E>,
    /// `[kv_heads * head_dim, hidden]`.
    pub v_proj: Linear<E>,
    /// `[hidden, heads * head_dim]`.
    pub o_proj: Linear<E>,
}

/// The SwiGLU feed-forward layer: `down(silu(gate(x)) * up(x))`.
///
/// ```
/// # let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/llama_gqa_tied");
/// let m = forge::hub::Llama::<f32>::from_dir(dir).unwrap();
/// assert_eq!(m.model.layers[0].mlp.gate_proj.weight.shape(), &[24, 16]);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct LlamaMlp<E: Float = f32> {
    /// `[intermediate, hidden]`.
    pub gate_proj: Linear<E>,
    /// `[intermediate, hidden]`.
    pub up_proj: Linear<E>,
    /// `[hidden, intermediate]`.
    pub down_proj: Linear<E>,
}

impl<E: Float> Forward<Tensor<E>> for LlamaMlp<E> {
    type Output = Tensor<E>;
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let g = self.gate_proj.forward(x.clone()).silu();
        self.down_proj.forward(g.mul(&self.up_proj.forward(x)))
    }
}

/// One pre-norm decoder layer.
///
/// ```
/// # let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/llama_gqa_tied");
/// let m = forge::hub::Llama::<f32>::from_dir(dir).unwrap();
/// assert_eq!(m.model.layers.len(), 2);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct LlamaLayer<E: Float = f32> {
    /// RMSNorm before attention.
    pub input_layernorm: RmsNorm<E>,
    /// Attention.
    pub self_attn: LlamaAttention<E>,
    /// RMSNorm before the MLP.
    pub post_attention_layernorm: RmsNorm<E>,
    /// SwiGLU MLP.
    pub mlp: LlamaMlp<E>,
}

/// The body of a [`Llama`] (Hugging Face's `model`).
///
/// ```
/// # let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/llama_gqa_tied");
/// let m = forge::hub::Llama::<f32>::from_dir(dir).unwrap();
/// assert_eq!(m.model.embed_tokens.weight.shape(), &[64, 16]);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct LlamaModel<E: Float = f32> {
    /// `[vocab, hidden]`.
    pub embed_tokens: Embedding<E>,
    /// The decoder layers.
    pub layers: Vec<LlamaLayer<E>>,
    /// The final RMSNorm.
    pub norm: RmsNorm<E>,
}

/// A Llama-family causal language model; its tensor paths are Hugging
/// Face's (`model.layers.0.self_attn.q_proj.weight`, ...), so its
/// [`state_dict`](Layer::state_dict) saves and loads with forge's
/// checkpoints under the same names. With tied embeddings there is no
/// `lm_head`: the head is `model.embed_tokens.weight`.
///
/// ```
/// use forge::hub::{CausalLm, Llama};
/// use forge::prelude::*;
/// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/llama_mha_untied");
/// let m = Llama::<f64>::from_dir(dir).unwrap();
/// let logits = m.logits(&Tensor::from_vec(vec![1, 2, 3], &[1, 3]));
/// assert_eq!(logits.shape(), &[1, 3, 64]);
/// assert!(m.lm_head.is_some());
/// ```
#[derive(Layer, Clone, Debug)]
pub struct Llama<E: Float = f32> {
    /// Embeddings, layers and final norm.
    pub model: LlamaModel<E>,
    /// The output head `[vocab, hidden]`, `None` when tied.
    pub lm_head: Option<Linear<E>>,
    /// The configuration it was loaded with.
    #[skip]
    pub config: LlamaConfig,
}

impl<E: Float> Forward<Tensor<i64>> for Llama<E> {
    type Output = Tensor<E>;

    /// The logits `[B, T, vocab]` of token ids `[B, T]` (see
    /// [`CausalLm::logits`]).
    fn forward(&self, ids: Tensor<i64>) -> Tensor<E> {
        record_output(self, self.logits(&ids))
    }
}

pub(crate) fn linear<E: Float>(w: &mut HfWeights, name: &str, bias: bool) -> Result<Linear<E>> {
    let weight = w.take::<E>(&format!("{name}.weight"))?;
    let bias = if bias {
        Some(w.take::<E>(&format!("{name}.bias"))?)
    } else {
        None
    };
    Linear::from_weights(weight.requires_grad(), bias.map(|b| b.requires_grad()))
        .map_err(|e| ForgeError::invalid(name, e.to_string()))
}

pub(crate) fn checked<E: Float>(
    w: &mut HfWeights,
    name: &str,
    shape: &[usize],
) -> Result<Tensor<E>> {
    let t = w.take::<E>(name)?;
    if t.shape() != shape {
        return Err(ForgeError::Shape {
            name: name.to_string(),
            expected: shape.to_vec(),
            found: t.shape().to_vec(),
        });
    }
    Ok(t.requires_grad())
}

impl<E: Float> Llama<E> {
    /// Loads a Hugging Face folder (`config.json` and `model.safetensors`
    /// or its shards) whose `model_type` is `llama`, `qwen2` or `mistral`.
    ///
    /// # Errors
    /// [`ForgeError::Unsupported`] for another `model_type`, an option
    /// forge does not implement, or tensors left over; the errors of
    /// [`LlamaConfig::from_hf`] and [`HfWeights`]; [`ForgeError::Shape`]
    /// for a tensor of the wrong shape.
    ///
    /// ```
    /// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/bert_pooler");
    /// let e = forge::hub::Llama::<f32>::from_dir(dir).unwrap_err();
    /// assert!(e.to_string().contains("bert"), "{e}");
    /// ```
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        let c = HfConfig::from_dir(dir)?;
        let kind = c.model_type()?;
        if !matches!(kind, "llama" | "qwen2" | "mistral") {
            return Err(ForgeError::unsupported(
                format!("model_type {kind:?}"),
                format!(
                    "{}: Llama loads llama, qwen2 and mistral",
                    c.origin().display()
                ),
            ));
        }
        let mut config = LlamaConfig::from_hf(&c)?;
        if kind == "qwen2" && c.get("attention_bias").is_none() {
            // Qwen2 always has q/k/v biases and no o_proj bias; its config has no key for it.
            config.attention_bias = true;
        }
        let mut w = HfWeights::from_dir(dir)?;
        Self::from_weights(config, &mut w, kind == "qwen2").and_then(|m| w.finish().map(|_| m))
    }

    fn from_weights(config: LlamaConfig, w: &mut HfWeights, qwen2: bool) -> Result<Self> {
        let cfg = &config;
        let norm = |w: &mut HfWeights, name: &str| -> Result<RmsNorm<E>> {
            let mut n = RmsNorm::new(&[cfg.hidden_size]).with_eps(cfg.rms_norm_eps);
            n.weight = Some(checked(w, name, &[cfg.hidden_size])?);
            Ok(n)
        };
        let embed = checked::<E>(
            w,
            "model.embed_tokens.weight",
            &[cfg.vocab_size, cfg.hidden_size],
        )?;
        let mut layers = Vec::new();
        for i in 0..cfg.num_hidden_layers {
            let p = format!("model.layers.{i}");
            let ab = cfg.attention_bias;
            layers.push(LlamaLayer {
                input_layernorm: norm(w, &format!("{p}.input_layernorm.weight"))?,
                self_attn: LlamaAttention {
                    q_proj: linear(w, &format!("{p}.self_attn.q_proj"), ab)?,
                    k_proj: linear(w, &format!("{p}.self_attn.k_proj"), ab)?,
                    v_proj: linear(w, &format!("{p}.self_attn.v_proj"), ab)?,
                    o_proj: linear(w, &format!("{p}.self_attn.o_proj"), ab && !qwen2)?,
                },
                post_attention_layernorm: norm(w, &format!("{p}.post_attention_layernorm.weight"))?,
                mlp: LlamaMlp {
                    gate_proj: linear(w, &format!("{p}.mlp.gate_proj"), cfg.mlp_bias)?,
                    up_proj: linear(w, &format!("{p}.mlp.up_proj"), cfg.mlp_bias)?,
                    down_proj: linear(w, &format!("{p}.mlp.down_proj"), cfg.mlp_bias)?,
                },
            });
        }
        let lm_head = if cfg.tie_word_embeddings {
            // Some tied checkpoints store the head too: it must be the embedding.
            if w.contains("lm_head.weight") {
                let head = w.take::<E>("lm_head.weight")?;
                if head.shape() != embed.shape() || head.as_slice() != embed.as_slice() {
                    return Err(ForgeError::invalid(
                        "lm_head.weight",
                        "tie_word_embeddings is true but lm_head.weight differs from model.embed_tokens.weight",
                    ));
                }
            }
            None
        } else {
            Some(linear(w, "lm_head", false)?)
        };
        let d = cfg.head_dim;
        let check = |name: &str, l: &Linear<E>, shape: [usize; 2]| -> Result<()> {
            if l.weight.shape() != shape {
                return Err(ForgeError::Shape {
                    name: name.into(),
                    expected: shape.to_vec(),
                    found: l.weight.shape().to_vec(),
                });
            }
            Ok(())
        };
        for (i, l) in layers.iter().enumerate() {
            let (h, kv, hs, is) = (
                cfg.num_attention_heads,
                cfg.num_key_value_heads,
                cfg.hidden_size,
                cfg.intermediate_size,
            );
            let p = format!("model.layers.{i}");
            check(
                &format!("{p}.self_attn.q_proj.weight"),
                &l.self_attn.q_proj,
                [h * d, hs],
            )?;
            check(
                &format!("{p}.self_attn.k_proj.weight"),
                &l.self_attn.k_proj,
                [kv * d, hs],
            )?;
            check(
                &format!("{p}.self_attn.v_proj.weight"),
                &l.self_attn.v_proj,
                [kv * d, hs],
            )?;
            check(
                &format!("{p}.self_attn.o_proj.weight"),
                &l.self_attn.o_proj,
                [hs, h * d],
            )?;
            check(
                &format!("{p}.mlp.gate_proj.weight"),
                &l.mlp.gate_proj,
                [is, hs],
            )?;
            check(&format!("{p}.mlp.up_proj.weight"), &l.mlp.up_proj, [is, hs])?;
            check(
                &format!("{p}.mlp.down_proj.weight"),
                &l.mlp.down_proj,
                [hs, is],
            )?;
        }
        if let Some(h) = &lm_head {
            check("lm_head.weight", h, [cfg.vocab_size, cfg.hidden_size])?;
        }
        Ok(Llama {
            model: LlamaModel {
                embed_tokens: Embedding {
                    weight: embed,
                    padding_idx: None,
                    int8: None,
                },
                layers,
                norm: norm(w, "model.norm.weight")?,
            },
            lm_head,
            config,
        })
    }
}

impl<E: Float> CausalLm<E> for Llama<E> {
    fn vocab_size(&self) -> usize {
        self.config.vocab_size
    }

    fn max_positions(&self) -> usize {
        self.config.max_position_embeddings
    }

    fn new_cache(&self) -> KvCache<E> {
        KvCache::new(self.config.num_hidden_layers)
    }

    fn forward_cached(
        &self,
        ids: &Tensor<i64>,
        valid: Option<&[bool]>,
        cache: &mut KvCache<E>,
    ) -> Tensor<E> {
        self.cached(ids, valid, cache, false)
    }

    fn forward_cached_last(
        &self,
        ids: &Tensor<i64>,
        valid: Option<&[bool]>,
        cache: &mut KvCache<E>,
    ) -> Tensor<E> {
        self.cached(ids, valid, cache, true)
    }
}

impl<E: Float> Llama<E> {
    /// [`CausalLm::forward_cached`], the head applied to the last position
    /// only when `last`.
    fn cached(
        &self,
        ids: &Tensor<i64>,
        valid: Option<&[bool]>,
        cache: &mut KvCache<E>,
        last: bool,
    ) -> Tensor<E> {
        assert!(
            ids.rank() == 2,
            "Llama: expected token ids [B, T], got {:?}",
            ids.shape()
        );
        let (b, t) = (ids.dim(0), ids.dim(1));
        let step = cache.begin(b, t, valid);
        let cfg = &self.config;
        let mut x = self.model.embed_tokens.forward(ids.clone());
        for (i, layer) in self.model.layers.iter().enumerate() {
            let h = layer.input_layernorm.forward(x.clone());
            let a = &layer.self_attn;
            let q = split_heads(&a.q_proj.forward(h.clone()), cfg.num_attention_heads);
            let k = split_heads(&a.k_proj.forward(h.clone()), cfg.num_key_value_heads);
            let v = split_heads(&a.v_proj.forward(h), cfg.num_key_value_heads);
            let q = rotary(&q, &step.positions, cfg.rope_theta);
            let k = rotary(&k, &step.positions, cfg.rope_theta);
            let (k, v) = cache.append(i, k, v);
            let y = grouped_attention(&q, &k, &v, &step.mask);
            x = x.add(&a.o_proj.forward(y));
            let m = layer
                .mlp
                .forward(layer.post_attention_layernorm.forward(x.clone()));
            x = x.add(&m);
        }
        let x = if last {
            let t = x.dim(1);
            x.narrow(1, t - 1, 1)
        } else {
            x
        };
        let x = self.model.norm.forward(x);
        match &self.lm_head {
            Some(h) => h.forward(x),
            None => self.model.embed_tokens.attend(&x),
        }
    }
}
