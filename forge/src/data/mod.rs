//! Datasets, batching and shuffling.
