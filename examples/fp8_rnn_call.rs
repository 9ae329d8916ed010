//! Times one no-grad call of a recurrent layer with fp8 weights
//! (`to_fp8`, E4M3, per-channel scales): the median of blocks of calls,
//! printed as one JSON line per shape, for A/B runs of two builds.
//!
//! ```sh
//! cargo run --release --example fp8_rnn_call -- gru,32,64,128,128 gru,32,1,128,128
//! ```
//! Each argument is `kind,steps,batch,input,hidden` with `kind` one of
//! `gru`, `lstm`, `rnn`; all cores unless `--threads N` comes first.

use forge::nn::{Forward, Gru, Lstm, Rnn, RnnConfig};
use forge::quant::{to_fp8, Fp8Format, Granularity};
use forge::runtime::set_num_threads;
use forge::{no_grad, Rng, Tensor};
use std::hint::black_box;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The median of `rounds` blocks of `reps` calls, in ms per call.
fn time(f: &dyn Fn(), reps: usize, rounds: usize) -> f64 {
    f();
    let mut v = Vec::new();
    for _ in 0..rounds {
        let t0 = Instant::now();
        for _ in 0..reps {
            f();
        }
        v.push(t0.elapsed().as_secs_f64() * 1e3 / reps as f64);
    }
    median(v)
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--threads") {
        set_num_threads(args[1].parse().expect("thread count"));
        args.drain(..2);
    }
    for arg in args {
        let parts: Vec<&str> = arg.split(',').collect();
        let d: Vec<usize> = parts[1..]
            .iter()
            .map(|s| s.parse().expect("number"))
            .collect();
        let (t, n, i, h) = (d[0], d[1], d[2], d[3]);
        let mut rng = Rng::new(0);
        let cfg = RnnConfig::new(i, h);
        let x = Tensor::<f32>::uniform(&[t, n, i], -1.0, 1.0, &mut rng);
        let (f8, g) = (Fp8Format::E4M3, Granularity::PerChannel);
        let ms = match parts[0] {
            "gru" => {
                let mut m = Gru::<f32>::new(cfg, &mut rng);
                to_fp8(&mut m, f8, g);
                time(&|| drop(black_box(no_grad(|| m.forward(x.clone())))), 10, 9)
            }
            "lstm" => {
                let mut m = Lstm::<f32>::new(cfg, &mut rng);
                to_fp8(&mut m, f8, g);
                time(&|| drop(black_box(no_grad(|| m.forward(x.clone())))), 10, 9)
            }
            "rnn" => {
                let mut m = Rnn::<f32>::new(cfg, &mut rng);
                to_fp8(&mut m, f8, g);
                time(&|| drop(black_box(no_grad(|| m.forward(x.clone())))), 10, 9)
            }
            k => panic!("unknown kind {k}"),
        };
        println!("{{\"case\": \"{arg}\", \"ms\": {ms:.4}}}");
    }
}
