use forge::prelude::*;

// Holds tensors but does not derive Layer.
struct Encoder {
    w: Tensor,
}

#[derive(Layer)]
struct Model {
    encoder: Encoder,
    head: Linear,
}

fn main() {}
