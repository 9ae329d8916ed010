//! The IDX format of the MNIST files: a 4-byte magic number (two zero
//! bytes, an element-type code, the number of dimensions), the dimensions as
//! big-endian `u32`, then the values in row-major order. Files may be gzip
//! compressed (detected by the gzip magic `1f 8b`).
//!
//! Only unsigned bytes (type code `0x08`), the type of every MNIST file, are
//! supported. Every malformed input is a [`ForgeError::Format`]; nothing is
//! allocated before the header has been checked, and decompression stops at
//! the size the header announces (capped by a limit), so a gzip bomb cannot
//! make the reader allocate without bound.

use crate::error::{ForgeError, Result};
use crate::tensor::Tensor;
use std::io::Read;
use std::path::Path;

/// The default cap on the data size of one IDX file, in bytes (1 GiB; the
/// full MNIST training images take 47 MB).
pub const MAX_IDX_BYTES: usize = 1 << 30;

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const UBYTE: u8 = 0x08;

/// An n-dimensional array of bytes read from an IDX file.
///
/// ```
/// let a = forge::io::IdxArray { dims: vec![2, 2], data: vec![1, 2, 3, 4] };
/// assert_eq!(a.to_tensor().shape(), &[2, 2]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdxArray {
    /// The dimensions, outermost first (for MNIST images `[count, 28, 28]`).
    pub dims: Vec<usize>,
    /// The values in row-major order; `data.len()` is the product of `dims`.
    pub data: Vec<u8>,
}

impl IdxArray {
    /// The values as a `u8` tensor of shape `dims`.
    ///
    /// # Panics
    /// When `data.len()` differs from the product of `dims` (never the case
    /// for an array returned by [`parse_idx`]).
    ///
    /// ```
    /// let a = forge::io::IdxArray { dims: vec![3], data: vec![7, 8, 9] };
    /// assert_eq!(a.to_tensor().to_vec(), vec![7, 8, 9]);
    /// ```
    pub fn to_tensor(&self) -> Tensor<u8> {
        Tensor::from_vec(self.data.clone(), &self.dims)
    }

    /// The plain (uncompressed) IDX encoding of this array.
    ///
    /// # Panics
    /// When a dimension exceeds `u32::MAX`, there are more than 255
    /// dimensions, or `data.len()` differs from the product of `dims`.
    ///
    /// ```
    /// let a = forge::io::IdxArray { dims: vec![2], data: vec![5, 6] };
    /// let bytes = a.to_bytes();
    /// assert_eq!(bytes, vec![0, 0, 8, 1, 0, 0, 0, 2, 5, 6]);
    /// assert_eq!(forge::io::parse_idx(&bytes).unwrap(), a);
    /// ```
    pub fn to_bytes(&self) -> Vec<u8> {
        let n: usize = self.dims.iter().product();
        assert_eq!(
            n,
            self.data.len(),
            "IdxArray::to_bytes: dims {:?} do not match {} values",
            self.dims,
            self.data.len()
        );
        let rank =
            u8::try_from(self.dims.len()).expect("IdxArray::to_bytes: more than 255 dimensions");
        let mut out = vec![0, 0, UBYTE, rank];
        for &d in &self.dims {
            let d = u32::try_from(d).expect("IdxArray::to_bytes: dimension exceeds u32::MAX");
            out.extend_from_slice(&d.to_be_bytes());
        }
        out.extend_from_slice(&self.data);
        out
    }
}

fn format_err(m: impl std::fmt::Display) -> ForgeError {
    ForgeError::format("IDX", m.to_string())
}

/// Maps a read error: an early end is a truncated file, anything else
/// (from the decompressor) is corrupt data.
fn read_err(what: &str, e: std::io::Error) -> ForgeError {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        format_err(format!("truncated {what}"))
    } else {
        format_err(format!("corrupt {what}: {e}"))
    }
}

fn type_name(code: u8) -> &'static str {
    match code {
        0x08 => "unsigned byte",
        0x09 => "signed byte",
        0x0B => "i16",
        0x0C => "i32",
        0x0D => "f32",
        0x0E => "f64",
        _ => "unknown",
    }
}

