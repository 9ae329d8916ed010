use forge::prelude::*;

fn main() {
    let fc = Linear::<f32>::new(2, 2, &mut Rng::new(0));
    let _ = fc.forward(vec![1.0f32, 2.0]);
}
