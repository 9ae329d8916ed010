//! The memory contract of the CPU device's buffer pool
//! (`forge::cpu::memory`): a steady training loop stops asking the
//! operating system for buffers after warm-up; dropping every tensor gives
//! every buffer back to the pool (whose footprint never exceeds its
//! high-water mark); `trim` releases the free buffers. Pinned for an MLP
//! and for a small convolutional net (conv, batch norm, ReLU, max pooling,
//! linear), at 1 and 2 threads.
//!
//! At 2 threads the contract holds whatever the scheduling: how many
//! buffers a parallel region holds at once depends on how its chunks (and
//! a `join`'s halves) happen to overlap, so the pool reserves, at the end
//! of each region, what its worst-case overlap needs
//! (`forge/src/cpu/memory/reserve.rs`). Part 7 forces a serial first run
//! and an overlapping second one. Before the reserve, this test failed in
//! 7 of 10 runs on a loaded 2-core machine; with it, 0 of 200.
//!
//! The pool and its counters are process-wide, so everything runs in one
//! test function: parallel tests in this binary would allocate in between.

use forge::cpu::memory::{self, stats};
use forge::models::gpt::{Gpt, GptConfig};
use forge::models::mnist::MnistMlp;
use forge::nn::functional::cross_entropy;
use forge::nn::{
    BatchNorm2d, Conv2d, Flatten, Forward, Layer, Linear, Lstm, MaxPool2d, RnnConfig, TensorKind,
};
use forge::optim::{Adam, AdamW, Sgd};
use forge::{Gradients, Rng, Tensor};

/// A LeNet/ResNet-style block: conv 1->8 (3x3, padding 1), batch norm,
/// ReLU, 2x2 max pooling, a second conv 8->8 with bias, flatten, linear.
#[derive(Layer)]
struct MiniConvNet {
    conv1: Conv2d,
    bn: BatchNorm2d,
    conv2: Conv2d,
    fc: Linear,
}

impl MiniConvNet {
    fn new(rng: &mut Rng) -> Self {
        MiniConvNet {
            conv1: Conv2d::new(1, 8, 3, rng).padding(1).no_bias(),
            bn: BatchNorm2d::new(8),
            conv2: Conv2d::new(8, 8, 3, rng),
            fc: Linear::new(8 * 12 * 12, 10, rng),
        }
    }
}

impl Forward<Tensor> for MiniConvNet {
    type Output = Tensor;
    fn forward(&self, x: Tensor) -> Tensor {
        let x = MaxPool2d::new(2).forward(self.bn.forward(self.conv1.forward(x)).relu());
        let x = self.conv2.forward(x).relu();
        self.fc.forward(Flatten.forward(x))
    }
}

/// A model the contract is checked on.
trait Model: Layer + Forward<Tensor, Output = Tensor> {
    fn build(rng: &mut Rng) -> Self;
}

impl Model for MnistMlp {
    fn build(rng: &mut Rng) -> Self {
        MnistMlp::new(rng)
    }
}

impl Model for MiniConvNet {
    fn build(rng: &mut Rng) -> Self {
        MiniConvNet::new(rng)
    }
}

fn batch(rng: &mut Rng, n: usize) -> (Tensor, Tensor<i64>) {
    let x = Tensor::<f32>::normal(&[n, 1, 28, 28], 0.0, 1.0, rng);
    let y = Tensor::<i64>::from_vec((0..n).map(|_| rng.below(10) as i64).collect(), &[n]);
    (x, y)
}

/// What one training step does with the gradients.
type Update<'a, M> = Box<dyn FnMut(&mut M, &Gradients) + 'a>;

/// Runs `steps` training steps on one fixed batch and returns the last loss.
fn train<M: Model>(
    model: &mut M,
    update: &mut Update<M>,
    x: &Tensor,
    y: &Tensor<i64>,
    steps: usize,
) -> f32 {
    let mut last = f32::NAN;
    for _ in 0..steps {
        let loss = cross_entropy(&model.forward(x.clone()), y);
        let grads = loss.backward();
        update(model, &grads);
        last = loss.item();
    }
    last
}

/// Plain SGD written with tensor ops: every buffer of the step comes from
/// the pool.
fn sgd<M: Model>(lr: f32) -> Update<'static, M> {
    Box::new(move |model: &mut M, grads: &Gradients| {
        model.visit_tensors_mut(&mut |_: &str, t: &mut Tensor, _: TensorKind| {
            if let Some(g) = grads.get(t) {
                *t = forge::no_grad(|| t.sub(&g.mul_scalar(lr))).requires_grad();
            }
        })
    })
}

