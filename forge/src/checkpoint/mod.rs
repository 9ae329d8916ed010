//! Checkpoints: a model's tensors as safetensors keyed by tensor path
//! ([`LayerIo`]), and a whole training state (model, optimizer, schedule,
//! step) in one file ([`TrainingCheckpoint`]). Every file is written
//! atomically, so a crash mid-write leaves the previous checkpoint intact.
//!
//! This module sits above [`io`](crate::io) (files and tensors) and
//! [`optim`](crate::optim) (optimizer and schedule state): neither of them
//! knows about checkpoints.
//!
//! ```
//! use forge::checkpoint::LayerIo;
//! use forge::prelude::*;
//! let path = std::env::temp_dir().join(format!("forge-ckpt-mod-doc-{}.safetensors", std::process::id()));
//! Linear::<f32>::new(3, 2, &mut Rng::new(0)).save(&path).unwrap();
//! let b = Linear::<f32>::new(3, 2, &mut Rng::new(1)).loaded(&path).unwrap();
//! assert_eq!(b.weight.shape(), &[2, 3]);
//! std::fs::remove_file(&path).unwrap();
//! ```

mod model;
mod training;

pub use model::{read_metadata, LayerIo};
pub use training::{ScheduleState, TrainingCheckpoint};
