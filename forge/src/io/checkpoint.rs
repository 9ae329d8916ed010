//! Checkpoints: a model's tensors as safetensors keyed by tensor path
//! ([`LayerIo`]), and a whole training state (model, optimizer, schedule,
//! step) in one file ([`TrainingCheckpoint`]). Every file is written
//! atomically, so a crash mid-write leaves the previous checkpoint intact.

use super::safetensors::{parse_safetensors, read_safetensors, serialize_safetensors};
use super::{atomic_write, AnyTensor, SafeTensorsData};
use crate::nn::Layer;
use crate::optim::{Optimizer, Persist, UpdateRule};
use crate::tensor::{DType, Float, Tensor};
use crate::{ForgeError, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// Saving and loading a model's tensors (weights and `#[frozen]` tensors)
/// as safetensors keyed by tensor path, for every [`Layer`].
///
/// ```
/// use forge::io::LayerIo;
/// use forge::prelude::*;
/// let path = std::env::temp_dir().join(format!("forge-layerio-doc-{}.safetensors", std::process::id()));
/// let mut rng = Rng::new(0);
/// let a = Linear::<f32>::new(3, 2, &mut rng);
/// a.save(&path).unwrap();
/// let mut b = Linear::<f32>::new(3, 2, &mut rng);
/// b.load_weights(&path).unwrap();
/// assert_eq!(a.weight.to_vec(), b.weight.to_vec());
/// std::fs::remove_file(&path).unwrap();
/// ```
pub trait LayerIo<E: Float>: Layer<E> {
    /// Writes every tensor in the model's own element type, atomically.
    ///
    /// # Errors
    /// [`ForgeError::Io`] with the path.
    ///
    /// ```
    /// use forge::io::{read_safetensors, LayerIo};
    /// use forge::prelude::*;
    /// let path = std::env::temp_dir().join(format!("forge-save-doc-{}.safetensors", std::process::id()));
    /// Linear::<f32>::new(3, 2, &mut Rng::new(0)).save(&path).unwrap();
    /// let keys: Vec<_> = read_safetensors(&path).unwrap().tensors.into_keys().collect();
    /// assert_eq!(keys, ["bias", "weight"]);
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        self.save_as(path, E::DTYPE)
    }

    /// Writes every tensor converted to `dtype` (F16, BF16, F32 or F64),
    /// atomically: `save_as(path, DType::BF16)` halves a checkpoint.
    ///
    /// # Errors
    /// [`ForgeError::Invalid`] for a non-float dtype; [`ForgeError::Io`].
    ///
    /// ```
    /// use forge::io::LayerIo;
    /// use forge::prelude::*;
    /// use forge::DType;
    /// let path = std::env::temp_dir().join(format!("forge-save-as-doc-{}.safetensors", std::process::id()));
    /// let a = Linear::<f32>::new(3, 2, &mut Rng::new(0));
    /// a.save_as(&path, DType::F16).unwrap();
    /// let mut b = Linear::<f32>::new(3, 2, &mut Rng::new(1));
    /// b.load_weights(&path).unwrap(); // f16 file into an f32 model
    /// assert!((a.weight.to_vec()[0] - b.weight.to_vec()[0]).abs() < 1e-3);
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    fn save_as(&self, path: impl AsRef<Path>, dtype: DType) -> Result<()> {
        let tensors = tensors_as(&self.state_dict(), "", dtype)?;
        atomic_write(path, &serialize_safetensors(&tensors, &BTreeMap::new()))
    }

    /// Replaces the model's tensors by a file's, converting any float
    /// storage type (f16, bf16, f32, f64) to the model's. Nothing changes
    /// unless the whole file fits.
    ///
    /// # Errors
    /// [`ForgeError::StateDict`] listing every missing, unexpected and
    /// mis-shaped key at once; [`ForgeError::DType`] for a non-float
    /// tensor; [`ForgeError::Format`] / [`ForgeError::Io`] for unreadable
    /// files.
    ///
    /// ```
    /// use forge::io::LayerIo;
    /// use forge::prelude::*;
    /// let path = std::env::temp_dir().join(format!("forge-load-doc-{}.safetensors", std::process::id()));
    /// Linear::<f32>::new(3, 2, &mut Rng::new(0)).save(&path).unwrap();
    /// let mut wrong = Linear::<f32>::new(4, 2, &mut Rng::new(0));
    /// let e = wrong.load_weights(&path).unwrap_err();
    /// assert!(matches!(e, ForgeError::StateDict { .. }));
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    fn load_weights(&mut self, path: impl AsRef<Path>) -> Result<()> {
        let data = read_safetensors(path)?;
        let dict = float_dict(&data, "")?;
        self.load_state_dict(&dict)
    }

    /// The model with its tensors loaded from `path`: build a model of the
    /// right architecture, then `model.loaded(path)?`.
    ///
    /// # Errors
    /// As [`load_weights`](Self::load_weights).
    ///
    /// ```
    /// use forge::io::LayerIo;
    /// use forge::prelude::*;
    /// let path = std::env::temp_dir().join(format!("forge-loaded-doc-{}.safetensors", std::process::id()));
    /// let a = Linear::<f64>::new(2, 2, &mut Rng::new(0));
    /// a.save(&path).unwrap();
    /// let b = Linear::<f64>::new(2, 2, &mut Rng::new(9)).loaded(&path).unwrap();
    /// assert_eq!(a.bias.unwrap().to_vec(), b.bias.unwrap().to_vec());
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    fn loaded(mut self, path: impl AsRef<Path>) -> Result<Self>
    where
        Self: Sized,
    {
        self.load_weights(path)?;
        Ok(self)
    }
}

