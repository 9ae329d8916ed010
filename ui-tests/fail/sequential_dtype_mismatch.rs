use forge::prelude::*;

fn main() {
    let mut rng = Rng::new(0);
    // An f32 layer feeding an f64 layer.
    let model = sequential![Linear::<f32>::new(2, 2, &mut rng), Relu, Linear::<f64>::new(2, 2, &mut rng)];
    let _ = model.forward(Tensor::<f32>::ones(&[1, 2]));
}
