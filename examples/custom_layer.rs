//! A user-defined layer, derived with `#[derive(Layer)]`, inside a
//! `sequential!` model, trained for a few steps of plain SGD written by hand
//! on top of `for_each_parameter_mut` and the backward gradients.
//!
//! ```sh
//! cargo run --release --example custom_layer
//! ```

use forge::nn::TensorKind;
use forge::prelude::*;

/// A gated residual block: `x + sigmoid(gate(x)) * tanh(value(x)) * scale`.
#[derive(Layer)]
struct GatedResidual {
    gate: Linear,
    value: Linear,
    /// A fixed per-feature scale: saved with the model, never trained.
    #[frozen]
    scale: Tensor,
    #[skip]
    width: usize,
}

impl GatedResidual {
    fn new(width: usize, rng: &mut Rng) -> Self {
        GatedResidual {
            gate: Linear::new(width, width, rng),
            value: Linear::new(width, width, rng),
            scale: Tensor::full(&[width], 0.5),
            width,
        }
    }
}

impl Forward<Tensor> for GatedResidual {
    type Output = Tensor;
    fn forward(&self, x: Tensor) -> Tensor {
        assert_eq!(x.dim(-1), self.width, "GatedResidual: wrong input width");
        let g = self.gate.forward(x.clone()).sigmoid();
        let v = self.value.forward(x.clone()).tanh();
        x + g * v * &self.scale
    }
}

fn main() {
    let mut rng = Rng::new(42);

    // Synthetic regression: y = sin(x0) + x1 * x2 on 256 points in [-1, 1)^3.
    let n = 256;
    let x = Tensor::<f32>::uniform(&[n, 3], -1.0, 1.0, &mut rng);
    let xs = x.to_vec();
    let y = Tensor::from_fn(&[n, 1], |i| {
        let r = &xs[3 * i..3 * i + 3];
        r[0].sin() + r[1] * r[2]
    });

    let mut model = sequential![
        Linear::new(3, 16, &mut rng),
        Tanh,
        GatedResidual::new(16, &mut rng),
        Linear::new(16, 1, &mut rng),
    ];

    println!("tensors:");
    for (path, t, kind) in model.named_tensors() {
        let role = match kind {
            TensorKind::Weight => "weight",
            TensorKind::Frozen => "frozen",
        };
        println!("  {path:<16} {:?} {role}", t.shape());
    }
    println!("trainable scalars: {}", model.num_parameters());

    let lr = 0.1f32;
    let mut first = 0.0;
    let mut last = 0.0;
    for step in 0..200 {
        let loss = (model.forward(x.clone()) - &y).square().mean();
        let grads = loss.backward();
        model.for_each_parameter_mut(&mut |_, w| {
            let g = grads.get(w).expect("every trainable weight has a gradient");
            *w = (&*w - &g.mul_scalar(lr)).detach().requires_grad();
        });
        let l = loss.item();
        if step == 0 {
            first = l;
        }
        last = l;
        if step % 25 == 0 {
            println!("step {step:>3}  loss {l:.5}");
        }
    }
    println!("loss {first:.5} -> {last:.5}");
    assert!(last < first / 2.0, "training did not reduce the loss");
    // The frozen scale did not move.
    assert_eq!(model.state_dict()["2.scale"].to_vec(), vec![0.5; 16]);
}
