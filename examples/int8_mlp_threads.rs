//! The bench's int8 MLP (784 -> 512 -> 256 -> 10 after `quantize_dynamic`)
//! at batch 128, one and two threads alternating every 50 single
//! `forward` calls, 2000 calls each: min, 10th, 25th percentile and median
//! µs per step (performance-products.md, "The row split, kept"). On a
//! shared host, run it when the cores are idle, and alternate builds.
//!
//! ```sh
//! cargo run --release --example int8_mlp_threads
//! ```

use forge::models::mnist::MnistMlp;
use forge::nn::Forward;
use forge::quant::{quantize_dynamic, Granularity};
use forge::runtime::set_num_threads;
use forge::{no_grad, Rng, Tensor};
use std::hint::black_box;
use std::time::Instant;

fn main() {
    let mut rng = Rng::new(0);
    let mut m = MnistMlp::new(&mut rng);
    quantize_dynamic(&mut m, Granularity::PerTensor);
    let x = Tensor::<f32>::normal(&[128, 784], 0.0, 1.0, &mut rng);
    let mut times: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for _ in 0..40 {
        for t in [1, 2] {
            set_num_threads(t);
            for _ in 0..50 {
                let t0 = Instant::now();
                no_grad(|| black_box(m.forward(x.clone())));
                times[t - 1].push(t0.elapsed().as_secs_f64() * 1e6);
            }
        }
    }
    for (t, v) in times.iter_mut().enumerate() {
        v.sort_by(f64::total_cmp);
        let q = |f: f64| v[(f * (v.len() - 1) as f64) as usize];
        println!(
            "{} thread(s): min {:.1} p10 {:.1} p25 {:.1} median {:.1} us",
            t + 1,
            q(0.0),
            q(0.1),
            q(0.25),
            q(0.5)
        );
    }
}
