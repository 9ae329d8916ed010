// Tuple structs are visited by index; unit structs hold nothing.
use forge::prelude::*;

#[derive(Layer)]
struct Pair(Linear, #[frozen] Tensor, #[skip] usize);

#[derive(Layer)]
struct Nothing;

impl Forward<Tensor> for Nothing {
    type Output = Tensor;
    fn forward(&self, x: Tensor) -> Tensor {
        x
    }
}

fn main() {
    let p = Pair(Linear::new(2, 2, &mut Rng::new(0)), Tensor::ones(&[2]), 7);
    let names: Vec<String> = p.named_tensors().into_iter().map(|(n, _, _)| n).collect();
    assert_eq!(names, ["0.weight", "0.bias", "1"]);
    assert_eq!(p.2, 7);
    assert!(Layer::<f32>::named_tensors(&Nothing).is_empty());
    let m = sequential![Nothing, p.0];
    assert_eq!(m.forward(Tensor::ones(&[1, 2])).shape(), &[1, 2]);
}
