//! The contract every reader of outside bytes keeps, as functions that
//! panic when it is broken. The fuzz targets (`fuzz/fuzz_targets/*.rs`)
//! call them on libFuzzer's inputs, and `tests/io/fuzz_corpus.rs` replays the
//! committed corpus and crash files through the same functions.
//!
//! The contract: the reader returns an error or a usable value, never
//! panics; a value that loads round-trips to the same bytes; using it (a
//! few optimizer steps, a forward pass) never panics, and never gives a
//! non-finite parameter from finite gradients while the loaded settings
//! are in the envelope [`tame`] describes. (Allocation limits are checked
//! by libFuzzer's `-malloc_limit_mb` and by the replay test's counting
//! allocator.)

#![allow(dead_code)]

use forge::checkpoint::{LayerIo, TrainingCheckpoint};
use forge::io::{parse_idx, parse_idx_limited, parse_safetensors, serialize_safetensors};
use forge::nn::{Forward, Layer, Linear};
use forge::optim::{
    AdadeltaConfig, AdagradConfig, AdamConfig, AdamWConfig, LrScheduler, Optimizer, Persist,
    RmsPropConfig, RuleState, Schedule, Sgd, SgdConfig, UpdateRule,
};
use forge::{Float, Rng, Tensor};
use std::collections::BTreeMap;

/// Names of the fuzz targets, which are also the corpus directories.
pub const TARGETS: &[&str] = &[
    "safetensors",
    "optim_state",
    "training_checkpoint",
    "weights",
    "idx",
    "idx_gzip",
];

/// Runs the contract of target `name` on `data`.
///
/// # Panics
/// When the contract is broken (that is the finding), or `name` is unknown.
pub fn run(name: &str, data: &[u8]) {
    match name {
        "safetensors" => safetensors(data),
        "optim_state" => optim_state(data),
        "training_checkpoint" => training_checkpoint(data),
        "weights" => weights(data),
        "idx" => idx(data),
        "idx_gzip" => idx_gzip(data),
        other => panic!("no fuzz target {other}"),
    }
}

/// safetensors: parse; a file that parses serialises to bytes that parse
/// to the same tensors and serialise to the same bytes.
pub fn safetensors(data: &[u8]) {
    let Ok(parsed) = parse_safetensors(data) else {
        return;
    };
    let bytes = serialize_safetensors(&parsed.tensors, &parsed.metadata);
    let again = parse_safetensors(&bytes).expect("serialised safetensors must parse");
    assert_eq!(again.metadata, parsed.metadata);
    assert_eq!(
        again.tensors.keys().collect::<Vec<_>>(),
        parsed.tensors.keys().collect::<Vec<_>>()
    );
    let bytes2 = serialize_safetensors(&again.tensors, &again.metadata);
    assert_eq!(bytes2, bytes, "safetensors round trip is not stable");
}

/// A deterministic gradient value in [-1, 1] for element `i` of step `k`.
fn grad_value(seed: u64, k: usize, i: usize) -> f64 {
    let mut x = seed ^ ((k as u64) << 32) ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    (x % 2001) as f64 / 1000.0 - 1.0
}

