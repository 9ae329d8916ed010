//! Executors, deferred calls, CPU-class pinning and cancellable progress
//! (issue 37): the results never depend on which executor, how many
//! threads or which CPU class ran a call, and a cancelled call stops at a
//! batch boundary and resumes to the same bits.

use forge::data::{evaluate, fit, DataLoader, InMemoryDataset};
use forge::nn::functional::cross_entropy;
use forge::nn::RnnConfig;
use forge::optim::{Adam, Persist, Sgd};
use forge::prelude::*;
use forge::runtime::{Deferred, Executor, Flow, Simd, Status};
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// A small conv net: conv, max pool, gemm and the vector math kernels.
fn conv_net(
    rng: &mut Rng,
) -> sequential_type![Conv2d, Relu, MaxPool2d, Flatten, Linear, Tanh, Linear] {
    sequential![
        Conv2d::new(3, 8, 3, rng),
        Relu,
        MaxPool2d::new(2),
        Flatten,
        Linear::new(8 * 15 * 15, 64, rng),
        Tanh,
        Linear::new(64, 10, rng)
    ]
}

/// An MLP big enough that its products go parallel on 2+ threads.
fn mlp(rng: &mut Rng) -> sequential_type![Linear, Gelu, Linear, Sigmoid] {
    sequential![
        Linear::new(256, 512, rng),
        Gelu,
        Linear::new(512, 32, rng),
        Sigmoid
    ]
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.to_vec().iter().map(|v| v.to_bits()).collect()
}

/// Two training steps of a copy of `model` on `(x, y)` (cross-entropy,
/// then `opt`), as bits: each step's loss and every parameter's gradient,
/// then the parameters after both steps.
fn two_training_steps<L, R>(
    model: &L,
    x: &Tensor,
    y: &Tensor<i64>,
    mut opt: forge::optim::Optimizer<R, f32>,
) -> Vec<u32>
where
    L: Layer<f32> + Forward<Tensor, Output = Tensor> + Clone,
    R: forge::optim::UpdateRule,
{
    let mut m = model.clone();
    let mut out = Vec::new();
    for _ in 0..2 {
        let loss = cross_entropy(&m.forward(x.clone()), y);
        out.extend(bits(&loss));
        let grads = loss.backward();
        for (_, p) in m.named_parameters() {
            out.extend(bits(grads.get(&p).expect("every parameter has a gradient")));
        }
        opt.step(&mut m, &grads).unwrap();
    }
    for (_, p) in m.named_parameters() {
        out.extend(bits(&p));
    }
    out
}

/// `run`'s result (bits) on one portable thread, after asserting that every
/// CPU class this machine has (portable, AVX2 + FMA, AVX-512) gives the
/// same at 1 and at 2 threads.
fn same_bits_in_every_class(run: &(dyn Fn() -> Vec<u32> + Sync)) -> Vec<u32> {
    let want = Executor::new(1)
        .with_cpu_class(Simd::Portable)
        .unwrap()
        .run(run);
    for class in [Simd::Portable, Simd::Avx2Fma, Simd::Avx512] {
        for threads in [1, 2] {
            let Ok(exec) = Executor::new(threads).with_cpu_class(class) else {
                continue;
            };
            assert!(
                exec.run(run) == want,
                "{class} on {threads} thread(s) differs from portable"
            );
        }
    }
    want
}

#[test]
fn two_executors_running_two_models_at_once_give_the_bits_of_one() {
    let mut rng = Rng::new(7);
    let (a, b) = (Arc::new(conv_net(&mut rng)), Arc::new(mlp(&mut rng)));
    let xa = Tensor::<f32>::normal(&[16, 3, 32, 32], 0.0, 1.0, &mut rng);
    let xb = Tensor::<f32>::normal(&[64, 256], 0.0, 1.0, &mut rng);
    let one = Executor::current_thread();
    let want_a = bits(&one.run(|| a.forward(xa.clone())));
    let want_b = bits(&one.run(|| b.forward(xb.clone())));
    let (ea, eb) = (Executor::new(2), Executor::new(2));
    for _ in 0..3 {
        let da = {
            let (a, x) = (Arc::clone(&a), xa.clone());
            ea.submit(move || a.forward(x))
        };
        let db = {
            let (b, x) = (Arc::clone(&b), xb.clone());
            eb.submit(move || b.forward(x))
        };
        assert_eq!(bits(da.wait()), want_a);
        assert_eq!(bits(db.wait()), want_b);
    }
}