/// Warm-up, then more steps that must take no buffer from the OS (no pool
/// miss); with `all_pooled`, no tensor may be built from a vector outside
/// the pool either.
fn assert_steady<M: Model>(name: &str, mut update: Update<M>, threads: usize, all_pooled: bool) {
    forge::cpu::set_num_threads(threads);
    let mut rng = Rng::new(7);
    let mut model = M::build(&mut rng);
    let (x, y) = batch(&mut rng, 32);
    let first = train(&mut model, &mut update, &x, &y, 3);
    let warm = stats();
    let last = train(&mut model, &mut update, &x, &y, 10);
    let after = stats();
    assert!(last < first, "{name}: the model learns ({first} -> {last})");
    assert_eq!(
        after.misses, warm.misses,
        "{name}, {threads} thread(s): buffers taken from the OS after warm-up"
    );
    if all_pooled {
        assert_eq!(
            after.wrapped, warm.wrapped,
            "{name}, {threads} thread(s): tensors built outside the pool after warm-up"
        );
    }
    assert!(
        after.hits > warm.hits,
        "{name}: the steps do allocate from the pool"
    );
    assert_eq!(after.high_water_bytes, warm.high_water_bytes, "{name}");
}

fn optimizer<M: Model, O: FnMut(&mut M, &Gradients) + 'static>(mut opt: O) -> Update<'static, M> {
    Box::new(move |m: &mut M, g: &Gradients| opt(m, g))
}

#[test]
fn pool_contract() {
    let base = stats();

    // 1. Steady loops take no new buffers from the OS, with 1 and 2 threads.
    // The optimizers' own update loops still build each new parameter from
    // a vector (forge::optim's in-place updates are issue #10 item 4), so
    // only the pool misses are pinned for them.
    for threads in [1, 2] {
        assert_steady::<MnistMlp>("tensor-op sgd", sgd(0.05), threads, true);
        let mut adam = Adam::new(1e-3);
        let adam = optimizer(move |m: &mut MnistMlp, g| adam.step(m, g).unwrap());
        assert_steady("Adam", adam, threads, false);
        let mut momentum = Sgd::new(0.05).momentum(0.9);
        let momentum = optimizer(move |m: &mut MnistMlp, g| momentum.step(m, g).unwrap());
        assert_steady("Sgd momentum", momentum, threads, false);
        // Convolutions, batch norm and pooling: every kernel output pooled.
        assert_steady::<MiniConvNet>("conv net, tensor-op sgd", sgd(0.05), threads, true);
        let mut adam = Adam::new(1e-3);
        let adam = optimizer(move |m: &mut MiniConvNet, g| adam.step(m, g).unwrap());
        assert_steady("conv net, Adam", adam, threads, false);
    }

    // 2. Every model, optimizer, batch and gradient is dropped by now: every
    // pooled buffer is back on a free list, and the footprint is at most
    // the high-water mark.
    let s = stats();
    assert_eq!(s.live_bytes, base.live_bytes, "pooled buffers still live");
    assert!(s.held_bytes > 0);
    assert!(s.held_bytes + s.live_bytes <= s.high_water_bytes);
    assert_eq!(
        s.released_bytes, base.released_bytes,
        "below the ceiling, nothing is released"
    );

    // Running the same loop again reuses what is held: no miss at all.
    assert_steady::<MnistMlp>("sgd again", sgd(0.05), 1, true);
    let again = stats();
    assert_eq!(
        again.misses, s.misses,
        "a second identical run is served by the pool"
    );
    assert_eq!(again.high_water_bytes, s.high_water_bytes);

    // 3. Trim gives every free buffer back.
    let held = again.held_bytes;
    let released = forge::cpu::trim();
    let t = stats();
    assert_eq!(released, held);
    assert_eq!(t.held_bytes, 0);
    assert_eq!(t.released_bytes, again.released_bytes + held as u64);

    // 4. The ceiling: with a 1 MiB ceiling, freeing 4 MiB keeps at most 1 MiB.
    memory::set_ceiling(1 << 20);
    let bufs: Vec<Tensor> = (0..4).map(|_| Tensor::zeros(&[1 << 18])).collect();
    drop(bufs);
    let c = stats();
    assert!(c.held_bytes <= 1 << 20, "{} bytes held", c.held_bytes);
    assert!(c.released_bytes >= t.released_bytes + (3 << 20));
    memory::set_ceiling(memory::DEFAULT_CEILING_BYTES);

    // 5. The recurrent and attention models: after warm-up, training steps
    // of a small LSTM (fused cells; batch 16, so 2 threads split the batch)
    // and a small GPT take no buffer from the OS, with 1 and 2 threads.
    for threads in [1, 2] {
        let mut rng = Rng::new(3);
        let mut lstm = LstmHead {
            lstm: Lstm::new(RnnConfig::new(16, 24).batch_first(true), &mut rng),
            head: Linear::new(24, 5, &mut rng),
        };
        let x = Tensor::<f32>::normal(&[16, 6, 16], 0.0, 1.0, &mut rng);
        let y = Tensor::<i64>::from_vec((0..16).map(|i| i % 5).collect(), &[16]);
        let mut adam = Adam::new(1e-3);
        assert_no_misses("LSTM + Adam", threads, || {
            let g = cross_entropy(&lstm.forward(x.clone()), &y).backward();
            adam.step(&mut lstm, &g).unwrap();
        });
        let cfg = GptConfig {
            vocab_size: 32,
            block_size: 16,
            n_layer: 2,
            n_head: 2,
            n_embd: 32,
            bias: true,
        };
        let mut gpt = Gpt::<f32>::new(cfg, &mut rng);
        let idx = Tensor::<i64>::from_vec((0..64).map(|i| (i * 7) % 32).collect(), &[4, 16]);
        let tgt = Tensor::<i64>::from_vec((0..64).map(|i| (i * 5) % 32).collect(), &[4, 16]);
        let mut adamw = AdamW::new(1e-3);
        assert_no_misses("GPT + AdamW", threads, || {
            let g = gpt.loss(&idx, &tgt).backward();
            adamw.step(&mut gpt, &g).unwrap();
        });
    }

    // 6. A block taken from the OS is resident as a whole from the start:
    // a later, longer request of its size class that reuses it faults no
    // page in. (Left lazy, a steady 2-thread loop kept faulting: requests
    // meet blocks in a different order each step, and a block first used
    // for a short request faulted in the rest under a longer one, LeNet's
    // 2-thread train step 4.6 faults a step.) 33 and 39.5 MiB share the
    // 40 MiB class (the second take is a hit, checked below), above the C
    // allocator's largest mmap threshold (32 MiB), so the block comes as
    // fresh zero pages whatever the allocator did before.
    forge::cpu::trim();
    let mib = (1 << 20) / 4;
    drop(memory::Storage::<f32>::filled(33 * mib, 1.0));
    let before = (stats(), thread_minor_faults());
    let longer = memory::Storage::<f32>::filled(39 * mib + mib / 2, 2.0);
    let after = (stats(), thread_minor_faults());
    assert_eq!(after.0.misses, before.0.misses, "the same class, reused");
    assert_eq!(after.0.hits, before.0.hits + 1);
    // 6.5 MiB never written by the first request: 1664 pages of 4 KiB. A
    // few faults may still come from elsewhere on this thread.
    assert!(
        after.1 - before.1 < 16,
        "{} page faults writing a reused block",
        after.1 - before.1
    );
    drop(longer);

    // 7. Whatever the scheduling: a parallel region first run with its two
    // chunks one after the other (each takes a scratch buffer and gives it
    // back, so one buffer serves both), then run with the chunks forced to
    // overlap (both hold their buffer at a barrier), takes no buffer from
    // the OS the second time: the first run's end reserved the buffer that
    // an overlap needs. Without the reserve the second run misses once.
    forge::cpu::set_num_threads(2);
    let n = 300_000; // a class no other part of this test leaves on a list
    let one_at_a_time = std::sync::Mutex::new(());
    forge::cpu::parallel_for(2, |_| {
        let _serial = one_at_a_time.lock().unwrap();
        drop(memory::Storage::<f32>::zeroed(n));
    });
    let before = stats();
    let both = std::sync::Barrier::new(2);
    forge::cpu::parallel_for(2, |_| {
        let scratch = memory::Storage::<f32>::zeroed(n);
        both.wait();
        drop(scratch);
    });
    let after = stats();
    assert_eq!(
        after.misses, before.misses,
        "overlapping chunks found the buffer their first, serial run reserved"
    );
    assert_eq!(after.hits, before.hits + 2);
    forge::cpu::set_num_threads(1);
}

