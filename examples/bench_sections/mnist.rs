//! The `mnist` section of `examples/bench.rs`: LeNet-5 and MLP training
//! steps (forward, cross-entropy, backward, Adam step) at batch 64 and 128
//! on 1 and 2 threads, split into phases. PyTorch's time on the same
//! machine in the same run comes from `bench/compare.sh --models mlp,lenet`.

use forge::models::mnist::{LeNet5, MnistMlp};
use forge::nn::functional::{cross_entropy_with, CrossEntropyOptions};
use forge::nn::{Forward, Layer};
use forge::optim::Adam;
use forge::runtime::set_num_threads;
use forge::{Gradients, Rng, Tensor};
use std::time::Instant;

/// Per-phase medians of one training step, in seconds.
#[derive(Clone, Copy, Default)]
struct Phases {
    forward: f64,
    backward: f64,
    optimizer: f64,
    total: f64,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One Adam step over every trainable parameter, keyed by path.
fn adam_step<M: Layer>(opt: &mut Adam, model: &mut M, grads: &Gradients<f32>) {
    model.for_each_parameter_mut(&mut |path, p| {
        opt.step_params(vec![(path, p)], grads).expect("shapes fit");
    });
}

/// Times `steps` training steps after `warmup` untimed ones.
fn time_steps<M>(model: &mut M, batch: usize, threads: usize, warmup: usize, steps: usize) -> Phases
where
    M: Layer + Forward<Tensor, Output = Tensor>,
{
    set_num_threads(threads);
    let mut rng = Rng::new(0);
    let x = Tensor::<f32>::normal(&[batch, 1, 28, 28], 0.0, 1.0, &mut rng);
    let y = Tensor::<i64>::from_vec((0..batch).map(|_| rng.below(10) as i64).collect(), &[batch]);
    let mut opt = Adam::<f32>::new(1e-3);
    let (mut f, mut b, mut o, mut t) = (vec![], vec![], vec![], vec![]);
    for i in 0..warmup + steps {
        let t0 = Instant::now();
        let loss = cross_entropy_with(
            &model.forward(x.clone()),
            &y,
            CrossEntropyOptions::default(),
        );
        let t1 = Instant::now();
        let grads = loss.backward();
        drop(loss);
        let t2 = Instant::now();
        adam_step(&mut opt, model, &grads);
        drop(grads);
        let t3 = Instant::now();
        if i >= warmup {
            f.push((t1 - t0).as_secs_f64());
            b.push((t2 - t1).as_secs_f64());
            o.push((t3 - t2).as_secs_f64());
            t.push((t3 - t0).as_secs_f64());
        }
    }
    Phases {
        forward: median(&mut f),
        backward: median(&mut b),
        optimizer: median(&mut o),
        total: median(&mut t),
    }
}

/// Prints one line per (model, batch, threads).
pub fn run(quick: bool) {
    let (warmup, steps) = if quick { (2, 5) } else { (5, 60) };
    println!(
        "{:<6} {:>5} {:>3}  {:>8} {:>9}  {:>7} {:>7} {:>7}",
        "model", "batch", "thr", "ms/step", "img/s", "fwd ms", "bwd ms", "adam ms"
    );
    for name in ["mlp", "lenet"] {
        for batch in [64, 128] {
            for threads in [1, 2] {
                let p = if name == "mlp" {
                    let mut m = MnistMlp::new(&mut Rng::new(0));
                    time_steps(&mut m, batch, threads, warmup, steps)
                } else {
                    let mut m = LeNet5::new(&mut Rng::new(0));
                    time_steps(&mut m, batch, threads, warmup, steps)
                };
                println!(
                    "{:<6} {:>5} {:>3}  {:>8.2} {:>9.0}  {:>7.2} {:>7.2} {:>7.2}",
                    name,
                    batch,
                    threads,
                    p.total * 1e3,
                    batch as f64 / p.total,
                    p.forward * 1e3,
                    p.backward * 1e3,
                    p.optimizer * 1e3
                );
            }
        }
    }
    println!("PyTorch's time in the same run: bash bench/compare.sh --models mlp,lenet");
}
