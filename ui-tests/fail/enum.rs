use forge::prelude::*;

#[derive(Layer)]
enum Either {
    A(Linear),
    B(Linear),
}

fn main() {}
