//! The misc test binary: concurrency, the distributed fallback on threads,
//! panic messages, the README's examples and usability. One binary per area
//! (README, "Test layout"): each file is a module, named as it was when it
//! was a binary of its own.

mod concurrency;
mod distributed;
mod panic_messages;
mod readme_example;
mod usability;
