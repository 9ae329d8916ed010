//! [`SentenceEmbedder`]: sentence embeddings from a BERT encoder, pooled
//! as a sentence-transformers folder says.

use super::bert::Bert;
use super::tokenizer::HfTokenizer;
use crate::error::{ForgeError, Result};
use crate::no_grad;
use crate::tensor::{Float, Tensor};
use std::path::Path;

/// How token vectors become one sentence vector.
///
/// ```
/// assert_ne!(forge::hub::Pooling::Mean, forge::hub::Pooling::Cls);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pooling {
    /// The mean over the real tokens (padding left out).
    Mean,
    /// The first token's vector (`[CLS]`).
    Cls,
    /// The largest value of each feature over the real tokens.
    Max,
}

/// Pools a last hidden state `[B, T, H]` over `mask` (`[B * T]`, false for
/// padding) into `[B, H]`.
///
/// # Panics
/// When `mask` does not have `B * T` entries or a row has no real token
/// (mean and max).
///
/// ```
/// use forge::hub::{pool, Pooling};
/// use forge::Tensor;
/// let h = Tensor::<f64>::from_vec(vec![1.0, 3.0, 100.0], &[1, 3, 1]);
/// let mask = [true, true, false];
/// assert_eq!(pool(&h, &mask, Pooling::Mean).to_vec(), vec![2.0]);
/// assert_eq!(pool(&h, &mask, Pooling::Max).to_vec(), vec![3.0]);
/// assert_eq!(pool(&h, &mask, Pooling::Cls).to_vec(), vec![1.0]);
/// ```
pub fn pool<E: Float>(hidden: &Tensor<E>, mask: &[bool], mode: Pooling) -> Tensor<E> {
    let (b, t, h) = (hidden.dim(0), hidden.dim(1), hidden.dim(2));
    assert!(
        mask.len() == b * t,
        "pool: {} mask entries for a hidden state of shape {:?}",
        mask.len(),
        hidden.shape()
    );
    let data = hidden.as_slice();
    let mut out = vec![E::zero(); b * h];
    for r in 0..b {
        let rows = (0..t).filter(|&i| mask[r * t + i]);
        let o = &mut out[r * h..(r + 1) * h];
        match mode {
            Pooling::Cls => o.copy_from_slice(&data[r * t * h..(r * t + 1) * h]),
            Pooling::Mean => {
                let mut acc = vec![0f64; h];
                let mut n = 0usize;
                for i in rows {
                    n += 1;
                    for (a, &x) in acc
                        .iter_mut()
                        .zip(&data[(r * t + i) * h..(r * t + i + 1) * h])
                    {
                        *a += x.to_f64();
                    }
                }
                assert!(n > 0, "pool: sequence {r} has no real token");
                for (o, a) in o.iter_mut().zip(acc) {
                    *o = E::from_f64(a / n as f64);
                }
            }
            Pooling::Max => {
                let mut acc = vec![f64::NEG_INFINITY; h];
                for i in rows {
                    for (a, &x) in acc
                        .iter_mut()
                        .zip(&data[(r * t + i) * h..(r * t + i + 1) * h])
                    {
                        *a = a.max(x.to_f64());
                    }
                }
                assert!(
                    acc.iter().all(|a| a.is_finite()),
                    "pool: sequence {r} has no real token"
                );
                for (o, a) in o.iter_mut().zip(acc) {
                    *o = E::from_f64(a);
                }
            }
        }
    }
    Tensor::from_vec(out, &[b, h])
}

/// Divides each row of `[B, H]` by its L2 norm (at least 1e-12, as
/// PyTorch's `F.normalize`).
///
/// ```
/// let x = forge::Tensor::<f64>::from_vec(vec![3.0, 4.0], &[1, 2]);
/// assert_eq!(forge::hub::l2_normalize(&x).to_vec(), vec![0.6, 0.8]);
/// ```
pub fn l2_normalize<E: Float>(x: &Tensor<E>) -> Tensor<E> {
    let n = x.vector_norm(2.0, &[-1], true).clamp(Some(1e-12), None);
    x.div(&n)
}

