//! A whole training state (model, optimizer, schedule, step) in one
//! safetensors file ([`TrainingCheckpoint`]).

use super::model::{float_dict, tensors_as};
use crate::io::{
    atomic_write, parse_safetensors, read_safetensors, serialize_safetensors, AnyTensor,
    SafeTensorsData,
};
use crate::nn::Layer;
use crate::optim::{Optimizer, Persist, UpdateRule};
use crate::tensor::{Float, Tensor};
use crate::{ForgeError, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

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
/// use forge::checkpoint::TrainingCheckpoint;
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
    /// use forge::checkpoint::TrainingCheckpoint;
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
    /// use forge::checkpoint::TrainingCheckpoint;
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
    /// use forge::checkpoint::TrainingCheckpoint;
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
    /// use forge::checkpoint::TrainingCheckpoint;
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
