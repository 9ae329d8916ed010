//! Named tensors in the [safetensors] format: an 8-byte little-endian header
//! length, a JSON header (`{"name": {"dtype", "shape", "data_offsets"}, ...,
//! "__metadata__": {string: string}}`), then the raw little-endian data.
//!
//! A thin layer over Hugging Face's [`safetensors`](::safetensors) crate,
//! which reads and writes the bytes. forge is stricter than the crate: its
//! own pass over the header (with `serde_json`) refuses duplicate names and
//! fields, dtypes it does not store, shapes of more than [`MAX_RANK`]
//! dimensions and offsets that leave gaps, and every message names the
//! tensor at fault. Every malformed file is a [`ForgeError::Format`], never
//! a panic, an out-of-bounds read or an allocation larger than the file.
//!
//! [safetensors]: https://github.com/huggingface/safetensors

use super::atomic::atomic_write;
use super::safetensors_header::{parse_header, Entry, Header};
use crate::error::{ForgeError, Result};
use crate::tensor::{DType, Element, Float, Tensor};
use ::safetensors::{Dtype, SafeTensors, View};
use std::any::Any;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;

/// The largest JSON header accepted, in bytes (the reference implementation
/// uses the same 100 MB cap).
pub const MAX_HEADER_BYTES: usize = 100_000_000;

/// The most dimensions a tensor may have (PyTorch's limit too).
pub const MAX_RANK: usize = 64;

/// The reserved header key holding the string metadata.
pub(super) const METADATA_KEY: &str = "__metadata__";

/// A tensor of any storage type, as stored in a safetensors file.
///
/// ```
/// use forge::io::AnyTensor;
/// use forge::{DType, Tensor};
/// let a: AnyTensor = Tensor::<i64>::from_vec(vec![1, 2, 3], &[3]).into();
/// assert_eq!(a.dtype(), DType::I64);
/// assert_eq!(a.shape(), &[3]);
/// assert_eq!(a.to_float::<f32>().to_vec(), vec![1.0, 2.0, 3.0]);
/// ```
#[derive(Clone, Debug)]
pub enum AnyTensor {
    /// IEEE half precision.
    F16(Tensor<half::f16>),
    /// bfloat16.
    BF16(Tensor<half::bf16>),
    /// Single precision.
    F32(Tensor<f32>),
    /// Double precision.
    F64(Tensor<f64>),
    /// 32-bit integers.
    I32(Tensor<i32>),
    /// 64-bit integers.
    I64(Tensor<i64>),
    /// Bytes.
    U8(Tensor<u8>),
    /// Booleans (one byte each, 0 or 1).
    Bool(Tensor<bool>),
}

/// Runs `$body` with `$t` bound to the inner tensor, whatever its type.
macro_rules! with_tensor {
    ($self:expr, $t:ident => $body:expr) => {
        match $self {
            AnyTensor::F16($t) => $body,
            AnyTensor::BF16($t) => $body,
            AnyTensor::F32($t) => $body,
            AnyTensor::F64($t) => $body,
            AnyTensor::I32($t) => $body,
            AnyTensor::I64($t) => $body,
            AnyTensor::U8($t) => $body,
            AnyTensor::Bool($t) => $body,
        }
    };
}

impl AnyTensor {
    /// The storage type.
    ///
    /// ```
    /// let a = forge::io::AnyTensor::from(forge::Tensor::<f64>::zeros(&[2]));
    /// assert_eq!(a.dtype(), forge::DType::F64);
    /// ```
    pub fn dtype(&self) -> DType {
        with_tensor!(self, t => t.dtype())
    }

    /// The shape.
    ///
    /// ```
    /// let a = forge::io::AnyTensor::from(forge::Tensor::<u8>::zeros(&[2, 5]));
    /// assert_eq!(a.shape(), &[2, 5]);
    /// ```
    pub fn shape(&self) -> &[usize] {
        with_tensor!(self, t => t.shape())
    }

    /// The number of elements.
    ///
    /// ```
    /// let a = forge::io::AnyTensor::from(forge::Tensor::<u8>::zeros(&[2, 5]));
    /// assert_eq!(a.numel(), 10);
    /// ```
    pub fn numel(&self) -> usize {
        with_tensor!(self, t => t.numel())
    }

