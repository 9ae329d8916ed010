//! A whole training state (model, optimizer, schedule, random generators,
//! data loader position, step) in one safetensors file
//! ([`TrainingCheckpoint`]).

use super::model::{float_dict, tensors_as, TRAINING_FORMAT_KEY as FORMAT_KEY};
use crate::data::{DataLoader, Dataset, LoaderState};
use crate::io::{
    parse_safetensors, read_safetensors, serialize_safetensors, write_safetensors, AnyTensor,
    SafeTensorsData,
};
use crate::nn::Layer;
use crate::optim::{
    CosineAnnealingLr, ExponentialLr, LinearLr, MultiStepLr, NoamLr, OneCycleLr, Optimizer,
    Persist, Schedule, SequentialLr, StepLr, UpdateRule,
};
use crate::tensor::{Float, Rng, Tensor};
use crate::{ForgeError, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The training-checkpoint format version this build writes and the
/// newest it reads. Version 2 added the random generators and the data
/// loader's position; version-1 files load without them.
const CHECKPOINT_VERSION: u32 = 2;

/// A learning-rate schedule a training checkpoint can save and fill in:
/// [`Schedule`] and every concrete schedule ([`StepLr`], [`CosineAnnealingLr`],
/// ...). The file stores the schedule as a [`Schedule`], so a checkpoint
/// saved from a `Schedule` loads into the concrete type it holds and the
/// other way round.
///
/// ```
/// use forge::checkpoint::ScheduleState;
/// use forge::optim::{LrScheduler, StepLr};
/// let mut a = StepLr::new(0.1, 2, 0.5);
/// a.step = 3;
/// let mut b = StepLr::new(1.0, 1, 0.1);
/// b.set_schedule(a.to_schedule()).unwrap();
/// assert_eq!(b, a);
/// ```
pub trait ScheduleState {
    /// The schedule as the one serializable type.
    fn to_schedule(&self) -> Schedule;

    /// Whether `schedule` holds this type (what
    /// [`set_schedule`](Self::set_schedule) accepts).
    fn accepts(&self, schedule: &Schedule) -> bool;

    /// Replaces `self` by `schedule`.
    ///
    /// # Errors
    /// [`ForgeError::State`] when `schedule` holds another kind of
    /// schedule; `self` is unchanged then.
    fn set_schedule(&mut self, schedule: Schedule) -> Result<()>;
}

impl ScheduleState for Schedule {
    fn to_schedule(&self) -> Schedule {
        self.clone()
    }
    fn accepts(&self, _: &Schedule) -> bool {
        true
    }
    fn set_schedule(&mut self, schedule: Schedule) -> Result<()> {
        *self = schedule;
        Ok(())
    }
}

macro_rules! concrete_schedule_state {
    ($($t:ident => $v:ident),* $(,)?) => {$(
        impl ScheduleState for $t {
            fn to_schedule(&self) -> Schedule {
                Schedule::$v(self.clone())
            }
            fn accepts(&self, schedule: &Schedule) -> bool {
                matches!(schedule, Schedule::$v(_))
            }
            fn set_schedule(&mut self, schedule: Schedule) -> Result<()> {
                match schedule {
                    Schedule::$v(s) => {
                        *self = s;
                        Ok(())
                    }
                    other => Err(ForgeError::state("schedule", format!(
                        "the checkpoint's schedule is {}, not {}",
                        schedule_name(&other),
                        stringify!($t)
                    ))),
                }
            }
        }
    )*};
}

concrete_schedule_state! {
    StepLr => Step,
    MultiStepLr => MultiStep,
    ExponentialLr => Exponential,
    CosineAnnealingLr => CosineAnnealing,
    LinearLr => Linear,
    SequentialLr => Sequential,
    OneCycleLr => OneCycle,
    NoamLr => Noam,
}

/// Refuses, before anything is decoded, a file `load_into` cannot take as
/// asked: a model weights file (no training-checkpoint metadata), or a
/// checkpoint holding a schedule when none was given (it would be dropped
/// without a word). The message names the path and the loader to use.
fn check_kind(data: &SafeTensorsData, path: &Path, schedule_given: bool) -> Result<()> {
    if !data.metadata.contains_key(FORMAT_KEY) {
        return Err(ForgeError::format(
            path.display().to_string(),
            "a model weights file, not a training checkpoint: load it with \
             `LayerIo::load_weights` (or `TrainingCheckpoint::load_model`)",
        ));
    }
    if let (false, Some(t)) = (schedule_given, data.tensors.get("schedule")) {
        let held = t
            .get::<u8>()
            .and_then(|b| Schedule::from_bytes(&b.to_vec()).ok())
            .map_or("a", |s| schedule_name(&s));
        return Err(ForgeError::state(
            "schedule",
            format!(
                "{} holds a {held} schedule but `TrainingCheckpoint::load_into` was given \
                 none: pass `Some(&mut schedule)` to restore it, or load the model alone \
                 with `TrainingCheckpoint::load_model`",
                path.display()
            ),
        ));
    }
    Ok(())
}

/// The schedule type a [`Schedule`] holds, for messages.
fn schedule_name(s: &Schedule) -> &'static str {
    match s {
        Schedule::Step(_) => "StepLr",
        Schedule::MultiStep(_) => "MultiStepLr",
        Schedule::Exponential(_) => "ExponentialLr",
        Schedule::CosineAnnealing(_) => "CosineAnnealingLr",
        Schedule::Linear(_) => "LinearLr",
        Schedule::Sequential(_) => "SequentialLr",
        Schedule::OneCycle(_) => "OneCycleLr",
        Schedule::Noam(_) => "NoamLr",
    }
}