fn seed_of(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// Rule settings inside which a few steps must keep finite parameters
/// (beyond it only "no panic" is asserted: a rate of 1e300 legitimately
/// overflows).
pub trait Tame {
    /// Whether the rule's settings are in the envelope.
    fn tame(&self) -> bool;
}

impl Tame for SgdConfig {
    fn tame(&self) -> bool {
        self.momentum <= 1.0 && self.dampening.abs() <= 1.0
    }
}
impl Tame for AdamConfig {
    fn tame(&self) -> bool {
        self.beta1 <= 0.9999 && self.beta2 <= 0.9999 && self.eps >= 1e-12
    }
}
impl Tame for AdamWConfig {
    fn tame(&self) -> bool {
        self.0.tame()
    }
}
impl Tame for RmsPropConfig {
    fn tame(&self) -> bool {
        self.eps >= 1e-12 && self.momentum <= 1.0
    }
}
impl Tame for AdagradConfig {
    fn tame(&self) -> bool {
        self.eps >= 1e-12 && self.initial_accumulator_value <= 1e3
    }
}
impl Tame for AdadeltaConfig {
    fn tame(&self) -> bool {
        self.eps >= 1e-12
    }
}

/// The envelope of [`Tame`] plus rates, decays and buffers of moderate size.
pub fn tame<R: UpdateRule + Tame, E: Float>(opt: &Optimizer<R, E>) -> bool {
    let small = |v: f64| v <= 10.0;
    small(opt.lr())
        && opt.rule().tame()
        && small(opt.hyper_for("").weight_decay)
        && opt
            .groups()
            .iter()
            .all(|g| small(g.lr_scale * opt.lr()) && g.weight_decay.is_none_or(small))
        && opt.state_paths().all(|p| {
            let s = opt.state(p).expect("listed path");
            s.rule_state()
                .buffers()
                .iter()
                .all(|(_, b)| b.iter().all(|x| forge::Element::to_f64(*x).abs() <= 1e3))
        })
}

/// Largest parameter a replayed state is used with.
const MAX_USE: usize = 1 << 16;

/// Loads `data` as `Optimizer<R, E>`; if it loads, checks the round trip
/// and takes three steps on parameters of the stored shapes.
fn one_optimizer<R, E>(data: &[u8])
where
    R: UpdateRule + Tame,
    E: Float,
    Optimizer<R, E>: Persist,
{
    let Ok(mut opt) = Optimizer::<R, E>::from_bytes(data) else {
        return;
    };
    let bytes = opt.to_bytes().expect("a loaded optimizer encodes");
    let again = Optimizer::<R, E>::from_bytes(&bytes).expect("re-encoded optimizer loads");
    assert_eq!(
        again.to_bytes().unwrap(),
        bytes,
        "optimizer round trip is not stable"
    );
    let check_finite = tame(&opt);
    let mut params: Vec<(String, Tensor<E>)> = opt
        .state_paths()
        .filter_map(|p| {
            let shape = opt.state(p).unwrap().shape().to_vec();
            let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))?;
            (n <= MAX_USE).then(|| (p.to_string(), Tensor::full(&shape, E::from_f64(0.5))))
        })
        .collect();
    params.push(("fresh.param".into(), Tensor::full(&[3], E::from_f64(-0.25))));
    let seed = seed_of(data);
    for k in 0..3 {
        let grads: BTreeMap<String, Tensor<E>> = params
            .iter()
            .map(|(p, t)| {
                let g = Tensor::from_fn(t.shape(), |i| E::from_f64(grad_value(seed, k, i)));
                (p.clone(), g)
            })
            .collect();
        let refs: Vec<(&str, &mut Tensor<E>)> =
            params.iter_mut().map(|(p, t)| (p.as_str(), t)).collect();
        if opt.step_params(refs, &grads).is_err() {
            return;
        }
        if check_finite {
            for (p, t) in &params {
                assert!(
                    t.as_slice().iter().all(|x| x.is_finite()),
                    "{} {}: step {k} gave a non-finite parameter from finite gradients",
                    R::NAME,
                    p
                );
            }
        }
    }
}

/// Loads `data` as a schedule; if it loads, checks the round trip and
/// drives an optimizer with it for a few steps.
fn one_schedule(data: &[u8]) {
    let Ok(mut s) = Schedule::from_bytes(data) else {
        return;
    };
    let bytes = s.to_bytes().expect("a loaded schedule encodes");
    let again = Schedule::from_bytes(&bytes).expect("re-encoded schedule loads");
    assert_eq!(again, s);
    let mut opt = Sgd::<f64>::new(0.1).momentum(0.5);
    let mut w = Tensor::<f64>::full(&[2], 1.0);
    let grads = BTreeMap::from([("w".to_string(), Tensor::full(&[2], 0.5))]);
    s.apply(&mut opt);
    for k in 0..3 {
        let _ = s.lr_at(s.current_step().saturating_add(k));
        let _ = s.momentum_at(s.current_step());
        let lr = opt.lr();
        if opt.step_params([("w", &mut w)], &grads).is_ok() && lr.is_finite() && lr <= 10.0 {
            assert!(w.as_slice().iter().all(|x| x.is_finite()));
        }
        s.step(&mut opt);
    }
}

/// Optimizer and schedule files: every optimizer type in f32 and f64,
/// and `Schedule`.
pub fn optim_state(data: &[u8]) {
    one_optimizer::<SgdConfig, f32>(data);
    one_optimizer::<SgdConfig, f64>(data);
    one_optimizer::<AdamConfig, f32>(data);
    one_optimizer::<AdamConfig, f64>(data);
    one_optimizer::<AdamWConfig, f32>(data);
    one_optimizer::<AdamWConfig, f64>(data);
    one_optimizer::<RmsPropConfig, f32>(data);
    one_optimizer::<RmsPropConfig, f64>(data);
    one_optimizer::<AdagradConfig, f32>(data);
    one_optimizer::<AdagradConfig, f64>(data);
    one_optimizer::<AdadeltaConfig, f32>(data);
    one_optimizer::<AdadeltaConfig, f64>(data);
    one_schedule(data);
}

/// The small model the checkpoint and weights targets load into.
pub fn small_model() -> Linear<f32> {
    Linear::new(3, 2, &mut Rng::new(0))
}

