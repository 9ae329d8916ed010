// A Sequential as a field of a derived struct, inside another Sequential.
use forge::prelude::*;

#[derive(Layer)]
struct Net {
    body: sequential_type![Linear, Relu, Linear],
    head: Sequential<(Linear, ())>,
}

impl Forward<Tensor> for Net {
    type Output = Tensor;
    fn forward(&self, x: Tensor) -> Tensor {
        self.head.forward(self.body.forward(x))
    }
}

fn main() {
    let mut r = Rng::new(0);
    let net = Net {
        body: sequential![Linear::new(2, 4, &mut r), Relu, Linear::new(4, 4, &mut r)],
        head: sequential![Linear::new(4, 1, &mut r)],
    };
    let model = sequential![Reshape(vec![-1, 2]), net];
    let names: Vec<String> = model.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names[0], "1.body.0.weight");
    assert_eq!(names[4], "1.head.0.weight");
    assert_eq!(model.forward(Tensor::ones(&[6])).shape(), &[3, 1]);
}
