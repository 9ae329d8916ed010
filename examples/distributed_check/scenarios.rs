//! The data-parallel checks, written once against [`Communicator`]: run by
//! `cargo test` on threads (`tests/misc/distributed.rs`) and by `.ci/run` on
//! MPI processes (`examples/distributed_check`). Each check panics on
//! failure; under `mpirun` a panicking rank ends the job with a non-zero
//! status.

use forge::data::{DataLoader, DistributedSampler, InMemoryDataset};
use forge::distributed::{Communicator, DistributedDataParallel};
use forge::nn::BatchNorm1d;
use forge::prelude::*;
use std::path::Path;

/// The global batch of the equivalence check, split across the ranks.
pub const GLOBAL_BATCH: usize = 64;
/// Steps of the equivalence check.
pub const STEPS: usize = 20;
const FEATURES: usize = 8;
const CLASSES: usize = 4;

type Mlp = sequential_type![Linear<f64>, Tanh, Linear<f64>];

/// A small f64 MLP; `hidden` varies only in the mismatch check.
fn mlp(seed: u64, hidden: usize) -> Mlp {
    let mut rng = Rng::new(seed);
    sequential![
        Linear::<f64>::new(FEATURES, hidden, &mut rng),
        Tanh,
        Linear::new(hidden, CLASSES, &mut rng)
    ]
}

/// `STEPS` global batches of random inputs and labels.
fn dataset() -> InMemoryDataset<f64> {
    let n = GLOBAL_BATCH * STEPS;
    let mut rng = Rng::new(11);
    let x = Tensor::<f64>::normal(&[n, FEATURES], 0.0, 1.0, &mut rng);
    let y = (0..n).map(|_| rng.below(CLASSES) as i64).collect();
    InMemoryDataset::new(x, y).expect("dataset")
}

fn loss<L: Forward<Tensor<f64>, Output = Tensor<f64>>>(
    model: &L,
    x: Tensor<f64>,
    y: &Tensor<i64>,
) -> Tensor<f64> {
    cross_entropy(&model.forward(x), y)
}

