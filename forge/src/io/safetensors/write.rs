//! Writing a safetensors file: the header built from the tensors' shapes
//! and checksums, then each tensor's bytes streamed from its storage.

use super::any_tensor::AnyTensor;
use super::checksum::{self, CHECKSUM_PREFIX};
use super::header::{write_header, MAX_HEADER_BYTES, METADATA_KEY};
use crate::error::{ForgeError, Result};
use crate::io::atomic::atomic_write_with;
use crate::tensor::DType;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// A file ready to be written: its header, and its tensors in the order
/// of their data.
struct Encoded<'a> {
    header: String,
    tensors: Vec<&'a AnyTensor>,
    data_len: usize,
}

/// Where a dtype's tensors go: by decreasing element size (so that every
/// tensor's data is aligned to its element size), as the reference crate
/// orders them (it sorts by its dtype enumeration, descending).
fn layout_rank(d: DType) -> u8 {
    match d {
        DType::I64 => 8,
        DType::F64 => 7,
        DType::F32 => 6,
        DType::I32 => 5,
        DType::BF16 => 4,
        DType::F16 => 3,
        DType::I8 => 2,
        DType::U8 | DType::F8E4M3 | DType::F8E5M2 => 1,
        DType::Bool => 0,
    }
}

/// Lays out `tensors`, computes their checksums and builds the header.
/// Metadata keys starting with [`CHECKSUM_PREFIX`] are the writer's: the
/// caller's are dropped and each tensor's checksum written instead.
///
/// The caller has checked that no tensor is named `__metadata__`.
///
/// # Errors
/// [`ForgeError::Format`] when the header would exceed
/// [`MAX_HEADER_BYTES`].
fn encode<'a>(
    tensors: &'a BTreeMap<String, AnyTensor>,
    metadata: &BTreeMap<String, String>,
) -> Result<Encoded<'a>> {
    let mut order: Vec<(&String, &AnyTensor)> = tensors.iter().collect();
    // Stable: names stay in order within a dtype.
    order.sort_by_key(|(_, t)| std::cmp::Reverse(layout_rank(t.dtype())));
    let mut meta: BTreeMap<String, String> = metadata
        .iter()
        .filter(|(k, _)| !k.starts_with(CHECKSUM_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    meta.extend(
        order
            .iter()
            .map(|(name, t)| checksum::entry(name, checksum::crc(&t.le_bytes()))),
    );
    let mut offset = 0;
    let mut spans = Vec::with_capacity(order.len());
    for (name, t) in &order {
        let n = t.numel() * t.dtype().size_in_bytes();
        spans.push((name.as_str(), t.dtype(), t.shape(), offset, offset + n));
        offset += n;
    }
    let header = write_header(spans.into_iter(), &meta);
    if header.len() > MAX_HEADER_BYTES {
        return Err(ForgeError::format(
            "safetensors",
            format!(
                "a header of {} bytes exceeds the {MAX_HEADER_BYTES}-byte limit",
                header.len()
            ),
        ));
    }
    Ok(Encoded {
        header,
        tensors: order.into_iter().map(|(_, t)| t).collect(),
        data_len: offset,
    })
}

impl Encoded<'_> {
    /// The file's size in bytes.
    fn len(&self) -> usize {
        8 + self.header.len() + self.data_len
    }

    /// Writes the file: the header, then each tensor's bytes as its
    /// storage holds them (no copy on a little-endian machine).
    fn write_to(&self, w: &mut dyn Write) -> std::io::Result<()> {
        w.write_all(&(self.header.len() as u64).to_le_bytes())?;
        w.write_all(self.header.as_bytes())?;
        for t in &self.tensors {
            w.write_all(&t.le_bytes())?;
        }
        Ok(())
    }

    /// The file's bytes.
    fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len());
        self.write_to(&mut out)
            .expect("writing to a Vec cannot fail");
        out
    }
}

/// Encodes tensors and metadata as a safetensors file.
///
/// The tensors are laid out by decreasing element size, then by name, and
/// the header is padded with spaces to a multiple of 8 bytes, so every
/// tensor's data is aligned to its element size (the reference crate's
/// layout). `__metadata__` holds `metadata` and a CRC-32C of every
/// tensor's bytes (keys starting with
/// [`CHECKSUM_PREFIX`](super::CHECKSUM_PREFIX), which are the writer's: a
/// caller's keys with that prefix are replaced), in key order; it is
/// omitted when there is nothing to put in it. The output is
/// deterministic.
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
    encode(tensors, metadata)
        .unwrap_or_else(|e| panic!("serialize_safetensors: {e}"))
        .to_vec()
}

/// Writes tensors and metadata to a safetensors file (laid out as by
/// [`serialize_safetensors`], checksums included), atomically (see
/// [`atomic_write`](crate::io::atomic_write)): a crash or error leaves any
/// previous file intact. The tensors' bytes go from their storage to the
/// file without an intermediate copy of the file.
///
/// # Errors
/// [`ForgeError::Invalid`] when a tensor is named `__metadata__`;
/// [`ForgeError::Format`] when the header would exceed
/// [`MAX_HEADER_BYTES`]; [`ForgeError::Io`] when the file cannot be
/// written.
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
    let file = encode(tensors, metadata)?;
    atomic_write_with(path, |w| file.write_to(w))
}
