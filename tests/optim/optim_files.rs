//! Optimizer and schedule files: exact round trips, resumed training equal
//! to uninterrupted training, refused versions and kinds, and hostile bytes
//! (truncated, corrupted, random) that must be errors, never panics.

use forge::optim::*;
use forge::{ForgeError, Gradients, Rng, Tensor};
use proptest::prelude::*;

fn tmp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("forge-optim-files-{}-{name}", std::process::id()))
}

/// A deterministic toy problem: params w (2x3) and b (3), loss
/// sum((w^T w) * b) style coupling, gradients from the tape.
fn step<R: UpdateRule>(
    opt: &mut Optimizer<R, f64>,
    w: &mut Tensor<f64>,
    b: &mut Tensor<f64>,
    k: usize,
) {
    let x = Tensor::<f64>::from_fn(&[4, 2], |i| ((i + k) as f64 * 0.37).sin());
    let y = (x.matmul(w) + &*b).tanh().square().sum();
    let grads = y.backward();
    opt.step_params(
        vec![("layer.weight", &mut *w), ("layer.bias", &mut *b)],
        &grads,
    )
    .unwrap();
}

fn params() -> (Tensor<f64>, Tensor<f64>) {
    let mut rng = Rng::new(7);
    (
        Tensor::<f64>::normal(&[2, 3], 0.0, 1.0, &mut rng).requires_grad(),
        Tensor::<f64>::normal(&[3], 0.0, 1.0, &mut rng).requires_grad(),
    )
}

