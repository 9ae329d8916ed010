use forge::prelude::*;

#[derive(Layer)]
struct Model {
    #[frozen]
    backbone: Linear,
    head: Linear,
}

fn main() {}
