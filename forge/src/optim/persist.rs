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
//! ranges, step counters that can still advance, finite buffers) before
//! returning it; every refusal names the field and the value.
//!
//! In memory each rule keeps a typed state struct
//! ([`AdamState`](crate::optim::AdamState), ...); in the file a parameter's
//! state is `(step, shape, [(buffer name, values)])` with PyTorch's buffer
//! names, so the layout does not depend on the struct and version-1 files
//! written before the typed states load unchanged.

use super::group::ParamGroup;
use super::optimizer::{Optimizer, UpdateRule};
use super::schedule::{LrScheduler, Schedule};
use super::state::RuleState;
use crate::tensor::Float;
use crate::{ForgeError, Result};
use serde::de::DeserializeOwned;
use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};
use std::collections::BTreeMap;
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
pub trait Persist: Serialize + Sized {
    /// What the file holds, decoded before it is checked.
    type Stored: DeserializeOwned;

    /// The kind written into the file (`Adam<f32>`), checked on load.
    fn kind() -> String;

    /// Checks a decoded value and turns it into `Self`.
    ///
    /// # Errors
    /// [`ForgeError::State`] or [`ForgeError::Invalid`] naming the field
    /// and the value, for inconsistent or out-of-range contents.
    ///
    /// ```
    /// use forge::optim::{Persist, Schedule, StepLr};
    /// let mut s = StepLr::new(0.1, 5, 0.5);
    /// s.gamma = f64::NAN;
    /// assert!(Schedule::from_stored(s.into()).is_err());
    /// ```
    fn from_stored(stored: Self::Stored) -> Result<Self>;

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
        let body = postcard::to_allocvec(&(Self::kind(), self)).map_err(|e| {
            ForgeError::format(Self::kind(), format!("cannot encode {}: {e}", Self::kind()))
                .with_source(e)
        })?;
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
        let (kind, rest): (String, &[u8]) = postcard::take_from_bytes(body).map_err(|e| {
            ForgeError::format("optimizer file", format!("corrupt kind: {e}")).with_source(e)
        })?;
        if kind != Self::kind() {
            return Err(ForgeError::state(
                "",
                format!("the file holds {kind}, not {}", Self::kind()),
            ));
        }
        let (value, rest): (Self::Stored, &[u8]) =
            postcard::take_from_bytes(rest).map_err(|e| {
                ForgeError::format(format!("{kind} file"), format!("corrupt or truncated: {e}"))
                    .with_source(e)
            })?;
        if !rest.is_empty() {
            return Err(ForgeError::format(
                format!("{kind} file"),
                format!("{} trailing bytes", rest.len()),
            ));
        }
        Self::from_stored(value)
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
        return Err(ForgeError::format(
            format!("{kind} file"),
            format!("{} bytes, shorter than the 12-byte header", bytes.len()),
        ));
    }
    if &bytes[..8] != MAGIC {
        return Err(ForgeError::format(
            format!("{kind} file"),
            "bad magic bytes (not a forge optimizer/schedule file)",
        ));
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
        return Err(ForgeError::format(
            format!("{kind} file"),
            "format version 0",
        ));
    }
    Ok(&bytes[12..])
}

/// One parameter's state as the file holds it (borrowed, for writing).
#[derive(Serialize)]
struct StoredParamRef<'a, E> {
    step: u64,
    shape: &'a [usize],
    buffers: Vec<(&'static str, &'a [E])>,
}

/// One parameter's state as the file holds it: step, shape and named
/// buffers (PyTorch's names).
///
/// ```
/// let s: forge::optim::StoredParam<f32> = Default::default();
/// assert_eq!((s.step, s.shape.len(), s.buffers.len()), (0, 0, 0));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct StoredParam<E> {
    /// Updates taken.
    pub step: u64,
    /// The parameter's shape.
    pub shape: Vec<usize>,
    /// `(name, values)` of each buffer.
    pub buffers: Vec<(String, Vec<E>)>,
}

