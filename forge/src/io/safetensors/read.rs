//! Reading a safetensors file: one pass over the header (forge's own,
//! [`parse_header`]), the layout checked against the data, each tensor's
//! checksum verified when the file carries one, and the data decoded.

use super::any_tensor::AnyTensor;
use super::checksum;
use super::header::{parse_header, Entry, Header, MAX_HEADER_BYTES};
use crate::error::{ForgeError, Result};
use std::collections::BTreeMap;
use std::path::Path;

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
    /// The `__metadata__` strings (empty when the file has none), without
    /// forge's checksums (keys starting with
    /// [`CHECKSUM_PREFIX`](super::CHECKSUM_PREFIX)), which were verified.
    pub metadata: BTreeMap<String, String>,
}

/// Parses a safetensors file held in memory. The tensors whose checksums
/// the metadata holds (every file forge writes) are verified; files
/// without checksums (older ones, other tools') load unverified.
///
/// # Errors
/// [`ForgeError::Format`] for any malformed input: a header length larger
/// than the file or than [`MAX_HEADER_BYTES`], a header that is not UTF-8
/// JSON of the expected shape, an unsupported dtype, a duplicate name,
/// offsets that are out of range, overlapping, leave gaps or do not cover
/// the data exactly, a shape whose byte size differs from its offsets (or
/// overflows), a `BOOL` byte other than 0 and 1, or data that does not
/// match its checksum (the message names the tensor).
///
/// ```
/// use forge::io::{parse_safetensors, serialize_safetensors, AnyTensor};
/// use std::collections::BTreeMap;
/// let mut t = BTreeMap::new();
/// t.insert("w".to_string(), AnyTensor::from(forge::Tensor::<f32>::ones(&[2, 2])));
/// let mut bytes = serialize_safetensors(&t, &BTreeMap::new());
/// let back = parse_safetensors(&bytes).unwrap();
/// assert_eq!(back.tensors, t);
/// assert!(parse_safetensors(&bytes[..bytes.len() - 1]).is_err());
/// *bytes.last_mut().unwrap() ^= 0x40; // one flipped bit in the data
/// let e = parse_safetensors(&bytes).unwrap_err().to_string();
/// assert!(e.contains("tensor 'w'") && e.contains("checksum"), "{e}");
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
    let data = &bytes[header_end..];
    check_layout(&entries, data.len()).map_err(fmt)?;
    let (metadata, sums) = checksum::split(metadata);
    if let Some(name) = sums.keys().find(|n| !entries.contains_key(*n)) {
        return Err(fmt(format!(
            "a checksum for tensor '{name}', which the file does not hold"
        )));
    }
    let mut tensors = BTreeMap::new();
    for (name, e) in entries {
        let raw = &data[e.start..e.end];
        if let Some(stored) = sums.get(&name) {
            checksum::verify(&name, stored, raw).map_err(fmt)?;
        }
        let t = AnyTensor::decode(&name, e.dtype, &e.shape, raw)?;
        tensors.insert(name, t);
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
/// start where the previous one ended and the last end with the data. So
/// every entry's `start..end` is in bounds afterwards.
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
/// errors of [`parse_safetensors`], whose origin then names the file.
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
