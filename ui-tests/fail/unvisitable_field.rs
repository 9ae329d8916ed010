use forge::prelude::*;

#[derive(Layer)]
struct Model {
    fc: Linear,
    hidden: usize,
}

fn main() {}
