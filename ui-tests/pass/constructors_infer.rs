// Constructors infer the default device without a turbofish, and a model
// whose element type is fixed (forge::f32, or the annotated output) takes
// `Tensor::ones` as is. Was: `cannot satisfy _: Device`.
use forge::prelude::*;

fn main() {
    let t = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
    assert_eq!(t.shape(), &[2]);
    let mut rng = Rng::new(0);
    let model = sequential![forge::f32::Linear::new(3, 4, &mut rng), Relu];
    let y = model.forward(Tensor::ones(&[2, 3]));
    assert_eq!(y.shape(), &[2, 4]);
    let generic = sequential![Linear::new(3, 2, &mut rng), Relu];
    let z: Tensor = generic.forward(Tensor::ones(&[2, 3]));
    // Shapes of one type: reshape to another tensor's shape.
    assert_eq!(z.reshape(&[4]).reshape(z.shape()).shape(), &[2, 2]);
}