/// Everything that decides the next training step, in one safetensors
/// file written atomically: the model's tensors (`model.<path>`, in the
/// model's element type), the optimizer with its state, the schedule (if
/// any), every random generator the model's layers own (each
/// [`Dropout`](crate::nn::Dropout)'s), the [`DataLoader`]'s epoch,
/// permutation and position (with the `_with_loader` forms), and the step.
/// A run resumed from it is `==` the uninterrupted run, mid-epoch included
/// (`tests/io/checkpoint.rs`).
///
/// Every tensor of the file carries a CRC-32C checksum in the metadata
/// (see [`CHECKSUM_PREFIX`](crate::io::CHECKSUM_PREFIX)), and loading
/// refuses a file whose data does not match, naming the file and the
/// tensor; a checkpoint written before checksums existed loads unverified.
/// The guide's chapter "Checkpoint integrity" says what is guaranteed.
///
/// Nothing to spell: the optimizer and the schedule are whatever the
/// caller has, and loading fills the caller's objects.
///
/// ```
/// use forge::prelude::*;
/// let path = std::env::temp_dir().join(format!("forge-ckpt-doc-{}.safetensors", std::process::id()));
/// let mut model = Linear::<f32>::new(2, 1, &mut Rng::new(0));
/// let mut opt = Adam::new(0.1);
/// let mut sched = StepLr::for_optimizer(&mut opt, 5, 0.5);
/// let grads = model.forward(Tensor::ones(&[1, 2])).sum().backward();
/// opt.step(&mut model, &grads).unwrap();
/// sched.step(&mut opt);
/// TrainingCheckpoint::save(&path, &model, &opt, Some(&sched), 1).unwrap();
///
/// let mut model2 = Linear::<f32>::new(2, 1, &mut Rng::new(7));
/// let mut opt2 = Adam::new(0.1);
/// let mut sched2 = StepLr::for_optimizer(&mut opt2, 5, 0.5);
/// let step = TrainingCheckpoint::load_into(&path, &mut model2, &mut opt2, Some(&mut sched2)).unwrap();
/// assert_eq!(step, 1);
/// assert_eq!(model2.weight.to_vec(), model.weight.to_vec());
/// assert_eq!(opt2.state("weight").unwrap().step(), 1);
/// assert_eq!(sched2, sched);
/// std::fs::remove_file(&path).unwrap();
/// ```
#[derive(Clone, Copy, Debug)]
pub struct TrainingCheckpoint;

/// A data loader a checkpoint restores (every [`DataLoader`]).
trait LoaderTarget {
    fn check(&self, state: &LoaderState) -> Result<()>;
    fn set(&self, state: LoaderState);
}

