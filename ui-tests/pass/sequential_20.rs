// A 20-layer sequential! is one static type; indices run 0..19.
use forge::prelude::*;

fn main() {
    let mut r = Rng::new(0);
    let m = sequential![
        Linear::new(4, 8, &mut r), Relu, Linear::new(8, 8, &mut r), Tanh,
        Linear::new(8, 8, &mut r), Gelu, Linear::new(8, 8, &mut r), Silu,
        Linear::new(8, 8, &mut r), Sigmoid, Linear::new(8, 8, &mut r), Mish,
        Linear::new(8, 8, &mut r), LeakyRelu::default(), Linear::new(8, 8, &mut r), Elu::default(),
        Linear::new(8, 8, &mut r), Softplus::default(), Flatten, Linear::new(8, 2, &mut r),
    ];
    assert_eq!(m.len(), 20);
    let y = m.forward(Tensor::<f32>::ones(&[3, 4]));
    assert_eq!(y.shape(), &[3, 2]);
    let last = m.named_parameters().pop().unwrap().0;
    assert_eq!(last, "19.bias");
}
