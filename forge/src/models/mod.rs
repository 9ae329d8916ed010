//! Reference architectures.