impl<D: Dataset> LoaderTarget for DataLoader<'_, D> {
    fn check(&self, state: &LoaderState) -> Result<()> {
        self.check_state(state)
    }
    fn set(&self, state: LoaderState) {
        // Checked just before: cannot fail.
        let _ = self.set_state(state);
    }
}

/// postcard bytes as a `U8` tensor.
fn blob(bytes: Vec<u8>) -> AnyTensor {
    let n = bytes.len();
    AnyTensor::U8(Tensor::from_vec(bytes, &[n]))
}

impl TrainingCheckpoint {
    /// The file's bytes (what [`save`](Self::save) and
    /// [`save_with_loader`](Self::save_with_loader) write).
    ///
    /// # Errors
    /// [`ForgeError::Format`] if a part cannot be encoded.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let m = Linear::<f32>::new(2, 1, &mut Rng::new(0));
    /// let b = TrainingCheckpoint::to_bytes(&m, &Sgd::new(0.1), None, None, 0).unwrap();
    /// assert!(b.len() > 8);
    /// ```
    pub fn to_bytes<E, R, L>(
        model: &L,
        optimizer: &Optimizer<R, E>,
        schedule: Option<&dyn ScheduleState>,
        loader: Option<&LoaderState>,
        step: u64,
    ) -> Result<Vec<u8>>
    where
        E: Float + Serialize + DeserializeOwned,
        R: UpdateRule,
        L: Layer<E> + ?Sized,
    {
        let (tensors, meta) = Self::contents(model, optimizer, schedule, loader, step)?;
        Ok(serialize_safetensors(&tensors, &meta))
    }

    /// The file's tensors and metadata: the model's tensors (sharing their
    /// storage), the optimizer, schedule, random generators and loader
    /// position as postcard blobs, and the format version and step.
    fn contents<E, R, L>(
        model: &L,
        optimizer: &Optimizer<R, E>,
        schedule: Option<&dyn ScheduleState>,
        loader: Option<&LoaderState>,
        step: u64,
    ) -> Result<(BTreeMap<String, AnyTensor>, BTreeMap<String, String>)>
    where
        E: Float + Serialize + DeserializeOwned,
        R: UpdateRule,
        L: Layer<E> + ?Sized,
    {
        let encode = |what: &str, r: std::result::Result<Vec<u8>, postcard::Error>| {
            r.map_err(|e| {
                ForgeError::format(
                    "training checkpoint",
                    format!("cannot encode the {what}: {e}"),
                )
                .with_source(e)
            })
        };
        let mut tensors = tensors_as(&model.state_dict(), "model.", E::DTYPE)?;
        tensors.insert("optimizer".into(), blob(optimizer.to_bytes()?));
        if let Some(s) = schedule {
            tensors.insert("schedule".into(), blob(s.to_schedule().to_bytes()?));
        }
        let rngs = model.rng_states();
        tensors.insert(
            "rng".into(),
            blob(encode("random generators", postcard::to_allocvec(&rngs))?),
        );
        if let Some(l) = loader {
            tensors.insert(
                "loader".into(),
                blob(encode("data loader state", postcard::to_allocvec(l))?),
            );
        }
        let mut meta = BTreeMap::new();
        meta.insert(FORMAT_KEY.to_string(), CHECKPOINT_VERSION.to_string());
        meta.insert("step".to_string(), step.to_string());
        Ok((tensors, meta))
    }

    /// Saves model (tensors and random generators), optimizer, schedule
    /// (`None` for a constant rate) and step in one atomic write.
    ///
    /// # Errors
    /// [`ForgeError::Io`] with the path; nothing is replaced then.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let path = std::env::temp_dir().join(format!("forge-ckpt-save-doc-{}.st", std::process::id()));
    /// let m = Linear::<f32>::new(2, 1, &mut Rng::new(0));
    /// TrainingCheckpoint::save(&path, &m, &Sgd::new(0.1), None, 3).unwrap();
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn save<E, R, L>(
        path: impl AsRef<Path>,
        model: &L,
        optimizer: &Optimizer<R, E>,
        schedule: Option<&dyn ScheduleState>,
        step: u64,
    ) -> Result<()>
    where
        E: Float + Serialize + DeserializeOwned,
        R: UpdateRule,
        L: Layer<E> + ?Sized,
    {
        let (tensors, meta) = Self::contents(model, optimizer, schedule, None, step)?;
        write_safetensors(path, &tensors, &meta)
    }

