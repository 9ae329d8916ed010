//! Layers: the [`Layer`] traversal, [`Forward`], `Sequential`, and the layer catalogue.

pub mod functional;
pub mod init;