impl<E: Float, L: Layer<E> + ?Sized> LayerIo<E> for L {}

/// Converts a state dict to file tensors of `dtype`, keys prefixed.
fn tensors_as<E: Float>(
    dict: &BTreeMap<String, Tensor<E>>,
    prefix: &str,
    dtype: DType,
) -> Result<BTreeMap<String, AnyTensor>> {
    let mut out = BTreeMap::new();
    for (k, t) in dict {
        let any = match dtype {
            DType::F16 => AnyTensor::F16(t.cast()),
            DType::BF16 => AnyTensor::BF16(t.cast()),
            DType::F32 => AnyTensor::F32(t.cast()),
            DType::F64 => AnyTensor::F64(t.cast()),
            other => {
                return Err(ForgeError::Invalid(format!(
                    "checkpoints store float tensors (F16, BF16, F32, F64), not {}",
                    other.name()
                )))
            }
        };
        out.insert(format!("{prefix}{k}"), any);
    }
    Ok(out)
}

/// The float tensors whose names start with `prefix` (prefix removed),
/// converted to `E`.
fn float_dict<E: Float>(
    data: &SafeTensorsData,
    prefix: &str,
) -> Result<BTreeMap<String, Tensor<E>>> {
    let mut dict = BTreeMap::new();
    for (name, t) in &data.tensors {
        let Some(key) = name.strip_prefix(prefix) else {
            continue;
        };
        match t.dtype() {
            DType::F16 | DType::BF16 | DType::F32 | DType::F64 => {
                dict.insert(key.to_string(), t.to_float::<E>());
            }
            other => {
                return Err(ForgeError::DType {
                    name: name.clone(),
                    expected: "a float type (F16, BF16, F32, F64)".into(),
                    found: other.name().into(),
                })
            }
        }
    }
    Ok(dict)
}

/// What identifies a training checkpoint in the safetensors metadata.
const FORMAT_KEY: &str = "forge_training_checkpoint";
/// The training-checkpoint format version this build writes and reads.
const CHECKPOINT_VERSION: u32 = 1;

