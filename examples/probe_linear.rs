//! GFLOP/s of `Tensor::linear` outside autograd (the weight's packed copy
//! cached on its storage, the bias added by the product) at the shapes of
//! the inference rows of `bench` and `sweep`: the MLP at batch 128, the
//! LSTM at batch 64, GPT's layers at d = 128, 192, 256 (`M = B * T`
//! rows), BERT-base at 8 x 128. `bench/probe_linear.py` times
//! `torch.nn.functional.linear` at the same shapes, for a side-by-side
//! reading (alternate the two: the host is shared).
//!
//! ```sh
//! cargo run --release --example probe_linear               # 1 and 2 threads, every shape
//! cargo run --release --example probe_linear -- 1 gpt128   # 1 thread, names containing "gpt128"
//! cargo run --release --example probe_linear -- 1 bert_fc1 loop   # a 20 s loop, for `perf record`
//! ```
//!
//! Each figure is the median of 7 rounds, each round as many calls as fill
//! about 30 ms.

use forge::runtime::set_num_threads;
use forge::{no_grad, Rng, Tensor};
use std::hint::black_box;
use std::time::Instant;

/// `(name, m, k, n, bias)`: an `m x k` input times a `[n, k]` weight.
const SHAPES: &[(&str, usize, usize, usize, bool)] = &[
    ("mlp128_fc1", 128, 784, 512, true),
    ("mlp128_fc2", 128, 512, 256, true),
    ("mlp128_fc3", 128, 256, 10, true),
    ("lstm64_in", 2048, 128, 512, true),
    ("lstm64_hid", 64, 128, 512, false),
    ("gpt128_qkv", 4096, 128, 384, true),
    ("gpt128_proj", 4096, 128, 128, true),
    ("gpt128_fc", 4096, 128, 512, true),
    ("gpt128_fc2", 4096, 512, 128, true),
    ("gpt128_head", 4096, 128, 256, false),
    ("gpt192_qkv", 2048, 192, 576, true),
    ("gpt192_proj", 2048, 192, 192, true),
    ("gpt192_fc", 2048, 192, 768, true),
    ("gpt192_fc2", 2048, 768, 192, true),
    ("gpt256_qkv", 1024, 256, 768, true),
    ("gpt256_proj", 1024, 256, 256, true),
    ("gpt256_fc", 1024, 256, 1024, true),
    ("gpt256_fc2", 1024, 1024, 256, true),
    ("bert_qkv", 1024, 768, 768, true),
    ("bert_fc1", 1024, 768, 3072, true),
    ("bert_fc2", 1024, 3072, 768, true),
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let threads: Vec<usize> = match args.first().and_then(|s| s.parse().ok()) {
        Some(t) => vec![t],
        None => vec![1, 2],
    };
    let filter = args.get(1).cloned().unwrap_or_default();
    let looping = args.get(2).is_some_and(|s| s == "loop");
    let mut rng = Rng::new(41);
    println!(
        "{:<14} {:>5} {:>5} {:>5} {:>3} {:>9} {:>9}",
        "shape", "m", "k", "n", "T", "us", "GFLOP/s"
    );
    for &(name, m, k, n, has_bias) in SHAPES.iter().filter(|s| s.0.contains(&filter)) {
        let x = Tensor::<f32>::normal(&[m, k], 0.0, 1.0, &mut rng);
        let w = Tensor::<f32>::normal(&[n, k], 0.0, 0.05, &mut rng);
        let b = Tensor::<f32>::normal(&[n], 0.0, 0.1, &mut rng);
        let bias = has_bias.then_some(&b);
        for &t in &threads {
            set_num_threads(t);
            let flops = 2.0 * (m * k * n) as f64;
            let us = no_grad(|| {
                let call = || black_box(black_box(&x).linear(&w, bias));
                if looping {
                    let start = Instant::now();
                    while start.elapsed().as_secs() < 20 {
                        call();
                    }
                }
                // calls per round: about 30 ms
                let t0 = Instant::now();
                call();
                let one = t0.elapsed().as_secs_f64();
                let reps = ((0.03 / one.max(1e-7)) as usize).clamp(1, 100_000);
                let mut rounds: Vec<f64> = (0..7)
                    .map(|_| {
                        let t0 = Instant::now();
                        for _ in 0..reps {
                            call();
                        }
                        t0.elapsed().as_secs_f64() / reps as f64
                    })
                    .collect();
                rounds.sort_by(f64::total_cmp);
                rounds[3] * 1e6
            });
            println!(
                "{name:<14} {m:>5} {k:>5} {n:>5} {t:>3} {us:>9.1} {:>9.1}",
                flops / us / 1e3
            );
        }
    }
}
