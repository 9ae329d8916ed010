//! The optim tests: optimizers, schedules and their files.
//! A module of the one suite binary (`tests/suite.rs`; CONTRIBUTING.md,
//! "The test layout"), its files modules named as the files.

mod optim_behaviour;
mod optim_files;
mod optim_loss_mutants;
mod optim_parity;
mod optim_schedule_contracts;
mod optim_validation;
