//! The optim test binary: optimizers, schedules and their files. One binary
//! per area (README, "Test layout"): each file is a module, named as it was
//! when it was a binary of its own.

#[path = "../common/mod.rs"]
mod common;
#[path = "../composed_loss/mod.rs"]
mod composed_loss;

mod optim_behaviour;
mod optim_files;
mod optim_loss_mutants;
mod optim_parity;
mod optim_schedule_contracts;
mod optim_validation;
