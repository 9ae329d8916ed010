//! `forge::nn::Linear` is generic over its element type, and Rust does not
//! use the `= f32` default to infer a constructor call: a model that is
//! only built and saved must name the type. `forge::f32::Linear` does
//! (see pass/f32_no_turbofish.rs).

use forge::prelude::*;

fn main() {
    let model = forge::nn::Linear::new(2, 4, &mut Rng::new(0));
    model.save("model.safetensors").unwrap();
}