    /// As [`save`](Self::save), with the data loader's epoch, permutation
    /// and position, so that a run resumed mid-epoch sees the batches the
    /// uninterrupted run would have.
    ///
    /// # Errors
    /// [`ForgeError::Io`] with the path; nothing is replaced then.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let path = std::env::temp_dir().join(format!("forge-ckpt-loader-doc-{}.st", std::process::id()));
    /// let ds = TensorDataset::new((Tensor::<f32>::zeros(&[6, 2]), Tensor::<f32>::zeros(&[6, 1]))).unwrap();
    /// let loader = DataLoader::new(&ds, 2).shuffle(0);
    /// let m = Linear::<f32>::new(2, 1, &mut Rng::new(0));
    /// let opt = Sgd::new(0.1);
    /// for (step, (x, y)) in loader.iter().enumerate().take(1) {
    ///     TrainingCheckpoint::save_with_loader(&path, &m, &opt, None, &loader, step as u64 + 1).unwrap();
    /// }
    /// let resumed = DataLoader::new(&ds, 2).shuffle(0);
    /// let mut m2 = Linear::<f32>::new(2, 1, &mut Rng::new(1));
    /// let mut opt2 = Sgd::new(0.1);
    /// TrainingCheckpoint::load_into_with_loader(&path, &mut m2, &mut opt2, None, &resumed).unwrap();
    /// assert_eq!(resumed.iter().len(), 2); // the two batches left in the epoch
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn save_with_loader<E, R, L, D>(
        path: impl AsRef<Path>,
        model: &L,
        optimizer: &Optimizer<R, E>,
        schedule: Option<&dyn ScheduleState>,
        loader: &DataLoader<'_, D>,
        step: u64,
    ) -> Result<()>
    where
        E: Float + Serialize + DeserializeOwned,
        R: UpdateRule,
        L: Layer<E> + ?Sized,
        D: Dataset,
    {
        let state = loader.state();
        let (tensors, meta) = Self::contents(model, optimizer, schedule, Some(&state), step)?;
        write_safetensors(path, &tensors, &meta)
    }

    /// Loads a checkpoint into the caller's model, optimizer and schedule
    /// (`None` to skip it) and returns the step it was taken at. The
    /// optimizer keeps its parameter groups (which may hold closures) and
    /// takes everything else from the file. Build the schedule from the
    /// optimizer before calling this; the file then overwrites its step.
    ///
    /// Everything is decoded and checked first (format version, optimizer
    /// state against the model's shapes, schedule type, random generators);
    /// on error nothing has changed.
    ///
    /// # Errors
    /// [`ForgeError::Io`] with the path; [`ForgeError::Format`] for corrupt
    /// bytes (data that fails its checksum included: the message names the
    /// file and the tensor) or a file that is not a training checkpoint;
    /// [`ForgeError::Version`] for a newer format; [`ForgeError::StateDict`]
    /// for a model that does not fit (every key listed);
    /// [`ForgeError::State`] for optimizer state of another model or
    /// optimizer type, another schedule type, a schedule asked for but not
    /// saved, a schedule saved but not asked for (`None` given: pass the
    /// schedule, or load the model alone with
    /// [`load_model`](Self::load_model)), or other random generators. A
    /// model weights file (written by [`LayerIo::save`](super::LayerIo::save))
    /// is a [`ForgeError::Format`] naming the path and
    /// [`LayerIo::load_weights`](super::LayerIo::load_weights).
    ///
    /// ```
    /// use forge::prelude::*;
    /// let mut m = Linear::<f32>::new(2, 1, &mut Rng::new(0));
    /// let missing = std::env::temp_dir().join("forge-no-such-checkpoint");
    /// let r = TrainingCheckpoint::load_into(&missing, &mut m, &mut Sgd::new(0.1), None);
    /// assert!(matches!(r, Err(ForgeError::Io { .. })));
    /// ```
    pub fn load_into<E, R, L>(
        path: impl AsRef<Path>,
        model: &mut L,
        optimizer: &mut Optimizer<R, E>,
        schedule: Option<&mut dyn ScheduleState>,
    ) -> Result<u64>
    where
        E: Float + Serialize + DeserializeOwned,
        R: UpdateRule,
        L: Layer<E> + ?Sized,
    {
        let path = path.as_ref();
        let data = read_safetensors(path)?;
        check_kind(&data, path, schedule.is_some())?;
        Self::from_data(&data, model, optimizer, schedule, None)
    }

