//! A user-defined layer, derived with `#[derive(Layer)]`, inside a
//! `sequential!` model: printed, summarised and trained with SGD.
//!
//! ```sh
//! cargo run --release --example custom_layer
//! ```

use forge::nn::{record_output, summary};
use forge::prelude::*;
use std::fmt;

/// A gated residual block: `x + sigmoid(gate(x)) * tanh(value(x)) * scale`.
#[derive(Layer)]
struct GatedResidual {
    gate: Linear,
    value: Linear,
    /// A fixed per-feature scale: saved with the model, never trained.
    #[frozen]
    scale: Tensor,
}

impl GatedResidual {
    fn new(width: usize, rng: &mut Rng) -> Self {
        GatedResidual {
            gate: Linear::new(width, width, rng),
            value: Linear::new(width, width, rng),
            scale: Tensor::full(&[width], 0.5),
        }
    }
}

impl Forward<Tensor> for GatedResidual {
    type Output = Tensor;
    fn forward(&self, x: Tensor) -> Tensor {
        let g = self.gate.forward(x.clone()).sigmoid();
        let v = self.value.forward(x.clone()).tanh();
        // record_output: the block's row in `summary` shows its output shape
        record_output(self, x + g * v * &self.scale)
    }
}

/// How `println!("{model}")` shows the block.
impl fmt::Display for GatedResidual {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GatedResidual(width={})", self.scale.numel())
    }
}

fn main() {
    let mut rng = Rng::new(42);
    // Synthetic regression: y = sin(x0) + x1 * x2 on 256 points in [-1, 1)^3.
    let x = Tensor::<f32>::uniform(&[256, 3], -1.0, 1.0, &mut rng);
    let y = Tensor::from_fn(&[256, 1], |i| {
        let r = &x.as_slice()[3 * i..3 * i + 3];
        r[0].sin() + r[1] * r[2]
    });

    let mut model = sequential![
        Linear::new(3, 16, &mut rng),
        Tanh,
        GatedResidual::new(16, &mut rng),
        Linear::new(16, 1, &mut rng),
    ];
    println!("{model}");
    println!("{}", summary(&model, &[256, 3]));

    let mut opt = Sgd::new(0.1);
    let first = mse_loss(&model.forward(x.clone()), &y).item();
    for step in 0..200 {
        let loss = mse_loss(&model.forward(x.clone()), &y);
        let value = opt.backward_step(&mut model, loss).unwrap();
        if step % 25 == 0 {
            println!("step {step:>3}  loss {value:.5}");
        }
    }
    let last = mse_loss(&model.forward(x.clone()), &y).item();
    println!("loss {first:.5} -> {last:.5}");
    assert!(last < first / 2.0, "training did not reduce the loss");
    assert_eq!(
        model.state_dict()["2.scale"].to_vec(),
        vec![0.5; 16],
        "frozen"
    );
}
