use forge::prelude::*;

#[derive(Layer)]
struct Model {
    #[skip(always)]
    width: usize,
    #[frozen = true]
    scale: Tensor,
}

fn main() {}
