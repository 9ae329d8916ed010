// A hand-written Layer nests like a derived one; Box<dyn Layer> works.
use forge::nn::{Scoped, TensorVisitor, TensorVisitorMut, Visit, Visitable};
use forge::prelude::*;

struct Scale {
    s: Tensor,
}

impl Layer for Scale {
    fn visit_tensors(&self, v: &mut dyn TensorVisitor<f32>) {
        self.s.visit("s", v)
    }
    fn visit_tensors_mut(&mut self, v: &mut dyn TensorVisitorMut<f32>) {
        self.s.visit_mut("s", v)
    }
}

impl Visit<f32> for Scale {
    fn visit(&self, name: &str, v: &mut dyn TensorVisitor<f32>) {
        self.visit_tensors(&mut Scoped::new(name, v))
    }
    fn visit_mut(&mut self, name: &str, v: &mut dyn TensorVisitorMut<f32>) {
        self.visit_tensors_mut(&mut Scoped::new(name, v))
    }
}

impl Visitable for Scale {}

#[derive(Layer)]
struct Outer {
    scales: Vec<Scale>,
}

fn main() {
    let o = Outer { scales: vec![Scale { s: Tensor::ones(&[1]).requires_grad() }] };
    assert_eq!(o.named_parameters()[0].0, "scales.0.s");
    let dynamic: Box<dyn Layer> = Box::new(o);
    assert_eq!(dynamic.num_parameters(), 1);
}