/// Parses an IDX file held in memory, plain or gzip compressed, with the
/// default size cap [`MAX_IDX_BYTES`].
///
/// # Errors
/// [`ForgeError::Format`] for a wrong magic number, an element type other
/// than unsigned bytes, a truncated header or data, a count whose size
/// overflows or exceeds the cap, bytes after the data (trailing garbage),
/// or corrupt gzip data.
///
/// ```
/// let a = forge::io::parse_idx(&[0, 0, 8, 2, 0, 0, 0, 1, 0, 0, 0, 2, 10, 20]).unwrap();
/// assert_eq!((a.dims, a.data), (vec![1, 2], vec![10, 20]));
/// assert!(forge::io::parse_idx(&[0, 0, 8, 1, 0, 0, 0, 3, 1, 2]).is_err()); // truncated
/// assert!(forge::io::parse_idx(&[0, 0, 8, 1, 0, 0, 0, 1, 1, 2]).is_err()); // trailing byte
/// assert!(forge::io::parse_idx(&[1, 0, 8, 1, 0, 0, 0, 1, 1]).is_err()); // wrong magic
/// ```
pub fn parse_idx(bytes: &[u8]) -> Result<IdxArray> {
    parse_idx_limited(bytes, MAX_IDX_BYTES)
}

/// [`parse_idx`] with a custom cap on the data size in bytes.
///
/// # Errors
/// As [`parse_idx`]; a header announcing more than `max_bytes` values is
/// refused before anything is decompressed or allocated.
///
/// ```
/// let bytes = [0, 0, 8, 1, 0, 0, 0, 4, 1, 2, 3, 4];
/// assert!(forge::io::parse_idx_limited(&bytes, 4).is_ok());
/// assert!(forge::io::parse_idx_limited(&bytes, 3).is_err());
/// ```
pub fn parse_idx_limited(bytes: &[u8], max_bytes: usize) -> Result<IdxArray> {
    if bytes.starts_with(&GZIP_MAGIC) {
        parse_stream(
            flate2::read::MultiGzDecoder::new(bytes),
            max_bytes,
            "gzip data",
        )
    } else {
        parse_stream(bytes, max_bytes, "file")
    }
}

fn parse_stream(mut r: impl Read, max_bytes: usize, what: &str) -> Result<IdxArray> {
    let mut magic = [0u8; 4];
    r.read_exact(&mut magic)
        .map_err(|e| read_err(&format!("{what} (no 4-byte magic number)"), e))?;
    if magic[0] != 0 || magic[1] != 0 {
        return Err(format_err(format!(
            "wrong magic number {:02x} {:02x} {:02x} {:02x} (expected 00 00 08 <rank>)",
            magic[0], magic[1], magic[2], magic[3]
        )));
    }
    if magic[2] != UBYTE {
        return Err(format_err(format!(
            "element type 0x{:02x} ({}) is not supported; only unsigned bytes (0x08) are",
            magic[2],
            type_name(magic[2])
        )));
    }
    let rank = usize::from(magic[3]);
    let mut dims = Vec::with_capacity(rank);
    let mut numel: usize = 1;
    for i in 0..rank {
        let mut b = [0u8; 4];
        r.read_exact(&mut b)
            .map_err(|e| read_err(&format!("header (dimension {i} of {rank})"), e))?;
        let d = usize::try_from(u32::from_be_bytes(b))
            .map_err(|_| format_err("dimension too large for this platform"))?;
        numel = numel
            .checked_mul(d)
            .ok_or_else(|| format_err("the dimensions' product overflows"))?;
        dims.push(d);
    }
    if numel > max_bytes {
        return Err(format_err(format!(
            "dimensions {dims:?} announce {numel} bytes, more than the {max_bytes}-byte limit"
        )));
    }
    // Read at most one byte more than announced: the buffer grows only with
    // data actually present, and one extra byte reveals trailing garbage.
    let mut data = Vec::new();
    r.take(numel as u64 + 1)
        .read_to_end(&mut data)
        .map_err(|e| read_err(what, e))?;
    match data.len().cmp(&numel) {
        std::cmp::Ordering::Less => Err(format_err(format!(
            "truncated: dimensions {dims:?} announce {numel} bytes, the {what} holds {}",
            data.len()
        ))),
        std::cmp::Ordering::Greater => Err(format_err(format!(
            "trailing garbage after the {numel} bytes of dimensions {dims:?}"
        ))),
        std::cmp::Ordering::Equal => Ok(IdxArray { dims, data }),
    }
}

