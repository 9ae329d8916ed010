//! Reading a safetensors file: one pass over the header (forge's own,
//! [`parse_header`]), the layout checked against the data, each tensor's
//! checksum verified when the file carries one, and the data decoded.

use super::any_tensor::AnyTensor;
use super::checksum;
use super::header::{parse_header, Entry, Header, MAX_HEADER_BYTES};
use crate::error::{ForgeError, Result};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read};
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
    let first = bytes.get(..8).and_then(|b| b.try_into().ok());
    let header_end = header_end(first, bytes.len())?;
    let header = parse_header_bytes(&bytes[8..header_end])?;
    let data = &bytes[header_end..];
    decode(header, data.len(), &mut |start, buf| {
        buf.copy_from_slice(&data[start..start + buf.len()]);
        Ok(())
    })
}

/// The header's entries and metadata from its bytes.
fn parse_header_bytes(bytes: &[u8]) -> Result<Header> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
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
    parse_header(text).map_err(|m| ForgeError::format("safetensors", m))
}

/// Checks the layout against the `data_len` bytes of data, then reads
/// every tensor in the order of the data: `fill(start, buf)` puts the
/// data's bytes from offset `start` into `buf`, and each tensor's
/// checksum, when the metadata holds one, is verified.
fn decode(
    header: Header,
    data_len: usize,
    fill: &mut dyn FnMut(usize, &mut [u8]) -> Result<()>,
) -> Result<SafeTensorsData> {
    let fmt = |m: String| ForgeError::format("safetensors", m);
    let Header { entries, metadata } = header;
    check_layout(&entries, data_len).map_err(fmt)?;
    let (metadata, sums) = checksum::split(metadata);
    if let Some(name) = sums.keys().find(|n| !entries.contains_key(*n)) {
        return Err(fmt(format!(
            "a checksum for tensor '{name}', which the file does not hold"
        )));
    }
    let mut order: Vec<(String, Entry)> = entries.into_iter().collect();
    order.sort_by_key(|(_, e)| e.start);
    let mut tensors = BTreeMap::new();
    for (name, e) in order {
        let stored = sums.get(&name);
        let check = |bytes: &[u8]| match stored {
            Some(s) => checksum::verify(&name, s, bytes).map_err(fmt),
            None => Ok(()),
        };
        let t = AnyTensor::read(
            &name,
            e.dtype,
            &e.shape,
            &mut |buf| fill(e.start, buf),
            &check,
        )?;
        tensors.insert(name, t);
    }
    Ok(SafeTensorsData { tensors, metadata })
}

/// Where the JSON header ends, from the 8-byte length before it (`None`
/// when the input is shorter) and the input's length. A length that
/// cannot be right (beyond the file or the limit) means the bytes are not
/// a safetensors file at all (a text file gives a length of about 10^18).
fn header_end(first: Option<[u8; 8]>, total: usize) -> Result<usize> {
    let not = |m: String| ForgeError::format("", format!("not a safetensors file: {m}"));
    let len_bytes = first.ok_or_else(|| {
        not(format!(
            "{total} bytes cannot hold the 8-byte header length"
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
        .filter(|&e| e <= total)
        .ok_or_else(|| {
            not(format!(
                "header length {n} exceeds the {} bytes that follow it",
                total - 8
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

/// Reads and parses a safetensors file: the header first, then each
/// tensor's data straight into the tensor's storage (no copy of the whole
/// file in memory).
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
    let io = |e: std::io::Error| ForgeError::io(path, e);
    let file = File::open(path).map_err(io)?;
    let total = file.metadata().map_err(io)?.len();
    let total = usize::try_from(total).map_err(|_| {
        io(std::io::Error::other(format!(
            "a file of {total} bytes does not fit this platform's memory"
        )))
    })?;
    let mut r = BufReader::new(file);
    let mut first = [0u8; 8];
    let first = if total >= 8 {
        r.read_exact(&mut first).map_err(io)?;
        Some(first)
    } else {
        None
    };
    let parsed = (|| {
        let header_end = header_end(first, total)?;
        let mut text = vec![0u8; header_end - 8];
        r.read_exact(&mut text).map_err(io)?;
        let header = parse_header_bytes(&text)?;
        // The tensors come in the order of the data, which the layout
        // check has found contiguous from offset 0: each read continues
        // where the previous one ended.
        decode(header, total - header_end, &mut |_, buf| {
            r.read_exact(buf).map_err(io)
        })
    })();
    parsed.map_err(|e| e.in_file(path))
}
