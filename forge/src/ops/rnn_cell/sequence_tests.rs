//! The shared time loops ([`forward_steps`](super::forward_steps),
//! [`backward_steps`](super::backward_steps)) and the row blocks they cut
//! through [`Rows`](super::Rows): an LSTM sequence against a plain scalar
//! loop, and the same sequence with the batch in one block and in two (on
//! 1 and 2 threads), bit for bit. Small enough for Miri
//! (`scripts/sanitize.sh miri`), which checks that the blocks' slices of
//! one buffer never alias.

use super::lstm_sequence;
use crate::runtime::Executor;
use crate::Tensor;

/// T steps of N rows of H units: N = 16 is two blocks of 8 rows on two
/// threads (`MIN_BLOCK_ROWS`), one block on one thread.
const T: usize = 3;
const N: usize = 16;
const H: usize = 2;

fn values(len: usize, seed: f64) -> Vec<f64> {
    (0..len)
        .map(|i| ((i as f64 + seed) * 0.37).sin() * 0.8)
        .collect()
}

/// The sequence's outputs and the gradients of `sum(out * weights)` with
/// respect to xp, h0, c0 and W_hh, on an executor of `threads` threads.
fn run(threads: usize) -> Vec<Vec<f64>> {
    Executor::new(threads).run(|| {
        let xp = Tensor::from_vec(values(T * N * 4 * H, 1.0), &[T, N, 4 * H]).requires_grad();
        let h0 = Tensor::from_vec(values(N * H, 2.0), &[N, H]).requires_grad();
        let c0 = Tensor::from_vec(values(N * H, 3.0), &[N, H]).requires_grad();
        let w = Tensor::from_vec(values(4 * H * H, 4.0), &[4 * H, H]).requires_grad();
        let (out, _, _) = lstm_sequence(&xp, &h0, &c0, &w, None, false);
        let weights = Tensor::from_vec(values(T * N * H, 5.0), &[T, N, H]);
        let g = (&out * &weights).sum().backward();
        let mut all = vec![out.to_vec()];
        all.extend([&xp, &h0, &c0, &w].map(|p| g.get(p).unwrap().to_vec()));
        all
    })
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

#[test]
fn one_block_and_two_give_the_same_bits_and_the_scalar_loops_values() {
    let one = run(1);
    let two = run(2);
    // the contract of the row blocks: bit-identical for any number
    assert_eq!(one, two);
    // the forward values against the cell's formula, row by row
    let (xp, h0, c0, w) = (
        values(T * N * 4 * H, 1.0),
        values(N * H, 2.0),
        values(N * H, 3.0),
        values(4 * H * H, 4.0),
    );
    let (mut h, mut c) = (h0, c0);
    for t in 0..T {
        let mut h_next = vec![0.0; N * H];
        for r in 0..N {
            let a: Vec<f64> = (0..4 * H)
                .map(|k| {
                    let hw: f64 = (0..H).map(|j| h[r * H + j] * w[k * H + j]).sum();
                    xp[(t * N + r) * 4 * H + k] + hw
                })
                .collect();
            for j in 0..H {
                let (i, f) = (sigmoid(a[j]), sigmoid(a[H + j]));
                let (g, o) = (a[2 * H + j].tanh(), sigmoid(a[3 * H + j]));
                c[r * H + j] = f * c[r * H + j] + i * g;
                h_next[r * H + j] = o * c[r * H + j].tanh();
            }
        }
        h = h_next;
        for (k, (&got, &want)) in one[0][t * N * H..(t + 1) * N * H]
            .iter()
            .zip(&h)
            .enumerate()
        {
            // forge's vector sigmoid and tanh against libm's exp and tanh:
            // a few ulps apart, compounded over 3 steps
            assert!(
                (got - want).abs() <= 1e-13,
                "step {t}, element {k}: {got} against {want}"
            );
        }
    }
}