/// A sentence encoder: a [`Bert`], its tokenizer and the pooling of a
/// sentence-transformers folder (`modules.json`, `1_Pooling/config.json`,
/// a `Normalize` module; mean pooling without normalisation when the
/// folder has none of them).
///
/// ```
/// use forge::hub::{Pooling, SentenceEmbedder};
/// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/bert_pooler");
/// let tok = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/tok_wordpiece/tokenizer.json");
/// let mut e = SentenceEmbedder::<f32>::from_parts(dir, tok).unwrap();
/// e.normalize = true;
/// let v = e.embed(&["hello world", "a"]).unwrap();
/// assert_eq!(v.shape(), &[2, 16]);
/// assert_eq!(e.pooling, Pooling::Mean);
/// ```
#[derive(Clone, Debug)]
pub struct SentenceEmbedder<E: Float = f32> {
    /// The encoder.
    pub model: Bert<E>,
    /// Its tokenizer.
    pub tokenizer: HfTokenizer,
    /// The pooling.
    pub pooling: Pooling,
    /// Whether embeddings are divided by their L2 norm.
    pub normalize: bool,
    /// Sentences are cut to this many tokens (special tokens included).
    pub max_seq_length: usize,
}

fn read_json(path: &Path) -> Result<Option<serde_json::Value>> {
    if !path.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(path).map_err(|e| ForgeError::io(path, e))?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| ForgeError::format(path.display().to_string(), e.to_string()))
}

