//! [`HfTokenizer`]: a `tokenizer.json` through Hugging Face's `tokenizers`
//! crate (byte-level BPE, WordPiece, ... with their special tokens).

use crate::error::{ForgeError, Result};
use std::path::Path;

/// A tokenizer read from a `tokenizer.json`. Padding set in the file is
/// turned off (forge pads batches itself); truncation is kept.
///
/// ```
/// use forge::hub::HfTokenizer;
/// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/tok_wordpiece");
/// let tok = HfTokenizer::from_dir(dir).unwrap();
/// let ids = tok.encode("Hello world", true).unwrap();
/// assert_eq!(ids.first().copied(), tok.token_to_id("[CLS]"));
/// assert_eq!(tok.decode(&ids, true).unwrap(), "hello world");
/// ```
#[derive(Clone, Debug)]
pub struct HfTokenizer {
    inner: tokenizers::Tokenizer,
}

fn err(origin: &str, e: impl std::fmt::Display) -> ForgeError {
    ForgeError::format(origin, e.to_string())
}

impl HfTokenizer {
    /// Reads a `tokenizer.json` file.
    ///
    /// # Errors
    /// [`ForgeError::Io`] when it cannot be read, [`ForgeError::Format`]
    /// when the crate refuses it.
    ///
    /// ```
    /// assert!(forge::hub::HfTokenizer::from_file("/no/tokenizer.json").is_err());
    /// ```
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| ForgeError::io(path, e))?;
        let mut inner = tokenizers::Tokenizer::from_bytes(&bytes)
            .map_err(|e| err(&path.display().to_string(), e))?;
        inner.with_padding(None);
        Ok(HfTokenizer { inner })
    }

    /// Reads `dir/tokenizer.json`.
    ///
    /// # Errors
    /// As [`from_file`](Self::from_file).
    ///
    /// ```
    /// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/gpt2_tiny");
    /// assert!(forge::hub::HfTokenizer::from_dir(dir).is_ok());
    /// ```
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Self> {
        Self::from_file(dir.as_ref().join("tokenizer.json"))
    }

    /// The ids of `text`, with the special tokens of the file's
    /// post-processor (`[CLS]` ... `[SEP]`) when `add_special_tokens`.
    ///
    /// # Errors
    /// [`ForgeError::Format`] when the tokenizer fails.
    ///
    /// ```
    /// # let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/gpt2_tiny");
    /// let tok = forge::hub::HfTokenizer::from_dir(dir).unwrap();
    /// assert_eq!(tok.decode(&tok.encode("The fox", false).unwrap(), false).unwrap(), "The fox");
    /// ```
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<i64>> {
        let e = self
            .inner
            .encode(text, add_special_tokens)
            .map_err(|e| err("tokenizer", e))?;
        Ok(e.get_ids().iter().map(|&i| i64::from(i)).collect())
    }

    /// The text of `ids`, leaving out special tokens when `skip_special`.
    ///
    /// # Errors
    /// [`ForgeError::Format`] when an id is negative or too large, or the
    /// decoder fails.
    ///
    /// ```
    /// # let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/gpt2_tiny");
    /// let tok = forge::hub::HfTokenizer::from_dir(dir).unwrap();
    /// assert!(tok.decode(&[-1], false).is_err());
    /// ```
    pub fn decode(&self, ids: &[i64], skip_special: bool) -> Result<String> {
        let ids: Vec<u32> = ids
            .iter()
            .map(|&i| u32::try_from(i).map_err(|_| err("tokenizer", format!("token id {i}"))))
            .collect::<Result<_>>()?;
        self.inner
            .decode(&ids, skip_special)
            .map_err(|e| err("tokenizer", e))
    }

    /// The id of a token of the vocabulary (special tokens included).
    ///
    /// ```
    /// # let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/gpt2_tiny");
    /// let tok = forge::hub::HfTokenizer::from_dir(dir).unwrap();
    /// assert_eq!(tok.token_to_id("<|endoftext|>"), Some(0));
    /// ```
    pub fn token_to_id(&self, token: &str) -> Option<i64> {
        self.inner.token_to_id(token).map(i64::from)
    }

    /// The vocabulary's size, added tokens included.
    ///
    /// ```
    /// # let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/gpt2_tiny");
    /// let tok = forge::hub::HfTokenizer::from_dir(dir).unwrap();
    /// assert!(tok.vocab_size() <= 300);
    /// ```
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }
}
