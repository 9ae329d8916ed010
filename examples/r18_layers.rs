//! Times ResNet-18's inference (eval mode, `no_grad`, 3x32x32 images) part
//! by part: the stem (convolution + batch norm + ReLU and max pooling, as
//! the whole model minus the rest, so it also holds what the other parts
//! lose to colder caches inside the whole model than when called alone),
//! each `BasicBlock`, the average pooling and the classifier; median of
//! interleaved rounds.
//!
//! ```sh
//! cargo run --release --example r18_layers -- --batch 1 --threads 1
//! ```

use forge::models::resnet::resnet18;
use forge::nn::{Forward, Layer};
use forge::runtime::set_num_threads;
use forge::{no_grad, Rng, Tensor};
use std::hint::black_box;
use std::time::Instant;

#[path = "bench_sections/probe_args.rs"]
mod probe_args;
use probe_args::{arg, median};

fn main() {
    let (batch, threads) = (arg("--batch", 1), arg("--threads", 1));
    let reps = arg("--reps", 50);
    set_num_threads(threads);
    let mut rng = Rng::new(0);
    let mut m = resnet18::<f32>(10, &mut rng);
    m.eval();
    let x = Tensor::<f32>::normal(&[batch, 3, 32, 32], 0.0, 1.0, &mut rng);
    let blocks: Vec<_> = m
        .layer1
        .iter()
        .chain(&m.layer2)
        .chain(&m.layer3)
        .chain(&m.layer4)
        .collect();
    // each block's input
    let mut inputs = Vec::new();
    let mut h = no_grad(|| m.maxpool.forward(m.conv1.forward(x.clone())));
    for b in &blocks {
        inputs.push(h.clone());
        h = no_grad(|| b.forward(h.clone()));
    }
    let pooled = no_grad(|| m.avgpool.forward(h.clone()).reshape(&[batch as isize, -1]));
    let names = [
        "layer1.0", "layer1.1", "layer2.0", "layer2.1", "layer3.0", "layer3.1", "layer4.0",
        "layer4.1",
    ];
    let parts = names.len() + 3;
    let mut times = vec![Vec::new(); parts];
    for _round in 0..9 {
        let time = |f: &mut dyn FnMut()| {
            let t0 = Instant::now();
            for _ in 0..reps {
                f();
            }
            t0.elapsed().as_secs_f64() * 1e3 / reps as f64
        };
        times[0].push(time(&mut || {
            black_box(no_grad(|| m.forward(x.clone())));
        }));
        for (i, b) in blocks.iter().enumerate() {
            let inp = &inputs[i];
            times[i + 1].push(time(&mut || {
                black_box(no_grad(|| b.forward(inp.clone())));
            }));
        }
        times[names.len() + 1].push(time(&mut || {
            black_box(no_grad(|| m.avgpool.forward(h.clone())));
        }));
        times[names.len() + 2].push(time(&mut || {
            black_box(no_grad(|| m.fc.forward(pooled.clone())));
        }));
    }
    let med: Vec<f64> = times.into_iter().map(median).collect();
    let rest: f64 = med[1..].iter().sum();
    println!("batch {batch}, {threads} thread(s), medians of 9 rounds x {reps} calls (ms):");
    println!("whole model {:.4}", med[0]);
    println!("stem (model - parts) {:.4}", med[0] - rest);
    for (i, n) in names.iter().enumerate() {
        println!("{n} {:.4}", med[i + 1]);
    }
    println!("avgpool {:.4}", med[names.len() + 1]);
    println!("fc {:.4}", med[names.len() + 2]);
}