    /// The values converted to a float type (`f32` or `f64`), whatever the
    /// stored type: half types widen exactly, `bool` gives 0 and 1, integers
    /// round to nearest. The result is an untracked tensor.
    ///
    /// ```
    /// let a = forge::io::AnyTensor::from(forge::Tensor::<half::bf16>::from_vec(
    ///     vec![half::bf16::from_f32(1.5)], &[1]));
    /// assert_eq!(a.to_float::<f64>().to_vec(), vec![1.5]);
    /// ```
    pub fn to_float<E: Float>(&self) -> Tensor<E> {
        with_tensor!(self, t => t.cast::<E>())
    }

    /// The inner tensor if it is stored as `E` exactly, `None` otherwise.
    ///
    /// ```
    /// let a = forge::io::AnyTensor::from(forge::Tensor::<i32>::from_vec(vec![7], &[1]));
    /// assert_eq!(a.get::<i32>().unwrap().to_vec(), vec![7]);
    /// assert!(a.get::<f32>().is_none());
    /// ```
    pub fn get<E: Element>(&self) -> Option<Tensor<E>> {
        let any: &dyn Any = with_tensor!(self, t => t);
        any.downcast_ref::<Tensor<E>>().cloned()
    }

    /// The raw little-endian bytes, as stored in a safetensors file.
    ///
    /// ```
    /// let a = forge::io::AnyTensor::from(forge::Tensor::<i32>::from_vec(vec![1, -1], &[2]));
    /// assert_eq!(a.to_le_bytes(), vec![1, 0, 0, 0, 255, 255, 255, 255]);
    /// ```
    pub fn to_le_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.numel() * self.dtype().size_in_bytes());
        with_tensor!(self, t => t.as_slice().iter().for_each(|v| v.put(&mut out)));
        out
    }

    /// Decodes `bytes` (whose length the caller has checked) as `dtype`.
    fn decode(name: &str, dtype: DType, shape: &[usize], bytes: &[u8]) -> Result<AnyTensor> {
        fn dec<E: LeBytes>(name: &str, shape: &[usize], bytes: &[u8]) -> Result<Tensor<E>> {
            let data = bytes
                .chunks_exact(E::SIZE)
                .map(E::take)
                .collect::<Option<Vec<E>>>()
                .ok_or_else(|| {
                    ForgeError::format(
                        "safetensors",
                        format!("tensor '{name}': invalid {} value", E::DTYPE.name()),
                    )
                })?;
            Ok(Tensor::from_vec(data, shape))
        }
        Ok(match dtype {
            DType::F16 => AnyTensor::F16(dec(name, shape, bytes)?),
            DType::BF16 => AnyTensor::BF16(dec(name, shape, bytes)?),
            DType::F32 => AnyTensor::F32(dec(name, shape, bytes)?),
            DType::F64 => AnyTensor::F64(dec(name, shape, bytes)?),
            DType::I32 => AnyTensor::I32(dec(name, shape, bytes)?),
            DType::I64 => AnyTensor::I64(dec(name, shape, bytes)?),
            DType::U8 => AnyTensor::U8(dec(name, shape, bytes)?),
            DType::Bool => AnyTensor::Bool(dec(name, shape, bytes)?),
        })
    }
}

/// Bit-exact equality: same type, same shape, same bytes (so two NaNs with
/// the same payload are equal, and `0.0 != -0.0`).
impl PartialEq for AnyTensor {
    fn eq(&self, other: &Self) -> bool {
        self.dtype() == other.dtype()
            && self.shape() == other.shape()
            && self.to_le_bytes() == other.to_le_bytes()
    }
}

macro_rules! from_tensor {
    ($($t:ty => $v:ident),*) => {$(
        impl From<Tensor<$t>> for AnyTensor {
            fn from(t: Tensor<$t>) -> Self {
                AnyTensor::$v(t)
            }
        }
    )*};
}
from_tensor!(half::f16 => F16, half::bf16 => BF16, f32 => F32, f64 => F64,
    i32 => I32, i64 => I64, u8 => U8, bool => Bool);

/// Little-endian encoding of one element.
trait LeBytes: Element {
    const SIZE: usize;
    /// Decodes exactly `SIZE` bytes; `None` for an invalid value.
    fn take(b: &[u8]) -> Option<Self>;
    fn put(self, out: &mut Vec<u8>);
}

