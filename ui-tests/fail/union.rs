use forge::prelude::*;

#[derive(Layer)]
union Bits {
    a: u32,
    b: f32,
}

fn main() {}
