//! Saving and loading optimizers and schedules: a versioned, compact binary
//! file (postcard), written atomically, read as hostile input.
//!
//! Layout: the 8 magic bytes `FORGEOPT`, a little-endian `u32` format
//! version (currently 1), then postcard: the kind string (`Adam<f32>`,
//! `Schedule`), then the value. Reading checks the magic, refuses newer
//! versions with [`ForgeError::Version`], decodes from the byte slice
//! (postcard never reads past it, and serde caps any preallocation, so a
//! corrupt length cannot cause a huge allocation), refuses trailing bytes,
//! and validates the value (buffer sizes against shapes, hyperparameter
//! ranges) before returning it.

use super::optimizer::{Optimizer, UpdateRule};
use super::schedule::{LrScheduler, Schedule};
use crate::tensor::Float;
use crate::{ForgeError, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::path::Path;

/// The magic bytes that start every optimizer or schedule file.
pub const MAGIC: &[u8; 8] = b"FORGEOPT";
/// The format version this build writes and the newest it reads.
pub const FORMAT_VERSION: u32 = 1;

/// Values saved in forge's optimizer-state format: every [`Optimizer`] and
/// [`Schedule`].
///
/// ```
/// use forge::optim::{Adam, Persist};
/// let opt = Adam::<f32>::new(1e-3).betas(0.9, 0.95);
/// let back = Adam::<f32>::from_bytes(&opt.to_bytes().unwrap()).unwrap();
/// assert_eq!(back.adam_config().beta2, 0.95);
/// ```
pub trait Persist: Serialize + DeserializeOwned {
    /// The kind written into the file (`Adam<f32>`), checked on load.
    fn kind() -> String;

    /// Checks a decoded value before it is handed out.
    ///
    /// # Errors
    /// [`ForgeError::State`] or [`ForgeError::Invalid`] for inconsistent
    /// or out-of-range contents.
    fn check(&self) -> Result<()>;

    /// The file's bytes.
    ///
    /// # Errors
    /// [`ForgeError::Format`] if serialization fails.
    ///
    /// ```
    /// use forge::optim::{Persist, Sgd};
    /// let b = Sgd::<f32>::new(0.1).to_bytes().unwrap();
    /// assert_eq!(&b[..8], b"FORGEOPT");
    /// ```
    fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        let body = postcard::to_allocvec(&(Self::kind(), self))
            .map_err(|e| ForgeError::Format(format!("cannot encode {}: {e}", Self::kind())))?;
        out.extend_from_slice(&body);
        Ok(out)
    }

    /// Decodes and validates a file's bytes.
    ///
    /// # Errors
    /// [`ForgeError::Format`] for bad magic, truncated or corrupt bytes, or
    /// trailing bytes; [`ForgeError::Version`] for a newer format;
    /// [`ForgeError::State`] for a file of another kind or inconsistent
    /// state; [`ForgeError::Invalid`] for out-of-range settings.
    ///
    /// ```
    /// use forge::optim::{Persist, Sgd};
    /// assert!(Sgd::<f32>::from_bytes(b"FORGEOPT").is_err());
    /// ```
    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let body = check_header(bytes, &Self::kind())?;
        let (kind, rest): (String, &[u8]) = postcard::take_from_bytes(body)
            .map_err(|e| ForgeError::Format(format!("optimizer file: corrupt kind: {e}")))?;
        if kind != Self::kind() {
            return Err(ForgeError::State(format!(
                "the file holds {kind}, not {}",
                Self::kind()
            )));
        }
        let (value, rest): (Self, &[u8]) = postcard::take_from_bytes(rest)
            .map_err(|e| ForgeError::Format(format!("{kind} file: corrupt or truncated: {e}")))?;
        if !rest.is_empty() {
            return Err(ForgeError::Format(format!(
                "{kind} file: {} trailing bytes",
                rest.len()
            )));
        }
        value.check()?;
        Ok(value)
    }

    /// Writes the value to `path` atomically (temporary file, `fsync`,
    /// rename): a crash leaves the previous file intact.
    ///
    /// # Errors
    /// [`ForgeError::Io`] with the path.
    ///
    /// ```
    /// use forge::optim::{Persist, Sgd};
    /// let path = std::env::temp_dir().join(format!("forge-persist-doc-{}.opt", std::process::id()));
    /// Sgd::<f32>::new(0.1).momentum(0.9).save(&path).unwrap();
    /// assert_eq!(Sgd::<f32>::load(&path).unwrap().rule().momentum, 0.9);
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        crate::io::atomic_write(path, &self.to_bytes()?)
    }

    /// Reads a value saved with [`save`](Self::save).
    ///
    /// # Errors
    /// [`ForgeError::Io`] with the path, or any error of
    /// [`from_bytes`](Self::from_bytes).
    ///
    /// ```
    /// use forge::optim::{Adam, Persist};
    /// let missing = std::env::temp_dir().join("forge-no-such-file.opt");
    /// assert!(matches!(Adam::<f32>::load(&missing), Err(forge::ForgeError::Io { .. })));
    /// ```
    fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| ForgeError::io(path, e))?;
        Self::from_bytes(&bytes)
    }
}

