//! Checkpoints: resumed training equals uninterrupted training bit for bit,
//! a failed or killed save leaves the previous checkpoint intact (and the
//! next save removes what a killed one left), optimizer state survives
//! freezing, and bad checkpoints are `ForgeError`s.

use forge::checkpoint::TrainingCheckpoint;
use forge::io::{atomic_write_with, write_safetensors, AnyTensor};
use forge::optim::{clip_grad_norm_with, AdamW, OneCycleLr, ParamGroup, Schedule, Sgd};
use forge::prelude::*;
use forge::DType;
use std::collections::BTreeMap;

#[derive(Layer)]
struct Mlp {
    fc1: Linear,
    fc2: Linear,
    #[frozen]
    scale: Tensor,
}

impl Forward<Tensor> for Mlp {
    type Output = Tensor;
    fn forward(&self, x: Tensor) -> Tensor {
        self.fc2.forward(self.fc1.forward(x).relu()) * &self.scale
    }
}

fn mlp(seed: u64) -> Mlp {
    let mut rng = Rng::new(seed);
    Mlp {
        fc1: Linear::new(4, 16, &mut rng),
        fc2: Linear::new(16, 2, &mut rng),
        scale: Tensor::full(&[2], 1.5),
    }
}

fn tmp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("forge-ckpt-test-{}-{name}", std::process::id()))
}

fn data() -> (Tensor, Tensor) {
    let x = Tensor::from_fn(&[32, 4], |i| ((i as f32) * 0.731).sin());
    let y = Tensor::from_fn(&[32, 2], |i| ((i as f32) * 0.377).cos());
    (x, y)
}

fn optimizer() -> AdamW {
    AdamW::new(0.01).with_group(ParamGroup::suffix("bias").weight_decay(0.0))
}

fn schedule() -> Schedule {
    OneCycleLr::new(0.05, 20).into()
}

fn train(model: &mut Mlp, opt: &mut AdamW, sched: &mut Schedule, steps: usize) {
    let (x, y) = data();
    for _ in 0..steps {
        let loss = (model.forward(x.clone()) - &y).square().mean();
        let mut grads = loss.backward();
        clip_grad_norm_with(&mut grads, 1.0, 2.0);
        opt.step(model, &grads).unwrap();
        sched.step(opt);
    }
}

fn values(m: &Mlp) -> Vec<(String, Vec<f32>)> {
    m.state_dict()
        .into_iter()
        .map(|(k, t)| (k, t.to_vec()))
        .collect()
}

#[test]
fn resumed_training_equals_uninterrupted_training() {
    let (mut a, mut opt_a, mut sched_a) = (mlp(1), optimizer(), schedule());
    sched_a.apply(&mut opt_a);
    train(&mut a, &mut opt_a, &mut sched_a, 20);

    let (mut b, mut opt_b, mut sched_b) = (mlp(1), optimizer(), schedule());
    sched_b.apply(&mut opt_b);
    train(&mut b, &mut opt_b, &mut sched_b, 10);
    let path = tmp("resume.safetensors");
    TrainingCheckpoint::save(&path, &b, &opt_b, Some(&sched_b), 10).unwrap();
    drop((b, opt_b, sched_b));

    let mut c = mlp(99); // different initial values, overwritten by the load
    let (mut opt_c, mut sched_c) = (optimizer(), schedule());
    let step =
        TrainingCheckpoint::load_into(&path, &mut c, &mut opt_c, Some(&mut sched_c)).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(step, 10);
    assert!(c.fc1.weight.is_tracked(), "loaded weights stay trainable");
    train(&mut c, &mut opt_c, &mut sched_c, 10);

    assert_eq!(values(&a), values(&c));
    assert_eq!(opt_a.to_bytes().unwrap(), opt_c.to_bytes().unwrap());
    assert_eq!(sched_a, sched_c);
}

#[test]
fn model_save_and_load_round_trip_exactly_and_in_half_precision() {
    let a = mlp(3);
    let path = tmp("model.safetensors");
    a.save(&path).unwrap();
    let b = mlp(4).loaded(&path).unwrap();
    assert_eq!(values(&a), values(&b));
    for dtype in [DType::F16, DType::BF16] {
        a.save_as(&path, dtype).unwrap();
        let data = forge::io::read_safetensors(&path).unwrap();
        assert!(data.tensors.values().all(|t| t.dtype() == dtype));
        let mut c = mlp(5);
        c.load_weights(&path).unwrap();
        for ((_, x), (_, y)) in values(&a).iter().zip(values(&c)) {
            for (p, q) in x.iter().zip(&y) {
                assert!(
                    (p - q).abs() <= 1e-2 * p.abs().max(1e-3),
                    "{dtype}: {p} vs {q}"
                );
            }
        }
    }
    assert!(matches!(
        a.save_as(&path, DType::I64),
        Err(ForgeError::Invalid { .. })
    ));
    std::fs::remove_file(&path).unwrap();
}

