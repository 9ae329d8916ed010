//! The element type fixed to `f32`: aliases of forge's generic layers and
//! optimizers, so that a model that is only built, saved or loaded (never
//! fed a tensor whose type would fix its element type) needs no turbofish.
//!
//! Rust does not use a type parameter's default (`Linear<E = f32>`) to
//! infer a constructor call, so `forge::nn::Linear::new(2, 4, &mut rng)`
//! alone is ambiguous; `forge::f32::Linear::new(2, 4, &mut rng)` is not.
//! Import the names you need explicitly (they take precedence over the
//! prelude's generic ones):
//!
//! ```
//! use forge::prelude::*;
//! use forge::f32::{Adam, Linear};
//! let path = std::env::temp_dir().join(format!("forge-f32-doc-{}.safetensors", std::process::id()));
//! let model = Linear::new(2, 4, &mut Rng::new(0)); // Linear<f32>, no turbofish
//! model.save(&path).unwrap();
//! let loaded = Linear::new(2, 4, &mut Rng::new(1)).loaded(&path).unwrap();
//! assert_eq!(loaded.weight.to_vec(), model.weight.to_vec());
//! let _opt = Adam::new(1e-3); // Adam<f32>
//! std::fs::remove_file(&path).unwrap();
//! ```

/// [`nn::Linear`](crate::nn::Linear) in `f32`.
pub type Linear = crate::nn::Linear<f32>;
/// [`nn::Conv1d`](crate::nn::Conv1d) in `f32`.
pub type Conv1d = crate::nn::Conv1d<f32>;
/// [`nn::Conv2d`](crate::nn::Conv2d) in `f32`.
pub type Conv2d = crate::nn::Conv2d<f32>;
/// [`nn::ConvTranspose2d`](crate::nn::ConvTranspose2d) in `f32`.
pub type ConvTranspose2d = crate::nn::ConvTranspose2d<f32>;
/// [`nn::BatchNorm1d`](crate::nn::BatchNorm1d) in `f32`.
pub type BatchNorm1d = crate::nn::BatchNorm1d<f32>;
/// [`nn::BatchNorm2d`](crate::nn::BatchNorm2d) in `f32`.
pub type BatchNorm2d = crate::nn::BatchNorm2d<f32>;
/// [`nn::LayerNorm`](crate::nn::LayerNorm) in `f32`.
pub type LayerNorm = crate::nn::LayerNorm<f32>;
/// [`nn::GroupNorm`](crate::nn::GroupNorm) in `f32`.
pub type GroupNorm = crate::nn::GroupNorm<f32>;
/// [`nn::Embedding`](crate::nn::Embedding) in `f32`.
pub type Embedding = crate::nn::Embedding<f32>;
/// [`nn::Rnn`](crate::nn::Rnn) in `f32`.
pub type Rnn = crate::nn::Rnn<f32>;
/// [`nn::Lstm`](crate::nn::Lstm) in `f32`.
pub type Lstm = crate::nn::Lstm<f32>;
/// [`nn::Gru`](crate::nn::Gru) in `f32`.
pub type Gru = crate::nn::Gru<f32>;
/// [`nn::MultiheadAttention`](crate::nn::MultiheadAttention) in `f32`.
pub type MultiheadAttention = crate::nn::MultiheadAttention<f32>;
/// [`optim::Sgd`](crate::optim::Sgd) in `f32`.
pub type Sgd = crate::optim::Sgd<f32>;
/// [`optim::Adam`](crate::optim::Adam) in `f32`.
pub type Adam = crate::optim::Adam<f32>;
/// [`optim::AdamW`](crate::optim::AdamW) in `f32`.
pub type AdamW = crate::optim::AdamW<f32>;
/// [`optim::Adagrad`](crate::optim::Adagrad) in `f32`.
pub type Adagrad = crate::optim::Adagrad<f32>;
/// [`optim::Adadelta`](crate::optim::Adadelta) in `f32`.
pub type Adadelta = crate::optim::Adadelta<f32>;
/// [`optim::RmsProp`](crate::optim::RmsProp) in `f32`.
pub type RmsProp = crate::optim::RmsProp<f32>;
