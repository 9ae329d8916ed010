use forge::prelude::*;

fn main() {
    let mut rng = Rng::new(0);
    // The first layer takes a tensor, not a tuple.
    let model = sequential![Linear::<f32>::new(2, 2, &mut rng), Relu];
    let _ = model.forward((Tensor::<f32>::ones(&[1, 2]), 3));
}
