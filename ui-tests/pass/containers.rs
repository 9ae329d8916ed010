// Option, Vec, arrays and Box of layers and of tensors.
use forge::prelude::*;

#[derive(Layer)]
struct Containers {
    maybe: Option<Linear>,
    absent: Option<Linear>,
    many: Vec<Linear>,
    fixed: [Linear; 2],
    boxed: Box<Linear>,
    tensors: Vec<Option<Tensor>>,
    grid: Vec<Vec<Tensor>>,
}

fn main() {
    let mut rng = Rng::new(0);
    let c = Containers {
        maybe: Some(Linear::new_no_bias(1, 1, &mut rng)),
        absent: None,
        many: vec![Linear::new_no_bias(1, 1, &mut rng)],
        fixed: [Linear::new_no_bias(1, 1, &mut rng), Linear::new_no_bias(1, 1, &mut rng)],
        boxed: Box::new(Linear::new_no_bias(1, 1, &mut rng)),
        tensors: vec![None, Some(Tensor::ones(&[1]).requires_grad())],
        grid: vec![vec![], vec![Tensor::ones(&[1]).requires_grad()]],
    };
    let names: Vec<String> = c.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "maybe.weight",
            "many.0.weight",
            "fixed.0.weight",
            "fixed.1.weight",
            "boxed.weight",
            "tensors.1",
            "grid.1.0"
        ]
    );
}
