//! The autograd test binary: the tape's contracts, the checkers, second-order
//! parity. One binary per area (README, "Test layout"): each file is a
//! module, named as it was when it was a binary of its own.

#[path = "../common/mod.rs"]
mod common;
#[path = "../second_order/mod.rs"]
mod second_order;

mod autograd_checks_fail;
mod autograd_contracts;
mod autograd_hvp;
