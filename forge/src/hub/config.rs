//! [`HfConfig`]: a checkpoint's `config.json`, read with errors that name
//! the key.

use crate::error::{ForgeError, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The `config.json` of a Hugging Face model folder, with typed getters
/// whose errors name the file and the key.
///
/// ```
/// use forge::hub::HfConfig;
/// let c = HfConfig::from_json(r#"{"model_type": "gpt2", "n_embd": 16}"#, "config.json").unwrap();
/// assert_eq!(c.model_type().unwrap(), "gpt2");
/// assert_eq!(c.usize("n_embd").unwrap(), 16);
/// assert!(c.usize("n_head").is_err());
/// ```
#[derive(Clone, Debug)]
pub struct HfConfig {
    value: Value,
    origin: PathBuf,
}

impl HfConfig {
    /// Reads `dir/config.json`.
    ///
    /// # Errors
    /// [`ForgeError::Io`] when the file cannot be read,
    /// [`ForgeError::Format`] when it is not a JSON object.
    ///
    /// ```
    /// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/gpt2_tiny");
    /// let c = forge::hub::HfConfig::from_dir(dir).unwrap();
    /// assert_eq!(c.model_type().unwrap(), "gpt2");
    /// ```
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Self> {
        let path = dir.as_ref().join("config.json");
        let text = std::fs::read_to_string(&path).map_err(|e| ForgeError::io(&path, e))?;
        Self::from_json(&text, path)
    }

    /// Parses the text of a `config.json`; `origin` names it in errors.
    ///
    /// # Errors
    /// [`ForgeError::Format`] when the text is not a JSON object.
    ///
    /// ```
    /// assert!(forge::hub::HfConfig::from_json("[1]", "x.json").is_err());
    /// ```
    pub fn from_json(text: &str, origin: impl Into<PathBuf>) -> Result<Self> {
        let origin = origin.into();
        let value: Value = serde_json::from_str(text)
            .map_err(|e| ForgeError::format(origin.display().to_string(), e.to_string()))?;
        if !value.is_object() {
            return Err(ForgeError::format(
                origin.display().to_string(),
                "expected a JSON object",
            ));
        }
        Ok(HfConfig { value, origin })
    }

    /// The raw value of `key` (`None` when absent or `null`).
    ///
    /// ```
    /// let c = forge::hub::HfConfig::from_json(r#"{"a": null, "b": 1}"#, "c").unwrap();
    /// assert!(c.get("a").is_none() && c.get("b").is_some());
    /// ```
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.value.get(key).filter(|v| !v.is_null())
    }

    fn bad(&self, key: &str, what: &str) -> ForgeError {
        ForgeError::invalid(
            key,
            format!("{}: `{key}` must be {what}", self.origin.display()),
        )
    }

    /// `model_type`.
    ///
    /// # Errors
    /// [`ForgeError::MissingKey`] when absent, [`ForgeError::Invalid`] when
    /// not a string.
    ///
    /// ```
    /// let c = forge::hub::HfConfig::from_json(r#"{"model_type": "bert"}"#, "c").unwrap();
    /// assert_eq!(c.model_type().unwrap(), "bert");
    /// ```
    pub fn model_type(&self) -> Result<&str> {
        self.str("model_type")
    }

    /// A required string.
    ///
    /// # Errors
    /// [`ForgeError::MissingKey`] when absent, [`ForgeError::Invalid`] when
    /// not a string.
    ///
    /// ```
    /// let c = forge::hub::HfConfig::from_json(r#"{"act": "gelu"}"#, "c").unwrap();
    /// assert_eq!(c.str("act").unwrap(), "gelu");
    /// ```
    pub fn str(&self, key: &str) -> Result<&str> {
        match self.get(key) {
            None => Err(self.missing(key)),
            Some(v) => v.as_str().ok_or_else(|| self.bad(key, "a string")),
        }
    }

    fn missing(&self, key: &str) -> ForgeError {
        ForgeError::missing(key, self.origin.display().to_string())
    }

    /// A required non-negative integer.
    ///
    /// # Errors
    /// [`ForgeError::MissingKey`] when absent, [`ForgeError::Invalid`] when
    /// not a non-negative integer.
    ///
    /// ```
    /// let c = forge::hub::HfConfig::from_json(r#"{"n": 3, "x": -1}"#, "c").unwrap();
    /// assert_eq!(c.usize("n").unwrap(), 3);
    /// assert!(c.usize("x").is_err());
    /// ```
    pub fn usize(&self, key: &str) -> Result<usize> {
        self.usize_or(key, None)
    }

    /// An optional non-negative integer, `default` when absent or `null`.
    ///
    /// # Errors
    /// [`ForgeError::Invalid`] when present but not a non-negative integer.
    ///
    /// ```
    /// let c = forge::hub::HfConfig::from_json(r#"{"n": null}"#, "c").unwrap();
    /// assert_eq!(c.usize_or("n", Some(4)).unwrap(), 4);
    /// ```
    pub fn usize_or(&self, key: &str, default: Option<usize>) -> Result<usize> {
        match self.get(key) {
            None => default.ok_or_else(|| self.missing(key)),
            Some(v) => v
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| self.bad(key, "a non-negative integer")),
        }
    }

    /// An optional number, `default` when absent or `null`.
    ///
    /// # Errors
    /// [`ForgeError::Invalid`] when present but not a finite number.
    ///
    /// ```
    /// let c = forge::hub::HfConfig::from_json(r#"{"eps": 1e-5}"#, "c").unwrap();
    /// assert_eq!(c.f64_or("eps", 1e-12).unwrap(), 1e-5);
    /// assert_eq!(c.f64_or("other", 1e-12).unwrap(), 1e-12);
    /// ```
    pub fn f64_or(&self, key: &str, default: f64) -> Result<f64> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_f64()
                .filter(|x| x.is_finite())
                .ok_or_else(|| self.bad(key, "a finite number")),
        }
    }

    /// An optional boolean, `default` when absent or `null`.
    ///
    /// # Errors
    /// [`ForgeError::Invalid`] when present but not a boolean.
    ///
    /// ```
    /// let c = forge::hub::HfConfig::from_json(r#"{"tie_word_embeddings": false}"#, "c").unwrap();
    /// assert!(!c.bool_or("tie_word_embeddings", true).unwrap());
    /// ```
    pub fn bool_or(&self, key: &str, default: bool) -> Result<bool> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.as_bool().ok_or_else(|| self.bad(key, "true or false")),
        }
    }

    /// The end-of-sequence ids (`eos_token_id`: a number or a list; empty
    /// when absent).
    ///
    /// ```
    /// let c = forge::hub::HfConfig::from_json(r#"{"eos_token_id": [2, 7]}"#, "c").unwrap();
    /// assert_eq!(c.eos_token_ids(), vec![2, 7]);
    /// ```
    pub fn eos_token_ids(&self) -> Vec<i64> {
        match self.get("eos_token_id") {
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_i64).collect(),
            Some(v) => v.as_i64().into_iter().collect(),
            None => Vec::new(),
        }
    }

    /// An error when `key` is present with a value other than the ones
    /// forge implements (`allowed`, compared as JSON; absent or `null`
    /// passes).
    ///
    /// # Errors
    /// [`ForgeError::Unsupported`] naming the key and its value.
    ///
    /// ```
    /// let c = forge::hub::HfConfig::from_json(r#"{"act": "relu"}"#, "c").unwrap();
    /// assert!(c.only("act", &[serde_json::json!("gelu")]).is_err());
    /// assert!(c.only("other", &[serde_json::json!("gelu")]).is_ok());
    /// ```
    pub fn only(&self, key: &str, allowed: &[Value]) -> Result<()> {
        match self.get(key) {
            Some(v) if !allowed.contains(v) => Err(ForgeError::unsupported(
                format!("{key} = {v}"),
                format!(
                    "{}: forge implements {key} = {}",
                    self.origin.display(),
                    allowed
                        .iter()
                        .map(Value::to_string)
                        .collect::<Vec<_>>()
                        .join(" or ")
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Where this configuration was read from.
    ///
    /// ```
    /// let c = forge::hub::HfConfig::from_json("{}", "a/config.json").unwrap();
    /// assert!(c.origin().ends_with("config.json"));
    /// ```
    pub fn origin(&self) -> &Path {
        &self.origin
    }
}
