//! The misc tests: concurrency, the distributed fallback on threads, the
//! one-way imports of forge/src and its public API listing, panic messages,
//! the README's examples and usability.
//! A module of the one suite binary (`tests/suite.rs`; CONTRIBUTING.md,
//! "The test layout"), its files modules named as the files.

mod arena;
mod concurrency;
mod coverage;
mod distributed;
mod docs_links;
mod import_cycles;
mod panic_messages;
mod papercuts;
mod port;
mod public_api;
mod readme_example;
mod runtime;
mod usability;
