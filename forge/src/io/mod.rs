//! Files and tensors only: safetensors, atomic writes, the IDX (MNIST)
//! format. Model and training checkpoints are built on this in
//! [`checkpoint`](crate::checkpoint).
//!
//! ```
//! use forge::io::{parse_safetensors, serialize_safetensors, AnyTensor};
//! use std::collections::BTreeMap;
//! let mut t = BTreeMap::new();
//! t.insert("w".to_string(), AnyTensor::from(forge::Tensor::<f32>::zeros(&[3])));
//! let back = parse_safetensors(&serialize_safetensors(&t, &BTreeMap::new())).unwrap();
//! assert_eq!(back.tensors["w"].shape(), &[3]);
//! ```

mod atomic;
mod idx;
mod safetensors;

pub use atomic::{atomic_write, atomic_write_with};
pub use idx::{parse_idx, parse_idx_limited, read_idx, IdxArray, MAX_IDX_BYTES};
pub use safetensors::{
    parse_safetensors, read_safetensors, serialize_safetensors, write_safetensors, AnyTensor,
    SafeTensorsData, CHECKSUM_PREFIX, MAX_HEADER_BYTES, MAX_RANK,
};
