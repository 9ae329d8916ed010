//! A model's tensors as safetensors keyed by tensor path ([`LayerIo`]).

use crate::io::{read_safetensors, write_safetensors, AnyTensor, SafeTensorsData};
use crate::nn::{Layer, TensorKind, TensorVisitor};
use crate::quant::{dequantize_fp8, Int8Weight};
use crate::tensor::{DType, Float, Tensor};
use crate::{ForgeError, Result};
use std::collections::BTreeMap;
use std::path::Path;

/// What identifies a training checkpoint in the safetensors metadata (its
/// value is the format version).
pub(crate) const TRAINING_FORMAT_KEY: &str = "forge_training_checkpoint";

/// Saving and loading a model's tensors (weights and `#[frozen]` tensors)
/// as safetensors keyed by tensor path, for every [`Layer`].
///
/// ```
/// use forge::checkpoint::LayerIo;
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
    /// Writes every tensor in the model's own element type, atomically,
    /// with a checksum of each (verified by every load; see
    /// [`CHECKSUM_PREFIX`](crate::io::CHECKSUM_PREFIX)).
    ///
    /// # Errors
    /// [`ForgeError::Io`] with the path.
    ///
    /// ```
    /// use forge::checkpoint::LayerIo;
    /// use forge::io::read_safetensors;
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
    /// use forge::checkpoint::LayerIo;
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
        write_safetensors(path, &checkpoint_tensors(self, dtype)?, &BTreeMap::new())
    }

    /// As [`save`](Self::save) (int8 and 8-bit float weights as they are
    /// held, with their scales), with `metadata` (string pairs: a
    /// configuration, a vocabulary) in the file's header, where
    /// [`read_metadata`] finds it before the model is built.
    ///
    /// # Errors
    /// [`ForgeError::Invalid`] for a key that starts with the checksum
    /// prefix ([`CHECKSUM_PREFIX`](crate::io::CHECKSUM_PREFIX), reserved);
    /// [`ForgeError::Io`].
    ///
    /// ```
    /// use forge::checkpoint::{read_metadata, LayerIo};
    /// use forge::prelude::*;
    /// use std::collections::BTreeMap;
    /// let path = std::env::temp_dir().join(format!("forge-save-meta-doc-{}.safetensors", std::process::id()));
    /// let meta = BTreeMap::from([("width".to_string(), "3".to_string())]);
    /// Linear::<f32>::new(3, 2, &mut Rng::new(0)).save_with_metadata(&path, &meta).unwrap();
    /// assert_eq!(read_metadata(&path).unwrap()["width"], "3");
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    fn save_with_metadata(
        &self,
        path: impl AsRef<Path>,
        metadata: &BTreeMap<String, String>,
    ) -> Result<()> {
        if let Some(k) = metadata
            .keys()
            .find(|k| k.starts_with(crate::io::CHECKSUM_PREFIX))
        {
            return Err(ForgeError::invalid(
                k.clone(),
                "metadata keys with the checksum prefix are reserved",
            ));
        }
        write_safetensors(path, &checkpoint_tensors(self, E::DTYPE)?, metadata)
    }

    /// Replaces the model's tensors by a file's, converting any float
    /// storage type (f16, bf16, f32, f64) to the model's. Nothing changes
    /// unless the whole file fits.
    ///
    /// # Errors
    /// [`ForgeError::StateDict`] listing every missing, unexpected and
    /// mis-shaped key at once; [`ForgeError::DType`] for a non-float
    /// tensor; [`ForgeError::Format`] / [`ForgeError::Io`] for unreadable
    /// files, and a [`ForgeError::Format`] naming the path and
    /// `TrainingCheckpoint::load_into` for a training checkpoint.
    ///
    /// ```
    /// use forge::checkpoint::LayerIo;
    /// use forge::prelude::*;
    /// let path = std::env::temp_dir().join(format!("forge-load-doc-{}.safetensors", std::process::id()));
    /// Linear::<f32>::new(3, 2, &mut Rng::new(0)).save(&path).unwrap();
    /// let mut wrong = Linear::<f32>::new(4, 2, &mut Rng::new(0));
    /// let e = wrong.load_weights(&path).unwrap_err();
    /// assert!(matches!(e, ForgeError::StateDict { .. }));
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    fn load_weights(&mut self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let data = read_safetensors(path)?;
        if data.metadata.contains_key(TRAINING_FORMAT_KEY) {
            return Err(ForgeError::format(
                path.display().to_string(),
                "a training checkpoint, not a model weights file: load it with \
                 `TrainingCheckpoint::load_into` (or `TrainingCheckpoint::load_model` \
                 for the model alone)",
            ));
        }
        if crate::quant::has_fp8(self) {
            // 8-bit float weights load as bytes, straight into the layers
            return crate::quant::load_fp8_model(self, &data, |d| float_dict(d, ""));
        }
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
    /// use forge::checkpoint::LayerIo;
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

/// What a checkpoint of `model` holds: its int8 weights as `I8` and its
/// 8-bit float weights as `F8_E4M3` / `F8_E5M2` (each with its scales), as
/// they are held, and every other tensor converted to `dtype`.
fn checkpoint_tensors<E: Float, L: Layer<E> + ?Sized>(
    model: &L,
    dtype: DType,
) -> Result<BTreeMap<String, AnyTensor>> {
    let mut int8 = int8_tensors(model);
    int8.extend(crate::quant::fp8_checkpoint_tensors(model));
    let mut dict = model.state_dict();
    dict.retain(|k, _| !int8.contains_key(k));
    let mut tensors = tensors_as(&dict, "", dtype)?;
    tensors.extend(int8);
    Ok(tensors)
}

/// The model's int8 weights ([`crate::quant`]) by path, as `I8` tensors:
/// what a checkpoint stores of them whatever the dtype of the rest.
fn int8_tensors<E: Float, L: Layer<E> + ?Sized>(model: &L) -> BTreeMap<String, AnyTensor> {
    struct Collect(BTreeMap<String, AnyTensor>);
    impl<E: Float> TensorVisitor<E> for Collect {
        fn visit(&mut self, _: &str, _: &Tensor<E>, _: TensorKind) {}
        fn visit_int8(&mut self, path: &str, weight: &Int8Weight) {
            let t = Tensor::from_vec(weight.values(), weight.shape());
            self.0.insert(path.to_string(), AnyTensor::I8(t));
        }
    }
    let mut v = Collect(BTreeMap::new());
    model.visit_tensors(&mut v);
    v.0
}

/// Converts a state dict to file tensors of `dtype`, keys prefixed. A
/// tensor already of `dtype` shares its storage (no copy).
pub(crate) fn tensors_as<E: Float>(
    dict: &BTreeMap<String, Tensor<E>>,
    prefix: &str,
    dtype: DType,
) -> Result<BTreeMap<String, AnyTensor>> {
    let mut out = BTreeMap::new();
    for (k, t) in dict {
        let same: &dyn std::any::Any = t;
        let shared = match dtype {
            DType::F16 => same
                .downcast_ref::<Tensor<half::f16>>()
                .cloned()
                .map(AnyTensor::F16),
            DType::BF16 => same
                .downcast_ref::<Tensor<half::bf16>>()
                .cloned()
                .map(AnyTensor::BF16),
            DType::F32 => same
                .downcast_ref::<Tensor<f32>>()
                .cloned()
                .map(AnyTensor::F32),
            DType::F64 => same
                .downcast_ref::<Tensor<f64>>()
                .cloned()
                .map(AnyTensor::F64),
            _ => None,
        };
        if let Some(any) = shared {
            out.insert(format!("{prefix}{k}"), any);
            continue;
        }
        let any = match dtype {
            DType::F16 => AnyTensor::F16(t.cast()),
            DType::BF16 => AnyTensor::BF16(t.cast()),
            DType::F32 => AnyTensor::F32(t.cast()),
            DType::F64 => AnyTensor::F64(t.cast()),
            other => {
                return Err(ForgeError::invalid(
                    "dtype",
                    format!(
                        "checkpoints store float tensors (F16, BF16, F32, F64), not {}",
                        other.name()
                    ),
                ))
            }
        };
        out.insert(format!("{prefix}{k}"), any);
    }
    Ok(out)
}

/// The float tensors whose names start with `prefix` (prefix removed),
/// converted to `E`.
pub(crate) fn float_dict<E: Float>(
    data: &SafeTensorsData,
    prefix: &str,
) -> Result<BTreeMap<String, Tensor<E>>> {
    let mut dict = BTreeMap::new();
    for (name, t) in &data.tensors {
        let Some(key) = name.strip_prefix(prefix) else {
            continue;
        };
        let is_fp8 = |d: DType| matches!(d, DType::F8E4M3 | DType::F8E5M2);
        // an 8-bit float weight's scale is consumed by the weight, and the
        // static activation scale beside it (`input_scale`) is not used
        let fp8_at = |n: &str| data.tensors.get(n).is_some_and(|b| is_fp8(b.dtype()));
        let consumed = name.strip_suffix("_scale").is_some_and(fp8_at)
            || name
                .strip_suffix("input_scale")
                .is_some_and(|p| fp8_at(&format!("{p}weight")));
        if consumed {
            continue;
        }
        match t.dtype() {
            // int8 tensors are quantized weights: their integer values
            // load into the layer that holds them (see `forge::quant`)
            DType::F16 | DType::BF16 | DType::F32 | DType::F64 | DType::I8 => {
                dict.insert(key.to_string(), t.to_float::<E>());
            }
            // 8-bit floats (FP8 checkpoints): decoded, times their
            // `<name>_scale` companion if the file has one
            DType::F8E4M3 | DType::F8E5M2 => {
                let scale = data.tensors.get(&format!("{name}_scale"));
                dict.insert(key.to_string(), dequantize_fp8(name, t, scale)?);
            }
            other => {
                return Err(ForgeError::dtype(
                    name.clone(),
                    &[DType::F16, DType::BF16, DType::F32, DType::F64],
                    other,
                ))
            }
        }
    }
    Ok(dict)
}

/// The metadata of a checkpoint written by
/// [`LayerIo::save_with_metadata`] (checksum entries left out), read
/// before a model is built from it.
///
/// # Errors
/// [`ForgeError::Io`] / [`ForgeError::Format`] for an unreadable file.
///
/// ```
/// use forge::checkpoint::{read_metadata, LayerIo};
/// use forge::prelude::*;
/// let path = std::env::temp_dir().join(format!("forge-read-meta-doc-{}.safetensors", std::process::id()));
/// Linear::<f32>::new(2, 2, &mut Rng::new(0)).save(&path).unwrap();
/// assert!(read_metadata(&path).unwrap().is_empty());
/// std::fs::remove_file(&path).unwrap();
/// ```
pub fn read_metadata(path: impl AsRef<Path>) -> Result<BTreeMap<String, String>> {
    let mut meta = read_safetensors(path)?.metadata;
    meta.retain(|k, _| !k.starts_with(crate::io::CHECKSUM_PREFIX));
    Ok(meta)
}
