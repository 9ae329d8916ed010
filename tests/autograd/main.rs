//! The autograd tests: the tape's contracts, the checkers, second-order parity.
//! A module of the one suite binary (`tests/suite.rs`; CONTRIBUTING.md,
//! "The test layout"), its files modules named as the files.

mod autograd_checks_fail;
mod autograd_contracts;
mod autograd_hvp;
