//! Times every distinct convolution of ResNet-18's inference on 3x32x32
//! images (`no_grad`: the direct kernel, as the model runs them but
//! without the folded batch norm) at 1 and 2 threads, alternated block by
//! block of `--inner` calls: per convolution the median time of a call at
//! each thread count, the 2-thread / 1-thread ratio, the weight's size
//! (MB; the kernel reads only the taps that meet the image) and the
//! hand-offs to the worker per call at 2 threads. Then the whole model the
//! same way. `--cold-mb N` rotates copies of each weight, at least N MB in
//! all (each packed before timing), so that every call streams its weight
//! from beyond L2, as inside the model; `--only i` times the i-th
//! convolution alone.
//!
//! ```sh
//! cargo run --release --example r18_ops -- --batch 1 --reps 100
//! cargo run --release --example r18_ops -- --batch 1 --cold-mb 64
//! ```

use forge::models::resnet::resnet18;
use forge::nn::{Conv2d, Forward, Layer};
use forge::runtime::{pool_dispatches, set_num_threads};
use forge::{no_grad, Rng, Tensor};
use std::hint::black_box;
use std::time::Instant;

#[path = "bench_sections/probe_args.rs"]
mod probe_args;
use probe_args::{arg, median};

/// Median time (µs) of `f` at 1 and 2 threads, interleaved, and the
/// dispatches per call at 2 threads.
fn time2(reps: usize, inner: usize, f: &mut dyn FnMut()) -> (f64, f64, f64) {
    let mut t = [Vec::new(), Vec::new()];
    let mut disp = 0;
    for rep in 0..reps + 3 {
        for th in [1usize, 2] {
            set_num_threads(th);
            let d0 = pool_dispatches();
            let t0 = Instant::now();
            for _ in 0..inner {
                f();
            }
            let dt = t0.elapsed().as_secs_f64() * 1e6 / inner as f64;
            if rep >= 3 {
                t[th - 1].push(dt);
                if th == 2 {
                    disp += pool_dispatches() - d0;
                }
            }
        }
    }
    (
        median(t[0].clone()),
        median(t[1].clone()),
        disp as f64 / (reps * inner) as f64,
    )
}

fn main() {
    let (batch, reps) = (arg("--batch", 1), arg("--reps", 100));
    let inner = arg("--inner", 5);
    let cold_mb = arg("--cold-mb", 0);
    let mut rng = Rng::new(0);
    // (name, c, o, k, stride, pad, input side)
    let convs = [
        ("stem 7x7 s2", 3, 64, 7, 2, 3, 32),
        ("l1 3x3 64 8x8", 64, 64, 3, 1, 1, 8),
        ("l2.0 3x3 s2 64->128", 64, 128, 3, 2, 1, 8),
        ("l2 3x3 128 4x4", 128, 128, 3, 1, 1, 4),
        ("l2.0 ds 1x1 s2", 64, 128, 1, 2, 0, 8),
        ("l3.0 3x3 s2 128->256", 128, 256, 3, 2, 1, 4),
        ("l3 3x3 256 2x2", 256, 256, 3, 1, 1, 2),
        ("l3.0 ds 1x1 s2", 128, 256, 1, 2, 0, 4),
        ("l4.0 3x3 s2 256->512", 256, 512, 3, 2, 1, 2),
        ("l4 3x3 512 1x1", 512, 512, 3, 1, 1, 1),
        ("l4.0 ds 1x1 s2", 256, 512, 1, 2, 0, 2),
    ];
    println!(
        "batch {batch}, medians of {reps} x {inner} calls, us: 1T, 2T, 2T/1T, weight MB, dispatches/call at 2T"
    );
    // `--only i`: the i-th convolution alone (no whole model)
    let only = arg("--only", usize::MAX);
    for (i, &(name, c, o, k, s, p, side)) in convs.iter().enumerate() {
        if only != usize::MAX && i != only {
            continue;
        }
        // `--cold-mb N`: copies of the weight rotated, at least N MB in
        // all, so that each call reads its weight from beyond L2 (as
        // inside the model, which reads ~17 MB of weights per call)
        let copies = (cold_mb * 1_000_000).div_ceil(o * c * k * k * 4).max(1);
        let convs: Vec<Conv2d<f32>> = (0..copies)
            .map(|_| {
                let w = Tensor::<f32>::normal(&[o, c, k, k], 0.0, 0.05, &mut rng);
                Conv2d::from_weights(w, None)
                    .expect("a 4-d weight")
                    .stride(s)
                    .padding(p)
            })
            .collect();
        let x = Tensor::<f32>::normal(&[batch, c, side, side], 0.0, 1.0, &mut rng);
        // pack every copy before timing
        no_grad(|| {
            for cv in &convs {
                black_box(cv.forward(x.clone()));
            }
        });
        let mut next = 0;
        let (a, b, d) = time2(reps, inner, &mut || {
            next = (next + 1) % copies;
            black_box(no_grad(|| convs[next].forward(x.clone())));
        });
        let mb = (o * c * k * k * 4) as f64 / 1e6;
        println!(
            "{name:<24} {a:>9.1} {b:>9.1} {:>5.2} {mb:>6.2} {d:.1}",
            b / a
        );
    }
    if only != usize::MAX {
        return;
    }
    let mut m = resnet18::<f32>(10, &mut rng);
    m.eval();
    let x = Tensor::<f32>::normal(&[batch, 3, 32, 32], 0.0, 1.0, &mut rng);
    let (a, b, d) = time2(reps, inner, &mut || {
        black_box(no_grad(|| m.forward(x.clone())));
    });
    println!(
        "{:<24} {a:>9.1} {b:>9.1} {:>5.2} {:>6} {d:.1}",
        "whole model",
        b / a,
        ""
    );
}
