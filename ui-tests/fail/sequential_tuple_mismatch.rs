use forge::prelude::*;

struct Split;
impl Forward<Tensor> for Split {
    type Output = (Tensor, Tensor);
    fn forward(&self, x: Tensor) -> (Tensor, Tensor) {
        (x.clone(), x)
    }
}

fn main() {
    let mut rng = Rng::new(0);
    // Split returns a pair, Linear takes a tensor: the layers do not fit.
    let model = sequential![Split, Linear::new(2, 2, &mut rng)];
    let _ = model.forward(Tensor::ones(&[1, 2]));
}