macro_rules! le_bytes {
    ($($t:ty),*) => {$(
        impl LeBytes for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn take(b: &[u8]) -> Option<Self> {
                Some(<$t>::from_le_bytes(b.try_into().ok()?))
            }
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
le_bytes!(half::f16, half::bf16, f32, f64, i32, i64, u8);

impl LeBytes for bool {
    const SIZE: usize = 1;
    fn take(b: &[u8]) -> Option<Self> {
        match b {
            [0] => Some(false),
            [1] => Some(true),
            _ => None,
        }
    }
    fn put(self, out: &mut Vec<u8>) {
        out.push(self as u8);
    }
}

/// The contents of a safetensors file.
///
/// ```
/// let d = forge::io::SafeTensorsData::default();
/// assert!(d.tensors.is_empty() && d.metadata.is_empty());
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SafeTensorsData {
    /// The tensors by name.
    pub tensors: BTreeMap<String, AnyTensor>,
    /// The `__metadata__` strings (empty when the file has none).
    pub metadata: BTreeMap<String, String>,
}

/// Parses a safetensors file held in memory.
///
/// # Errors
/// [`ForgeError::Format`] for any malformed input: a header length larger
/// than the file or than [`MAX_HEADER_BYTES`], a header that is not UTF-8
/// JSON of the expected shape, an unsupported dtype, a duplicate name,
/// offsets that are out of range, overlapping, leave gaps or do not cover
/// the data exactly, a shape whose byte size differs from its offsets (or
/// overflows), or a `BOOL` byte other than 0 and 1.
///
/// ```
/// use forge::io::{parse_safetensors, serialize_safetensors, AnyTensor};
/// use std::collections::BTreeMap;
/// let mut t = BTreeMap::new();
/// t.insert("w".to_string(), AnyTensor::from(forge::Tensor::<f32>::ones(&[2, 2])));
/// let bytes = serialize_safetensors(&t, &BTreeMap::new());
/// let back = parse_safetensors(&bytes).unwrap();
/// assert_eq!(back.tensors, t);
/// assert!(parse_safetensors(&bytes[..bytes.len() - 1]).is_err());
/// ```
pub fn parse_safetensors(bytes: &[u8]) -> Result<SafeTensorsData> {
    let fmt = |m: String| ForgeError::format("safetensors", m);
    let header_end = header_end(bytes)?;
    let text = std::str::from_utf8(&bytes[8..header_end]).map_err(|e| {
        ForgeError::format(
            "",
            format!("not a safetensors file: header is not UTF-8: {e}"),
        )
    })?;
    if let Some(c) = text.trim_start().chars().next().filter(|&c| c != '{') {
        return Err(ForgeError::format(
            "",
            format!(
                "not a safetensors file: the header is not a JSON object (expected '{{', found {c:?})"
            ),
        ));
    }
    let Header { entries, metadata } = parse_header(text).map_err(fmt)?;
    check_layout(&entries, bytes.len() - header_end).map_err(fmt)?;

    // forge's checks passed: the reference crate reads the data (and checks
    // the layout once more).
    let file = SafeTensors::deserialize(bytes).map_err(|e| fmt(e.to_string()))?;
    let mut tensors = BTreeMap::new();
    for (name, view) in file.iter() {
        let dtype = entries
            .get(name)
            .map(|e| e.dtype)
            .ok_or_else(|| fmt(format!("tensor '{name}' is missing from forge's reading")))?;
        let t = AnyTensor::decode(name, dtype, view.shape(), view.data())?;
        tensors.insert(name.to_string(), t);
    }
    if tensors.len() != entries.len() {
        return Err(fmt(format!(
            "the safetensors crate read {} tensors where forge read {}",
            tensors.len(),
            entries.len()
        )));
    }
    Ok(SafeTensorsData { tensors, metadata })
}

/// Where the JSON header ends, from the 8-byte length before it. A length
/// that cannot be right (beyond the file or the limit) means the bytes are
/// not a safetensors file at all (a text file gives a length of about
/// 10^18).
fn header_end(bytes: &[u8]) -> Result<usize> {
    let not = |m: String| ForgeError::format("", format!("not a safetensors file: {m}"));
    let len_bytes: [u8; 8] = bytes
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| {
            not(format!(
                "{} bytes cannot hold the 8-byte header length",
                bytes.len()
            ))
        })?;
    let n = u64::from_le_bytes(len_bytes);
    if n > MAX_HEADER_BYTES as u64 {
        return Err(not(format!(
            "header length {n} exceeds the {MAX_HEADER_BYTES}-byte limit"
        )));
    }
    8usize
        .checked_add(n as usize)
        .filter(|&e| e <= bytes.len())
        .ok_or_else(|| {
            not(format!(
                "header length {n} exceeds the {} bytes that follow it",
                bytes.len() - 8
            ))
        })
}

/// Checks sizes first, then the layout: sorted by offsets, each tensor must
/// start where the previous one ended and the last end with the data.
fn check_layout(
    entries: &BTreeMap<String, Entry>,
    data_len: usize,
) -> std::result::Result<(), String> {
    let mut order: Vec<(&String, &Entry)> = Vec::with_capacity(entries.len());
    for (name, e) in entries {
        let numel = e
            .shape
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| format!("tensor '{name}': shape {:?} overflows", e.shape))?;
        let nbytes = numel
            .checked_mul(e.dtype.size_in_bytes())
            .ok_or_else(|| format!("tensor '{name}': byte size overflows"))?;
        if e.end < e.start || e.end - e.start != nbytes {
            return Err(format!(
                "tensor '{name}': data_offsets [{}, {}] do not hold {nbytes} bytes of {} {:?}",
                e.start,
                e.end,
                e.dtype.name(),
                e.shape
            ));
        }
        order.push((name, e));
    }
    order.sort_by_key(|(_, e)| (e.start, e.end));
    let mut cursor = 0usize;
    for (name, e) in &order {
        if e.start != cursor {
            let what = if e.start < cursor {
                "overlaps"
            } else {
                "leaves a gap before"
            };
            return Err(format!(
                "tensor '{name}' at offset {} {what} byte {cursor}",
                e.start
            ));
        }
        cursor = e.end;
    }
    if cursor != data_len {
        return Err(format!(
            "tensors cover {cursor} bytes of data but the file holds {data_len}"
        ));
    }
    Ok(())
}

/// Reads and parses a safetensors file.
///
/// # Errors
/// [`ForgeError::Io`] (with the path) when the file cannot be read, and the
/// errors of [`parse_safetensors`].
///
/// ```
/// let e = forge::io::read_safetensors("/no/such/file.safetensors").unwrap_err();
/// assert!(e.to_string().contains("/no/such/file.safetensors"));
/// ```
pub fn read_safetensors(path: impl AsRef<Path>) -> Result<SafeTensorsData> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| ForgeError::io(path, e))?;
    parse_safetensors(&bytes).map_err(|e| e.in_file(path))
}