/// A writer that fails after `n` bytes: the atomic write must leave the
/// previous checkpoint loadable and byte-for-byte unchanged.
#[test]
fn a_save_failing_part_way_leaves_the_previous_checkpoint() {
    let (mut m, mut opt, mut sched) = (mlp(1), optimizer(), schedule());
    train(&mut m, &mut opt, &mut sched, 3);
    let path = tmp("crash.safetensors");
    TrainingCheckpoint::save(&path, &m, &opt, Some(&sched), 3).unwrap();
    let before = std::fs::read(&path).unwrap();
    train(&mut m, &mut opt, &mut sched, 3);
    let next = TrainingCheckpoint::to_bytes(&m, &opt, Some(&sched), None, 6).unwrap();
    for n in [0, 1, 8, 100, next.len() / 2, next.len() - 1] {
        let r = atomic_write_with(&path, |w| {
            w.write_all(&next[..n])?;
            Err(std::io::Error::other("disk full"))
        });
        assert!(r.is_err());
        assert_eq!(
            std::fs::read(&path).unwrap(),
            before,
            "after failing at {n} bytes"
        );
        let mut fresh = mlp(7);
        let step = TrainingCheckpoint::load_into(
            &path,
            &mut fresh,
            &mut optimizer(),
            Some(&mut schedule()),
        );
        assert_eq!(step.unwrap(), 3);
    }
    // No temporary file is left behind.
    let dir = path.parent().unwrap();
    let stem = path.file_name().unwrap().to_string_lossy().to_string();
    let leftovers = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            let n = e.file_name().to_string_lossy().to_string();
            n.contains(&stem) && n != stem
        })
        .count();
    assert_eq!(leftovers, 0);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn optimizer_state_survives_freeze_and_unfreeze() {
    let mut m = mlp(2);
    let mut opt = Sgd::<f32>::new(0.1).momentum(0.9);
    let (x, y) = data();
    let step = |m: &mut Mlp, opt: &mut Sgd<f32>| {
        let grads = (m.forward(x.clone()) - &y).square().mean().backward();
        opt.step(m, &grads).unwrap();
    };
    step(&mut m, &mut opt);
    m.freeze_prefix("fc1");
    step(&mut m, &mut opt);
    assert_eq!(
        opt.state("fc1.weight").unwrap().step(),
        1,
        "frozen: not stepped"
    );
    assert_eq!(opt.state("fc2.weight").unwrap().step(), 2);
    m.unfreeze();
    step(&mut m, &mut opt);
    assert_eq!(opt.state("fc1.weight").unwrap().step(), 2);
    assert!(opt.check_compatible(&m).is_ok());
}

