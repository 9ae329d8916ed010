//! The integration tests' one binary: each area of `tests/` (autograd, io,
//! misc, models, nn, ops, optim) is a module, declared from its
//! `tests/<area>/main.rs`, and the helpers they share are declared once
//! here (CONTRIBUTING.md, "The test layout"). Every test binary compiles at opt-level 3
//! the part of forge's generic code it uses, so one binary for the seven
//! areas builds that code once instead of seven times. A test is listed as
//! `<area>::<file>::<name>`: `cargo test --test suite nn_conv_parity` runs
//! one file, `cargo test --test suite nn::` one area.
//!
//! The areas' tests run in parallel threads of this one process: a test
//! that sets the thread count (process-wide) holds
//! `common::lock_thread_count()`.

#[path = "common/mod.rs"]
mod common;
#[path = "composed_loss/mod.rs"]
mod composed_loss;
#[path = "second_order/mod.rs"]
mod second_order;

// The areas' files keep the name `main.rs`: proptest's default regression
// path (`SourceParallel`) takes the nearest directory holding a `main.rs`
// as the source root, so seeds stay in `tests/proptest-regressions/`.
#[path = "autograd/main.rs"]
mod autograd;
#[path = "io/main.rs"]
mod io;
#[path = "misc/main.rs"]
mod misc;
#[path = "models/main.rs"]
mod models;
#[path = "nn/main.rs"]
mod nn;
#[path = "ops/main.rs"]
mod ops;
#[path = "optim/main.rs"]
mod optim;
#[path = "reliability/main.rs"]
mod reliability;
#[path = "tools/main.rs"]
mod tools;