fn resume_equals_uninterrupted<R: UpdateRule>(make: impl Fn() -> Optimizer<R, f64>) {
    let (mut w1, mut b1) = params();
    let mut straight = make();
    for k in 0..20 {
        step(&mut straight, &mut w1, &mut b1, k);
    }
    let (mut w2, mut b2) = params();
    let mut first = make();
    for k in 0..10 {
        step(&mut first, &mut w2, &mut b2, k);
    }
    let path = tmp(&format!("resume-{}", R::NAME));
    first.save(&path).unwrap();
    drop(first);
    let mut resumed = Optimizer::<R, f64>::load(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    for k in 10..20 {
        step(&mut resumed, &mut w2, &mut b2, k);
    }
    assert_eq!(w1.to_vec(), w2.to_vec(), "{}", R::NAME);
    assert_eq!(b1.to_vec(), b2.to_vec(), "{}", R::NAME);
    assert_eq!(straight.to_bytes().unwrap(), resumed.to_bytes().unwrap());
}

#[test]
fn every_optimizer_resumes_bit_for_bit() {
    resume_equals_uninterrupted(|| {
        Sgd::new(0.05)
            .momentum(0.9)
            .nesterov(true)
            .weight_decay(0.01)
    });
    resume_equals_uninterrupted(|| Adam::new(0.01).amsgrad(true));
    resume_equals_uninterrupted(|| {
        AdamW::new(0.01).with_group(ParamGroup::suffix("bias").weight_decay(0.0))
    });
    resume_equals_uninterrupted(|| {
        Adagrad::new(0.05)
            .lr_decay(0.01)
            .initial_accumulator_value(0.1)
    });
    resume_equals_uninterrupted(|| Adadelta::new(1.0));
    resume_equals_uninterrupted(|| RmsProp::new(0.01).momentum(0.5).centered(true));
}

#[test]
fn schedules_round_trip() {
    let s: Schedule = SequentialLr::new(
        vec![
            LinearLr::new(0.1, 0.1, 1.0, 5).into(),
            CosineAnnealingLr::new(0.1, 25, 0.0).into(),
        ],
        &[5],
    )
    .into();
    let mut s = s;
    let mut opt = Sgd::<f32>::new(0.1);
    for _ in 0..7 {
        s.step(&mut opt);
    }
    let path = tmp("sched");
    s.save(&path).unwrap();
    let back = Schedule::load(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(back, s);
    assert_eq!(back.current_step(), 7);
    for s in [
        Schedule::from(StepLr::new(0.1, 3, 0.5)),
        MultiStepLr::new(0.1, &[2, 4], 0.3).into(),
        ExponentialLr::new(0.1, 0.9).into(),
        OneCycleLr::new(0.1, 30).into(),
        NoamLr::new(1.0, 64, 100).into(),
    ] {
        assert_eq!(Schedule::from_bytes(&s.to_bytes().unwrap()).unwrap(), s);
    }
}

#[test]
fn a_newer_version_is_refused_and_other_kinds_too() {
    let mut b = Adam::<f32>::new(1e-3).to_bytes().unwrap();
    b[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    let e = Adam::<f32>::from_bytes(&b).unwrap_err();
    assert!(
        matches!(e, ForgeError::Version { found, .. } if found == FORMAT_VERSION + 1),
        "{e}"
    );
    assert!(e.to_string().contains("newer"), "{e}");
    // Another optimizer, another element type, a schedule.
    let b = Adam::<f32>::new(1e-3).to_bytes().unwrap();
    assert!(matches!(
        Sgd::<f32>::from_bytes(&b),
        Err(ForgeError::State { .. })
    ));
    assert!(matches!(
        Adam::<f64>::from_bytes(&b),
        Err(ForgeError::State { .. })
    ));
    assert!(matches!(
        Schedule::from_bytes(&b),
        Err(ForgeError::State { .. })
    ));
    // Trailing bytes and bad magic.
    let mut t = b.clone();
    t.push(0);
    assert!(matches!(
        Adam::<f32>::from_bytes(&t),
        Err(ForgeError::Format { .. })
    ));
    let mut m = b.clone();
    m[0] = b'X';
    assert!(matches!(
        Adam::<f32>::from_bytes(&m),
        Err(ForgeError::Format { .. })
    ));
}

#[test]
fn closure_groups_are_unbound_after_load_and_restore_keeps_them() {
    let make = || {
        Sgd::<f64>::new(0.1)
            .weight_decay(0.1)
            .with_group(ParamGroup::matching(|p| p.ends_with("bias")).weight_decay(0.0))
    };
    let (mut w, mut b) = params();
    let mut opt = make();
    step(&mut opt, &mut w, &mut b, 0);
    let bytes = opt.to_bytes().unwrap();
    let mut loaded = Sgd::<f64>::from_bytes(&bytes).unwrap();
    let e = loaded
        .step_params(vec![("w", &mut w)], &Gradients::new())
        .unwrap_err();
    assert!(
        matches!(e, ForgeError::State { ref detail, .. } if detail.contains("restore")),
        "{e}"
    );
    let path = tmp("restore");
    std::fs::write(&path, &bytes).unwrap();
    let mut fresh = make();
    fresh.restore(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(fresh.to_bytes().unwrap(), bytes);
}

/// A state file whose buffers disagree with their shape is refused at
/// load; a state file of a different model is refused at the next step.
#[test]
fn inconsistent_state_is_refused() {
    let (mut w, mut b) = params();
    let mut opt = Adam::<f64>::new(0.1).amsgrad(true);
    step(&mut opt, &mut w, &mut b, 0);
    let bytes = opt.to_bytes().unwrap();
    // In the file: "layer.bias", step 1, shape [3] (postcard: 1, 1, 3).
    let key = b"layer.bias";
    let at = bytes.windows(key.len()).position(|x| x == key).unwrap() + key.len();
    assert_eq!(&bytes[at..at + 3], &[1, 1, 3]);
    let mut bad = bytes.clone();
    bad[at + 2] = 4; // shape [4] but buffers of 3 values
    let e = Adam::<f64>::from_bytes(&bad).unwrap_err();
    assert!(
        matches!(e, ForgeError::State { ref path, .. } if path == "layer.bias"),
        "{e}"
    );
    // A state file for a different model (bias of 4 values): refused at
    // the step, naming the path and both shapes, with nothing changed.
    let mut other = Adam::<f64>::from_bytes(&bytes).unwrap();
    let mut b4 = Tensor::<f64>::zeros(&[4]).requires_grad();
    let mut g = Gradients::new();
    g.insert(&b4, Tensor::ones(&[4]));
    let e = other
        .step_params(vec![("layer.bias", &mut b4)], &g)
        .unwrap_err();
    assert!(
        e.to_string().contains("layer.bias")
            && e.to_string().contains("[3]")
            && e.to_string().contains("[4]"),
        "{e}"
    );
    // Huge length prefix right after the header: no allocation, an error.
    let mut huge = bytes[..12].to_vec();
    huge.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
    assert!(Adam::<f64>::from_bytes(&huge).is_err());
}

fn sample_files() -> Vec<Vec<u8>> {
    let (mut w, mut b) = params();
    let mut adam = Adam::<f64>::new(0.1)
        .amsgrad(true)
        .with_group(ParamGroup::prefix("layer.b").lr_scale(0.5));
    let mut sgd = Sgd::<f64>::new(0.1).momentum(0.9);
    let mut rms = RmsProp::<f64>::new(0.01).momentum(0.9).centered(true);
    for k in 0..2 {
        step(&mut adam, &mut w, &mut b, k);
        step(&mut sgd, &mut w, &mut b, k);
        step(&mut rms, &mut w, &mut b, k);
    }
    vec![
        adam.to_bytes().unwrap(),
        sgd.to_bytes().unwrap(),
        rms.to_bytes().unwrap(),
        Schedule::from(OneCycleLr::new(0.1, 30)).to_bytes().unwrap(),
    ]
}

/// Decoding with every type: must return (Ok or Err), never panic.
fn decode_all(bytes: &[u8]) -> usize {
    let mut ok = 0;
    ok += Adam::<f64>::from_bytes(bytes).is_ok() as usize;
    ok += Sgd::<f64>::from_bytes(bytes).is_ok() as usize;
    ok += RmsProp::<f64>::from_bytes(bytes).is_ok() as usize;
    ok += Schedule::from_bytes(bytes).is_ok() as usize;
    ok
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn truncated_files_are_errors(which in 0usize..4, cut in 0usize..10_000) {
        let files = sample_files();
        let f = &files[which];
        let cut = cut % f.len();
        prop_assert_eq!(decode_all(&f[..cut]), 0);
    }

    #[test]
    fn corrupted_files_never_panic(which in 0usize..4, pos in 0usize..10_000, byte in any::<u8>(), extra in proptest::collection::vec((0usize..10_000, any::<u8>()), 0..4)) {
        let files = sample_files();
        let mut f = files[which].clone();
        let n = f.len();
        f[pos % n] = byte;
        for (p, v) in extra {
            f[p % n] = v;
        }
        decode_all(&f);
    }

    #[test]
    fn random_bytes_after_a_valid_header_never_panic(body in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut f = MAGIC.to_vec();
        f.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        f.extend_from_slice(&body);
        decode_all(&f);
    }
}
