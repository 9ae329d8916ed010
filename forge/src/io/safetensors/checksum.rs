//! Per-tensor CRC-32C checksums, kept in the file's `__metadata__` as
//! `"forge.crc32c.<tensor name>": "<8 hex digits>"`, so the file stays a
//! plain safetensors file for every other reader.

use std::collections::BTreeMap;

/// The metadata key prefix of forge's per-tensor checksums: the key of
/// tensor `name`'s checksum is `format!("{CHECKSUM_PREFIX}{name}")`, its
/// value the CRC-32C (Castagnoli) of the tensor's stored bytes as 8
/// lowercase hex digits. Every file forge writes carries them; reading a
/// file verifies those present and leaves them out of
/// [`SafeTensorsData::metadata`](super::SafeTensorsData::metadata).
///
/// ```
/// use forge::io::{serialize_safetensors, AnyTensor, CHECKSUM_PREFIX};
/// use std::collections::BTreeMap;
/// let mut t = BTreeMap::new();
/// t.insert("w".to_string(), AnyTensor::from(forge::Tensor::<u8>::zeros(&[4])));
/// let bytes = serialize_safetensors(&t, &BTreeMap::new());
/// let reference = safetensors::SafeTensors::read_metadata(&bytes).unwrap().1;
/// let meta = reference.metadata().as_ref().unwrap();
/// assert_eq!(meta[&format!("{CHECKSUM_PREFIX}w")], format!("{:08x}", crc32c::crc32c(&[0; 4])));
/// ```
pub const CHECKSUM_PREFIX: &str = "forge.crc32c.";

/// The checksum of a tensor's stored bytes.
pub(super) fn crc(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

/// The metadata entry holding tensor `name`'s checksum `crc`.
pub(super) fn entry(name: &str, crc: u32) -> (String, String) {
    (format!("{CHECKSUM_PREFIX}{name}"), format!("{crc:08x}"))
}

/// Splits a file's metadata into the caller's strings and the checksums
/// by tensor name.
pub(super) fn split(
    metadata: BTreeMap<String, String>,
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let mut sums = BTreeMap::new();
    let mut rest = BTreeMap::new();
    for (k, v) in metadata {
        match k.strip_prefix(CHECKSUM_PREFIX) {
            Some(name) => {
                sums.insert(name.to_string(), v);
            }
            None => {
                rest.insert(k, v);
            }
        }
    }
    (rest, sums)
}

/// Checks tensor `name`'s bytes against the checksum the file gives; the
/// error names the tensor.
pub(super) fn verify(name: &str, stored: &str, bytes: &[u8]) -> Result<(), String> {
    let want = (stored.len() == 8 && stored.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| u32::from_str_radix(stored, 16).ok())
        .flatten()
        .ok_or_else(|| {
            format!("tensor '{name}': checksum {stored:?} is not 8 hex digits of a CRC-32C")
        })?;
    let got = crc(bytes);
    if got != want {
        return Err(format!(
            "tensor '{name}': the data does not match its checksum (CRC-32C {got:08x}, \
             the file says {want:08x}): the file is corrupt"
        ));
    }
    Ok(())
}