/// An optimizer as its file holds it, before it is checked:
/// [`Persist::from_stored`] turns it into an [`Optimizer`].
///
/// ```
/// use forge::optim::{Adam, Persist, StoredOptimizer};
/// let bytes = Adam::<f32>::new(1e-3).to_bytes().unwrap();
/// assert!(Adam::<f32>::from_bytes(&bytes).is_ok());
/// let _unused: Option<StoredOptimizer<forge::optim::AdamConfig, f32>> = None;
/// ```
#[derive(Clone, Debug, Deserialize)]
#[serde(bound(deserialize = "R: DeserializeOwned, E: DeserializeOwned"))]
pub struct StoredOptimizer<R, E> {
    /// The learning rate.
    pub lr: f64,
    /// The weight decay.
    pub weight_decay: f64,
    /// The rule's hyperparameters.
    pub rule: R,
    /// The parameter groups.
    pub groups: Vec<ParamGroup>,
    /// Per-parameter state by path.
    pub state: BTreeMap<String, StoredParam<E>>,
}

impl<R: UpdateRule, E: Float + Serialize> Serialize for Optimizer<R, E> {
    /// The version-1 layout: lr, weight decay, rule, groups, then each
    /// path's step, shape and named buffers.
    fn serialize<S: Serializer>(&self, ser: S) -> std::result::Result<S::Ok, S::Error> {
        let state: BTreeMap<&str, StoredParamRef<'_, E>> = self
            .state
            .iter()
            .map(|(path, s)| {
                let stored = StoredParamRef {
                    step: s.step,
                    shape: &s.shape,
                    buffers: s.buffers.buffers(),
                };
                (path.as_str(), stored)
            })
            .collect();
        let mut st = ser.serialize_struct("Optimizer", 5)?;
        st.serialize_field("lr", &self.lr)?;
        st.serialize_field("weight_decay", &self.weight_decay)?;
        st.serialize_field("rule", &self.rule)?;
        st.serialize_field("groups", &self.groups)?;
        st.serialize_field("state", &state)?;
        st.end()
    }
}

impl<R: UpdateRule, E: Float + Serialize + DeserializeOwned> Persist for Optimizer<R, E> {
    type Stored = StoredOptimizer<R, E>;

    fn kind() -> String {
        format!("{}<{}>", R::NAME, std::any::type_name::<E>())
    }

    fn from_stored(f: StoredOptimizer<R, E>) -> Result<Self> {
        let mut opt = Optimizer {
            lr: f.lr,
            weight_decay: f.weight_decay,
            rule: f.rule,
            groups: f.groups,
            state: BTreeMap::new(),
            error_if_nonfinite: false,
        };
        opt.check_loaded()?;
        // Every buffer the rule keeps from its first step on must be in
        // the file: creating one here would allocate what the shape says,
        // not what the file holds.
        let required: Vec<&str> = opt
            .rule
            .new_state::<E>(0)
            .buffers()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        for (path, p) in f.state {
            if let Some((unknown, _)) = p
                .buffers
                .iter()
                .find(|(n, _)| !R::BUFFERS.contains(&n.as_str()))
            {
                return Err(ForgeError::state(
                    path.as_str(),
                    format!(
                        "state buffer {unknown} is not used by {} (it keeps {:?})",
                        R::NAME,
                        R::BUFFERS
                    ),
                ));
            }
            if let Some(missing) = required
                .iter()
                .find(|r| !p.buffers.iter().any(|(n, _)| n == *r))
            {
                return Err(ForgeError::state(
                    path.to_string(),
                    format!("the file has no {missing} buffer, which {} keeps", R::NAME),
                ));
            }
            let s = opt.checked_state(&path, p.step, p.shape, p.buffers)?;
            opt.state.insert(path, s);
        }
        Ok(opt)
    }
}

impl Persist for Schedule {
    type Stored = Schedule;

    fn kind() -> String {
        "Schedule".into()
    }

    fn from_stored(s: Schedule) -> Result<Self> {
        s.validate()?;
        Ok(s)
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
