//! The misc tests: concurrency, the distributed fallback on threads, panic
//! messages, the README's examples and usability.
//! A module of the one suite binary (`tests/suite.rs`; CONTRIBUTING.md,
//! "The test layout"), its files modules named as the files.

mod concurrency;
mod distributed;
mod docs_links;
mod panic_messages;
mod readme_example;
mod usability;