/// Checks magic and version; returns the postcard body.
fn check_header<'a>(bytes: &'a [u8], kind: &str) -> Result<&'a [u8]> {
    if bytes.len() < 12 {
        return Err(ForgeError::Format(format!(
            "{kind} file: {} bytes, shorter than the 12-byte header",
            bytes.len()
        )));
    }
    if &bytes[..8] != MAGIC {
        return Err(ForgeError::Format(format!(
            "{kind} file: bad magic bytes (not a forge optimizer/schedule file)"
        )));
    }
    let version = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    if version > FORMAT_VERSION {
        return Err(ForgeError::Version {
            what: format!("{kind} file"),
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    if version == 0 {
        return Err(ForgeError::Format(format!("{kind} file: format version 0")));
    }
    Ok(&bytes[12..])
}

impl<R: UpdateRule, E: Float + Serialize + DeserializeOwned> Persist for Optimizer<R, E> {
    fn kind() -> String {
        format!("{}<{}>", R::NAME, std::any::type_name::<E>())
    }

    fn check(&self) -> Result<()> {
        self.check_loaded()
    }
}

impl Persist for Schedule {
    fn kind() -> String {
        "Schedule".into()
    }

    fn check(&self) -> Result<()> {
        self.validate()
    }
}

impl<R: UpdateRule, E: Float + Serialize + DeserializeOwned> Optimizer<R, E> {
    /// Takes the learning rate, weight decay, hyperparameters and all
    /// per-parameter state from a saved file, keeping this optimizer's
    /// parameter groups. Use it when the groups were built with closures
    /// ([`ParamGroup::matching`](crate::optim::ParamGroup::matching)),
    /// which a file cannot store.
    ///
    /// # Errors
    /// As [`Persist::load`]; on error `self` is unchanged.
    ///
    /// ```
    /// use forge::optim::{ParamGroup, Persist, Sgd};
    /// let path = std::env::temp_dir().join(format!("forge-restore-doc-{}.opt", std::process::id()));
    /// let make = || Sgd::<f32>::new(0.1).with_group(ParamGroup::matching(|p| p.ends_with("bias")).weight_decay(0.0));
    /// let mut saved = make();
    /// saved.set_lr(0.05);
    /// saved.save(&path).unwrap();
    /// let mut opt = make();
    /// opt.restore(&path).unwrap();
    /// assert_eq!(opt.lr(), 0.05);
    /// assert!(opt.groups()[0].matcher.matches("fc.bias"));
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn restore(&mut self, path: impl AsRef<Path>) -> Result<()> {
        let loaded = Self::load(path)?;
        self.lr = loaded.lr;
        self.weight_decay = loaded.weight_decay;
        self.rule = loaded.rule;
        self.state = loaded.state;
        Ok(())
    }
}