    /// As [`load_into`](Self::load_into), also putting `loader` where the
    /// checkpoint's loader was: its next [`iter`](DataLoader::iter)
    /// finishes the interrupted epoch.
    ///
    /// # Errors
    /// As [`load_into`](Self::load_into); [`ForgeError::State`] when the
    /// file holds no loader state or one that does not fit `loader`.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let path = std::env::temp_dir().join(format!("forge-ckpt-noloader-doc-{}.st", std::process::id()));
    /// let mut m = Linear::<f32>::new(2, 1, &mut Rng::new(0));
    /// TrainingCheckpoint::save(&path, &m, &Sgd::new(0.1), None, 0).unwrap();
    /// let ds = TensorDataset::new((Tensor::<f32>::zeros(&[4, 2]),)).unwrap();
    /// let loader = DataLoader::new(&ds, 2);
    /// let r = TrainingCheckpoint::load_into_with_loader(&path, &mut m, &mut Sgd::new(0.1), None, &loader);
    /// assert!(matches!(r, Err(ForgeError::State { .. })));
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn load_into_with_loader<E, R, L, D>(
        path: impl AsRef<Path>,
        model: &mut L,
        optimizer: &mut Optimizer<R, E>,
        schedule: Option<&mut dyn ScheduleState>,
        loader: &DataLoader<'_, D>,
    ) -> Result<u64>
    where
        E: Float + Serialize + DeserializeOwned,
        R: UpdateRule,
        L: Layer<E> + ?Sized,
        D: Dataset,
    {
        let path = path.as_ref();
        let data = read_safetensors(path)?;
        check_kind(&data, path, schedule.is_some())?;
        Self::from_data(&data, model, optimizer, schedule, Some(loader))
    }

    /// Loads only the model's tensors from a training checkpoint (or from
    /// a plain model file written by [`LayerIo::save`](super::LayerIo::save)),
    /// for inference: no optimizer needed.
    ///
    /// # Errors
    /// [`ForgeError::Io`] with the path; [`ForgeError::Format`] for corrupt
    /// bytes; [`ForgeError::StateDict`] for a model that does not fit.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let path = std::env::temp_dir().join(format!("forge-ckpt-model-doc-{}.st", std::process::id()));
    /// let m = Linear::<f32>::new(2, 1, &mut Rng::new(0));
    /// TrainingCheckpoint::save(&path, &m, &Adam::new(0.1), None, 7).unwrap();
    /// let mut m2 = Linear::<f32>::new(2, 1, &mut Rng::new(1));
    /// TrainingCheckpoint::load_model(&path, &mut m2).unwrap();
    /// assert_eq!(m2.weight.to_vec(), m.weight.to_vec());
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn load_model<E: Float, L: Layer<E> + ?Sized>(
        path: impl AsRef<Path>,
        model: &mut L,
    ) -> Result<()> {
        let data = read_safetensors(path)?;
        let prefix = if data.metadata.contains_key(FORMAT_KEY) {
            "model."
        } else {
            ""
        };
        model.load_state_dict(&float_dict::<E>(&data, prefix)?)
    }

    /// [`load_into`](Self::load_into) from a file's bytes.
    ///
    /// # Errors
    /// As [`load_into`](Self::load_into), without the I/O.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let mut m = Linear::<f32>::new(2, 1, &mut Rng::new(0));
    /// assert!(TrainingCheckpoint::load_bytes_into(b"junk", &mut m, &mut Sgd::new(0.1), None).is_err());
    /// ```
    pub fn load_bytes_into<E, R, L>(
        bytes: &[u8],
        model: &mut L,
        optimizer: &mut Optimizer<R, E>,
        schedule: Option<&mut dyn ScheduleState>,
    ) -> Result<u64>
    where
        E: Float + Serialize + DeserializeOwned,
        R: UpdateRule,
        L: Layer<E> + ?Sized,
    {
        let data = parse_safetensors(bytes)?;
        Self::from_data(&data, model, optimizer, schedule, None)
    }