/// Everything needed to resume training, in one safetensors file written
/// atomically: the model's tensors (`model.<path>`, in the model's element
/// type), the optimizer and the schedule (forge's optimizer format, stored
/// as `U8` tensors `optimizer` and `schedule`), and the step (metadata).
///
/// ```
/// use forge::io::TrainingCheckpoint;
/// use forge::optim::{Adam, LrScheduler, Schedule, StepLr};
/// use forge::prelude::*;
/// let path = std::env::temp_dir().join(format!("forge-ckpt-doc-{}.safetensors", std::process::id()));
/// let mut model = Linear::<f32>::new(2, 1, &mut Rng::new(0));
/// let mut opt = Adam::new(0.1);
/// let mut sched: Schedule = StepLr::new(0.1, 5, 0.5).into();
/// let grads = model.forward(Tensor::ones(&[1, 2])).sum().backward();
/// opt.step(&mut model, &grads).unwrap();
/// sched.step(&mut opt);
/// TrainingCheckpoint::save(&path, &model, &opt, &sched, 1).unwrap();
///
/// let mut fresh = Linear::<f32>::new(2, 1, &mut Rng::new(7));
/// let ck: TrainingCheckpoint<_, f32, Schedule> = TrainingCheckpoint::load(&path, &mut fresh).unwrap();
/// assert_eq!(ck.step, 1);
/// assert_eq!(fresh.weight.to_vec(), model.weight.to_vec());
/// assert_eq!(ck.optimizer.state("weight").unwrap().step(), 1);
/// let _: &Adam = &ck.optimizer;
/// std::fs::remove_file(&path).unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct TrainingCheckpoint<R, E, S> {
    /// The optimizer, state included.
    pub optimizer: Optimizer<R, E>,
    /// The learning-rate schedule, at its step.
    pub schedule: S,
    /// The training step the checkpoint was taken at.
    pub step: u64,
}

