//! The misc tests: concurrency, the distributed fallback on threads, the
//! one-way imports of forge/src, panic messages, the README's examples and
//! usability.
//! A module of the one suite binary (`tests/suite.rs`; README, "Test
//! layout"), its files modules named as the files.

mod concurrency;
mod distributed;
mod docs_links;
mod import_cycles;
mod panic_messages;
mod public_api;
mod readme_example;
mod usability;
