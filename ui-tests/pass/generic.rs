// Generic structs: element and device parameters, where-clauses, default
// type parameters, lifetimes and const generics.
use forge::prelude::*;

#[derive(Layer)]
struct Block<E: Element, D: Device> {
    w: Tensor<E, D>,
}

#[derive(Layer)]
struct WithDefault<E: Float = f32>
where
    E: Copy,
{
    fc: Linear<E>,
    bias: Option<Tensor<E>>,
}

#[derive(Layer)]
struct Borrowing<'a, L, const N: usize> {
    inner: [L; N],
    #[skip]
    name: &'a str,
}

fn main() {
    let mut rng = Rng::new(0);
    let b = Block::<f64, Cpu> { w: Tensor::ones(&[2]).requires_grad() };
    assert_eq!(b.named_parameters()[0].0, "w");

    let d: WithDefault = WithDefault { fc: Linear::new(2, 2, &mut rng), bias: None };
    let p: Vec<Tensor<f32>> = d.parameters();
    assert_eq!(p.len(), 2);

    let x = Borrowing::<Linear<f64>, 2> {
        inner: [Linear::new(1, 1, &mut rng), Linear::new(1, 1, &mut rng)],
        name: "pair",
    };
    assert_eq!(x.name, "pair");
    assert_eq!(x.named_parameters()[3].0, "inner.1.bias");
}
