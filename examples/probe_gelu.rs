//! Where `gelu_tanh`'s time goes (issue 41): its forward and backward per
//! value on slices from L1-sized to beyond L2, against a pass of the same
//! traffic that computes almost nothing (`x * 2` for the forward's one
//! read and one write, `g * x` for the backward's two reads and one
//! write). Equal rates per value at every size: compute bound; a rate that
//! falls with the size towards the cheap pass's: memory bound. 1 thread.
//!
//! ```sh
//! cargo run --release --example probe_gelu -- --reps 31
//! ```

use forge::runtime::set_num_threads;
use forge::{no_grad, Rng, Tensor};
use std::hint::black_box;
use std::time::Instant;

#[path = "bench_sections/probe_args.rs"]
mod probe_args;
use probe_args::{arg, median};

/// Median ns per value of `f` over `reps` timed blocks of calls, each block
/// about `values_per_block` values.
fn ns_per_value(n: usize, reps: usize, f: &mut dyn FnMut()) -> f64 {
    let inner = (4 << 20) / n + 1;
    let mut t = Vec::new();
    for rep in 0..reps + 2 {
        let t0 = Instant::now();
        for _ in 0..inner {
            f();
        }
        if rep >= 2 {
            t.push(t0.elapsed().as_secs_f64() * 1e9 / (inner * n) as f64);
        }
    }
    median(t)
}

fn main() {
    set_num_threads(1);
    let reps = arg("--reps", 21);
    let mut rng = Rng::new(41);
    println!("values     KiB   fwd  x*2   bwd  g*x   (ns per value, median of {reps})");
    for n in [4 << 10, 32 << 10, 128 << 10, 512 << 10, 2 << 20] {
        // pre-activations of GPT's c_fc at initialisation: about N(0, 0.6)
        let x = Tensor::<f32>::normal(&[n], 0.0, 0.6, &mut rng);
        let g = Tensor::<f32>::normal(&[n], 0.0, 1.0, &mut rng);
        let fwd = ns_per_value(n, reps, &mut || {
            black_box(no_grad(|| x.gelu_tanh()));
        });
        let copy = ns_per_value(n, reps, &mut || {
            black_box(no_grad(|| x.mul_scalar(2.0)));
        });
        let xt = x.clone().requires_grad();
        // recorded forward plus backward, less the forward alone
        let both = ns_per_value(n, reps, &mut || {
            let y = xt.gelu_tanh();
            black_box(y.backward_with(&g, false));
        });
        let zip = ns_per_value(n, reps, &mut || {
            black_box(no_grad(|| g.mul(&x)));
        });
        println!(
            "{n:>8} {:>6} {fwd:5.2} {copy:5.2} {:5.2} {zip:5.2}",
            n * 4 / 1024,
            both - fwd
        );
    }
}
