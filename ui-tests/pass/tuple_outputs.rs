// Forward can take and return tuples; a Sequential chains them.
use forge::prelude::*;

struct Split;
impl Forward<Tensor> for Split {
    type Output = (Tensor, Tensor);
    fn forward(&self, x: Tensor) -> (Tensor, Tensor) {
        (x.clone(), x.mul_scalar(2.0))
    }
}

#[derive(Layer)]
struct AddPair;
impl Forward<(Tensor, Tensor)> for AddPair {
    type Output = Tensor;
    fn forward(&self, (a, b): (Tensor, Tensor)) -> Tensor {
        a + b
    }
}

fn main() {
    let m = sequential![Lambda::new(|x: Tensor| Split.forward(x)), AddPair, Relu];
    assert_eq!(m.forward(Tensor::ones(&[2])).to_vec(), vec![3.0, 3.0]);
}
