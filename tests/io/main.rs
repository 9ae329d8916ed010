//! The io test binary: files and formats (IDX, safetensors, checkpoints, the
//! data loader, the fuzz corpus). One binary per area (README, "Test
//! layout"): each file is a module, named as it was when it was a binary of
//! its own. `fuzz_corpus` installs a counting global allocator for the whole
//! binary: it forwards every call to the system allocator unchanged.

#[path = "../common/mod.rs"]
mod common;

mod checkpoint;
mod data_loader;
mod fuzz_corpus;
mod io_idx;
mod io_safetensors;
