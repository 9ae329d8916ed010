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

/// The sequence op's buffers are not zero-filled (`Storage::stale`): with
/// free pool blocks of every size the op takes filled with NaN first, the
/// f64 gradcheck of every input (forward values and gradients through
/// the kernels' reverse pass) still passes in both directions, so no
/// element of those buffers is read before it is written. (A block's
/// stale values are whatever it last held; NaN makes any such read show.)
/// Tolerances: forge's central differences, `eps = atol = rtol = 1e-6`,
/// as the suite's gradchecks (f64; the truncation error is far below).
#[test]
#[cfg_attr(miri, ignore = "hundreds of forward passes: too slow under Miri")]
fn unfilled_buffers_are_written_before_they_are_read() {
    use crate::cpu::Storage;
    const H4: usize = 4;
    let poison = || {
        let sizes = [T * N * 4 * H4, T * N * H4, N * H4, 4 * H4 * H4, 4 * H4];
        let held: Vec<Storage<f64>> = sizes
            .iter()
            .flat_map(|&s| (0..4).map(move |_| Storage::filled(s, f64::NAN)))
            .collect();
        drop(held);
    };
    for reverse in [false, true] {
        let xs = [
            Tensor::from_vec(values(T * N * 4 * H4, 1.0), &[T, N, 4 * H4]),
            Tensor::from_vec(values(N * H4, 2.0), &[N, H4]),
            Tensor::from_vec(values(N * H4, 3.0), &[N, H4]),
            Tensor::from_vec(values(4 * H4 * H4, 4.0), &[4 * H4, H4]),
            Tensor::from_vec(values(4 * H4, 5.0), &[4 * H4]),
        ];
        let f = |v: &[Tensor<f64>]| {
            poison();
            let (out, h_n, c_n) = lstm_sequence(&v[0], &v[1], &v[2], &v[3], Some(&v[4]), reverse);
            let parts = [out.reshape(&[-1]), h_n.reshape(&[-1]), c_n.reshape(&[-1])];
            Tensor::cat(&[&parts[0], &parts[1], &parts[2]], 0)
        };
        poison();
        let report = crate::gradcheck(f, &xs, 1e-6, 1e-6, 1e-6)
            .unwrap_or_else(|e| panic!("reverse {reverse}: {e}"));
        assert_eq!(report.checked, xs.iter().map(|t| t.numel()).sum::<usize>());
    }
}

/// The bias gradient's column sums ([`column_sum`](super::column_sum)),
/// split by columns on two threads, against the sum of every column row
/// after row, bit for bit: values of many magnitudes, so that another
/// order of the additions would round differently. Big enough (180,000
/// elements) to be split, with a width that does not divide evenly into
/// the ranges (200 columns: 13 groups of 16, the last one 8 wide).
#[test]
#[cfg_attr(miri, ignore = "180,000 elements: too slow under Miri")]
fn column_sums_are_the_row_order_sums_on_any_threads() {
    let (rows, width) = (900, 200);
    let d: Vec<f32> = (0..rows * width)
        .map(|i| ((i as f32) * 0.618).sin() * 10f32.powi((i % 7) as i32 - 3))
        .collect();
    let mut want = vec![0f32; width];
    for row in d.chunks_exact(width) {
        for (a, &v) in want.iter_mut().zip(row) {
            *a += v;
        }
    }
    for threads in [1, 2, 3] {
        let got = Executor::new(threads).run(|| super::column_sum(&d, width).to_vec());
        assert!(
            got.iter()
                .zip(&want)
                .all(|(g, w)| g.to_bits() == w.to_bits()),
            "{threads} threads"
        );
    }
}
