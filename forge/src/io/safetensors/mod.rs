//! Named tensors in the [safetensors] format: an 8-byte little-endian header
//! length, a JSON header (`{"__metadata__": {string: string}, "name":
//! {"dtype", "shape", "data_offsets"}, ...}`), then the raw little-endian
//! data.
//!
//! forge reads and writes the format itself, and the reference crate
//! ([`safetensors`](https://docs.rs/safetensors)) checks its files in the
//! tests. Reading parses the header once (`header`), refusing duplicate
//! names and fields, dtypes forge does not store, shapes of more than
//! [`MAX_RANK`] dimensions and offsets that overlap or leave gaps, with a
//! message naming the tensor at fault; every malformed file is a
//! [`ForgeError::Format`](crate::ForgeError::Format), never a panic, an
//! out-of-bounds read or an allocation larger than the file. Writing
//! streams each tensor's bytes from its storage. Every file forge writes
//! carries a CRC-32C of each tensor in its metadata ([`CHECKSUM_PREFIX`]),
//! which reading verifies.
//!
//! The files (each imports only the ones above it): `header` (limits, the
//! header's JSON both ways), `checksum`, `any_tensor` (the tensor types
//! and their bytes), then `read` and `write`.
//!
//! [safetensors]: https://github.com/huggingface/safetensors

mod any_tensor;
mod checksum;
mod header;
mod read;
mod write;

pub use any_tensor::AnyTensor;
pub use checksum::CHECKSUM_PREFIX;
pub use header::{MAX_HEADER_BYTES, MAX_RANK};
pub use read::{parse_safetensors, read_safetensors, SafeTensorsData};
pub use write::{serialize_safetensors, write_safetensors};

#[cfg(test)]
mod tests;
