//! Replays every committed fuzz input (the minimised corpus in
//! `fuzz/corpus/TARGET/` and every crash or regression input in
//! `fuzz/artifacts/TARGET/`) through the same contract functions the
//! fuzz targets run (`fuzz/contracts.rs`), on a stable compiler, on every
//! CI run. A counting allocator checks that no single allocation exceeds
//! what the input can account for.
//!
//! `fresh_seeds_keep_the_contract` builds the hand-made seed inputs the
//! fuzzers start from (`seed-*`, written by forge itself) and runs them
//! through the same checks, in memory: a test never writes into the
//! repository. To rewrite the seed files under `fuzz/` (by hand, when the
//! formats change), set `FORGE_WRITE_SEEDS=1` for that test:
//! `FORGE_WRITE_SEEDS=1 cargo test --test suite fuzz_corpus::fresh_seeds`.

#[path = "../../fuzz/contracts.rs"]
mod contracts;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::{Path, PathBuf};

/// The system allocator, noting the largest request made on each thread.
struct Counting;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    // `try_with`: during thread teardown the slot may be gone.
    let _ = LARGEST.try_with(|m| {
        if size > m.get() {
            m.set(size);
        }
    });
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged; `note` only touches a const-initialised thread-local `Cell`
// (no allocation, no destructor), so the allocator contract is `System`'s.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: forwarded unchanged (see the impl's comment).
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// Every file under `fuzz/corpus/TARGET` and `fuzz/artifacts/TARGET`.
fn inputs(target: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for kind in ["corpus", "artifacts"] {
        let dir = fuzz_dir().join(kind).join(target);
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries {
                let p = e.expect("readable corpus directory").path();
                if p.is_file() {
                    files.push(p);
                }
            }
        }
    }
    files.sort();
    files
}

/// The largest single allocation an input of `len` bytes may cause: a
/// fixed allowance (the small model, gzip's 1 MiB cap, buffer growth)
/// plus a multiple of the input.
fn allowance(len: usize) -> usize {
    (4 << 20) + 64 * len
}

/// Runs the contract of `target` on `data` (named `what` in the messages)
/// and checks its largest single allocation.
fn check(target: &str, what: &str, data: &[u8]) {
    LARGEST.with(|m| m.set(0));
    let r = std::panic::catch_unwind(|| contracts::run(target, data));
    let largest = LARGEST.with(|m| m.get());
    assert!(r.is_ok(), "{target}: {what} breaks the contract");
    assert!(
        largest <= allowance(data.len()),
        "{target}: {what} ({} bytes) made an allocation of {largest} bytes",
        data.len()
    );
}

fn replay(target: &str) -> usize {
    let files = inputs(target);
    for path in &files {
        let data = std::fs::read(path).expect("readable input");
        check(target, &path.display().to_string(), &data);
    }
    files.len()
}

#[test]
fn every_committed_fuzz_input_keeps_the_contract() {
    let mut total = 0;
    for target in contracts::TARGETS {
        let n = replay(target);
        assert!(
            n > 0,
            "{target}: no corpus committed under fuzz/corpus/{target}"
        );
        total += n;
    }
    eprintln!("replayed {total} fuzz inputs");
}

/// Issue 16: FORGEOPT, version 1, `Schedule`, StepLr base_lr 0.1,
/// step_size 5, gamma 0.5, step = u64::MAX: 49 bytes (the issue's hex
/// has one `00` too many in gamma; its text says 49 bytes).
const ISSUE16_SCHEDULE: &[u8] = &[
    0x46, 0x4f, 0x52, 0x47, 0x45, 0x4f, 0x50, 0x54, 0x01, 0x00, 0x00, 0x00, 0x08, 0x53, 0x63, 0x68,
    0x65, 0x64, 0x75, 0x6c, 0x65, 0x00, 0x9a, 0x99, 0x99, 0x99, 0x99, 0x99, 0xb9, 0x3f, 0x05, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0xe0, 0x3f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0x01,
];

