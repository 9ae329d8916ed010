//! Four threads at once: inference, backpropagation, dropout and weight
//! initialisation each give exactly (`==`) the single-thread results.

use forge::models::mnist::{LeNet5, MnistMlp};
use forge::nn::functional::{cross_entropy_with, CrossEntropyOptions};
use forge::nn::{Forward, Layer};
use forge::{Rng, Tensor};

const THREADS: usize = 4;

/// Runs `f(thread_index)` on `THREADS` threads started together and
/// returns their results in thread order.
fn on_threads<T: Send>(f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let barrier = std::sync::Barrier::new(THREADS);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|i| {
                let (f, barrier) = (&f, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    f(i)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn batch(seed: u64, n: usize) -> (Tensor, Tensor<i64>) {
    let mut rng = Rng::new(seed);
    let x = Tensor::<f32>::normal(&[n, 1, 28, 28], 0.0, 1.0, &mut rng);
    let y = Tensor::<i64>::from_vec((0..n).map(|_| rng.below(10) as i64).collect(), &[n]);
    (x, y)
}

/// All weights of a model, flattened in traversal order.
fn weights<L: Layer>(m: &L) -> Vec<(String, Vec<f32>)> {
    m.state_dict()
        .into_iter()
        .map(|(k, t)| (k, t.to_vec()))
        .collect()
}

#[test]
fn weight_init_from_four_threads_matches_one() {
    let single: Vec<_> = (0..THREADS as u64)
        .map(|s| weights(&LeNet5::new(&mut Rng::new(s))))
        .collect();
    let multi = on_threads(|i| weights(&LeNet5::new(&mut Rng::new(i as u64))));
    assert_eq!(single, multi);
    assert_ne!(single[0], single[1], "different seeds, different weights");
}

#[test]
fn inference_from_four_threads_matches_one() {
    let model = LeNet5::new(&mut Rng::new(0));
    let inputs: Vec<Tensor> = (0..THREADS as u64).map(|s| batch(s, 16).0).collect();
    let single: Vec<Vec<f32>> = inputs
        .iter()
        .map(|x| forge::no_grad(|| model.forward(x.clone())).to_vec())
        .collect();
    // One model shared by reference: inference needs only `&self`.
    let multi = on_threads(|i| forge::no_grad(|| model.forward(inputs[i].clone())).to_vec());
    assert_eq!(single, multi);
}

fn gradients<M: Layer + Forward<Tensor, Output = Tensor>>(
    model: &M,
    x: &Tensor,
    y: &Tensor<i64>,
) -> Vec<Vec<f32>> {
    let loss = cross_entropy_with(&model.forward(x.clone()), y, CrossEntropyOptions::default());
    let grads = loss.backward();
    model
        .parameters()
        .iter()
        .map(|p| {
            grads
                .get(p)
                .expect("every parameter has a gradient")
                .to_vec()
        })
        .collect()
}

#[test]
fn backprop_from_four_threads_matches_one() {
    let lenet = LeNet5::new(&mut Rng::new(1));
    let mlp = MnistMlp::new(&mut Rng::new(2));
    let data: Vec<_> = (0..THREADS as u64).map(|s| batch(10 + s, 8)).collect();
    let single: Vec<_> = data
        .iter()
        .map(|(x, y)| (gradients(&lenet, x, y), gradients(&mlp, x, y)))
        .collect();
    let multi = on_threads(|i| {
        let (x, y) = &data[i];
        (gradients(&lenet, x, y), gradients(&mlp, x, y))
    });
    assert_eq!(single, multi);
}

#[test]
fn dropout_from_four_threads_matches_one() {
    let x = Tensor::<f32>::ones(&[64, 100]).requires_grad();
    let run = |seed: u64| {
        let y = x.dropout(0.3, true, &mut Rng::new(seed));
        let g = (&y * &y).sum().backward();
        (y.to_vec(), g.get(&x).unwrap().to_vec())
    };
    let single: Vec<_> = (0..THREADS as u64).map(run).collect();
    let multi = on_threads(|i| run(i as u64));
    assert_eq!(single, multi);
    assert_ne!(single[0].0, single[1].0);
}
