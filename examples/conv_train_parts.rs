//! Times the parts of a small conv net's training step layer by layer
//! (`Conv2d` with bias, ReLU, 2x2 max pooling: the `cnn` of
//! `examples/sweep.rs`), at one and two threads alternated: per layer the
//! recording forward of the convolution, of ReLU and of the pooling, and
//! the backward of each (the gradient of the sum of its output); medians
//! and minima of interleaved rounds.
//!
//! ```sh
//! cargo run --release --example conv_train_parts -- 96,3,10,32 96,10,20,16 96,20,40,8
//! ```
//! Each argument is `batch,in,out,plane[,kernel]` (kernel 3, padding
//! `kernel / 2`); `--reps R` calls per timing (default 20), `--rounds N`
//! (default 7), `--threads 1,2` (default).

use forge::nn::{Conv2d, Forward, MaxPool2d};
use forge::runtime::set_num_threads;
use forge::{Rng, Tensor};
use std::hint::black_box;
use std::time::Instant;

fn stats(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    (v[v.len() / 2], v[0])
}

fn arg(name: &str) -> Option<String> {
    let a: Vec<String> = std::env::args().collect();
    a.iter()
        .position(|s| s == name)
        .and_then(|i| a.get(i + 1))
        .cloned()
}

fn main() {
    let reps: usize = arg("--reps").map_or(20, |v| v.parse().expect("a number"));
    let rounds: usize = arg("--rounds").map_or(7, |v| v.parse().expect("a number"));
    let threads: Vec<usize> = arg("--threads").map_or(vec![1, 2], |v| {
        v.split(',')
            .map(|t| t.parse().expect("a thread count"))
            .collect()
    });
    let args: Vec<String> = std::env::args().skip(1).collect();
    let shapes: Vec<Vec<usize>> = args
        .iter()
        .enumerate()
        .filter(|(i, a)| !a.starts_with("--") && (*i == 0 || !args[i - 1].starts_with("--")))
        .map(|(_, a)| a.split(',').map(|s| s.parse().expect("number")).collect())
        .collect();
    let mut rng = Rng::new(0);
    for d in shapes {
        let (n, c, o, s) = (d[0], d[1], d[2], d[3]);
        let k = d.get(4).copied().unwrap_or(3);
        let conv = Conv2d::new(c, o, k, &mut rng).padding(k / 2);
        let pool = MaxPool2d::new(2);
        // the first layer's input needs no gradient, the others' do
        let x0 = Tensor::<f32>::normal(&[n, c, s, s], 0.0, 1.0, &mut rng);
        let x = if c <= 3 { x0 } else { x0.requires_grad() };
        let y = conv.forward(x.clone()).detach().requires_grad();
        let r = y.relu().detach().requires_grad();
        let names = [
            "conv fwd", "conv bwd", "relu fwd", "relu bwd", "pool fwd", "pool bwd",
        ];
        let mut times = vec![vec![Vec::new(); names.len()]; threads.len()];
        for _ in 0..rounds {
            for (ti, &t) in threads.iter().enumerate() {
                set_num_threads(t);
                let mut time = |part: usize, f: &mut dyn FnMut()| {
                    f();
                    let t0 = Instant::now();
                    for _ in 0..reps {
                        f();
                    }
                    times[ti][part].push(t0.elapsed().as_secs_f64() * 1e3 / reps as f64);
                };
                time(0, &mut || {
                    black_box(conv.forward(x.clone()));
                });
                time(1, &mut || {
                    black_box(conv.forward(x.clone()).sum().backward());
                });
                time(2, &mut || {
                    black_box(y.relu());
                });
                time(3, &mut || {
                    black_box(y.relu().sum().backward());
                });
                time(4, &mut || {
                    black_box(pool.forward(r.clone()));
                });
                time(5, &mut || {
                    black_box(pool.forward(r.clone()).sum().backward());
                });
            }
        }
        println!("{n},{c},{o},{s},k{k}: median / min ms per call ({rounds} rounds x {reps})");
        for (p, name) in names.iter().enumerate() {
            let mut line = format!("  {name:10}");
            let mut fwd = [0.0; 2];
            for (ti, &t) in threads.iter().enumerate() {
                let (med, min) = stats(times[ti][p].clone());
                // the backward rows include their forward: print the difference
                let (med, min) = if p % 2 == 1 {
                    let (fm, fmin) = stats(times[ti][p - 1].clone());
                    (med - fm, min - fmin)
                } else {
                    (med, min)
                };
                fwd[ti.min(1)] = med;
                line += &format!("  {t}T {med:8.3} / {min:8.3}");
            }
            if threads.len() == 2 {
                line += &format!("  speed-up {:.2}", fwd[0] / fwd[1]);
            }
            println!("{line}");
        }
    }
}
