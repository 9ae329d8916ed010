//! Layer norm over many rows, where the fused kernel cuts the rows into
//! fixed blocks and runs them in parallel.
//!
//! Math, per row of length `m` (biased variance, `eps` inside the root):
//!
//! ```text
//! xhat = (x - mean) / sqrt(var + eps);  y = xhat w + b
//! dx = rstd (gw - mean(gw) - xhat mean(gw xhat)),  gw = g w
//! dw = sum_rows g xhat;  db = sum_rows g
//! ```
//!
//! Tolerances: in f64 the fused op agrees with the same formulas written
//! in tensor ops to 1e-12 relative (the sums run in another order: per
//! block, then over the blocks). At 1 and 2 threads the f32 results are
//! the same bits, and the 2-thread run hands blocks to the worker pool.

use forge::{Float, Rng, Tensor};

/// Layer norm over the last axis in tensor ops.
fn composed<E: Float>(x: &Tensor<E>, w: &Tensor<E>, b: &Tensor<E>, eps: f64) -> Tensor<E> {
    let mean = x.mean_dim(&[-1], true);
    let xc = x.sub(&mean);
    let var = xc.square().mean_dim(&[-1], true);
    xc.mul(&var.add_scalar(E::from_f64(eps)).rsqrt())
        .mul(w)
        .add(b)
}

/// `(x, w, b, u)` for `rows x m`, `u` the weights of the scalar loss.
fn inputs<E: Float>(rows: usize, m: usize, seed: u64) -> [Tensor<E>; 4] {
    let mut rng = Rng::new(seed);
    [
        Tensor::normal(&[rows, m], 0.5, 2.0, &mut rng),
        Tensor::normal(&[m], 1.0, 0.3, &mut rng),
        Tensor::normal(&[m], 0.0, 0.3, &mut rng),
        Tensor::normal(&[rows, m], 0.0, 1.0, &mut rng),
    ]
}

/// `(y, dx, dw, db)` of `sum(layer_norm(x) u)`, fused or composed.
fn run<E: Float>(t: &[Tensor<E>; 4], fused: bool) -> Vec<Vec<E>> {
    let (x, w, b) = (
        t[0].requires_grad(),
        t[1].requires_grad(),
        t[2].requires_grad(),
    );
    let m = t[0].dim(-1);
    let y = if fused {
        forge::nn::functional::layer_norm(&x, &[m], Some(&w), Some(&b), 1e-5)
    } else {
        composed(&x, &w, &b, 1e-5)
    };
    let g = y.mul(&t[3]).sum().backward();
    vec![
        y.to_vec(),
        g.get(&x).unwrap().to_vec(),
        g.get(&w).unwrap().to_vec(),
        g.get(&b).unwrap().to_vec(),
    ]
}

#[test]
fn many_rows_match_the_composed_ops_f64() {
    // 1000 rows of 64: four blocks of 256 rows, large enough to run in
    // parallel
    let t = inputs::<f64>(1000, 64, 1);
    let (f, c) = (run(&t, true), run(&t, false));
    for (k, (a, b)) in f.iter().zip(&c).enumerate() {
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                (x - y).abs() <= 1e-12 * y.abs().max(1.0),
                "output {k} [{i}]: fused {x} vs composed {y}"
            );
        }
    }
}

#[test]
fn many_rows_are_bit_identical_for_1_and_2_threads() {
    let _threads = crate::common::lock_thread_count();
    let t = inputs::<f32>(1024, 128, 2);
    forge::runtime::set_num_threads(1);
    let one = run(&t, true);
    forge::runtime::set_num_threads(2);
    let two = run(&t, true);
    let before = forge::runtime::pool_dispatches();
    let (w, b) = (Some(&t[1]), Some(&t[2]));
    forge::nn::functional::layer_norm(&t[0], &[128], w, b, 1e-5);
    let dispatched = forge::runtime::pool_dispatches() > before;
    for (k, (a, b)) in one.iter().zip(&two).enumerate() {
        let (a, b): (Vec<u32>, Vec<u32>) = (
            a.iter().map(|v| v.to_bits()).collect(),
            b.iter().map(|v| v.to_bits()).collect(),
        );
        assert!(a == b, "output {k} differs between 1 and 2 threads");
    }
    assert!(
        dispatched,
        "layer_norm at 2 threads did not use the worker pool"
    );
}
