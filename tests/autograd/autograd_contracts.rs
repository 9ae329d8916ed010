//! Contracts of the tape that the rest of forge relies on:
//! - determinism: gradients are bit-identical from run to run and for 1 and
//!   2 kernel threads (compared with `==`, never a tolerance);
//! - concurrency: `Tensor` is `Send + Sync`, and forward + backward from 4
//!   threads at once give exactly the single-thread results;
//! - a 100k-node chain runs backward and drops without deep recursion;
//! - `no_grad` records nothing, `detach` stops gradients, and
//!   `backward_with_graph` returns differentiable gradients.
//!
//! (That dropping the loss frees the graph is a unit test inside
//! `forge/src/autograd`, where the nodes are visible.)

use forge::{no_grad, Gradients, Rng, Tensor};

// Compile-time: tensors and gradients cross threads.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Tensor<f32>>();
    assert_send_sync::<Tensor<f64>>();
    assert_send_sync::<Tensor<i64>>();
    assert_send_sync::<Gradients<f32>>();
};

/// Batch, input, hidden and output sizes. The first layer's products
/// (forward `x W1^T`: m = 256, k = 128, n = 128, and backward `g^T x` for W1:
/// m = 128, k = 256, n = 128) do 2^22 multiply-adds with m > 64, so the gemm
/// kernel splits them into several row blocks and runs them in parallel
/// when more than one thread is allowed.
const B: usize = 256;
const IN: usize = 128;
const HID: usize = 128;
const OUT: usize = 32;

struct Mlp {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
    b2: Tensor,
    x: Tensor,
    y: Tensor,
}

impl Mlp {
    fn new(seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let s1 = 1.0 / (IN as f64).sqrt();
        let s2 = 1.0 / (HID as f64).sqrt();
        Mlp {
            w1: Tensor::uniform(&[HID, IN], -s1, s1, &mut rng).requires_grad(),
            b1: Tensor::uniform(&[HID], -s1, s1, &mut rng).requires_grad(),
            w2: Tensor::uniform(&[OUT, HID], -s2, s2, &mut rng).requires_grad(),
            b2: Tensor::uniform(&[OUT], -s2, s2, &mut rng).requires_grad(),
            x: Tensor::normal(&[B, IN], 0.0, 1.0, &mut rng),
            y: Tensor::normal(&[B, OUT], 0.0, 1.0, &mut rng),
        }
    }

    fn params(&self) -> [&Tensor; 4] {
        [&self.w1, &self.b1, &self.w2, &self.b2]
    }

    /// The loss and the gradient of every parameter, copied out.
    fn loss_and_grads(&self) -> (f32, Vec<Vec<f32>>) {
        let h = self.x.matmul_t(&self.w1).add(&self.b1).tanh();
        let h = h.matmul_t(&self.w2).add(&self.b2).relu();
        let loss = (&h - &self.y).square().mean();
        let g = loss.backward();
        let grads = self
            .params()
            .iter()
            .map(|p| g.get(p).expect("every parameter has a gradient").to_vec())
            .collect();
        (loss.item(), grads)
    }
}

#[test]
fn mlp_gradients_are_bit_identical_across_runs_and_thread_counts() {
    let _threads = crate::common::lock_thread_count();
    let mlp = Mlp::new(7);
    let first = mlp.loss_and_grads();
    let second = mlp.loss_and_grads();
    assert!(first == second, "two runs differ");

    // This is the only test in this binary that changes the thread count;
    // the others compute the same values whatever it is.
    forge::runtime::set_num_threads(1);
    let one = mlp.loss_and_grads();
    forge::runtime::set_num_threads(2);
    let two = mlp.loss_and_grads();
    assert!(one == two, "1 and 2 threads differ");
    assert!(one == first, "the default thread count differs");
    assert!(one.1.iter().flatten().all(|v| v.is_finite()));
    assert!(one.1[0].iter().any(|&v| v != 0.0));
}

#[test]
fn four_threads_at_once_match_one_thread() {
    let mlp = Mlp::new(11);
    let reference = mlp.loss_and_grads();
    // The same parameter leaves are shared by four threads, each building
    // and differentiating its own graph.
    let results: Vec<(f32, Vec<Vec<f32>>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4).map(|_| s.spawn(|| mlp.loss_and_grads())).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, r) in results.iter().enumerate() {
        assert!(
            *r == reference,
            "thread {i} differs from the single-thread run"
        );
    }
}

#[test]
fn long_chain_runs_backward_and_drops_without_recursion() {
    // A small stack: a recursive backward or drop of 100k nodes would
    // overflow it.
    let handle = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(|| {
            let x = Tensor::<f64>::scalar(1.0).requires_grad();
            let mut y = x.clone();
            for _ in 0..100_000 {
                y = &y * 1.000001;
            }
            let g = y.backward();
            let want = 1.000001f64.powi(100_000);
            let got = g.get(&x).unwrap().item();
            assert!((got - want).abs() < 1e-9 * want, "{got} vs {want}");
            drop(g);
            drop(y);
        })
        .unwrap();
    handle.join().expect("the chain thread panicked");
}

#[test]
fn no_grad_records_nothing() {
    let w = Tensor::<f64>::from_vec(vec![1.0, 2.0], &[2]).requires_grad();
    let y = no_grad(|| {
        let h = w.exp().matmul(&w);
        assert!(!forge::is_grad_enabled());
        // Nested no_grad restores the outer (off) state.
        no_grad(|| ());
        assert!(!forge::is_grad_enabled());
        h.max()
    });
    assert!(forge::is_grad_enabled());
    assert!(!y.is_tracked());
    assert!(y.backward().is_empty());
    // Outside no_grad the same expression is recorded.
    assert!(w.exp().matmul(&w).max().is_tracked());
}

#[test]
fn detach_stops_gradients() {
    let x = Tensor::<f64>::from_vec(vec![1.5, -2.0, 3.0], &[3]).requires_grad();
    // d/dx sum(stop(x) * x) = x, not 2x.
    let g = (&x.detach() * &x).sum().backward();
    assert_eq!(g.get(&x).unwrap().to_vec(), x.to_vec());
    let only_detached = (x.detach() * 2.0).sum();
    assert!(!only_detached.is_tracked());
    assert!(only_detached.backward().get(&x).is_none());
    // Plain backward returns detached gradients.
    assert!(!g.get(&x).unwrap().is_tracked());
}

#[test]
fn backward_with_graph_gives_differentiable_gradients() {
    let xs = [-1.5, 0.5, 2.0];
    let x = Tensor::<f64>::from_vec(xs.to_vec(), &[3]).requires_grad();
    let cube = (&x * &x * &x).sum();
    let g = cube.backward_with_graph();
    let dx = g.get(&x).unwrap();
    assert!(dx.is_tracked());
    assert_eq!(
        dx.to_vec(),
        xs.iter().map(|v| 3.0 * v * v).collect::<Vec<_>>()
    );
    // d/dx sum(3x^2) = 6x
    let gg = dx.sum().backward();
    assert_eq!(
        gg.get(&x).unwrap().to_vec(),
        xs.iter().map(|v| 6.0 * v).collect::<Vec<_>>()
    );
    // and once more through the graph: d/dx sum(6x) = 6
    let g2 = dx.sum().backward_with_graph();
    let g3 = g2.get(&x).unwrap().sum().backward_with_graph();
    assert_eq!(g3.get(&x).unwrap().to_vec(), vec![6.0; 3]);
}