/// Issue 16: an `Adam<f32>` file with one parameter whose step is
/// `u64::MAX` (built from a real file by rewriting the step's varint).
fn issue16_adam() -> Vec<u8> {
    use forge::optim::{Adam, Persist};
    use forge::Tensor;
    let mut opt = Adam::<f32>::new(1e-3);
    opt.set_state(
        "w",
        5,
        &[
            ("exp_avg", Tensor::zeros(&[1])),
            ("exp_avg_sq", Tensor::zeros(&[1])),
        ],
    )
    .unwrap();
    let bytes = opt.to_bytes().unwrap();
    // In the body: path "w" (len 1, 'w'), then step 5 as one varint byte.
    let at = bytes.windows(3).position(|x| x == [1, b'w', 5]).unwrap() + 2;
    let mut out = bytes[..at].to_vec();
    out.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
    out.extend_from_slice(&bytes[at + 1..]);
    out
}

#[test]
fn issue16_inputs_are_refused_with_the_field_and_value() {
    use forge::optim::{Adam, Persist, Schedule};
    assert_eq!(ISSUE16_SCHEDULE.len(), 49);
    let e = Schedule::from_bytes(ISSUE16_SCHEDULE)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("step") && e.contains(&u64::MAX.to_string()),
        "{e}"
    );
    let e = Adam::<f32>::from_bytes(&issue16_adam())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("w: step") && e.contains(&u64::MAX.to_string()),
        "{e}"
    );
}

/// One seed input: `(kind, target, file name, bytes)`, kind `corpus` or
/// `artifacts` (the directories under `fuzz/`).
type Seed = (&'static str, &'static str, String, Vec<u8>);

