use forge::prelude::*;

#[derive(Layer)]
struct Dropout {
    #[training]
    mode: u8,
}

fn main() {}
