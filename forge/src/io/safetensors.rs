//! Named tensors in the [safetensors] format: an 8-byte little-endian header
//! length, a JSON header (`{"name": {"dtype", "shape", "data_offsets"}, ...,
//! "__metadata__": {string: string}}`), then the raw little-endian data.
//!
//! The reader is written from the format description, without `unsafe`, and
//! validates everything before touching the data: every malformed file is a
//! [`ForgeError::Format`], never a panic, an out-of-bounds read or an
//! allocation larger than the file itself.
//!
//! [safetensors]: https://github.com/huggingface/safetensors

use super::atomic::atomic_write;
use super::json::{write_string, Parser};
use crate::error::{ForgeError, Result};
use crate::tensor::{DType, Element, Float, Tensor};
use std::any::Any;
use std::collections::BTreeMap;
use std::path::Path;

/// The largest JSON header accepted, in bytes (the reference implementation
/// uses the same 100 MB cap).
pub const MAX_HEADER_BYTES: usize = 100_000_000;

/// The most dimensions a tensor may have (PyTorch's limit too).
pub const MAX_RANK: usize = 64;

/// The reserved header key holding the string metadata.
const METADATA_KEY: &str = "__metadata__";

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
                    ForgeError::Format(format!(
                        "tensor '{name}': invalid {} value",
                        E::DTYPE.name()
                    ))
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

/// One header entry before validation against the data.
struct Entry {
    dtype: DType,
    shape: Vec<usize>,
    start: usize,
    end: usize,
}

fn dtype_from_name(name: &str) -> Option<DType> {
    Some(match name {
        "F16" => DType::F16,
        "BF16" => DType::BF16,
        "F32" => DType::F32,
        "F64" => DType::F64,
        "I32" => DType::I32,
        "I64" => DType::I64,
        "U8" => DType::U8,
        "BOOL" => DType::Bool,
        _ => return None,
    })
}

fn to_usize(p: &Parser, v: u64) -> Result<usize> {
    usize::try_from(v).map_err(|_| p.err("integer too large for this platform"))
}

/// Parses one `{"dtype": .., "shape": [..], "data_offsets": [a, b]}`.
fn parse_entry(p: &mut Parser, name: &str) -> Result<Entry> {
    let mut dtype = None;
    let mut shape = None;
    let mut offsets = None;
    p.object(|p, key| {
        let dup = match key.as_str() {
            "dtype" => {
                let s = p.string()?;
                let d = dtype_from_name(&s)
                    .ok_or_else(|| p.err(format!("tensor '{name}': unsupported dtype '{s}'")))?;
                dtype.replace(d).is_some()
            }
            "shape" => {
                let mut dims = Vec::new();
                p.array(|p| {
                    if dims.len() == MAX_RANK {
                        return Err(
                            p.err(format!("tensor '{name}': more than {MAX_RANK} dimensions"))
                        );
                    }
                    let v = p.uint()?;
                    dims.push(to_usize(p, v)?);
                    Ok(())
                })?;
                shape.replace(dims).is_some()
            }
            "data_offsets" => {
                let mut v = Vec::new();
                p.array(|p| {
                    if v.len() == 2 {
                        return Err(p.err(format!("tensor '{name}': more than 2 data_offsets")));
                    }
                    let x = p.uint()?;
                    v.push(to_usize(p, x)?);
                    Ok(())
                })?;
                match v[..] {
                    [a, b] => offsets.replace((a, b)).is_some(),
                    _ => return Err(p.err(format!("tensor '{name}': data_offsets needs 2 values"))),
                }
            }
            _ => {
                p.skip_value(2)?;
                false
            }
        };
        if dup {
            return Err(p.err(format!("tensor '{name}': duplicate field '{key}'")));
        }
        Ok(())
    })?;
    let missing = |f: &str| p.err(format!("tensor '{name}': missing field '{f}'"));
    let (start, end) = offsets.ok_or_else(|| missing("data_offsets"))?;
    Ok(Entry {
        dtype: dtype.ok_or_else(|| missing("dtype"))?,
        shape: shape.ok_or_else(|| missing("shape"))?,
        start,
        end,
    })
}

