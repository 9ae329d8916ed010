//! Times one `Conv2d` forward at the given shapes on forge's two f32
//! inference paths: under `no_grad` (the direct kernel where
//! `direct::preferred_f32` takes the geometry, else im2col + gemm) and
//! with autograd on (im2col + gemm), median of interleaved blocks.
//!
//! ```sh
//! cargo run --release --example conv_paths -- 16,64,64,32 8,128,128,16
//! cargo run --release --example conv_paths -- --threads 2 32,3,64,32,7,2,3
//! ```
//! Each argument is `batch,in,out,plane[,kernel,stride,padding]` (kernel 3,
//! stride 1, padding 1 by default); `--threads T` sets the thread count
//! (default 1). The FLOPs counted are the dense convolution's.

use forge::nn::{Conv2d, Forward};
use forge::runtime::set_num_threads;
use forge::{no_grad, Rng, Tensor};
use std::hint::black_box;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let threads = args
        .iter()
        .position(|a| a == "--threads")
        .and_then(|i| args.get(i + 1))
        .map_or(1, |v| v.parse().expect("a thread count"));
    set_num_threads(threads);
    let shapes = args
        .iter()
        .enumerate()
        .filter(|(i, a)| *a != "--threads" && (*i == 0 || args[i - 1] != "--threads"))
        .map(|(_, a)| a);
    for arg in shapes {
        let d: Vec<usize> = arg.split(',').map(|s| s.parse().expect("number")).collect();
        let (n, c, o, s) = (d[0], d[1], d[2], d[3]);
        let (k, st, p) = (
            d.get(4).copied().unwrap_or(3),
            d.get(5).copied().unwrap_or(1),
            d.get(6).copied().unwrap_or(1),
        );
        let mut rng = Rng::new(0);
        let conv = Conv2d::<f32>::new(c, o, k, &mut rng).stride(st).padding(p);
        let x = Tensor::<f32>::normal(&[n, c, s, s], 0.0, 1.0, &mut rng);
        let os = (s + 2 * p - k) / st + 1;
        let (mut direct, mut im2col) = (Vec::new(), Vec::new());
        let reps = 5;
        for round in 0..7 {
            let t0 = Instant::now();
            for _ in 0..reps {
                black_box(no_grad(|| conv.forward(x.clone())));
            }
            let a = t0.elapsed().as_secs_f64() * 1e3 / reps as f64;
            let t0 = Instant::now();
            for _ in 0..reps {
                black_box(conv.forward(x.clone()));
            }
            let b = t0.elapsed().as_secs_f64() * 1e3 / reps as f64;
            if round > 0 {
                direct.push(a);
                im2col.push(b);
            }
        }
        let (a, b) = (median(direct), median(im2col));
        let gf = 2.0 * (n * o * os * os * c * k * k) as f64 / 1e6;
        println!(
            "n={n} c={c} o={o} plane={s}x{s} k={k} s={st} p={p} positions={}: no_grad {a:.3} ms ({:.0} GFLOP/s), autograd {b:.3} ms ({:.0} GFLOP/s), ratio {:.2}",
            n * os * os,
            gf / a,
            gf / b,
            a / b
        );
    }
}
