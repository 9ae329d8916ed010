use forge::prelude::*;

#[derive(Layer)]
#[frozen]
struct Model {
    fc: Linear,
}

fn main() {}
