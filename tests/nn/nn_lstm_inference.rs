//! `nn::Lstm` without a tape (`no_grad`, or nothing tracked) runs
//! `lstm_projected`: the input projection inside the time loop, in the
//! input's own layout (batch-first input and output are not transposed).
//! Its outputs and final states must be bit for bit those of the recorded
//! forward (the input projected in one product, then the fused
//! `lstm_sequence`; itself checked against PyTorch in `nn_rnn_parity.rs`
//! and against the composed ops in `ops_rnn_cells.rs`), for every layout,
//! direction, depth, bias setting and thread count, and where the path
//! declines (one row, a narrow `4H`, f64) the fallback must give them too.

use forge::nn::{Forward, Lstm, RnnConfig};
use forge::{Float, Rng, Tensor};

/// `(out, h_n, c_n)` of `lstm` on `x` from `(h0, c0)`, as vectors.
type Outs<E> = (Vec<E>, Vec<E>, Vec<E>);

fn run<E: Float>(lstm: &Lstm<E>, x: &Tensor<E>, s: &(Tensor<E>, Tensor<E>)) -> Outs<E> {
    let (out, (h, c)) = lstm.forward((x.clone(), s.clone()));
    (out.to_vec(), h.to_vec(), c.to_vec())
}

/// Recorded (parameters tracked, grad mode on) against `no_grad`, at 1
/// and 2 threads, for the batch sizes `ns` and hidden size `h`.
fn inference_equals_recorded<E: Float>(ns: &[usize], h: usize) {
    let (t_len, i) = (5, 20);
    let mut k = 0;
    for &n in ns {
        for batch_first in [true, false] {
            for (layers, bidir, bias) in [(1, false, true), (2, true, true), (2, false, false)] {
                k += 1;
                let cfg = RnnConfig::new(i, h)
                    .num_layers(layers)
                    .bidirectional(bidir)
                    .bias(bias)
                    .batch_first(batch_first);
                let lstm = Lstm::<E>::new(cfg, &mut Rng::new(k));
                let mut rng = Rng::new(100 + k);
                let shape = if batch_first {
                    [n, t_len, i]
                } else {
                    [t_len, n, i]
                };
                let x = Tensor::<E>::normal(&shape, 0.0, 1.0, &mut rng);
                let rows = layers * cfg.num_directions();
                let s = (
                    Tensor::<E>::normal(&[rows, n, h], 0.0, 0.5, &mut rng),
                    Tensor::<E>::normal(&[rows, n, h], 0.0, 0.5, &mut rng),
                );
                let what = format!("n {n}, h {h}, batch_first {batch_first}, layers {layers}, bidirectional {bidir}, bias {bias}");
                forge::runtime::set_num_threads(1);
                let recorded = run(&lstm, &x, &s);
                for threads in [1, 2] {
                    forge::runtime::set_num_threads(threads);
                    let inferred = forge::no_grad(|| run(&lstm, &x, &s));
                    assert!(inferred.0 == recorded.0, "out, {what}, {threads} threads");
                    assert!(inferred.1 == recorded.1, "h_n, {what}, {threads} threads");
                    assert!(inferred.2 == recorded.2, "c_n, {what}, {threads} threads");
                }
                // and from the zero state, outputs in the configured layout
                forge::runtime::set_num_threads(2);
                let (o1, (h1, _)) = lstm.forward(x.clone());
                let (o2, (h2, _)) = forge::no_grad(|| lstm.forward(x.clone()));
                assert_eq!(o1.shape(), o2.shape(), "{what}");
                assert!(o1.to_vec() == o2.to_vec(), "zero state out, {what}");
                assert!(h1.to_vec() == h2.to_vec(), "zero state h_n, {what}");
            }
        }
    }
    forge::runtime::set_num_threads(1);
}

/// f32, `4H = 96`: the projected path (on AVX-512), with batches of
/// several blocks at 2 threads (40), one block (9) and two rows (2).
#[test]
fn no_grad_forward_equals_the_recorded_forward_f32() {
    let _threads = crate::common::lock_thread_count();
    inference_equals_recorded::<f32>(&[40, 9, 2], 24);
}

/// Where the path declines: one row, `4H = 16` (gemm's narrow path), f64.
#[test]
fn declined_cases_fall_back_to_the_same_values() {
    let _threads = crate::common::lock_thread_count();
    inference_equals_recorded::<f32>(&[1], 24);
    inference_equals_recorded::<f32>(&[6], 4);
    inference_equals_recorded::<f64>(&[6, 1], 24);
}

/// Untracked parameters under grad mode also take the path (nothing to
/// record), with the recorded values.
#[test]
fn untracked_layer_in_grad_mode_matches() {
    let cfg = RnnConfig::new(20, 24).batch_first(true);
    let lstm = Lstm::<f32>::new(cfg, &mut Rng::new(7));
    let mut frozen = lstm.clone();
    forge::nn::Layer::freeze(&mut frozen);
    let x = Tensor::<f32>::normal(&[12, 5, 20], 0.0, 1.0, &mut Rng::new(8));
    let (o1, (h1, c1)) = lstm.forward(x.clone());
    let (o2, (h2, c2)) = frozen.forward(x);
    assert!(o1.is_tracked() && !o2.is_tracked());
    assert!(o1.to_vec() == o2.to_vec());
    assert!(h1.to_vec() == h2.to_vec() && c1.to_vec() == c2.to_vec());
}