/// A training checkpoint (model, Adam, schedule) into [`small_model`].
pub fn training_checkpoint(data: &[u8]) {
    let mut model = small_model();
    let mut opt = forge::optim::Adam::<f32>::new(1e-3);
    let mut sched: Schedule = forge::optim::StepLr::new(1e-3, 10, 0.5).into();
    let Ok(step) =
        TrainingCheckpoint::load_bytes_into(data, &mut model, &mut opt, Some(&mut sched))
    else {
        return;
    };
    let bytes = TrainingCheckpoint::to_bytes(&model, &opt, Some(&sched), None, step)
        .expect("a loaded checkpoint encodes");
    let (mut m2, mut o2) = (small_model(), forge::optim::Adam::<f32>::new(1e-3));
    let mut s2: Schedule = forge::optim::StepLr::new(1e-3, 10, 0.5).into();
    let step2 = TrainingCheckpoint::load_bytes_into(&bytes, &mut m2, &mut o2, Some(&mut s2))
        .expect("a re-encoded checkpoint loads");
    assert_eq!(step2, step);
    let bytes2 = TrainingCheckpoint::to_bytes(&m2, &o2, Some(&s2), None, step2).unwrap();
    assert_eq!(bytes2, bytes, "checkpoint round trip is not stable");
    // Train a few steps with the loaded state.
    let weights_finite = model
        .named_parameters()
        .iter()
        .all(|(_, t)| t.as_slice().iter().all(|x| x.is_finite()));
    let check = weights_finite && tame(&opt);
    let x = Tensor::<f32>::from_vec(vec![0.5, -1.0, 0.25], &[1, 3]);
    for _ in 0..3 {
        sched.apply(&mut opt);
        let lr_ok = opt.lr() <= 10.0;
        let grads = model.forward(x.clone()).sum().backward();
        if opt.step(&mut model, &grads).is_err() {
            return;
        }
        sched.step(&mut opt);
        if check && lr_ok {
            for (p, t) in model.named_parameters() {
                assert!(
                    t.as_slice().iter().all(|v| v.is_finite()),
                    "{p}: non-finite after a step from a loaded checkpoint"
                );
            }
        }
    }
}

/// Safetensors weights into [`small_model`] through `LayerIo::load_weights`
/// (the bytes go through a temporary file, as users' files do).
pub fn weights(data: &[u8]) {
    let dir = std::env::temp_dir();
    let path = dir.join(format!(
        "forge-fuzz-weights-{}-{:?}.safetensors",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::write(&path, data).expect("temporary file");
    let mut model = small_model();
    let bits = |m: &Linear<f32>| -> Vec<(String, Vec<u32>)> {
        m.state_dict()
            .into_iter()
            .map(|(k, t)| (k, t.as_slice().iter().map(|x| x.to_bits()).collect()))
            .collect()
    };
    let before = bits(&model);
    let r = model.load_weights(&path);
    let _ = std::fs::remove_file(&path);
    match r {
        Err(_) => assert_eq!(bits(&model), before, "a failed load changed the model"),
        Ok(()) => {
            let y = model.forward(Tensor::ones(&[2, 3]));
            assert_eq!(y.shape(), &[2, 2]);
            // Round trip through the same files.
            model.save(&path).expect("save");
            let mut other = small_model();
            other.load_weights(&path).expect("reload");
            let _ = std::fs::remove_file(&path);
            assert_eq!(
                bits(&model),
                bits(&other),
                "weights round trip changed bits"
            );
        }
    }
}

/// IDX, plain: parse; an array that parses encodes to bytes that parse to
/// the same array.
pub fn idx(data: &[u8]) {
    let Ok(a) = parse_idx(data) else {
        return;
    };
    let bytes = a.to_bytes();
    assert_eq!(parse_idx(&bytes).expect("encoded IDX parses"), a);
}

/// IDX, gzip: the input compressed parses exactly as the input does
/// (same array or both errors), and gzip input as given never panics.
pub fn idx_gzip(data: &[u8]) {
    use std::io::Write;
    const CAP: usize = 1 << 20;
    let _ = parse_idx_limited(data, CAP);
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(data).expect("gzip in memory");
    let gz = enc.finish().expect("gzip in memory");
    let plain = parse_idx_limited(data, CAP);
    let zipped = parse_idx_limited(&gz, CAP);
    match (plain, zipped) {
        (Ok(a), Ok(b)) => assert_eq!(a, b),
        (Err(_), Err(_)) => {}
        // A plain input that itself starts with the gzip magic is read as
        // gzip; compressed once more it is not the same file.
        (p, z) if data.starts_with(&[0x1f, 0x8b]) => {
            let _ = (p, z);
        }
        (p, z) => panic!(
            "plain {:?} but gzip {:?}",
            p.map(|a| a.dims),
            z.map(|a| a.dims)
        ),
    }
}
