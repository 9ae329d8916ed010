use forge::prelude::*;

#[derive(Layer)]
struct Model {
    #[frozn]
    scale: Tensor,
}

fn main() {}