#[test]
fn results_are_equal_for_every_executor_size() {
    let mut rng = Rng::new(3);
    let model = conv_net(&mut rng);
    let x = Tensor::<f32>::normal(&[8, 3, 32, 32], 0.0, 1.0, &mut rng);
    let want = bits(&Executor::current_thread().run(|| model.forward(x.clone())));
    for threads in 1..=4 {
        let exec = Executor::new(threads);
        assert_eq!(exec.run(forge::runtime::num_threads), threads);
        assert_eq!(
            bits(&exec.run(|| model.forward(x.clone()))),
            want,
            "{threads} threads"
        );
    }
    assert_eq!(
        bits(&Executor::process().run(|| model.forward(x.clone()))),
        want
    );
}

#[test]
fn threads_meeting_on_different_executors_each_see_their_own_count() {
    let execs: Vec<Executor> = (1..=4).map(Executor::new).collect();
    let barrier = Arc::new(std::sync::Barrier::new(4));
    let seen: Vec<usize> = std::thread::scope(|s| {
        let handles: Vec<_> = execs
            .iter()
            .map(|e| {
                let barrier = Arc::clone(&barrier);
                s.spawn(move || {
                    e.run(|| {
                        barrier.wait();
                        forge::runtime::num_threads()
                    })
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(seen, [1, 2, 3, 4]);
}

struct Flag(std::sync::Mutex<bool>, std::sync::Condvar);
impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        *self.0.lock().unwrap() = true;
        self.1.notify_all();
    }
}

/// A minimal `block_on`: polls, then sleeps until woken (no async runtime).
fn block_on<F: Future>(f: F) -> F::Output {
    let flag = Arc::new(Flag(
        std::sync::Mutex::new(false),
        std::sync::Condvar::new(),
    ));
    let waker = Waker::from(Arc::clone(&flag));
    let mut cx = Context::from_waker(&waker);
    let mut f = pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        let mut woken = flag.0.lock().unwrap();
        while !*woken {
            woken = flag.1.wait(woken).unwrap();
        }
        *woken = false;
    }
}

#[test]
fn a_deferred_result_outlives_its_inputs_and_answers_the_same_each_time() {
    let exec = Executor::new(2);
    let (gate, opened) = std::sync::mpsc::channel::<()>();
    let d: Deferred<Tensor> = {
        let x = Tensor::<f32>::from_vec((0..4096).map(|i| i as f32 / 100.0).collect(), &[64, 64]);
        let w = x.transpose(0, 1);
        exec.submit(move || {
            opened.recv().unwrap();
            x.matmul(&w).tanh()
        })
        // `x` and `w` are gone from here: the call owns them.
    };
    assert!(matches!(d.status(), Status::Queued | Status::Running));
    assert_eq!(exec.try_submit(|| ()).unwrap_err().kind(), "contended");
    gate.send(()).unwrap();
    let first = bits(block_on(&d));
    assert_eq!(d.status(), Status::Done);
    assert_eq!(bits(d.wait()), first);
    assert_eq!(bits(d.wait()), first);
    let x = Tensor::<f32>::from_vec((0..4096).map(|i| i as f32 / 100.0).collect(), &[64, 64]);
    assert_eq!(bits(&x.matmul(&x.transpose(0, 1)).tanh()), first);
    // A panicking call is kept in its Deferred; the executor goes on.
    let bad = exec.submit(|| -> u8 { panic!("deliberate") });
    assert_eq!(bad.try_wait().unwrap_err(), "deliberate");
    assert_eq!(bad.status(), Status::Panicked);
    assert_eq!(*exec.submit(|| 5).wait(), 5);
    // Dropping a Deferred waits for its call.
    let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let f2 = Arc::clone(&flag);
    drop(exec.submit(move || {
        std::thread::sleep(std::time::Duration::from_millis(20));
        f2.store(true, std::sync::atomic::Ordering::SeqCst);
    }));
    assert!(flag.load(std::sync::atomic::Ordering::SeqCst));
}

#[test]
fn every_cpu_class_gives_the_same_bits() {
    let mut rng = Rng::new(11);
    let net = conv_net(&mut rng);
    let x = Tensor::<f32>::normal(&[4, 3, 32, 32], 0.0, 1.0, &mut rng);
    let a = Tensor::<f32>::normal(&[96, 200], 0.0, 1.0, &mut rng);
    let b = Tensor::<f32>::normal(&[200, 72], 0.0, 1.0, &mut rng);
    let v = Tensor::<f32>::normal(&[200], 0.0, 1.0, &mut rng);
    let lstm = Lstm::<f32>::new(RnnConfig::new(12, 16).batch_first(true), &mut rng);
    let seq = Tensor::<f32>::normal(&[3, 5, 12], 0.0, 1.0, &mut rng);
    let run = || {
        let mut out = bits(&net.forward(x.clone()));
        out.extend(bits(&a.matmul(&b)));
        out.extend(bits(&a.matmul(&v.reshape(&[200, 1]))));
        out.extend(bits(&a.exp()));
        out.extend(bits(&a.tanh().sigmoid()));
        out.extend(bits(&x.max_pool2d([3, 3], [2, 2], [1, 1])));
        out.extend(bits(&lstm.forward(seq.clone()).0));
        out
    };
    let portable = Executor::new(2).with_cpu_class(Simd::Portable).unwrap();
    assert_eq!(portable.run(forge::runtime::cpu_class), Simd::Portable);
    let want = portable.run(run);
    let mut classes = 0;
    for class in [Simd::Portable, Simd::Avx2Fma, Simd::Avx512] {
        for threads in [1, 2] {
            let Ok(exec) = Executor::new(threads).with_cpu_class(class) else {
                assert!(class != Simd::Portable, "every CPU runs the portable class");
                continue;
            };
            classes += 1;
            assert_eq!(exec.cpu_class(), class);
            assert!(
                exec.run(run) == want,
                "{class} on {threads} thread(s) differs from portable"
            );
        }
    }
    assert!(classes >= 2);
    let d = forge::runtime::describe();
    assert!(d.to_string().contains("CPU class"), "{d}");
}

fn toy_data(n: usize) -> InMemoryDataset<f32> {
    let mut rng = Rng::new(5);
    InMemoryDataset::new(
        Tensor::<f32>::normal(&[n, 6], 0.0, 1.0, &mut rng),
        (0..n as i64).map(|i| i % 3).collect(),
    )
    .unwrap()
}

#[test]
fn a_cancelled_evaluation_stops_within_one_batch_and_resumes_exactly() {
    let ds = toy_data(50);
    let model = Linear::<f32>::new(6, 3, &mut Rng::new(1));
    let loader = DataLoader::new(&ds, 8).shuffle(9);
    let whole = evaluate(
        &loader,
        |(x, _)| bits(&model.forward(x)),
        |_, _| Flow::Continue,
    )
    .unwrap();
    assert_eq!(whole.len(), 7);
    // The same epoch order again, cancelled after batch 3, then resumed.
    let loader = DataLoader::new(&ds, 8).shuffle(9);
    let mut calls = 0;
    let err = evaluate(
        &loader,
        |(x, _)| bits(&model.forward(x)),
        |done, total| {
            calls += 1;
            assert_eq!(total, 7);
            if done == 3 {
                Flow::Cancel
            } else {
                Flow::Continue
            }
        },
    )
    .unwrap_err();
    assert!(
        matches!(&err, ForgeError::Cancelled { call, .. } if call == "evaluate"),
        "{err}"
    );
    assert_eq!(calls, 3, "no batch ran after the cancel");
    let mut first = Vec::new();
    // (the first three batches again, from a fresh loader, to compare)
    let again = DataLoader::new(&ds, 8).shuffle(9);
    for (i, (x, _)) in again.iter().enumerate().take(3) {
        let _ = i;
        first.push(bits(&model.forward(x)));
    }
    let rest = evaluate(
        &loader,
        |(x, _)| bits(&model.forward(x)),
        |_, _| Flow::Continue,
    )
    .unwrap();
    first.extend(rest);
    assert_eq!(first, whole);
}

#[test]
fn a_cancelled_fit_resumes_from_its_checkpoint_to_the_same_bits() {
    let ds = toy_data(40);
    let loss = |m: &Linear, (x, y): (Tensor, Tensor<i64>)| cross_entropy(&m.forward(x), &y);
    // Uninterrupted: 3 epochs of 5 batches.
    let mut model = Linear::<f32>::new(6, 3, &mut Rng::new(2));
    let mut opt = Adam::new(0.01);
    let loader = DataLoader::new(&ds, 8).shuffle(4);
    let all = fit(&mut model, &mut opt, &loader, 3, loss, |_, _| {
        Flow::Continue
    })
    .unwrap();
    assert_eq!(all.len(), 15);
    let want = bits(&model.weight);

    // Cancelled after step 7 (mid-epoch 2), checkpointed, resumed in a
    // fresh model, optimizer and loader.
    let path = std::env::temp_dir().join(format!(
        "forge-fit-cancel-{}.safetensors",
        std::process::id()
    ));
    let mut model = Linear::<f32>::new(6, 3, &mut Rng::new(2));
    let mut opt = Adam::new(0.01);
    let loader = DataLoader::new(&ds, 8).shuffle(4);
    let mut steps = 0;
    let err = fit(&mut model, &mut opt, &loader, 3, loss, |done, total| {
        steps = done;
        assert_eq!(total, 15);
        if done == 7 {
            Flow::Cancel
        } else {
            Flow::Continue
        }
    })
    .unwrap_err();
    assert_eq!(err.kind(), "cancelled");
    assert_eq!(steps, 7);
    forge::checkpoint::TrainingCheckpoint::save_with_loader(&path, &model, &opt, None, &loader, 7)
        .unwrap();

    let mut model = Linear::<f32>::new(6, 3, &mut Rng::new(99));
    let mut opt = Adam::new(0.01);
    let loader = DataLoader::new(&ds, 8).shuffle(12345);
    let step = forge::checkpoint::TrainingCheckpoint::load_into_with_loader(
        &path, &mut model, &mut opt, None, &loader,
    )
    .unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(step, 7);
    let mut first = None;
    let rest = fit(&mut model, &mut opt, &loader, 3, loss, |done, _| {
        first.get_or_insert(done);
        Flow::Continue
    })
    .unwrap();
    assert_eq!(first, Some(8), "the resumed fit starts at the next step");
    assert_eq!(rest.len(), 8);
    assert_eq!(bits(&model.weight), want);
    assert_eq!(rest[..], all[7..]);
}

#[test]
fn errors_name_their_kind_type_their_fields_and_chain_their_source() {
    use std::error::Error;
    let mut bytes = Sgd::<f32>::new(0.1).to_bytes().unwrap();
    bytes.truncate(bytes.len() - 1);
    let e = Sgd::<f32>::from_bytes(&bytes).unwrap_err();
    assert_eq!(e.kind(), "format", "{e}");
    let cause = e.source().expect("the postcard error is the source");
    assert!(e.to_string().contains(&cause.to_string()), "{e} / {cause}");
    let e = ForgeError::dtype("w", &[DType::F32], DType::I64);
    assert!(
        matches!(&e, ForgeError::DType { expected, found: DType::I64, .. } if expected == &[DType::F32])
    );
    assert!(e.source().is_none());
}

/// Each executor owns the pool its calls draw from: two executors serving
/// two models at once give the bits of one, each pool's counters move
/// with its own executor's calls only, and each reaches a steady state
/// (no buffer from the OS after warm-up) while the other runs beside it.
#[test]
fn each_executor_draws_from_its_own_pool() {
    let mut rng = Rng::new(17);
    let (a, b) = (Arc::new(conv_net(&mut rng)), Arc::new(mlp(&mut rng)));
    let xa = Tensor::<f32>::normal(&[16, 3, 32, 32], 0.0, 1.0, &mut rng);
    let xb = Tensor::<f32>::normal(&[64, 256], 0.0, 1.0, &mut rng);
    let one = Executor::current_thread();
    let want_a = bits(&one.run(|| a.forward(xa.clone())));
    let want_b = bits(&one.run(|| b.forward(xb.clone())));
    let (ea, eb) = (Executor::new(2), Executor::new(2));

    // Only `ea` runs: `eb`'s pool does not move.
    let (a0, b0) = (ea.memory_stats(), eb.memory_stats());
    let y = ea.run(|| a.forward(xa.clone()));
    let (a1, b1) = (ea.memory_stats(), eb.memory_stats());
    assert!(
        a1.hits + a1.misses > a0.hits + a0.misses,
        "ea's calls use ea's pool"
    );
    assert!(a1.live_bytes > 0, "ea's output lives in ea's pool");
    assert_eq!(b1, b0, "eb's pool moved while only ea ran");
    // Dropped on this thread (outside both), the output goes back to ea.
    drop(y);
    assert_eq!(ea.memory_stats().live_bytes, a0.live_bytes);

    // Both at once, from two threads, several rounds: the same bits, and
    // after two warm-up rounds neither pool asks the OS for more.
    let round = |ea: &Executor, eb: &Executor| {
        let da = {
            let (a, x) = (Arc::clone(&a), xa.clone());
            ea.submit(move || bits(&a.forward(x)))
        };
        let db = {
            let (b, x) = (Arc::clone(&b), xb.clone());
            eb.submit(move || bits(&b.forward(x)))
        };
        assert_eq!(*da.wait(), want_a);
        assert_eq!(*db.wait(), want_b);
    };
    for _ in 0..2 {
        round(&ea, &eb);
    }
    let (wa, wb) = (ea.memory_stats(), eb.memory_stats());
    for _ in 0..4 {
        round(&ea, &eb);
    }
    let (sa, sb) = (ea.memory_stats(), eb.memory_stats());
    assert_eq!(
        sa.misses, wa.misses,
        "ea took buffers from the OS after warm-up"
    );
    assert_eq!(
        sb.misses, wb.misses,
        "eb took buffers from the OS after warm-up"
    );
    assert!(sa.hits > wa.hits && sb.hits > wb.hits);
    assert_eq!(
        (sa.live_bytes, sb.live_bytes),
        (wa.live_bytes, wb.live_bytes),
        "every buffer of a call back in its pool"
    );

    // describe() reports each executor's pool.
    let d = forge::runtime::describe();
    assert_eq!(d.executors.len(), d.executor_memory.len());
    let own: Vec<_> = d
        .executors
        .iter()
        .filter(|e| e.contains("own pool"))
        .collect();
    assert!(own.len() >= 2, "{:?}", d.executors);
    assert!(d
        .executor_memory
        .iter()
        .any(|m| m.hits == sa.hits && m.misses == sa.misses));
}

/// LeNet-5 training steps (its second convolution keeps the forward's
/// column matrix for the weight gradient, copies im2col's runs of 10 and
/// runs col2im a plane at a time with AVX-512; its first takes the
/// small-channel kernels), two Adam steps at batch 40 (three column
/// chunks of 17, 17 and 6 images), give the same loss and parameter bits
/// in every CPU class at 1 and 2 threads (issue 41), and a second run of
/// the same model the same bits again.
#[test]
fn a_lenet_training_step_has_the_same_bits_in_every_class_and_thread_count() {
    use forge::models::mnist::LeNet5;
    let mut rng = Rng::new(41);
    let model = LeNet5::new(&mut rng);
    let x = Tensor::<f32>::normal(&[40, 1, 28, 28], 0.0, 1.0, &mut rng);
    let y = Tensor::<i64>::from_fn(&[40], |_| rng.below(10) as i64);
    let run = || two_training_steps(&model, &x, &y, Adam::<f32>::new(1e-3));
    let want = same_bits_in_every_class(&run);
    assert!(run() == want, "the process's own class differs");
}

/// A small conv net's training step (the sweep's `cnn:ch=10-M-20-M-40-M`,
/// 3x3 padding 1, bias, ReLU, 2x2 max pooling, at batch 72), two SGD
/// steps with momentum, gives the same loss and parameter bits in every
/// CPU class at 1 and 2 threads: its second and third convolutions run
/// seven and four column chunks (the last shorter), in parallel on 2
/// threads (`cpu/conv/im2col/chunked.rs`), and its first the small-channel
/// kernels.
#[test]
fn a_small_conv_net_training_step_has_the_same_bits_in_every_class_and_thread_count() {
    let mut rng = Rng::new(43);
    let model = sequential![
        Conv2d::new(3, 10, 3, &mut rng).padding(1),
        Relu,
        MaxPool2d::new(2),
        Conv2d::new(10, 20, 3, &mut rng).padding(1),
        Relu,
        MaxPool2d::new(2),
        Conv2d::new(20, 40, 3, &mut rng).padding(1),
        Relu,
        MaxPool2d::new(2),
        Flatten,
        Linear::new(40 * 4 * 4, 10, &mut rng)
    ];
    let x = Tensor::<f32>::normal(&[72, 3, 32, 32], 0.0, 1.0, &mut rng);
    let y = Tensor::<i64>::from_fn(&[72], |_| rng.below(10) as i64);
    let run = || two_training_steps(&model, &x, &y, Sgd::<f32>::new(0.01).momentum(0.9));
    let want = same_bits_in_every_class(&run);
    assert!(run() == want, "the process's own class differs");
}

/// A GPT training step (layer norms, packed-qkv attention, GELU, residual
/// adds, bias gradients, cross-entropy, AdamW), two steps, gives the same
/// loss and parameter bits in every CPU class at 1 and 2 threads: the
/// non-gemm passes that run at the widest vector width the class allows
/// (issue 41) compute each element as the portable loops do. Widths not a
/// multiple of 16 (132, heads of 33, vocabulary 67) leave vector tails, and
/// the activations are long enough to split over 2 threads.
#[test]
fn a_gpt_training_step_has_the_same_bits_in_every_class_and_thread_count() {
    use forge::models::gpt::{Gpt, GptConfig};
    use forge::optim::AdamW;
    let cfg = GptConfig {
        vocab_size: 67,
        block_size: 64,
        n_layer: 2,
        n_head: 4,
        n_embd: 132,
        bias: true,
    };
    let mut rng = Rng::new(41);
    let model = Gpt::<f32>::new(cfg, &mut rng);
    let idx = Tensor::<i64>::from_fn(&[8, 64], |_| rng.below(67) as i64);
    let tgt = Tensor::<i64>::from_fn(&[8, 64], |_| rng.below(67) as i64);
    let run = || {
        let mut m = model.clone();
        let mut opt = AdamW::<f32>::new(3e-3).weight_decay(0.1);
        let mut out = Vec::new();
        for _ in 0..2 {
            let loss = m.loss(&idx, &tgt);
            out.extend(bits(&loss));
            let grads = loss.backward();
            opt.step(&mut m, &grads).unwrap();
        }
        for (_, p) in m.named_parameters() {
            out.extend(bits(&p));
        }
        out
    };
    same_bits_in_every_class(&run);
}

/// The bench's int8 MLP (784 -> 512 -> 256 -> 10 after `quantize_dynamic`)
/// at batch 128 and 100: at 2 threads each int8 layer splits its rows in
/// two blocks (64 + 64, 64 + 36), each thread quantizing, multiplying and
/// finishing its own with the ReLU in the epilogue (issue 41). The bits are
/// those of every CPU class at 1 and 2 threads, and those of the layers run
/// one op at a time (`forward`, then `relu`) on one thread.
#[test]
fn an_int8_mlp_inference_has_the_same_bits_in_every_class_and_thread_count() {
    use forge::models::mnist::MnistMlp;
    use forge::quant::{quantize_dynamic, Granularity};
    let mut rng = Rng::new(41);
    let mut model = MnistMlp::new(&mut rng);
    quantize_dynamic(&mut model, Granularity::PerTensor);
    for batch in [128, 100] {
        let x = Tensor::<f32>::normal(&[batch, 784], 0.0, 1.0, &mut rng);
        let run = || no_grad(|| bits(&model.forward(x.clone())));
        let want = same_bits_in_every_class(&run);
        let one_op_at_a_time = Executor::new(1).run(|| {
            no_grad(|| {
                let h = model.fc1.forward(x.clone()).relu();
                let h = model.fc2.forward(h).relu();
                bits(&model.fc3.forward(h))
            })
        });
        assert!(want == one_op_at_a_time, "batch {batch}: fused differs");
    }
}