#[test]
fn a_checkpoint_that_does_not_fit_reports_every_key_at_once() {
    let path = tmp("bad.safetensors");
    let mut t = BTreeMap::new();
    t.insert(
        "fc1.weight".to_string(),
        AnyTensor::from(Tensor::<f32>::zeros(&[16, 5])),
    ); // wrong shape
    t.insert(
        "fc2.weight".to_string(),
        AnyTensor::from(Tensor::<f32>::zeros(&[2, 16])),
    );
    t.insert(
        "fc2.bias".to_string(),
        AnyTensor::from(Tensor::<f32>::zeros(&[2])),
    );
    t.insert(
        "scale".to_string(),
        AnyTensor::from(Tensor::<f32>::zeros(&[2])),
    );
    t.insert(
        "head.weight".to_string(),
        AnyTensor::from(Tensor::<f32>::zeros(&[1])),
    ); // unexpected
       // fc1.bias missing
    write_safetensors(&path, &t, &BTreeMap::new()).unwrap();
    let mut m = mlp(1);
    let before = values(&m);
    match m.load_weights(&path).unwrap_err() {
        ForgeError::StateDict {
            missing,
            unexpected,
            mismatched,
        } => {
            assert_eq!(missing, ["fc1.bias"]);
            assert_eq!(unexpected, ["head.weight"]);
            assert_eq!(
                mismatched,
                [("fc1.weight".to_string(), vec![16, 4], vec![16, 5])]
            );
        }
        e => panic!("{e:?}"),
    }
    assert_eq!(values(&m), before, "nothing loaded");
    // An integer tensor where a weight belongs.
    t.clear();
    t.insert(
        "fc1.weight".to_string(),
        AnyTensor::from(Tensor::<i64>::zeros(&[16, 4])),
    );
    write_safetensors(&path, &t, &BTreeMap::new()).unwrap();
    assert!(matches!(
        m.load_weights(&path),
        Err(ForgeError::DType { .. })
    ));
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn an_unknown_dtype_is_an_error() {
    // complex64: a safetensors dtype forge does not store
    let header = br#"{"fc1.weight":{"dtype":"C64","shape":[2],"data_offsets":[0,16]}}"#;
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header);
    bytes.extend_from_slice(&[0; 16]);
    let path = tmp("dtype.safetensors");
    std::fs::write(&path, &bytes).unwrap();
    let e = mlp(1).load_weights(&path).unwrap_err();
    assert!(e.to_string().contains("C64"), "{e}");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn optimizer_state_of_another_model_is_refused_and_the_model_kept() {
    // State for fc1.weight [16, 4]; the checkpoint's model has [16, 4] too,
    // but we pair it with the state of a narrower model.
    let mut small = Mlp {
        fc1: Linear::new(3, 16, &mut Rng::new(0)),
        ..mlp(0)
    };
    let mut opt = optimizer();
    let x = Tensor::ones(&[1, 3]);
    let grads = small.forward(x).sum().backward();
    opt.step(&mut small, &grads).unwrap();
    let e = opt.check_compatible(&mlp(1)).unwrap_err();
    assert!(
        matches!(e, ForgeError::State { .. } if e.to_string().contains("fc1.weight")),
        "{e}"
    );

    let path = tmp("other.safetensors");
    TrainingCheckpoint::save(&path, &mlp(1), &opt, Some(&schedule()), 1).unwrap();
    let mut target = mlp(2);
    let before = values(&target);
    let mut target_opt = optimizer();
    let r =
        TrainingCheckpoint::load_into(&path, &mut target, &mut target_opt, Some(&mut schedule()));
    assert!(matches!(r, Err(ForgeError::State { .. })));
    assert_eq!(values(&target), before, "model unchanged");
    assert!(
        target_opt.state("fc1.weight").is_none(),
        "optimizer unchanged"
    );
    // A plain model file is not a training checkpoint.
    target.save(&path).unwrap();
    let r = TrainingCheckpoint::load_into(&path, &mut target, &mut target_opt, None);
    assert!(matches!(r, Err(ForgeError::Format { .. })));
    std::fs::remove_file(&path).unwrap();
}

/// The child half of `a_killed_save_then_a_save_leaves_one_good_file`:
/// when run with `FORGE_CKPT_CHILD=<path>`, it writes a new checkpoint
/// (padded to 4 MiB) to `<path>` through the atomic writer in 64 KiB
/// chunks, and after half of them waits to be killed, so that the parent
/// kills it mid-write every time. Without the variable it does nothing.
#[test]
fn killed_save_child() {
    let Ok(path) = std::env::var("FORGE_CKPT_CHILD") else {
        return;
    };
    let (mut m, mut opt, mut sched) = (mlp(1), optimizer(), schedule());
    train(&mut m, &mut opt, &mut sched, 5);
    let mut bytes = TrainingCheckpoint::to_bytes(&m, &opt, Some(&sched), None, 5).unwrap();
    bytes.resize(bytes.len().max(4 << 20), 0);
    let _ = atomic_write_with(&path, |w| {
        let chunks: Vec<&[u8]> = bytes.chunks(64 << 10).collect();
        for (i, chunk) in chunks.iter().enumerate() {
            w.write_all(chunk)?;
            if i == chunks.len() / 2 {
                w.flush()?;
                // The parent kills this process while it sleeps here.
                loop {
                    std::thread::sleep(std::time::Duration::from_secs(1));
                }
            }
        }
        Ok(())
    });
    panic!("the parent should have killed this process");
}

/// Issue 42: a child process killed by SIGKILL in the middle of a save
/// leaves the previous checkpoint intact and its temporary file behind;
/// the next save removes that file, so the folder holds exactly the
/// checkpoint, which loads and holds the new state. (Unix: elsewhere
/// stale temporary files are not removed.)
#[cfg(unix)]
#[test]
fn a_killed_save_then_a_save_leaves_one_good_file() {
    let dir = tmp("killed");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("b.ckpt");
    let (mut m, mut opt, mut sched) = (mlp(1), optimizer(), schedule());
    train(&mut m, &mut opt, &mut sched, 2);
    TrainingCheckpoint::save(&path, &m, &opt, Some(&sched), 2).unwrap();
    let before = std::fs::read(&path).unwrap();
    // The child test's name in this binary: its module path, crate left out.
    let child_test = concat!(module_path!(), "::killed_save_child");
    let child_test = child_test.split_once("::").map_or(child_test, |(_, t)| t);
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", child_test, "--nocapture", "--test-threads=1"])
        .env("FORGE_CKPT_CHILD", &path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let files = || -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    // Wait until the child has written half its file (it then pauses).
    let half = 2 << 20;
    let start = std::time::Instant::now();
    let temp = loop {
        let grown = files().into_iter().find(|n| {
            n != "b.ckpt" && std::fs::metadata(dir.join(n)).is_ok_and(|m| m.len() >= half)
        });
        if let Some(t) = grown {
            break t;
        }
        // A guard against a hang, not a measurement.
        assert!(
            start.elapsed().as_secs() < 120,
            "the child never wrote half its file"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the child exited early"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    child.kill().unwrap(); // SIGKILL on Unix
    child.wait().unwrap();
    assert!(temp.starts_with(".b.ckpt.tmp-"), "{temp}");
    assert_eq!(files(), [temp.clone(), "b.ckpt".to_string()]);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "previous checkpoint unchanged"
    );

    // A normal save of a newer state.
    train(&mut m, &mut opt, &mut sched, 3);
    TrainingCheckpoint::save(&path, &m, &opt, Some(&sched), 5).unwrap();
    assert_eq!(files(), ["b.ckpt"], "the killed writer's file is gone");
    let (mut fresh, mut fresh_opt, mut fresh_sched) = (mlp(3), optimizer(), schedule());
    let step =
        TrainingCheckpoint::load_into(&path, &mut fresh, &mut fresh_opt, Some(&mut fresh_sched));
    assert_eq!(step.unwrap(), 5);
    assert_eq!(values(&fresh), values(&m));
    assert_eq!(fresh_opt.to_bytes().unwrap(), opt.to_bytes().unwrap());
    assert_eq!(fresh_sched, sched);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A model with dropout, trained from a shuffled loader, checkpointed in
/// the middle of an epoch (dropout generators and loader position
/// included) and resumed in fresh objects: parameters, optimizer state
/// and schedule are `==` the uninterrupted run's.
#[derive(Layer)]
struct DropNet {
    fc1: Linear,
    drop: Dropout,
    fc2: Linear,
}

impl Forward<Tensor> for DropNet {
    type Output = Tensor;
    fn forward(&self, x: Tensor) -> Tensor {
        self.fc2
            .forward(self.drop.forward(self.fc1.forward(x).relu()))
    }
}

fn dropnet(seed: u64) -> DropNet {
    let mut rng = Rng::new(seed);
    DropNet {
        fc1: Linear::new(4, 32, &mut rng),
        drop: Dropout::from_rng(0.5, &mut rng),
        fc2: Linear::new(32, 3, &mut rng),
    }
}

/// Trains until `stop_at` steps in all (or to the end of `epochs`); returns
/// the step reached.
fn train_epochs(
    model: &mut DropNet,
    opt: &mut AdamW,
    sched: &mut forge::optim::CosineAnnealingLr,
    loader: &DataLoader<TensorDataset<(Tensor, Tensor<i64>)>>,
    mut step: u64,
    epochs: u64,
    checkpoint_at: Option<(u64, &std::path::Path)>,
) -> u64 {
    for _ in loader.epochs_done()..epochs {
        for (x, y) in loader.iter() {
            let loss = cross_entropy(&model.forward(x), &y);
            let mut grads = loss.backward();
            clip_grad_norm(&mut grads, 1.0);
            opt.step(model, &grads).unwrap();
            sched.step(opt);
            step += 1;
            if let Some((at, path)) = checkpoint_at {
                if step == at {
                    TrainingCheckpoint::save_with_loader(
                        path,
                        model,
                        opt,
                        Some(sched),
                        loader,
                        step,
                    )
                    .unwrap();
                    return step;
                }
            }
        }
    }
    step
}

#[test]
fn resume_mid_epoch_with_dropout_and_shuffling_equals_the_uninterrupted_run() {
    let x = Tensor::from_fn(&[50, 4], |i| ((i as f32) * 0.37).sin());
    let y = Tensor::<i64>::from_fn(&[50], |i| (i % 3) as i64);
    let data = TensorDataset::new((x, y)).unwrap();
    let make = |seed| {
        let mut opt = AdamW::new(0.01);
        let sched = forge::optim::CosineAnnealingLr::for_optimizer(&mut opt, 40, 1e-4);
        (
            dropnet(seed),
            opt,
            sched,
            DataLoader::new(&data, 8).shuffle(11),
        )
    };

    // Uninterrupted: 3 epochs of 7 batches (the last one of 2 samples).
    let (mut a, mut opt_a, mut sched_a, loader_a) = make(1);
    let steps = train_epochs(&mut a, &mut opt_a, &mut sched_a, &loader_a, 0, 3, None);
    assert_eq!(steps, 21);

    // Interrupted at step 10 (batch 3 of epoch 2), resumed in fresh objects.
    let path = tmp("dropout-resume.safetensors");
    let (mut b, mut opt_b, mut sched_b, loader_b) = make(1);
    let at = train_epochs(
        &mut b,
        &mut opt_b,
        &mut sched_b,
        &loader_b,
        0,
        3,
        Some((10, &path)),
    );
    assert_eq!(at, 10);
    drop((b, opt_b, sched_b, loader_b));

    let (mut c, mut opt_c, mut sched_c, loader_c) = make(2); // other weights and dropout seeds
    let step = TrainingCheckpoint::load_into_with_loader(
        &path,
        &mut c,
        &mut opt_c,
        Some(&mut sched_c),
        &loader_c,
    )
    .unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(step, 10);
    assert_eq!(loader_c.epochs_done(), 1);
    let end = train_epochs(&mut c, &mut opt_c, &mut sched_c, &loader_c, step, 3, None);
    assert_eq!(end, 21);

    assert_eq!(values_of(&a), values_of(&c));
    assert_eq!(opt_a.to_bytes().unwrap(), opt_c.to_bytes().unwrap());
    assert_eq!(sched_a, sched_c);
    assert_eq!(a.rng_states(), c.rng_states());
    assert_eq!(loader_a.state(), loader_c.state());

    // Without the dropout generator or the loader position the run differs:
    // the test can fail.
    let (mut d, mut opt_d, mut sched_d, loader_d) = make(1);
    train_epochs(
        &mut d,
        &mut opt_d,
        &mut sched_d,
        &loader_d,
        0,
        3,
        Some((10, &path)),
    );
    let (mut e, mut opt_e, mut sched_e, loader_e) = make(2);
    TrainingCheckpoint::load_into(&path, &mut e, &mut opt_e, Some(&mut sched_e)).unwrap();
    std::fs::remove_file(&path).unwrap();
    train_epochs(&mut e, &mut opt_e, &mut sched_e, &loader_e, 10, 3, None);
    assert_ne!(
        values_of(&a),
        values_of(&e),
        "a fresh loader replays other batches"
    );
}

fn values_of<L: Layer>(m: &L) -> Vec<(String, Vec<f32>)> {
    m.state_dict()
        .into_iter()
        .map(|(k, t)| (k, t.to_vec()))
        .collect()
}

#[test]
fn the_wrong_schedule_type_or_a_missing_schedule_is_an_error() {
    let path = tmp("sched-kind.safetensors");
    let m = mlp(1);
    let opt = optimizer();
    TrainingCheckpoint::save(&path, &m, &opt, None, 0).unwrap();
    let mut step_lr = forge::optim::StepLr::new(0.1, 1, 0.5);
    let e = TrainingCheckpoint::load_into(&path, &mut mlp(2), &mut optimizer(), Some(&mut step_lr))
        .unwrap_err();
    assert!(e.to_string().contains("holds none"), "{e}");
    TrainingCheckpoint::save(&path, &m, &opt, Some(&schedule()), 0).unwrap();
    let e = TrainingCheckpoint::load_into(&path, &mut mlp(2), &mut optimizer(), Some(&mut step_lr))
        .unwrap_err();
    assert!(e.to_string().contains("OneCycleLr"), "{e}");
    let mut concrete = OneCycleLr::new(1.0, 5);
    TrainingCheckpoint::load_into(&path, &mut mlp(2), &mut optimizer(), Some(&mut concrete))
        .unwrap();
    assert_eq!(Schedule::from(concrete), schedule());
    std::fs::remove_file(&path).unwrap();
}