/// Minor page faults of the calling thread so far (`getrusage`,
/// `RUSAGE_THREAD`): other test threads' faults do not count.
fn thread_minor_faults() -> u64 {
    // SAFETY: getrusage only writes the zero-initialised struct it is
    // given.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_THREAD, &mut u), 0);
        u.ru_minflt as u64
    }
}

/// An LSTM over a sequence and a Linear head on its last hidden state.
#[derive(Layer)]
struct LstmHead {
    lstm: Lstm,
    head: Linear,
}

impl Forward<Tensor> for LstmHead {
    type Output = Tensor;
    fn forward(&self, x: Tensor) -> Tensor {
        let (_, (h, _)) = self.lstm.forward(x);
        let (n, hid) = (h.dim(1), h.dim(2));
        self.head.forward(h.view(&[n, hid]))
    }
}

/// Three warm-up steps, then five that must take no buffer from the OS.
fn assert_no_misses(name: &str, threads: usize, mut step: impl FnMut()) {
    forge::cpu::set_num_threads(threads);
    for _ in 0..3 {
        step();
    }
    let warm = stats();
    for _ in 0..5 {
        step();
    }
    let after = stats();
    assert_eq!(
        after.misses, warm.misses,
        "{name}, {threads} thread(s): buffers taken from the OS after warm-up"
    );
    assert!(after.hits > warm.hits, "{name}: the steps use the pool");
}
