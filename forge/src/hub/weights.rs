//! [`HfWeights`]: every tensor of a model folder, from `model.safetensors`
//! or from the shards `model.safetensors.index.json` lists.

use crate::error::{ForgeError, Result};
use crate::io::{read_safetensors, AnyTensor};
use crate::tensor::{DType, Float, Tensor};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The tensors of a Hugging Face model folder by their own names. Each
/// file is read once; a tensor whose stored type is the requested one is
/// handed over without a conversion.
///
/// ```
/// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/llama_gqa_tied");
/// let mut w = forge::hub::HfWeights::from_dir(dir).unwrap(); // sharded
/// let emb = w.take::<f64>("model.embed_tokens.weight").unwrap();
/// assert_eq!(emb.shape(), &[64, 16]);
/// assert!(w.take::<f64>("model.embed_tokens.weight").is_err()); // taken
/// ```
#[derive(Debug)]
pub struct HfWeights {
    tensors: BTreeMap<String, AnyTensor>,
    origin: PathBuf,
}

/// The single-file checkpoint's name.
const SINGLE: &str = "model.safetensors";
/// The index of a sharded checkpoint.
const INDEX: &str = "model.safetensors.index.json";

impl HfWeights {
    /// Reads `dir/model.safetensors`, or every shard named in
    /// `dir/model.safetensors.index.json`'s `weight_map` (each tensor must
    /// be in the shard the index names).
    ///
    /// # Errors
    /// [`ForgeError::Io`] when neither file exists or a file cannot be
    /// read; [`ForgeError::Format`] for a malformed index or safetensors
    /// file, or a tensor missing from its shard.
    ///
    /// ```
    /// assert!(forge::hub::HfWeights::from_dir("/no/such/folder").is_err());
    /// ```
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        let single = dir.join(SINGLE);
        let index = dir.join(INDEX);
        if single.exists() || !index.exists() {
            let data = read_safetensors(&single)?;
            return Ok(HfWeights {
                tensors: data.tensors,
                origin: single,
            });
        }
        let text = std::fs::read_to_string(&index).map_err(|e| ForgeError::io(&index, e))?;
        let fmt = |d: String| ForgeError::format(index.display().to_string(), d);
        let json: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| fmt(e.to_string()))?;
        let map = json
            .get("weight_map")
            .and_then(|m| m.as_object())
            .ok_or_else(|| fmt("no `weight_map` object".into()))?;
        let mut by_file: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (name, file) in map {
            let file = file
                .as_str()
                .filter(|f| !f.contains('/') && !f.contains('\\') && !f.starts_with('.'))
                .ok_or_else(|| fmt(format!("`{name}` maps to no plain file name")))?;
            by_file
                .entry(file.to_string())
                .or_default()
                .insert(name.clone());
        }
        let mut tensors = BTreeMap::new();
        for (file, names) in by_file {
            let path = dir.join(&file);
            let mut data = read_safetensors(&path)?;
            for name in names {
                let t = data.tensors.remove(&name).ok_or_else(|| {
                    ForgeError::format(
                        path.display().to_string(),
                        format!("`{name}` is listed in {INDEX} but not stored here"),
                    )
                })?;
                tensors.insert(name, t);
            }
        }
        Ok(HfWeights {
            tensors,
            origin: index,
        })
    }

    /// The names not taken yet.
    ///
    /// ```
    /// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/bert_pooler");
    /// let w = forge::hub::HfWeights::from_dir(dir).unwrap();
    /// assert!(w.names().any(|n| n == "pooler.dense.weight"));
    /// ```
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(String::as_str)
    }

    /// Whether `name` is there (and not taken).
    ///
    /// ```
    /// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/gpt2_tiny");
    /// let w = forge::hub::HfWeights::from_dir(dir).unwrap();
    /// assert!(!w.contains("lm_head.weight")); // tied: not stored
    /// ```
    pub fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    /// Removes `name` and returns it as `Tensor<E>` (converted when stored
    /// in another floating-point type).
    ///
    /// # Errors
    /// [`ForgeError::MissingKey`] when absent; [`ForgeError::DType`] when
    /// it is not a floating-point tensor.
    ///
    /// ```
    /// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/gpt2_tiny");
    /// let mut w = forge::hub::HfWeights::from_dir(dir).unwrap();
    /// assert_eq!(w.take::<f32>("transformer.wpe.weight").unwrap().shape(), &[24, 16]);
    /// ```
    pub fn take<E: Float>(&mut self, name: &str) -> Result<Tensor<E>> {
        let t = self
            .tensors
            .remove(name)
            .ok_or_else(|| ForgeError::missing(name, self.origin.display().to_string()))?;
        if let Some(same) = t.get::<E>() {
            return Ok(same);
        }
        match t {
            AnyTensor::F32(_) | AnyTensor::F64(_) | AnyTensor::F16(_) | AnyTensor::BF16(_) => {
                Ok(t.to_float::<E>())
            }
            other => Err(ForgeError::DType {
                name: name.to_string(),
                expected: vec![DType::F32, DType::F64, DType::F16, DType::BF16],
                found: other.dtype(),
            }),
        }
    }

    /// Drops `name` if present (buffers such as BERT's `position_ids` that
    /// forge recomputes).
    ///
    /// ```
    /// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/gpt2_tiny");
    /// let mut w = forge::hub::HfWeights::from_dir(dir).unwrap();
    /// w.discard("not.there");
    /// ```
    pub fn discard(&mut self, name: &str) {
        self.tensors.remove(name);
    }

    /// An error when tensors are left over: a checkpoint with parts forge
    /// does not know is refused rather than half loaded.
    ///
    /// # Errors
    /// [`ForgeError::Unsupported`] naming the tensors left.
    ///
    /// ```
    /// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/gpt2_tiny");
    /// let w = forge::hub::HfWeights::from_dir(dir).unwrap();
    /// assert!(w.finish().is_err()); // nothing was taken
    /// ```
    pub fn finish(self) -> Result<()> {
        if self.tensors.is_empty() {
            return Ok(());
        }
        let names: Vec<&str> = self.names().collect();
        Err(ForgeError::unsupported(
            format!("tensors {}", names.join(", ")),
            format!(
                "{}: forge's architecture for this model_type has no place for them",
                self.origin.display()
            ),
        ))
    }
}
