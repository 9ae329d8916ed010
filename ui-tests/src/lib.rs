//! trybuild cases for forge-macros live in `pass/` and `fail/`; `tests/ui.rs` runs them.

#![warn(missing_docs)]
