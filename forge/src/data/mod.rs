//! Datasets, batching and shuffling.
//!
//! - [`Dataset`]: anything with a length and an indexed `get`.
//! - [`TensorDataset`]: samples as the rows of a tuple of tensors of any
//!   element types (inputs and labels, inputs and regression targets),
//!   PyTorch's `TensorDataset`; [`Collate`] stacks tuples of tensors.
//! - [`InMemoryDataset`]: samples stored as one `[N, ...]` tensor plus
//!   `i64` labels, the shape of most small supervised sets.
//! - [`DataLoader`]: walks a dataset in batches, optionally shuffled with a
//!   seed (the same seed gives the same order, epoch after epoch), keeping
//!   or dropping the last partial batch.
//! - [`DistributedSampler`]: each rank's shard of every epoch in
//!   data-parallel training ([`DataLoader::distributed`]).
//! - [`mnist::Mnist`]: the bundled MNIST digits as two in-memory datasets.
//!
//! ```
//! use forge::data::{DataLoader, InMemoryDataset};
//! use forge::Tensor;
//! let images = Tensor::<f32>::from_fn(&[10, 2], |i| i as f32);
//! let ds = InMemoryDataset::new(images, (0..10).collect()).unwrap();
//! let loader = DataLoader::new(&ds, 4).shuffle(42);
//! let batches: Vec<_> = loader.iter().collect();
//! assert_eq!(batches.len(), 3); // 4 + 4 + 2
//! assert_eq!(batches[0].0.shape(), &[4, 2]);
//! assert_eq!(batches[2].1.shape(), &[2]);
//! ```

mod dataset;
mod loader;
pub mod mnist;
mod progress;
mod sampler;
mod tensor_dataset;
pub use dataset::{Collate, Dataset, InMemoryDataset};
pub use loader::{Batches, DataLoader, LoaderState};
pub use progress::{evaluate, fit};
pub use sampler::DistributedSampler;
pub use tensor_dataset::{TensorDataset, TensorTuple};