/// The seed inputs the fuzzers start from: every optimizer with state in
/// f32 and f64, every schedule, a training checkpoint, the small model's
/// weights in three dtypes, four PyTorch fixtures, IDX arrays, and issue
/// 16's two inputs (regression artifacts).
fn seeds() -> Vec<Seed> {
    use forge::checkpoint::{LayerIo, TrainingCheckpoint};
    use forge::io::IdxArray;
    use forge::optim::*;
    use forge::prelude::*;

    let mut out: Vec<Seed> = Vec::new();
    let mut put = |target: &'static str, name: &str, bytes: &[u8]| {
        out.push(("corpus", target, format!("seed-{name}"), bytes.to_vec()));
    };

    // Optimizers with state, f32 and f64, and every schedule.
    fn stepped<R: UpdateRule, E: Float>(mut opt: Optimizer<R, E>) -> Optimizer<R, E> {
        let mut w = Tensor::<E>::from_fn(&[2, 3], |i| E::from_f64(i as f64 * 0.1 - 0.2));
        let mut b = Tensor::<E>::from_fn(&[3], |i| E::from_f64(0.3 - i as f64 * 0.2));
        for k in 0..2 {
            let g = |t: &Tensor<E>| {
                Tensor::<E>::from_fn(t.shape(), |i| E::from_f64(((i + k) as f64).sin()))
            };
            let grads = std::collections::BTreeMap::from([
                ("layer.weight".to_string(), g(&w)),
                ("layer.bias".to_string(), g(&b)),
            ]);
            opt.step_params([("layer.weight", &mut w), ("layer.bias", &mut b)], &grads)
                .unwrap();
        }
        opt
    }
    macro_rules! both {
        ($name:literal, $make:expr) => {{
            put(
                "optim_state",
                concat!($name, "-f32"),
                &stepped::<_, f32>($make).to_bytes().unwrap(),
            );
            put(
                "optim_state",
                concat!($name, "-f64"),
                &stepped::<_, f64>($make).to_bytes().unwrap(),
            );
        }};
    }
    both!("sgd", Sgd::new(0.1).momentum(0.9).weight_decay(1e-4));
    both!(
        "adam",
        Adam::new(1e-3)
            .amsgrad(true)
            .with_group(ParamGroup::suffix("bias").weight_decay(0.0))
    );
    both!(
        "adamw",
        AdamW::new(1e-3).with_group(ParamGroup::prefix("layer.").lr_scale(0.5))
    );
    both!("rmsprop", RmsProp::new(1e-2).momentum(0.9).centered(true));
    both!("adagrad", Adagrad::new(1e-2).lr_decay(0.01));
    both!("adadelta", Adadelta::new(1.0));
    let schedules: Vec<(&str, Schedule)> = vec![
        ("steplr", StepLr::new(0.1, 5, 0.5).into()),
        ("multistep", MultiStepLr::new(0.1, &[2, 4], 0.3).into()),
        ("exponential", ExponentialLr::new(0.1, 0.9).into()),
        ("cosine", CosineAnnealingLr::new(0.1, 20, 0.001).into()),
        ("linear", LinearLr::new(0.1, 0.1, 1.0, 5).into()),
        ("onecycle", OneCycleLr::new(0.1, 30).into()),
        ("noam", NoamLr::new(1.0, 64, 100).into()),
        (
            "sequential",
            SequentialLr::new(
                vec![
                    LinearLr::new(0.1, 0.1, 1.0, 5).into(),
                    CosineAnnealingLr::new(0.1, 25, 0.0).into(),
                ],
                &[5],
            )
            .into(),
        ),
    ];
    for (name, s) in schedules {
        put(
            "optim_state",
            &format!("schedule-{name}"),
            &s.to_bytes().unwrap(),
        );
    }

    // A training checkpoint and weights of the small model.
    let mut model = contracts::small_model();
    let mut opt = Adam::<f32>::new(1e-3);
    let mut sched: Schedule = StepLr::new(1e-3, 10, 0.5).into();
    for _ in 0..2 {
        let grads = model
            .forward(Tensor::from_vec(vec![0.5, -1.0, 0.25], &[1, 3]))
            .sum()
            .backward();
        opt.step(&mut model, &grads).unwrap();
        sched.step(&mut opt);
    }
    put(
        "training_checkpoint",
        "adam-steplr",
        &TrainingCheckpoint::to_bytes(&model, &opt, Some(&sched), None, 2).unwrap(),
    );
    let tmp = std::env::temp_dir().join(format!("forge-seed-{}.safetensors", std::process::id()));
    for (name, dtype) in [
        ("f32", DType::F32),
        ("f16", DType::F16),
        ("f64", DType::F64),
    ] {
        model.save_as(&tmp, dtype).unwrap();
        let bytes = std::fs::read(&tmp).unwrap();
        put("weights", name, &bytes);
        put("safetensors", &format!("linear-{name}"), &bytes);
    }
    std::fs::remove_file(&tmp).unwrap();
    for f in ["adam", "sgd", "clip_grad_value", "sched_onecycle_lr"] {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/optim")
            .join(format!("{f}.safetensors"));
        put(
            "safetensors",
            &format!("fixture-{f}"),
            &std::fs::read(p).unwrap(),
        );
    }

    // IDX arrays; the gzip target compresses its input itself.
    for (name, a) in [
        (
            "labels",
            IdxArray {
                dims: vec![5],
                data: vec![7, 2, 1, 0, 4],
            },
        ),
        (
            "images",
            IdxArray {
                dims: vec![2, 3, 3],
                data: (0..18).collect(),
            },
        ),
        (
            "empty",
            IdxArray {
                dims: vec![0],
                data: vec![],
            },
        ),
    ] {
        put("idx", name, &a.to_bytes());
        put("idx_gzip", name, &a.to_bytes());
    }

    // Issue 16's two inputs that loaded and then panicked (step = u64::MAX),
    // kept as regression artifacts.
    for (name, bytes) in [
        ("issue16-schedule-step-max", ISSUE16_SCHEDULE.to_vec()),
        ("issue16-adam-step-max", issue16_adam()),
    ] {
        out.push(("artifacts", "optim_state", name.to_string(), bytes));
    }
    out
}

/// The seeds, freshly written by forge, keep the contract (the committed
/// corpus is replayed above; cargo fuzz cmin may have dropped seeds that
/// other inputs cover). Writes them under `fuzz/` only when
/// `FORGE_WRITE_SEEDS` is set (see the module docs).
#[test]
fn fresh_seeds_keep_the_contract() {
    let seeds = seeds();
    assert_eq!(seeds.len(), 39, "seeds");
    for (kind, target, name, bytes) in &seeds {
        check(target, &format!("fresh {kind} {name}"), bytes);
    }
    if std::env::var_os("FORGE_WRITE_SEEDS").is_some() {
        for (kind, target, name, bytes) in &seeds {
            let dir = fuzz_dir().join(kind).join(target);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(name), bytes).unwrap();
        }
        eprintln!(
            "wrote {} seed files under {}",
            seeds.len(),
            fuzz_dir().display()
        );
    }
}