    fn from_data<E, R, L>(
        data: &SafeTensorsData,
        model: &mut L,
        optimizer: &mut Optimizer<R, E>,
        schedule: Option<&mut dyn ScheduleState>,
        loader: Option<&dyn LoaderTarget>,
    ) -> Result<u64>
    where
        E: Float + Serialize + DeserializeOwned,
        R: UpdateRule,
        L: Layer<E> + ?Sized,
    {
        let version: u32 = data
            .metadata
            .get(FORMAT_KEY)
            .ok_or_else(|| ForgeError::format("", "not a forge training checkpoint"))?
            .parse()
            .map_err(|_| ForgeError::format("training checkpoint", "bad format version"))?;
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
            .ok_or_else(|| ForgeError::format("training checkpoint", "missing or bad step"))?;
        let blob = |name: &str| -> Option<Result<Vec<u8>>> {
            data.tensors.get(name).map(|t| {
                t.get::<u8>().map(|t| t.to_vec()).ok_or_else(|| {
                    ForgeError::format("training checkpoint", format!("{name} is not a U8 tensor"))
                })
            })
        };
        let required = |name: &str| -> Result<Vec<u8>> {
            blob(name).unwrap_or_else(|| Err(ForgeError::missing(name, "training checkpoint")))
        };
        let decode_err = |what: &str, e: postcard::Error| {
            ForgeError::format("training checkpoint", format!("corrupt {what}: {e}")).with_source(e)
        };

        // Decode and check everything before anything changes.
        let mut loaded = Optimizer::<R, E>::from_bytes(&required("optimizer")?)?;
        loaded.groups = optimizer.groups.clone();
        let new_schedule = match &schedule {
            None => None,
            Some(target) => {
                let bytes = blob("schedule").unwrap_or_else(|| {
                    Err(ForgeError::state(
                        "schedule",
                        "a schedule was given but the checkpoint holds none",
                    ))
                })?;
                let s = Schedule::from_bytes(&bytes)?;
                if !target.accepts(&s) {
                    return Err(ForgeError::state(
                        "schedule",
                        format!(
                            "the checkpoint's schedule is {}, another type than the one given",
                            schedule_name(&s)
                        ),
                    ));
                }
                Some(s)
            }
        };
        let rngs: Option<BTreeMap<String, Rng>> = match blob("rng") {
            None if version < 2 => None,
            None => return Err(ForgeError::missing("rng", "training checkpoint")),
            Some(bytes) => Some(
                postcard::from_bytes(&bytes?).map_err(|e| decode_err("random generators", e))?,
            ),
        };
        if let Some(rngs) = &rngs {
            let mine = model.rng_states();
            if !mine.keys().eq(rngs.keys()) {
                return Err(ForgeError::state(
                    "rng",
                    format!(
                        "the checkpoint's random generators {:?} are not the model's {:?}",
                        rngs.keys().collect::<Vec<_>>(),
                        mine.keys().collect::<Vec<_>>()
                    ),
                ));
            }
        }
        let loader_state = match loader {
            None => None,
            Some(l) => {
                let bytes = blob("loader").unwrap_or_else(|| {
                    Err(ForgeError::state(
                        "loader",
                        "a data loader was given but the checkpoint holds no loader state",
                    ))
                })?;
                let state: LoaderState =
                    postcard::from_bytes(&bytes).map_err(|e| decode_err("data loader state", e))?;
                l.check(&state)?;
                Some((l, state))
            }
        };
        let dict = float_dict::<E>(data, "model.")?;
        let backup = model.state_dict();
        model.load_state_dict(&dict)?;
        if let Err(e) = loaded.check_compatible(model) {
            model.load_state_dict(&backup)?;
            return Err(e);
        }

        // Nothing below can fail.
        *optimizer = loaded;
        if let (Some(target), Some(s)) = (schedule, new_schedule) {
            target.set_schedule(s)?;
        }
        if let Some(rngs) = rngs {
            model.load_rng_states(&rngs)?;
        }
        if let Some((l, state)) = loader_state {
            l.set(state);
        }
        Ok(step)
    }
}
