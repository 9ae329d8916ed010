//! Hugging Face GPT-2 (`GPT2LMHeadModel`) into forge's own
//! [`Gpt`](crate::models::gpt::Gpt), which has GPT-2's names and layout.

use super::cache::{grouped_attention, split_heads, KvCache};
use super::causal::CausalLm;
use super::config::HfConfig;
use super::weights::HfWeights;
use crate::error::{ForgeError, Result};
use crate::models::gpt::{Gpt, GptConfig};
use crate::nn::{Forward, Layer};
use crate::tensor::{Float, Rng, Tensor};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;

/// Reads a GPT-2 `config.json` into a [`GptConfig`] and the LayerNorm
/// epsilon.
///
/// # Errors
/// [`ForgeError::Unsupported`] for an option forge does not implement
/// (an activation other than `gelu_new`, `n_inner` other than `4 n_embd`,
/// unscaled or per-layer scaled attention, untied embeddings, cross
/// attention); missing or malformed keys.
///
/// ```
/// use forge::hub::{gpt2_config, HfConfig};
/// let c = HfConfig::from_json(r#"{"model_type": "gpt2", "vocab_size": 8, "n_positions": 4,
///     "n_embd": 4, "n_layer": 1, "n_head": 2, "activation_function": "relu"}"#, "config.json").unwrap();
/// let e = gpt2_config(&c).unwrap_err();
/// assert!(e.to_string().contains("activation_function"), "{e}");
/// ```
pub fn gpt2_config(c: &HfConfig) -> Result<(GptConfig, f64)> {
    let kind = c.model_type()?;
    if kind != "gpt2" {
        return Err(ForgeError::unsupported(
            format!("model_type {kind:?}"),
            format!("{}: expected gpt2", c.origin().display()),
        ));
    }
    c.only(
        "activation_function",
        &[json!("gelu_new"), json!("gelu_pytorch_tanh")],
    )?;
    c.only("scale_attn_weights", &[json!(true)])?;
    c.only("scale_attn_by_inverse_layer_idx", &[json!(false)])?;
    c.only("add_cross_attention", &[json!(false)])?;
    c.only("tie_word_embeddings", &[json!(true)])?;
    let n_embd = c.usize("n_embd")?;
    if let Some(v) = c
        .get("n_inner")
        .filter(|v| v.as_u64() != Some(4 * n_embd as u64))
    {
        return Err(ForgeError::unsupported(
            format!("n_inner = {v}"),
            format!(
                "{}: forge's GPT-2 MLP is 4 n_embd = {} wide",
                c.origin().display(),
                4 * n_embd
            ),
        ));
    }
    let config = GptConfig {
        vocab_size: c.usize("vocab_size")?,
        block_size: c.usize("n_positions")?,
        n_layer: c.usize("n_layer")?,
        n_head: c.usize("n_head")?,
        n_embd,
        bias: true,
    };
    if config.n_head == 0 || !n_embd.is_multiple_of(config.n_head) {
        return Err(ForgeError::invalid(
            "n_head",
            format!("{} heads do not divide n_embd {n_embd}", config.n_head),
        ));
    }
    Ok((config, c.f64_or("layer_norm_epsilon", 1e-5)?))
}