impl<R, E, S> TrainingCheckpoint<R, E, S>
where
    R: UpdateRule,
    E: Float + Serialize + DeserializeOwned,
    S: Persist,
{
    /// The file's bytes (what [`save`](Self::save) writes).
    ///
    /// # Errors
    /// [`ForgeError::Format`] if the optimizer or schedule cannot be encoded.
    ///
    /// ```
    /// use forge::io::TrainingCheckpoint;
    /// use forge::optim::{Schedule, Sgd, StepLr};
    /// use forge::prelude::*;
    /// let m = Linear::<f32>::new(2, 1, &mut Rng::new(0));
    /// let s: Schedule = StepLr::new(0.1, 5, 0.5).into();
    /// let b = TrainingCheckpoint::to_bytes(&m, &Sgd::new(0.1), &s, 0).unwrap();
    /// assert!(b.len() > 8);
    /// ```
    pub fn to_bytes<L: Layer<E> + ?Sized>(
        model: &L,
        optimizer: &Optimizer<R, E>,
        schedule: &S,
        step: u64,
    ) -> Result<Vec<u8>> {
        let mut tensors = tensors_as(&model.state_dict(), "model.", E::DTYPE)?;
        let bytes = |b: Vec<u8>| {
            let n = b.len();
            AnyTensor::U8(Tensor::from_vec(b, &[n]))
        };
        tensors.insert("optimizer".into(), bytes(optimizer.to_bytes()?));
        tensors.insert("schedule".into(), bytes(schedule.to_bytes()?));
        let mut meta = BTreeMap::new();
        meta.insert(FORMAT_KEY.to_string(), CHECKPOINT_VERSION.to_string());
        meta.insert("step".to_string(), step.to_string());
        Ok(serialize_safetensors(&tensors, &meta))
    }

    /// Saves model, optimizer, schedule and step in one atomic write.
    ///
    /// # Errors
    /// [`ForgeError::Io`] with the path; nothing is replaced then.
    ///
    /// ```
    /// use forge::io::TrainingCheckpoint;
    /// use forge::optim::{Schedule, Sgd, StepLr};
    /// use forge::prelude::*;
    /// let path = std::env::temp_dir().join(format!("forge-ckpt-save-doc-{}.st", std::process::id()));
    /// let m = Linear::<f32>::new(2, 1, &mut Rng::new(0));
    /// let s: Schedule = StepLr::new(0.1, 5, 0.5).into();
    /// TrainingCheckpoint::save(&path, &m, &Sgd::new(0.1), &s, 3).unwrap();
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn save<L: Layer<E> + ?Sized>(
        path: impl AsRef<Path>,
        model: &L,
        optimizer: &Optimizer<R, E>,
        schedule: &S,
        step: u64,
    ) -> Result<()> {
        atomic_write(path, &Self::to_bytes(model, optimizer, schedule, step)?)
    }

    /// Decodes a checkpoint and loads its tensors into `model`. Everything
    /// is decoded and checked (format version, optimizer state against the
    /// model's shapes) before the model changes; on error it is unchanged.
    ///
    /// # Errors
    /// [`ForgeError::Format`] for corrupt bytes or a file that is not a
    /// training checkpoint; [`ForgeError::Version`] for a newer format;
    /// [`ForgeError::StateDict`] for a model that does not fit (every key
    /// listed); [`ForgeError::State`] for optimizer state of another model.
    ///
    /// ```
    /// use forge::io::TrainingCheckpoint;
    /// use forge::optim::{Schedule, Sgd};
    /// use forge::prelude::*;
    /// let mut m = Linear::<f32>::new(2, 1, &mut Rng::new(0));
    /// let r: Result<TrainingCheckpoint<_, f32, Schedule>, _> = TrainingCheckpoint::<forge::optim::SgdConfig, f32, Schedule>::from_bytes(b"junk", &mut m);
    /// assert!(r.is_err());
    /// ```
    pub fn from_bytes<L: Layer<E> + ?Sized>(bytes: &[u8], model: &mut L) -> Result<Self> {
        let data = parse_safetensors(bytes)?;
        Self::from_data(&data, model)
    }

    /// Reads a checkpoint written by [`save`](Self::save) and loads its
    /// tensors into `model`.
    ///
    /// # Errors
    /// [`ForgeError::Io`] with the path, or as [`from_bytes`](Self::from_bytes).
    ///
    /// ```
    /// use forge::io::TrainingCheckpoint;
    /// use forge::optim::{Schedule, SgdConfig};
    /// use forge::prelude::*;
    /// let mut m = Linear::<f32>::new(2, 1, &mut Rng::new(0));
    /// let missing = std::env::temp_dir().join("forge-no-such-checkpoint");
    /// let r = TrainingCheckpoint::<SgdConfig, f32, Schedule>::load(&missing, &mut m);
    /// assert!(matches!(r, Err(ForgeError::Io { .. })));
    /// ```
    pub fn load<L: Layer<E> + ?Sized>(path: impl AsRef<Path>, model: &mut L) -> Result<Self> {
        let data = read_safetensors(path)?;
        Self::from_data(&data, model)
    }

    fn from_data<L: Layer<E> + ?Sized>(data: &SafeTensorsData, model: &mut L) -> Result<Self> {
        let version: u32 = data
            .metadata
            .get(FORMAT_KEY)
            .ok_or_else(|| ForgeError::Format("not a forge training checkpoint".into()))?
            .parse()
            .map_err(|_| ForgeError::Format("training checkpoint: bad format version".into()))?;
        if version > CHECKPOINT_VERSION {
            return Err(ForgeError::Version {
                what: "training checkpoint".into(),
                found: version,
                supported: CHECKPOINT_VERSION,
            });
        }
        let step: u64 = data
            .metadata
            .get("step")
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| ForgeError::Format("training checkpoint: missing or bad step".into()))?;
        let blob = |name: &str| -> Result<Vec<u8>> {
            data.tensors
                .get(name)
                .and_then(|t| t.get::<u8>())
                .map(|t| t.to_vec())
                .ok_or_else(|| {
                    ForgeError::Format(format!("training checkpoint: no U8 tensor {name}"))
                })
        };
        let optimizer = Optimizer::<R, E>::from_bytes(&blob("optimizer")?)?;
        let schedule = S::from_bytes(&blob("schedule")?)?;
        let dict = float_dict::<E>(data, "model.")?;
        let backup = model.state_dict();
        model.load_state_dict(&dict)?;
        if let Err(e) = optimizer.check_compatible(model) {
            model.load_state_dict(&backup)?;
            return Err(e);
        }
        Ok(TrainingCheckpoint {
            optimizer,
            schedule,
            step,
        })
    }
}