impl<E: Float> SentenceEmbedder<E> {
    /// Loads a sentence-transformers (or plain Hugging Face BERT) folder:
    /// the model and `tokenizer.json` from `dir`, the pooling from
    /// `modules.json` when present.
    ///
    /// # Errors
    /// As [`Bert::from_dir`] and [`HfTokenizer::from_dir`];
    /// [`ForgeError::Unsupported`] for a module or pooling mode forge does
    /// not implement (a `Dense` layer, `mean_sqrt_len_tokens`, ...).
    ///
    /// ```
    /// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/bert_pooler");
    /// assert!(forge::hub::SentenceEmbedder::<f32>::from_dir(dir).is_err()); // no tokenizer.json
    /// ```
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        Self::from_parts(dir, dir.join("tokenizer.json"))
    }

    /// As [`from_dir`](Self::from_dir), with the tokenizer from another file.
    ///
    /// # Errors
    /// As [`from_dir`](Self::from_dir).
    ///
    /// ```
    /// assert!(forge::hub::SentenceEmbedder::<f32>::from_parts("/no", "/no/t.json").is_err());
    /// ```
    pub fn from_parts(dir: impl AsRef<Path>, tokenizer: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        let model = Bert::from_dir(dir)?;
        let tokenizer = HfTokenizer::from_file(tokenizer)?;
        let mut pooling = Pooling::Mean;
        let mut normalize = false;
        let mut max_seq_length = model.config.max_position_embeddings;
        if let Some(modules) = read_json(&dir.join("modules.json"))? {
            let list = modules.as_array().cloned().unwrap_or_default();
            for m in list {
                let kind = m.get("type").and_then(|t| t.as_str()).unwrap_or("");
                let sub = m.get("path").and_then(|t| t.as_str()).unwrap_or("");
                match kind.rsplit('.').next().unwrap_or("") {
                    "Transformer" => {}
                    "Normalize" => normalize = true,
                    "Pooling" => pooling = read_pooling(&dir.join(sub).join("config.json"))?,
                    other => {
                        return Err(ForgeError::unsupported(
                            format!("sentence-transformers module {other:?}"),
                            format!(
                                "{}: forge implements Transformer, Pooling and Normalize",
                                dir.join("modules.json").display()
                            ),
                        ))
                    }
                }
            }
        }
        let st = read_json(&dir.join("sentence_bert_config.json"))?;
        if let Some(n) = st.and_then(|c| c.get("max_seq_length").and_then(|n| n.as_u64())) {
            max_seq_length = max_seq_length.min(n as usize);
        }
        Ok(SentenceEmbedder {
            model,
            tokenizer,
            pooling,
            normalize,
            max_seq_length,
        })
    }

    /// The embeddings `[N, hidden]` of `sentences`, in order (batched with
    /// padding; each equals the sentence embedded alone, to rounding).
    ///
    /// # Errors
    /// When the tokenizer fails.
    ///
    /// ```
    /// # let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/bert_pooler");
    /// # let tok = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/tok_wordpiece/tokenizer.json");
    /// let e = forge::hub::SentenceEmbedder::<f64>::from_parts(dir, tok).unwrap();
    /// assert_eq!(e.embed(&[]).unwrap().shape(), &[0, 16]);
    /// ```
    pub fn embed(&self, sentences: &[&str]) -> Result<Tensor<E>> {
        let h = self.model.config.hidden_size;
        if sentences.is_empty() {
            return Ok(Tensor::zeros(&[0, h]));
        }
        let mut rows = Vec::new();
        for s in sentences {
            let mut ids = self.tokenizer.encode(s, true)?;
            ids.truncate(self.max_seq_length.max(1));
            if ids.is_empty() {
                ids.push(0);
            }
            rows.push(ids);
        }
        let t = rows.iter().map(Vec::len).max().unwrap_or(1);
        let b = rows.len();
        let mut ids = Vec::with_capacity(b * t);
        let mut mask = Vec::with_capacity(b * t);
        for r in &rows {
            ids.extend(r.iter().copied().chain(std::iter::repeat_n(0, t - r.len())));
            mask.extend(
                std::iter::repeat_n(true, r.len()).chain(std::iter::repeat_n(false, t - r.len())),
            );
        }
        let out = no_grad(|| {
            let m = Tensor::from_vec(mask.clone(), &[b, t]);
            let hidden = self
                .model
                .encode(&Tensor::from_vec(ids, &[b, t]), Some(&m), None);
            pool(&hidden, &mask, self.pooling)
        });
        Ok(if self.normalize {
            l2_normalize(&out)
        } else {
            out
        })
    }

    /// [`embed`](Self::embed)'s embeddings rounded to bf16 (to nearest,
    /// ties to even, as PyTorch's `.to(torch.bfloat16)`): half the memory
    /// for a vector index, about three significant digits. The encoder and
    /// the pooling run in `E`; only the result is rounded.
    ///
    /// # Errors
    /// As [`embed`](Self::embed).
    ///
    /// ```
    /// # let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/bert_pooler");
    /// # let tok = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/tok_wordpiece/tokenizer.json");
    /// let e = forge::hub::SentenceEmbedder::<f32>::from_parts(dir, tok).unwrap();
    /// let v = e.embed_bf16(&["hello world"]).unwrap();
    /// let f = e.embed(&["hello world"]).unwrap();
    /// assert_eq!(v.shape(), f.shape());
    /// // each value is the f32 one to bf16's 8-bit significand
    /// assert!(v.as_slice().iter().zip(f.as_slice()).all(|(b, x)| (b.to_f32() - x).abs() <= x.abs() / 256.0));
    /// ```
    pub fn embed_bf16(&self, sentences: &[&str]) -> Result<Tensor<half::bf16>> {
        Ok(self.embed(sentences)?.cast::<half::bf16>())
    }
}

fn read_pooling(path: &Path) -> Result<Pooling> {
    let c = read_json(path)?
        .ok_or_else(|| ForgeError::missing("pooling config", path.display().to_string()))?;
    let on = |k: &str| c.get(k).and_then(|v| v.as_bool()).unwrap_or(false);
    let modes: Vec<(&str, Pooling)> = [
        ("pooling_mode_mean_tokens", Pooling::Mean),
        ("pooling_mode_cls_token", Pooling::Cls),
        ("pooling_mode_max_tokens", Pooling::Max),
    ]
    .into_iter()
    .filter(|(k, _)| on(k))
    .collect();
    for k in [
        "pooling_mode_mean_sqrt_len_tokens",
        "pooling_mode_weightedmean_tokens",
        "pooling_mode_lasttoken",
    ] {
        if on(k) {
            return Err(ForgeError::unsupported(
                k,
                format!("{}: forge pools by mean, cls or max", path.display()),
            ));
        }
    }
    match modes.as_slice() {
        [(_, p)] => Ok(*p),
        _ => Err(ForgeError::unsupported(
            "pooling modes",
            format!(
                "{}: exactly one of mean, cls and max must be on",
                path.display()
            ),
        )),
    }
}