/// Loads a Hugging Face GPT-2 folder (`config.json`, `model.safetensors` or
/// shards) into forge's [`Gpt`]: the `Conv1D` weights, stored `[in, out]`,
/// are transposed into `Linear`'s `[out, in]`; the head is tied to
/// `transformer.wte.weight` (a stored `lm_head.weight` must equal it).
///
/// # Errors
/// As [`gpt2_config`] and [`HfWeights`]; [`ForgeError::StateDict`] when a
/// tensor is missing, left over or of the wrong shape.
///
/// ```
/// use forge::hub::{load_gpt2, CausalLm};
/// use forge::prelude::*;
/// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/gpt2_tiny");
/// let gpt = load_gpt2::<f32>(dir).unwrap();
/// assert_eq!(gpt.logits(&Tensor::from_vec(vec![5, 6], &[1, 2])).shape(), &[1, 2, 300]);
/// ```
pub fn load_gpt2<E: Float>(dir: impl AsRef<Path>) -> Result<Gpt<E>> {
    let dir = dir.as_ref();
    let (config, eps) = gpt2_config(&HfConfig::from_dir(dir)?)?;
    let mut gpt = Gpt::<E>::new(config, &mut Rng::new(0));
    for ln in gpt
        .transformer
        .h
        .iter_mut()
        .flat_map(|b| [&mut b.ln_1, &mut b.ln_2])
        .chain([&mut gpt.transformer.ln_f])
    {
        ln.eps = eps;
    }
    let mut w = HfWeights::from_dir(dir)?;
    // Older checkpoints keep the attention's constant buffers.
    for i in 0..config.n_layer {
        w.discard(&format!("transformer.h.{i}.attn.bias"));
        w.discard(&format!("transformer.h.{i}.attn.masked_bias"));
    }
    let names: Vec<String> = w.names().map(String::from).collect();
    let mut dict = BTreeMap::new();
    for name in names {
        let t = w.take::<E>(&name)?;
        // Checkpoints saved from GPT2Model have no `transformer.` prefix.
        let key = if name.starts_with("transformer.") || name == "lm_head.weight" {
            name.clone()
        } else {
            format!("transformer.{name}")
        };
        let conv1d = [
            ".attn.c_attn.weight",
            ".attn.c_proj.weight",
            ".mlp.c_fc.weight",
            ".mlp.c_proj.weight",
        ];
        let t = if conv1d.iter().any(|s| key.ends_with(s)) && t.rank() == 2 {
            t.t()
        } else {
            t
        };
        dict.insert(key, t);
    }
    gpt.load_state_dict(&dict)?;
    Ok(gpt)
}

impl<E: Float> CausalLm<E> for Gpt<E> {
    fn vocab_size(&self) -> usize {
        self.config.vocab_size
    }

    fn max_positions(&self) -> usize {
        self.config.block_size
    }

    fn new_cache(&self) -> KvCache<E> {
        KvCache::new(self.config.n_layer)
    }

    fn forward_cached(
        &self,
        ids: &Tensor<i64>,
        valid: Option<&[bool]>,
        cache: &mut KvCache<E>,
    ) -> Tensor<E> {
        gpt_cached(self, ids, valid, cache, false)
    }

    fn forward_cached_last(
        &self,
        ids: &Tensor<i64>,
        valid: Option<&[bool]>,
        cache: &mut KvCache<E>,
    ) -> Tensor<E> {
        gpt_cached(self, ids, valid, cache, true)
    }
}

/// [`CausalLm::forward_cached`] for [`Gpt`], the head applied to the last
/// position only when `last`.
fn gpt_cached<E: Float>(
    gpt: &Gpt<E>,
    ids: &Tensor<i64>,
    valid: Option<&[bool]>,
    cache: &mut KvCache<E>,
    last: bool,
) -> Tensor<E> {
    {
        assert!(
            ids.rank() == 2,
            "Gpt: expected token ids [B, T], got {:?}",
            ids.shape()
        );
        let (b, t) = (ids.dim(0), ids.dim(1));
        let step = cache.begin(b, t, valid);
        let bs = gpt.config.block_size as i64;
        if let Some(&p) = step.positions.iter().max() {
            assert!(p < bs, "Gpt: position {p} is past block_size {bs}");
        }
        let tr = &gpt.transformer;
        let c = gpt.config.n_embd;
        let pos = Tensor::<i64>::from_vec(step.positions.clone(), &[b, t]);
        let mut x = tr.wte.forward(ids.clone()).add(&tr.wpe.forward(pos));
        for (i, block) in tr.h.iter().enumerate() {
            let qkv = block.attn.c_attn.forward(block.ln_1.forward(x.clone()));
            let heads = gpt.config.n_head;
            let q = split_heads(&qkv.narrow(-1, 0, c), heads);
            let k = split_heads(&qkv.narrow(-1, c, c), heads);
            let v = split_heads(&qkv.narrow(-1, 2 * c, c), heads);
            let (k, v) = cache.append(i, k, v);
            let y = grouped_attention(&q, &k, &v, &step.mask);
            x = x.add(&block.attn.c_proj.forward(y));
            x = x.add(&block.mlp.forward(block.ln_2.forward(x.clone())));
        }
        let x = if last { x.narrow(1, t - 1, 1) } else { x };
        tr.wte.attend(&tr.ln_f.forward(x))
    }
}