/// Parses the JSON header into entries and metadata, refusing duplicates.
fn parse_header(text: &str) -> Result<(BTreeMap<String, Entry>, BTreeMap<String, String>)> {
    let mut p = Parser::new(text);
    let mut entries = BTreeMap::new();
    let mut metadata = None;
    p.object(|p, key| {
        if key == METADATA_KEY {
            let mut m = BTreeMap::new();
            p.object(|p, k| {
                if !p.at_string() {
                    return Err(p.err(format!("metadata '{k}' is not a string")));
                }
                let v = p.string()?;
                match m.insert(k, v) {
                    Some(_) => Err(p.err("duplicate metadata key")),
                    None => Ok(()),
                }
            })?;
            if metadata.replace(m).is_some() {
                return Err(p.err("duplicate __metadata__"));
            }
        } else {
            let e = parse_entry(p, &key)?;
            if entries.contains_key(&key) {
                return Err(p.err(format!("duplicate tensor name '{key}'")));
            }
            entries.insert(key, e);
        }
        Ok(())
    })?;
    p.end()?;
    Ok((entries, metadata.unwrap_or_default()))
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
    let fmt = |m: String| ForgeError::Format(format!("safetensors: {m}"));
    let len_bytes: [u8; 8] = bytes
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| {
            fmt(format!(
                "{} bytes cannot hold the 8-byte header length",
                bytes.len()
            ))
        })?;
    let n = u64::from_le_bytes(len_bytes);
    if n > MAX_HEADER_BYTES as u64 {
        return Err(fmt(format!(
            "header length {n} exceeds the {MAX_HEADER_BYTES}-byte limit"
        )));
    }
    let header_end = 8usize
        .checked_add(n as usize)
        .filter(|&e| e <= bytes.len())
        .ok_or_else(|| {
            fmt(format!(
                "header length {n} exceeds the {} bytes that follow it",
                bytes.len() - 8
            ))
        })?;
    let text = std::str::from_utf8(&bytes[8..header_end])
        .map_err(|e| fmt(format!("header is not UTF-8: {e}")))?;
    let (entries, metadata) = parse_header(text)?;
    let data = &bytes[header_end..];

    // Sizes first, then the layout: sorted by offsets, each tensor must
    // start where the previous one ended and the last end with the data.
    let mut order: Vec<(&String, &Entry)> = Vec::with_capacity(entries.len());
    for (name, e) in &entries {
        let numel = e
            .shape
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| fmt(format!("tensor '{name}': shape {:?} overflows", e.shape)))?;
        let nbytes = numel
            .checked_mul(e.dtype.size_in_bytes())
            .ok_or_else(|| fmt(format!("tensor '{name}': byte size overflows")))?;
        if e.end < e.start || e.end - e.start != nbytes {
            return Err(fmt(format!(
                "tensor '{name}': data_offsets [{}, {}] do not hold {nbytes} bytes of {} {:?}",
                e.start,
                e.end,
                e.dtype.name(),
                e.shape
            )));
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
            return Err(fmt(format!(
                "tensor '{name}' at offset {} {what} byte {cursor}",
                e.start
            )));
        }
        cursor = e.end;
    }
    if cursor != data.len() {
        return Err(fmt(format!(
            "tensors cover {cursor} bytes of data but the file holds {}",
            data.len()
        )));
    }

    let mut tensors = BTreeMap::new();
    for (name, e) in order {
        let raw = data
            .get(e.start..e.end)
            .ok_or_else(|| fmt(format!("tensor '{name}': offsets out of range")))?;
        let t = AnyTensor::decode(name, e.dtype, &e.shape, raw)?;
        tensors.insert(name.clone(), t);
    }
    Ok(SafeTensorsData { tensors, metadata })
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
    parse_safetensors(&bytes).map_err(|e| match e {
        ForgeError::Format(m) => ForgeError::Format(format!("{}: {m}", path.display())),
        other => other,
    })
}

/// Encodes tensors and metadata as a safetensors file.
///
/// Tensors are laid out by decreasing element size, then by name, and the
/// header is padded with spaces to a multiple of 8 bytes, so every tensor's
/// data is aligned to its element size. `__metadata__` is omitted when
/// `metadata` is empty. The output is deterministic.
///
/// # Panics
/// When a tensor is named `__metadata__` (reserved by the format);
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
    let mut order: Vec<(&String, &AnyTensor)> = tensors.iter().collect();
    order.sort_by_key(|(name, t)| (std::cmp::Reverse(t.dtype().size_in_bytes()), *name));

    let mut header = String::from("{");
    let mut first = true;
    let mut sep = |h: &mut String| {
        if !std::mem::take(&mut first) {
            h.push(',');
        }
    };
    if !metadata.is_empty() {
        sep(&mut header);
        write_string(&mut header, METADATA_KEY);
        header.push_str(":{");
        for (i, (k, v)) in metadata.iter().enumerate() {
            if i > 0 {
                header.push(',');
            }
            write_string(&mut header, k);
            header.push(':');
            write_string(&mut header, v);
        }
        header.push('}');
    }
    let mut offset = 0usize;
    for (name, t) in &order {
        let nbytes = t.numel() * t.dtype().size_in_bytes();
        sep(&mut header);
        write_string(&mut header, name);
        header.push_str(&format!(
            ":{{\"dtype\":\"{}\",\"shape\":{:?},\"data_offsets\":[{},{}]}}",
            t.dtype().name(),
            t.shape(),
            offset,
            offset + nbytes
        ));
        offset += nbytes;
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }

    let mut out = Vec::with_capacity(8 + header.len() + offset);
    out.extend_from_slice(&(header.len() as u64).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for (_, t) in order {
        with_tensor!(t, x => x.as_slice().iter().for_each(|v| v.put(&mut out)));
    }
    out
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
        return Err(ForgeError::Invalid(format!(
            "a tensor may not be named {METADATA_KEY}"
        )));
    }
    atomic_write(path, &serialize_safetensors(tensors, metadata))
}

#[cfg(test)]
#[path = "safetensors_tests.rs"]
mod tests;