/// Encodes tensors and metadata as a safetensors file.
///
/// The `safetensors` crate lays the tensors out by decreasing element size,
/// then by name, and the header is padded with spaces to a multiple of 8 bytes, so every tensor's
/// data is aligned to its element size. `__metadata__` is omitted when
/// `metadata` is empty. The output is deterministic.
///
/// # Panics
/// When a tensor is named `__metadata__` (reserved by the format), or when
/// the header would exceed [`MAX_HEADER_BYTES`] (millions of tensors);
/// [`write_safetensors`] returns an error instead.
///
/// ```
/// use forge::io::{serialize_safetensors, AnyTensor};
/// use std::collections::BTreeMap;
/// let mut t = BTreeMap::new();
/// t.insert("b".to_string(), AnyTensor::from(forge::Tensor::<u8>::from_vec(vec![1, 2], &[2])));
/// let bytes = serialize_safetensors(&t, &BTreeMap::new());
/// let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
/// assert_eq!(n % 8, 0);
/// assert_eq!(&bytes[8 + n..], &[1, 2]);
/// ```
pub fn serialize_safetensors(
    tensors: &BTreeMap<String, AnyTensor>,
    metadata: &BTreeMap<String, String>,
) -> Vec<u8> {
    assert!(
        !tensors.contains_key(METADATA_KEY),
        "serialize_safetensors: a tensor may not be named {METADATA_KEY}"
    );
    encode(tensors, metadata).unwrap_or_else(|e| panic!("serialize_safetensors: {e}"))
}

