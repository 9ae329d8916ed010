//! Hugging Face checkpoints by their own names: GPT-2 (into forge's own
//! [`Gpt`](crate::models::gpt::Gpt)), Llama-family decoders ([`Llama`]) and
//! BERT encoders ([`Bert`]) from a downloaded folder (`config.json`,
//! `model.safetensors` or its shards), `tokenizer.json` tokenizers
//! ([`HfTokenizer`]), generation with a [`KvCache`] ([`generate`]) and
//! sentence embeddings ([`SentenceEmbedder`]). The user guide's "Hugging
//! Face checkpoints" chapter shows each in a few lines.
//!
//! ```
//! use forge::hub::{generate, load_causal_lm, GenerateOptions, Flow};
//! let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/llama_gqa_tied");
//! let model = load_causal_lm::<f32>(dir).unwrap();
//! let opts = GenerateOptions { max_new_tokens: 3, ..Default::default() };
//! let new = generate(model.as_ref(), &[vec![1, 5, 9]], &opts, |_, _| Flow::Continue);
//! assert_eq!(new[0].len(), 3);
//! ```

mod bert;
mod bert_infer;
mod cache;
mod causal;
mod config;
mod embed;
mod generate;
mod gpt2;
mod llama;
mod text;
mod tokenizer;
mod weights;

pub use bert::{
    Bert, BertAttention, BertConfig, BertEmbeddings, BertEncoder, BertIntermediate, BertLayer,
    BertOutput, BertPooler, BertSelfAttention,
};
pub use cache::KvCache;
pub use causal::CausalLm;
pub use config::HfConfig;
pub use embed::{l2_normalize, pool, Pooling, SentenceEmbedder};
pub use generate::{generate, Flow, GenerateOptions, Sampling};
pub use gpt2::{gpt2_config, load_gpt2};
pub use llama::{Llama, LlamaAttention, LlamaConfig, LlamaLayer, LlamaMlp, LlamaModel};
pub use text::{generate_text, Generated};
pub use tokenizer::HfTokenizer;
pub use weights::HfWeights;

use crate::error::{ForgeError, Result};
use crate::tensor::Float;
use std::path::Path;

/// Loads the causal language model of a Hugging Face folder, chosen by its
/// `model_type`: `gpt2` (as forge's [`Gpt`](crate::models::gpt::Gpt)),
/// `llama`, `qwen2` or `mistral` (as [`Llama`]).
///
/// # Errors
/// [`ForgeError::Unsupported`] naming any other `model_type`; the errors
/// of the family's loader.
///
/// ```
/// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/bert_pooler");
/// let e = forge::hub::load_causal_lm::<f32>(dir).err().unwrap();
/// assert!(e.to_string().contains("\"bert\""), "{e}");
/// ```
pub fn load_causal_lm<E: Float>(
    dir: impl AsRef<Path>,
) -> Result<Box<dyn CausalLm<E> + Send + Sync>> {
    let dir = dir.as_ref();
    let c = HfConfig::from_dir(dir)?;
    match c.model_type()? {
        "gpt2" => Ok(Box::new(load_gpt2::<E>(dir)?)),
        "llama" | "qwen2" | "mistral" => Ok(Box::new(Llama::<E>::from_dir(dir)?)),
        other => Err(ForgeError::unsupported(
            format!("model_type {other:?}"),
            format!(
                "{}: forge's causal models are gpt2, llama, qwen2 and mistral",
                c.origin().display()
            ),
        )),
    }
}
