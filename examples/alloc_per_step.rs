//! How many bytes one training step takes from forge's buffer pool, for
//! the bench's GPT and ResNet-18 steps (same models, batches and
//! optimizers as `examples/bench.rs`): the growth of
//! `memory_stats().taken_bytes` (size classes of every buffer handed out,
//! reused or fresh) and of the buffer count (`hits + misses`) over a few
//! steps after a warm-up, divided by the steps. A count, not a timing: the
//! same on every run for a given thread count.
//!
//! ```sh
//! cargo run --release --example alloc_per_step            # 1 thread, 3 steps
//! cargo run --release --example alloc_per_step -- 2 5     # 2 threads, 5 steps
//! ```

use forge::models::gpt::{Gpt, GptConfig};
use forge::models::resnet::resnet18;
use forge::nn::functional::cross_entropy_with;
use forge::nn::Forward;
use forge::optim::{AdamW, Sgd};
use forge::runtime::{memory_stats, set_num_threads};
use forge::{Rng, Tensor};

/// Runs `step` once to warm up, then `steps` times, and prints the bytes
/// and buffers taken from the pool per step.
fn report(label: &str, steps: usize, mut step: impl FnMut()) {
    step();
    let before = memory_stats();
    for _ in 0..steps {
        step();
    }
    let after = memory_stats();
    let bytes = (after.taken_bytes - before.taken_bytes) as f64 / steps as f64;
    let buffers =
        ((after.hits + after.misses) - (before.hits + before.misses)) as f64 / steps as f64;
    println!(
        "{label:<24} {:>10.2} MB taken per step, {buffers:>8.0} buffers per step",
        bytes / 1e6
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    let threads: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(1);
    let steps: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(3);
    set_num_threads(threads);

    let cfg = GptConfig {
        vocab_size: 256,
        block_size: 64,
        n_layer: 4,
        n_head: 4,
        n_embd: 128,
        bias: true,
    };
    let mut rng = Rng::new(0);
    let mut gpt = Gpt::<f32>::new(cfg, &mut rng);
    let x = Tensor::<i64>::from_fn(&[16, 64], |_| rng.below(256) as i64);
    let y = Tensor::<i64>::from_fn(&[16, 64], |_| rng.below(256) as i64);
    let mut opt = AdamW::<f32>::new(3e-4).weight_decay(0.1);
    report(&format!("gpt train b16 {threads}T"), steps, || {
        let grads = gpt.loss(&x, &y).backward();
        opt.step(&mut gpt, &grads).expect("shapes match");
    });

    let mut rng = Rng::new(0);
    let mut m = resnet18::<f32>(10, &mut rng);
    let x = Tensor::<f32>::normal(&[16, 3, 32, 32], 0.0, 1.0, &mut rng);
    let y = Tensor::<i64>::from_fn(&[16], |_| rng.below(10) as i64);
    let mut opt = Sgd::<f32>::new(0.01).momentum(0.9);
    report(&format!("resnet18 train b16 {threads}T"), steps, || {
        let grads = cross_entropy_with(&m.forward(x.clone()), &y, Default::default()).backward();
        opt.step(&mut m, &grads).expect("shapes match");
    });
}