/// Reads an IDX file (plain or gzip compressed).
///
/// # Errors
/// [`ForgeError::Io`] (with the path) when the file cannot be read, and the
/// errors of [`parse_idx`], prefixed with the path.
///
/// ```
/// let labels = forge::io::read_idx(concat!(env!("CARGO_MANIFEST_DIR"),
///     "/../data/mnist/test-labels-idx1-ubyte.gz")).unwrap();
/// assert_eq!(labels.dims, vec![1996]);
/// assert!(labels.data.iter().all(|&l| l < 10));
/// ```
pub fn read_idx(path: impl AsRef<Path>) -> Result<IdxArray> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| ForgeError::io(path, e))?;
    parse_idx(&bytes).map_err(|e| e.in_file(path))
}

#[cfg(test)]
mod tests {
    //! The reader on small inputs, plain and gzip compressed, and on every
    //! kind of malformed header; small enough to run under Miri
    //! (`scripts/sanitize.sh miri`), which checks the decompressor's and the
    //! reader's memory accesses on them.
    use super::*;
    use std::io::Write;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    fn message(r: Result<IdxArray>) -> String {
        r.expect_err("a malformed file must be refused").to_string()
    }

    #[test]
    fn plain_and_gzip_files_round_trip() {
        let a = IdxArray {
            dims: vec![2, 3],
            data: vec![0, 1, 2, 253, 254, 255],
        };
        let bytes = a.to_bytes();
        assert_eq!(parse_idx(&bytes).unwrap(), a);
        assert_eq!(parse_idx(&gzip(&bytes)).unwrap(), a);
        // A rank-0 file holds one value.
        let scalar = parse_idx(&[0, 0, 8, 0, 42]).unwrap();
        assert_eq!((scalar.dims, scalar.data), (vec![], vec![42]));
    }

    #[test]
    fn malformed_headers_are_refused_with_their_reason() {
        assert!(message(parse_idx(&[0, 0, 8])).contains("no 4-byte magic"));
        assert!(message(parse_idx(&[0, 1, 8, 1, 0, 0, 0, 1, 7])).contains("wrong magic"));
        assert!(message(parse_idx(&[0, 0, 0x0D, 1, 0, 0, 0, 1, 7])).contains("f32"));
        assert!(message(parse_idx(&[0, 0, 8, 2, 0, 0, 0, 1, 0, 0])).contains("dimension 1 of 2"));
        let huge = [
            0, 0, 8, 3, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
        ];
        assert!(message(parse_idx(&huge)).contains("overflows"));
        assert!(message(parse_idx(&[0, 0, 8, 1, 255, 255, 255, 255])).contains("limit"));
        // 4 bytes announced, 3 allowed: refused before any data is read.
        assert!(message(parse_idx_limited(&[0, 0, 8, 1, 0, 0, 0, 4], 3)).contains("limit"));
        assert!(parse_idx_limited(&[0, 0, 8, 1, 0, 0, 0, 3, 1, 2, 3], 3).is_ok());
    }

    #[test]
    fn short_and_long_data_are_refused_compressed_or_not() {
        // 3 values announced, 2 present; 1 announced, 2 present.
        let cases: [(&[u8], &str); 2] = [
            (&[0, 0, 8, 1, 0, 0, 0, 3, 1, 2], "truncated"),
            (&[0, 0, 8, 1, 0, 0, 0, 1, 1, 2], "trailing garbage"),
        ];
        for (bytes, reason) in cases {
            let plain = message(parse_idx(bytes));
            let packed = message(parse_idx(&gzip(bytes)));
            assert!(plain.contains(reason), "{plain}");
            assert!(packed.contains(reason), "{packed}");
        }
        // A gzip stream cut in the middle is corrupt or truncated, never read.
        let packed = gzip(
            &[0, 0, 8, 1, 0, 0, 0, 64]
                .iter()
                .chain(&[9u8; 64])
                .copied()
                .collect::<Vec<_>>(),
        );
        assert!(parse_idx(&packed[..packed.len() / 2]).is_err());
    }
}