/// The bytes of a file, through the `safetensors` crate. The crate keeps
/// `__metadata__` in a hash map, whose order changes from run to run, so
/// the tensors go through the crate and the metadata is added to its
/// header here, in key order: the output is deterministic.
fn encode(
    tensors: &BTreeMap<String, AnyTensor>,
    metadata: &BTreeMap<String, String>,
) -> Result<Vec<u8>> {
    let fmt = |m: String| ForgeError::format("safetensors", m);
    let views = tensors
        .iter()
        .map(|(name, t)| (name.as_str(), TensorBytes(t)));
    let mut bytes = ::safetensors::serialize(views, None).map_err(|e| fmt(e.to_string()))?;
    if metadata.is_empty() {
        return Ok(bytes);
    }
    let n = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) as usize;
    let mut header: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&bytes[8..8 + n]).map_err(|e| fmt(e.to_string()))?;
    let meta = metadata
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
        .collect();
    header.insert(METADATA_KEY.to_string(), serde_json::Value::Object(meta));
    let mut text = serde_json::to_string(&header).map_err(|e| fmt(e.to_string()))?;
    while text.len() % 8 != 0 {
        text.push(' ');
    }
    if text.len() > MAX_HEADER_BYTES {
        return Err(fmt(format!(
            "a header of {} bytes exceeds the {MAX_HEADER_BYTES}-byte limit",
            text.len()
        )));
    }
    let data = bytes.split_off(8 + n);
    let mut out = Vec::with_capacity(8 + text.len() + data.len());
    out.extend_from_slice(&(text.len() as u64).to_le_bytes());
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(&data);
    Ok(out)
}

/// An [`AnyTensor`] as the `safetensors` crate's [`View`].
struct TensorBytes<'a>(&'a AnyTensor);

impl View for TensorBytes<'_> {
    fn dtype(&self) -> Dtype {
        match self.0.dtype() {
            DType::F16 => Dtype::F16,
            DType::BF16 => Dtype::BF16,
            DType::F32 => Dtype::F32,
            DType::F64 => Dtype::F64,
            DType::I32 => Dtype::I32,
            DType::I64 => Dtype::I64,
            DType::U8 => Dtype::U8,
            DType::Bool => Dtype::BOOL,
        }
    }
    fn shape(&self) -> &[usize] {
        self.0.shape()
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Owned(self.0.to_le_bytes())
    }
    fn data_len(&self) -> usize {
        self.0.numel() * self.0.dtype().size_in_bytes()
    }
}

/// Writes tensors and metadata to a safetensors file, atomically (see
/// [`atomic_write`]): a crash or error leaves any previous file intact.
///
/// # Errors
/// [`ForgeError::Invalid`] when a tensor is named `__metadata__`;
/// [`ForgeError::Io`] when the file cannot be written.
///
/// ```
/// use forge::io::{read_safetensors, write_safetensors, AnyTensor};
/// use std::collections::BTreeMap;
/// let path = std::env::temp_dir().join(format!("forge-doc-{}.safetensors", std::process::id()));
/// let mut t = BTreeMap::new();
/// t.insert("x".to_string(), AnyTensor::from(forge::Tensor::<f64>::from_vec(vec![0.1], &[1])));
/// let mut meta = BTreeMap::new();
/// meta.insert("epoch".to_string(), "3".to_string());
/// write_safetensors(&path, &t, &meta).unwrap();
/// let back = read_safetensors(&path).unwrap();
/// assert_eq!((back.tensors, back.metadata), (t, meta));
/// std::fs::remove_file(&path).unwrap();
/// ```
pub fn write_safetensors(
    path: impl AsRef<Path>,
    tensors: &BTreeMap<String, AnyTensor>,
    metadata: &BTreeMap<String, String>,
) -> Result<()> {
    if tensors.contains_key(METADATA_KEY) {
        return Err(ForgeError::invalid(
            "tensor name",
            format!("a tensor may not be named {METADATA_KEY}"),
        ));
    }
    atomic_write(path, &encode(tensors, metadata)?)
}

#[cfg(test)]
#[path = "safetensors_tests.rs"]
mod tests;
