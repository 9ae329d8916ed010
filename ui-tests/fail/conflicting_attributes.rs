use forge::prelude::*;

#[derive(Layer)]
struct Model {
    #[frozen]
    #[skip]
    scale: Tensor,
}

fn main() {}
