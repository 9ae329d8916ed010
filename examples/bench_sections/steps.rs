//! What `bench --json` (`json.rs`) and the shape sweep (`examples/sweep.rs`)
//! both build: the LSTM head model, class labels, and the timed step of a
//! classifier with cross-entropy in each mode of the plan.

use forge::nn::functional::cross_entropy_with;
use forge::nn::{Forward, Layer, Linear, Lstm};
use forge::optim::{Optimizer, UpdateRule};
use forge::quant::{quantize_dynamic, Granularity};
use forge::{autocast, no_grad, DType, Rng, Tensor};
use std::hint::black_box;

/// An LSTM and a Linear head on its last hidden state: the bench's LSTM
/// model (one layer 128 -> 128, batch first, Linear(128, 10)) and the
/// sweep's of other sizes.
#[derive(Layer)]
pub(crate) struct LstmHead {
    pub(crate) lstm: Lstm,
    pub(crate) head: Linear,
}

impl Forward<Tensor> for LstmHead {
    type Output = Tensor;
    fn forward(&self, x: Tensor) -> Tensor {
        let (_, (h, _)) = self.lstm.forward(x);
        let (n, hid) = (h.shape()[1], h.shape()[2]);
        self.head.forward(h.reshape(&[n as isize, hid as isize]))
    }
}

/// A step to time, boxed so that every model fits one schedule.
pub(crate) type Step = Box<dyn FnMut()>;

/// `n` class labels below `c`.
pub(crate) fn classes(rng: &mut Rng, n: usize, c: usize) -> Tensor<i64> {
    Tensor::<i64>::from_vec((0..n).map(|_| rng.below(c) as i64).collect(), &[n])
}

/// The timed step of a classifier `m` with cross-entropy on `(x, y)` in
/// `mode`: `train` (forward, backward, `opt` step), `fwdbwd`, `fwd`,
/// `infer` (eval, no grad), `infer_int8` (dynamically quantized, per
/// tensor) or `infer_bf16` (under bf16 autocast).
pub(crate) fn classifier_step<M, R>(
    mut m: M,
    x: Tensor,
    y: Tensor<i64>,
    mut opt: Optimizer<R, f32>,
    mode: &str,
) -> Step
where
    M: Layer + Forward<Tensor, Output = Tensor> + 'static,
    R: UpdateRule + 'static,
{
    let ce = move |m: &M, x: &Tensor, y: &Tensor<i64>| {
        cross_entropy_with(&m.forward(x.clone()), y, Default::default())
    };
    match mode {
        "train" => Box::new(move || {
            let grads = ce(&m, &x, &y).backward();
            opt.step(&mut m, &grads).expect("shapes match");
        }),
        "fwdbwd" => Box::new(move || {
            black_box(ce(&m, &x, &y).backward());
        }),
        "fwd" => Box::new(move || {
            black_box(ce(&m, &x, &y));
        }),
        "infer" => {
            m.eval();
            Box::new(move || {
                black_box(no_grad(|| m.forward(x.clone())));
            })
        }
        // infer_bench.py's int8 rows: the Linear and LSTM layers
        // dynamically quantized (per tensor, PyTorch's default qconfig),
        // as its quantize_dynamic(m, {nn.Linear, nn.LSTM})
        "infer_int8" => {
            m.eval();
            quantize_dynamic(&mut m, Granularity::PerTensor);
            Box::new(move || {
                black_box(no_grad(|| m.forward(x.clone())));
            })
        }
        // infer_bench.py's bf16 rows: the forward under bf16 autocast,
        // entered inside each timed call as the script does (PyTorch's
        // autocast cache lives only as long as its context, so it converts
        // the weights in every call; forge's cache keeps them across
        // scopes until a weight is written)
        "infer_bf16" => {
            m.eval();
            Box::new(move || {
                black_box(no_grad(|| autocast(DType::BF16, || m.forward(x.clone()))));
            })
        }
        _ => unreachable!("mode {mode}"),
    }
}
