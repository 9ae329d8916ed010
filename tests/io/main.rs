//! The io tests: files and formats (IDX, safetensors, checkpoints, the
//! data loader, the fuzz corpus). `fuzz_corpus` installs a counting global
//! allocator for the whole suite binary: it forwards every call to the
//! system allocator unchanged and notes the largest request per thread.
//! A module of the one suite binary (`tests/suite.rs`; CONTRIBUTING.md,
//! "The test layout"), its files modules named as the files.

mod checkpoint;
mod checksums;
mod data_loader;
mod fuzz_corpus;
mod io_idx;
mod io_safetensors;
