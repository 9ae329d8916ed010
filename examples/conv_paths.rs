//! Times one 3x3 padding-1 `Conv2d` forward at the given shapes on forge's
//! two f32 inference paths: under `no_grad` (the direct kernel where
//! `direct::preferred` takes the geometry) and with autograd on (im2col +
//! gemm), one thread, median of interleaved blocks.
//!
//! ```sh
//! cargo run --release --example conv_paths -- 16,64,64,32 8,128,128,16
//! ```
//! Each argument is `batch,in,out,plane`.

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
    set_num_threads(1);
    for arg in std::env::args().skip(1) {
        let d: Vec<usize> = arg.split(',').map(|s| s.parse().expect("number")).collect();
        let (n, c, o, s) = (d[0], d[1], d[2], d[3]);
        let mut rng = Rng::new(0);
        let conv = Conv2d::<f32>::new(c, o, 3, &mut rng).padding(1);
        let x = Tensor::<f32>::normal(&[n, c, s, s], 0.0, 1.0, &mut rng);
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
        let gf = 2.0 * (n * o * s * s * c * 9) as f64 / 1e6;
        println!(
            "n={n} c={c} o={o} plane={s}x{s} positions={}: no_grad {a:.3} ms ({:.0} GFLOP/s), autograd {b:.3} ms ({:.0} GFLOP/s), ratio {:.2}",
            n * s * s,
            gf / a,
            gf / b,
            a / b
        );
    }
}
