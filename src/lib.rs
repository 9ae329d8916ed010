//! Examples and integration tests of forge live in `examples/` and `tests/`.

#![warn(missing_docs)]