/// Every tensor of `model` (weights and buffers) as bytes, in traversal order.
fn state_bytes<L: Layer<f64>>(model: &L) -> Vec<u8> {
    let mut out = Vec::new();
    for t in model.state_dict().values() {
        for v in t.as_slice() {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    out
}

/// Asserts that every rank's `model` is bit-identical to rank 0's.
fn assert_ranks_equal<C: Communicator, L: Layer<f64>>(comm: &C, model: &L, when: &str) {
    let all = comm
        .all_gather_bytes(&state_bytes(model))
        .expect("all_gather");
    for (r, b) in all.iter().enumerate() {
        assert!(
            b == &all[0],
            "{when}: rank {r}'s tensors differ from rank 0's"
        );
    }
}

/// World size and rank are what the launcher was asked for: each rank
/// reports its rank, and together they are `0..expected`. A binary started
/// by another MPI's `mpirun` runs as `expected` worlds of one and fails here.
pub fn world<C: Communicator>(comm: &C, expected: usize) {
    assert_eq!(
        comm.size(),
        expected,
        "world size {} but {expected} processes were launched (a mismatched mpirun?)",
        comm.size()
    );
    let ranks = comm
        .all_gather_bytes(&(comm.rank() as u64).to_le_bytes())
        .expect("all_gather");
    let ranks: Vec<u64> = ranks
        .iter()
        .map(|b| u64::from_le_bytes(b[..].try_into().expect("8 bytes")))
        .collect();
    assert_eq!(ranks, (0..expected as u64).collect::<Vec<_>>());
}

/// The all-reduce sums on the documented binomial tree, bit for bit, and
/// every rank gets rank 0's bytes.
pub fn all_reduce_order<C: Communicator>(comm: &C) {
    let n = comm.size();
    let mine: Vec<f64> = (0..1000)
        .map(|i| ((i * 7919 + comm.rank() * 104_729) % 1000) as f64 * 1e-3 + 1e-9)
        .collect();
    let bytes: Vec<u8> = mine.iter().flat_map(|v| v.to_le_bytes()).collect();
    let all = comm.all_gather_bytes(&bytes).expect("all_gather");
    let values: Vec<Vec<f64>> = all
        .iter()
        .map(|b| {
            b.chunks(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
                .collect()
        })
        .collect();
    // The tree, serially: at distance `step`, rank r (a multiple of 2 step)
    // adds rank r + step's partial sum to its own.
    let mut partial = values.clone();
    let mut step = 1;
    while step < n {
        for r in (0..n).step_by(2 * step) {
            if r + step < n {
                let other = partial[r + step].clone();
                partial[r].iter_mut().zip(other).for_each(|(a, b)| *a += b);
            }
        }
        step *= 2;
    }
    let mut got = mine.clone();
    comm.all_reduce_sum(&mut got).expect("all_reduce_sum");
    let same_bits = got
        .iter()
        .zip(&partial[0])
        .all(|(a, b)| a.to_bits() == b.to_bits());
    assert!(same_bits, "all_reduce_sum is not the fixed tree sum");
}

/// `STEPS` data-parallel steps with the global batch split across the
/// ranks equal `STEPS` single-process steps with the whole batch, to 1e-12
/// relative, and all ranks are bit-identical after every step.
pub fn matches_single_process<C: Communicator>(comm: &C) {
    let n = comm.size();
    assert_eq!(GLOBAL_BATCH % n, 0, "the global batch must split evenly");
    let ds = dataset();

    // The reference: one process, whole batches.
    let mut single = mlp(1, 16);
    let mut opt = Sgd::new(0.1).momentum(0.9);
    let loader = DataLoader::new(&ds, GLOBAL_BATCH).shuffle(5);
    let mut reference = Vec::new();
    for (x, y) in loader.iter() {
        let grads = loss(&single, x, &y).backward();
        opt.step(&mut single, &grads).expect("step");
        reference.push(single.state_dict());
    }
    assert_eq!(reference.len(), STEPS);

    // Data parallel: every rank starts from another seed; construction
    // copies rank 0's (seed 1) weights.
    let mut ddp = DistributedDataParallel::new(mlp(1 + comm.rank() as u64, 16), comm)
        .expect("DistributedDataParallel::new");
    assert_ranks_equal(comm, &ddp, "after construction");
    let mut opt = Sgd::new(0.1).momentum(0.9);
    let sampler = DistributedSampler::new(comm.rank(), n);
    let loader = DataLoader::new(&ds, GLOBAL_BATCH / n)
        .shuffle(5)
        .distributed(sampler);
    assert_eq!(loader.num_batches(), STEPS);
    let mut worst = 0.0f64;
    for (step, (x, y)) in loader.iter().enumerate() {
        let l = loss(&ddp, x, &y);
        let grads = ddp.backward(&l).expect("backward");
        opt.step(&mut ddp, &grads).expect("step");
        assert_ranks_equal(comm, &ddp, &format!("step {step}"));
        for (name, t) in ddp.state_dict() {
            let want = &reference[step][&name];
            let scale = want.as_slice().iter().fold(0.0f64, |m, v| m.max(v.abs()));
            for (a, b) in t.as_slice().iter().zip(want.as_slice()) {
                let rel = (a - b).abs() / scale;
                worst = worst.max(rel);
                assert!(
                    rel <= 1e-12,
                    "step {step} {name}: {a} vs single-process {b}"
                );
            }
        }
    }
    if comm.is_root() {
        println!(
            "  {n} ranks vs 1 process over {STEPS} steps: max relative difference {worst:.1e}"
        );
    }
}

/// Batch-norm buffers are rank 0's on every rank after every step, though
/// each rank's batch statistics differ.
pub fn buffers_follow_rank_0<C: Communicator>(comm: &C) {
    let mut rng = Rng::new(3);
    let model = sequential![Linear::<f64>::new(4, 6, &mut rng), BatchNorm1d::new(6)];
    let mut ddp = DistributedDataParallel::new(model, comm).expect("new");
    let mut opt = Sgd::new(0.05);
    let mut data = Rng::new(100 + comm.rank() as u64);
    for step in 0..3 {
        let x = Tensor::<f64>::normal(&[8, 4], comm.rank() as f64, 1.0, &mut data);
        let grads = ddp
            .backward(&ddp.forward(x).square().mean())
            .expect("backward");
        opt.step(&mut ddp, &grads).expect("step");
        assert_ranks_equal(comm, &ddp, &format!("batch norm step {step}"));
    }
}

/// Each rank's shards: disjoint and covering when the dataset divides
/// evenly (or with `drop_last`), covering with the first samples repeated
/// when it is padded; the same number of batches on every rank; a new
/// permutation every epoch.
pub fn sampler_shards<C: Communicator>(comm: &C) {
    let n = comm.size();
    for (len, drop_last) in [(96, false), (103, false), (103, true)] {
        let x = Tensor::<f32>::zeros(&[len, 1]);
        let ds = InMemoryDataset::new(x, (0..len as i64).collect()).expect("dataset");
        let sampler = DistributedSampler::new(comm.rank(), n).drop_last(drop_last);
        let loader = DataLoader::new(&ds, 5).shuffle(9).distributed(sampler);
        let reference = DataLoader::new(&ds, len).shuffle(9);
        let mut previous = Vec::new();
        for epoch in 0..2 {
            let batches: Vec<Vec<i64>> = loader.iter().map(|(_, y)| y.to_vec()).collect();
            let order = reference.next_order();
            let mine: Vec<u8> = batches
                .iter()
                .flatten()
                .flat_map(|v| v.to_le_bytes())
                .collect();
            let counts = comm
                .all_gather_bytes(&(batches.len() as u64).to_le_bytes())
                .expect("all_gather");
            assert!(
                counts.iter().all(|c| c == &counts[0]),
                "batch counts differ between ranks"
            );
            let all = comm.all_gather_bytes(&mine).expect("all_gather");
            let mut seen: Vec<usize> = all
                .iter()
                .flat_map(|b| {
                    b.chunks(8)
                        .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as usize)
                })
                .collect();
            let per_rank = if drop_last { len / n } else { len.div_ceil(n) };
            assert_eq!(seen.len(), per_rank * n, "len {len} epoch {epoch}");
            // What the shards must hold together: the permutation, cut to
            // a multiple of the world size or padded with its start.
            let mut want: Vec<usize> = order.iter().copied().cycle().take(per_rank * n).collect();
            seen.sort_unstable();
            want.sort_unstable();
            assert_eq!(seen, want, "len {len} drop_last {drop_last} epoch {epoch}");
            if drop_last || len % n == 0 {
                seen.dedup();
                assert_eq!(seen.len(), per_rank * n, "shards overlap");
            }
            assert_ne!(order, previous, "epochs repeat the permutation");
            previous = order;
        }
    }
}

/// A training checkpoint written by rank 0 mid-epoch, after a step, (model, optimizer,
/// schedule, loader position) and loaded by every rank continues exactly
/// as the uninterrupted run, into the next epoch.
pub fn checkpoint_resume<C: Communicator>(comm: &C, dir: &Path) {
    let n = comm.size();
    let ds = dataset();
    let path = dir.join(format!("forge-distributed-check-{n}.safetensors"));
    let loader = || {
        DataLoader::new(&ds, GLOBAL_BATCH / n)
            .shuffle(21)
            .distributed(DistributedSampler::new(comm.rank(), n))
    };
    // Saved at step 6 of epoch 0, trained to step 26 (6 into epoch 1).
    let (save_at, epochs) = (6u64, 2);
    let train = |ddp: &mut DistributedDataParallel<Mlp, &C>,
                 opt: &mut Sgd<f64>,
                 sched: &mut StepLr,
                 batches: &DataLoader<'_, InMemoryDataset<f64>>,
                 mut step: u64,
                 save: bool| {
        for _ in batches.epochs_done()..epochs {
            for (x, y) in batches.iter() {
                let grads = ddp.backward(&loss(&*ddp, x, &y)).expect("backward");
                opt.step(ddp, &grads).expect("step");
                sched.step(opt);
                step += 1;
                if save && step == save_at {
                    comm.run_on_root(|| {
                        TrainingCheckpoint::save_with_loader(
                            &path,
                            &*ddp,
                            opt,
                            Some(&*sched),
                            batches,
                            step,
                        )
                    })
                    .expect("rank 0 writes the checkpoint");
                }
            }
        }
    };

    let mut ddp = DistributedDataParallel::new(mlp(7, 16), comm).expect("new");
    let mut opt = Sgd::new(0.1).momentum(0.9);
    let mut sched = StepLr::for_optimizer(&mut opt, 4, 0.5);
    let batches = loader();
    train(&mut ddp, &mut opt, &mut sched, &batches, 0, true);
    let uninterrupted = state_bytes(&ddp);

    // Every rank loads rank 0's file into a model built with another seed.
    let mut ddp = DistributedDataParallel::new(mlp(99, 16), comm).expect("new");
    let mut opt = Sgd::new(0.1).momentum(0.9);
    let mut sched = StepLr::for_optimizer(&mut opt, 4, 0.5);
    let batches = loader();
    let step = TrainingCheckpoint::load_into_with_loader(
        &path,
        &mut ddp,
        &mut opt,
        Some(&mut sched),
        &batches,
    )
    .expect("every rank loads");
    assert_eq!(step, save_at);
    train(&mut ddp, &mut opt, &mut sched, &batches, step, false);
    assert!(
        state_bytes(&ddp) == uninterrupted,
        "the resumed run differs"
    );
    comm.run_on_root(|| std::fs::remove_file(&path).map_err(|e| ForgeError::io(&path, e)))
        .expect("cleanup");
}

/// A rank whose model differs from rank 0's: every rank gets an error
/// that names it, nobody hangs.
pub fn model_mismatch_fails<C: Communicator>(comm: &C) {
    let last = comm.size() - 1;
    let hidden = if comm.rank() == last && last > 0 {
        17
    } else {
        16
    };
    let result = DistributedDataParallel::new(mlp(0, hidden), comm);
    if comm.size() == 1 {
        assert!(result.is_ok());
        return;
    }
    let err = match result {
        Ok(_) => panic!("a rank with another model must fail"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("the model differs between ranks")
            && err.contains(&format!(
                "rank {last}: `0.weight: trainable weight of shape [17, 8]`"
            )),
        "unclear message: {err}"
    );
    if comm.is_root() {
        println!("  mismatch reported on every rank as: {err}");
    }
}

/// Every check, in order; `dir` holds the checkpoint file.
pub fn all<C: Communicator>(comm: &C, expected: usize, dir: &Path) -> usize {
    let checks: [(&str, &dyn Fn()); 7] = [
        ("world size and rank", &|| world(comm, expected)),
        ("all-reduce order", &|| all_reduce_order(comm)),
        ("matches single process", &|| matches_single_process(comm)),
        ("buffers follow rank 0", &|| buffers_follow_rank_0(comm)),
        ("sampler shards", &|| sampler_shards(comm)),
        ("checkpoint resume", &|| checkpoint_resume(comm, dir)),
        ("model mismatch fails", &|| model_mismatch_fails(comm)),
    ];
    for (name, check) in &checks {
        check();
        comm.barrier().expect("barrier");
        if comm.is_root() {
            println!("ok: {name} ({} ranks)", comm.size());
        }
    }
    checks.len()
}
