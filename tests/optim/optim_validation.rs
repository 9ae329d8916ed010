//! Issue 16: a value that loads must be usable. Each validation rule is
//! tested with a crafted file (written with `to_bytes`, which does not
//! validate, or patched by hand), and a property test checks that after
//! any `Ok` load a few steps never panic and never turn finite gradients
//! into a non-finite parameter.

use forge::optim::*;
use forge::{ForgeError, Tensor};
use proptest::prelude::*;
use std::collections::BTreeMap;

/// Loading `bytes` as `T` fails, and the message names every `needle`.
fn refused<T: Persist + std::fmt::Debug>(bytes: &[u8], needles: &[&str]) -> ForgeError {
    let e = T::from_bytes(bytes).unwrap_err();
    let msg = e.to_string();
    for n in needles {
        assert!(msg.contains(n), "{msg:?} does not name {n:?}");
    }
    e
}

fn invalid<T: Persist + std::fmt::Debug>(bytes: Vec<u8>, needles: &[&str]) {
    let e = refused::<T>(&bytes, needles);
    assert!(matches!(e, ForgeError::Invalid { .. }), "{e:?}");
}

#[test]
fn out_of_range_rates_and_decays_are_refused_naming_field_and_value() {
    let mut o = Sgd::<f32>::new(0.1);
    o.set_lr(f64::NAN);
    invalid::<Sgd<f32>>(o.to_bytes().unwrap(), &["lr", "NaN"]);
    o.set_lr(-0.5);
    invalid::<Sgd<f32>>(o.to_bytes().unwrap(), &["lr", "-0.5"]);
    o.set_lr(f64::INFINITY);
    invalid::<Sgd<f32>>(o.to_bytes().unwrap(), &["lr", "inf"]);
    // Finite in f64, infinite once converted to f32.
    o.set_lr(1e39);
    invalid::<Sgd<f32>>(o.to_bytes().unwrap(), &["lr", "f32"]);
    assert!(Sgd::<f64>::from_bytes(&Sgd::<f64>::new(1e39).to_bytes().unwrap()).is_ok());
    let o = Sgd::<f32>::new(0.1).weight_decay(-1.0);
    invalid::<Sgd<f32>>(o.to_bytes().unwrap(), &["weight_decay", "-1"]);
    let o = Sgd::<f32>::new(0.1).with_group(ParamGroup::suffix("b").lr_scale(f64::NAN));
    invalid::<Sgd<f32>>(o.to_bytes().unwrap(), &["groups[0].lr_scale", "NaN"]);
    let o = Sgd::<f32>::new(0.1).with_group(ParamGroup::suffix("b").weight_decay(-2.0));
    invalid::<Sgd<f32>>(o.to_bytes().unwrap(), &["groups[0].weight_decay", "-2"]);
}

#[test]
fn out_of_range_rule_settings_are_refused_for_every_rule() {
    invalid::<Sgd<f64>>(
        Sgd::<f64>::new(0.1).momentum(f64::NAN).to_bytes().unwrap(),
        &["momentum", "NaN"],
    );
    invalid::<Sgd<f64>>(
        Sgd::<f64>::new(0.1).momentum(-0.9).to_bytes().unwrap(),
        &["momentum", "-0.9"],
    );
    invalid::<Sgd<f64>>(
        Sgd::<f64>::new(0.1)
            .dampening(f64::INFINITY)
            .to_bytes()
            .unwrap(),
        &["dampening", "inf"],
    );
    invalid::<Sgd<f64>>(
        Sgd::<f64>::new(0.1).nesterov(true).to_bytes().unwrap(),
        &["Nesterov", "momentum = 0"],
    );
    for (b1, b2, field, value) in [
        (1.0, 0.999, "beta1", "1"),
        (0.9, 1.0, "beta2", "1"),
        (-0.1, 0.999, "beta1", "-0.1"),
        (0.9, f64::NAN, "beta2", "NaN"),
    ] {
        invalid::<Adam<f64>>(
            Adam::<f64>::new(1e-3).betas(b1, b2).to_bytes().unwrap(),
            &[field, value],
        );
        invalid::<AdamW<f32>>(
            AdamW::<f32>::new(1e-3).betas(b1, b2).to_bytes().unwrap(),
            &[field, value],
        );
    }
    for eps in [0.0, -1e-8, f64::NAN, 1e-40] {
        let v = format!("{eps}");
        invalid::<Adam<f32>>(
            Adam::<f32>::new(1e-3).eps(eps).to_bytes().unwrap(),
            &["eps", &v],
        );
        invalid::<RmsProp<f32>>(
            RmsProp::<f32>::new(1e-3).eps(eps).to_bytes().unwrap(),
            &["eps", &v],
        );
        invalid::<Adagrad<f32>>(
            Adagrad::<f32>::new(1e-3).eps(eps).to_bytes().unwrap(),
            &["eps", &v],
        );
        invalid::<Adadelta<f32>>(
            Adadelta::<f32>::new(1.0).eps(eps).to_bytes().unwrap(),
            &["eps", &v],
        );
    }
    invalid::<RmsProp<f64>>(
        RmsProp::<f64>::new(1e-3).alpha(1.5).to_bytes().unwrap(),
        &["alpha", "1.5"],
    );
    invalid::<RmsProp<f64>>(
        RmsProp::<f64>::new(1e-3)
            .momentum(f64::NEG_INFINITY)
            .to_bytes()
            .unwrap(),
        &["momentum", "-inf"],
    );
    invalid::<Adagrad<f64>>(
        Adagrad::<f64>::new(1e-3).lr_decay(-1.0).to_bytes().unwrap(),
        &["lr_decay", "-1"],
    );
    invalid::<Adagrad<f64>>(
        Adagrad::<f64>::new(1e-3)
            .initial_accumulator_value(f64::NAN)
            .to_bytes()
            .unwrap(),
        &["initial_accumulator_value", "NaN"],
    );
    invalid::<Adadelta<f64>>(
        Adadelta::<f64>::new(1.0).rho(1.01).to_bytes().unwrap(),
        &["rho", "1.01"],
    );
}

/// An `Adam<f64>` file with one parameter "p" of 2 values, step 3.
fn adam_file(m: [f64; 2], v: [f64; 2]) -> Vec<u8> {
    let mut o = Adam::<f64>::new(1e-3);
    o.set_state(
        "p",
        3,
        &[
            ("exp_avg", Tensor::from_vec(m.to_vec(), &[2])),
            ("exp_avg_sq", Tensor::from_vec(v.to_vec(), &[2])),
        ],
    )
    .unwrap();
    o.to_bytes().unwrap()
}

/// Replaces the first occurrence of `from` by `to` (same length).
fn patch(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let at = bytes
        .windows(from.len())
        .position(|w| w == from)
        .expect("pattern in file");
    let mut out = bytes.to_vec();
    out[at..at + to.len()].copy_from_slice(to);
    out
}

#[test]
fn step_counters_that_cannot_advance_are_refused_and_checked_when_used() {
    let good = adam_file([0.1, 0.2], [0.01, 0.04]);
    // "p" (1, 'p'), step 3 (one varint byte): rewrite the step.
    let at = good.windows(3).position(|w| w == [1, b'p', 3]).unwrap() + 2;
    for (step, varint) in [
        (
            u64::MAX,
            vec![0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
        ),
        (
            1 << 53,
            vec![0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10],
        ),
    ] {
        let mut bad = good[..at].to_vec();
        bad.extend_from_slice(&varint);
        bad.extend_from_slice(&good[at + 1..]);
        let e = refused::<Adam<f64>>(&bad, &["p: step", &step.to_string()]);
        assert!(matches!(e, ForgeError::State { .. }), "{e:?}");
    }
    // set_state refuses the same counters; the largest allowed one steps once.
    let mut o = Adam::<f64>::new(1e-3);
    let z = || Tensor::<f64>::zeros(&[1]);
    assert!(o.set_state("w", u64::MAX, &[("exp_avg", z())]).is_err());
    o.set_state("w", (1 << 53) - 2, &[("exp_avg", z())])
        .unwrap();
    let mut w = Tensor::<f64>::ones(&[1]);
    let g = BTreeMap::from([("w".to_string(), Tensor::<f64>::ones(&[1]))]);
    o.step_params([("w", &mut w)], &g).unwrap();
    assert!(w.item().is_finite());
    let e = o.step_params([("w", &mut w)], &g).unwrap_err();
    assert!(
        matches!(e, ForgeError::State { ref path, ref detail } if path == "w" && detail.contains("cannot advance")),
        "{e}"
    );
}

#[test]
fn buffers_that_cannot_be_used_are_refused_naming_path_buffer_and_value() {
    let good = adam_file([0.1, 0.2], [0.01, 0.04]);
    assert!(Adam::<f64>::from_bytes(&good).is_ok());
    let bits = |x: f64| x.to_le_bytes();
    // A non-finite first moment.
    let bad = patch(&good, &bits(0.2), &bits(f64::NAN));
    refused::<Adam<f64>>(&bad, &["p", "exp_avg[1]", "NaN"]);
    let bad = patch(&good, &bits(0.1), &bits(f64::INFINITY));
    refused::<Adam<f64>>(&bad, &["exp_avg[0]", "inf"]);
    // A negative second moment (its square root would be NaN).
    let bad = patch(&good, &bits(0.04), &bits(-0.04));
    refused::<Adam<f64>>(&bad, &["exp_avg_sq[1]", "-0.04", ">= 0"]);
    // A buffer this rule does not keep, and a missing one.
    let bad = patch(&good, b"exp_avg_sq", b"exp_avg_zz");
    refused::<Adam<f64>>(&bad, &["exp_avg_zz", "not used by Adam"]);
    // A length that does not match the shape: shape [2] -> [3].
    let at = good.windows(4).position(|w| w == [1, b'p', 3, 1]).unwrap() + 4;
    let mut bad = good.clone();
    bad[at] = 3;
    refused::<Adam<f64>>(&bad, &["p", "buffer exp_avg has 2 values", "[3]"]);
    // A file without a buffer the rule keeps from the first step: an
    // Adagrad file whose `sum` was renamed to a name Adagrad does not know
    // is refused, and so is an AMSGrad file without `max_exp_avg_sq`.
    let mut ams = Adam::<f64>::new(1e-3).amsgrad(true);
    ams.set_state("p", 1, &[("exp_avg", Tensor::zeros(&[2]))])
        .unwrap();
    let b = ams.to_bytes().unwrap();
    let bad = patch(&b, b"max_exp_avg_sq", b"max_exp_avg_zz");
    refused::<Adam<f64>>(&bad, &["max_exp_avg_zz"]);
    // The shape's element count overflowing.
    let mut sgd = Sgd::<f64>::new(0.1);
    sgd.set_state("q", 1, &[("momentum_buffer", Tensor::zeros(&[1]))])
        .unwrap();
    let b = sgd.to_bytes().unwrap();
    // shape [1] = (len 1, dim 1) -> (len 2, dims 2^63, 4): overflow.
    let at = b.windows(4).position(|w| w == [1, b'q', 1, 1]).unwrap() + 3;
    let mut bad = b[..at].to_vec();
    bad.push(2);
    bad.extend_from_slice(&[
        0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 4,
    ]);
    bad.extend_from_slice(&b[at + 2..]);
    refused::<Sgd<f64>>(&bad, &["q", "shape"]);
}

#[test]
fn every_schedule_refuses_unusable_values_naming_field_and_value() {
    let s = |x: Schedule| x.to_bytes().unwrap();
    let mut step = StepLr::new(0.1, 5, 0.5);
    step.step_size = 0;
    invalid::<Schedule>(s(step.into()), &["StepLr: step_size = 0"]);
    let mut step = StepLr::new(0.1, 5, 0.5);
    step.gamma = f64::NAN;
    invalid::<Schedule>(s(step.into()), &["StepLr: gamma = NaN"]);
    let mut ms = MultiStepLr::new(0.1, &[1], 0.5);
    ms.base_lr = -1.0;
    invalid::<Schedule>(s(ms.into()), &["MultiStepLr: base_lr = -1"]);
    invalid::<Schedule>(
        s(ExponentialLr::new(0.1, f64::INFINITY).into()),
        &["ExponentialLr: gamma = inf"],
    );
    let mut cos = CosineAnnealingLr::new(0.1, 5, 0.0);
    cos.t_max = 0;
    invalid::<Schedule>(s(cos.into()), &["CosineAnnealingLr: t_max = 0"]);
    let mut lin = LinearLr::new(0.1, 0.5, 1.0, 3);
    lin.start_factor = 0.0;
    invalid::<Schedule>(s(lin.clone().into()), &["LinearLr: start_factor = 0"]);
    lin.start_factor = 0.5;
    lin.end_factor = 2.0;
    invalid::<Schedule>(s(lin.into()), &["LinearLr: end_factor = 2"]);
    let mut noam = NoamLr::new(1.0, 64, 10);
    noam.warmup = 0;
    invalid::<Schedule>(s(noam.into()), &["NoamLr: warmup = 0"]);
    let mut oc = OneCycleLr::new(0.1, 30);
    oc.total_steps = 2; // 0.3 * 2 - 1 < 0: the warm-up phase has no length
    invalid::<Schedule>(s(oc.into()), &["OneCycleLr: phase 0"]);
    let mut oc = OneCycleLr::new(0.1, 30);
    oc.div_factor = 0.0;
    invalid::<Schedule>(s(oc.into()), &["OneCycleLr: div_factor = 0"]);
    let mut seq = SequentialLr::new(
        vec![
            StepLr::new(0.1, 1, 0.5).into(),
            StepLr::new(0.1, 1, 0.5).into(),
        ],
        &[3],
    );
    seq.milestones.push(7);
    invalid::<Schedule>(
        s(seq.into()),
        &["SequentialLr", "2 schedules need 1 milestones"],
    );
    // A step counter that cannot advance, in every schedule.
    let all: Vec<Schedule> = vec![
        StepLr::new(0.1, 5, 0.5).into(),
        MultiStepLr::new(0.1, &[2], 0.5).into(),
        ExponentialLr::new(0.1, 0.9).into(),
        CosineAnnealingLr::new(0.1, 5, 0.0).into(),
        LinearLr::new(0.1, 0.5, 1.0, 3).into(),
        OneCycleLr::new(0.1, 30).into(),
        NoamLr::new(1.0, 64, 10).into(),
        SequentialLr::new(vec![StepLr::new(0.1, 1, 0.5).into()], &[]).into(),
    ];
    for mut sched in all {
        sched.set_step(u64::MAX);
        let e = refused::<Schedule>(&s(sched), &["step = 18446744073709551615"]);
        assert!(matches!(e, ForgeError::State { .. }), "{e:?}");
    }
    // A schedule built in code with a huge step does not panic stepping.
    let mut opt = Sgd::<f32>::new(0.1);
    let mut st = StepLr::new(0.1, 5, 0.5);
    st.step = u64::MAX;
    st.step(&mut opt);
    assert_eq!(st.current_step(), u64::MAX);
}

// ---- After any Ok load: a few steps, no panic, finite parameters ----------

/// A hyperparameter drawn mostly from its usual range, sometimes from the
/// edges and beyond (which the loader must refuse or survive).
fn setting(lo: f64, hi: f64) -> impl Strategy<Value = f64> {
    prop_oneof![
        6 => lo..=hi,
        1 => Just(lo),
        1 => Just(hi),
        1 => prop::sample::select(vec![0.0, -1.0, 1.0, 2.0, 1e-40, 1e39, f64::NAN, f64::INFINITY]),
    ]
}

fn step_count() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 0u64..100,
        1 => prop::sample::select(vec![(1u64 << 53) - 3, (1 << 53) - 1, 1 << 53, u64::MAX]),
    ]
}

#[derive(Debug, Clone)]
struct Case {
    rule: usize,
    lr: f64,
    wd: f64,
    a: f64,
    b: f64,
    eps: f64,
    flag: bool,
    step: u64,
    bufs: Vec<Vec<f64>>,
    grads: Vec<f64>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        0usize..6,
        setting(0.0, 10.0),
        setting(0.0, 1.0),
        setting(0.0, 0.9999),
        setting(0.0, 0.9999),
        setting(1e-12, 1e-3),
        any::<bool>(),
        step_count(),
        prop::collection::vec(prop::collection::vec(-1e3f64..1e3, 3), 3),
        prop::collection::vec(-1.0f64..1.0, 9),
    )
        .prop_map(|(rule, lr, wd, a, b, eps, flag, step, bufs, grads)| Case {
            rule,
            lr,
            wd,
            a,
            b,
            eps,
            flag,
            step,
            bufs,
            grads,
        })
}

/// Saves `opt` with state from `c` (through `set_state`, when it accepts
/// the state) and returns whether loading it back and stepping three
/// times kept the contract.
fn roundtrip_and_use<R: UpdateRule>(mut opt: Optimizer<R, f32>, c: &Case) -> Result<(), String> {
    let names = R::BUFFERS;
    let bufs: Vec<(&str, Tensor<f32>)> = names
        .iter()
        .zip(&c.bufs)
        .map(|(n, v)| {
            let v: Vec<f32> = v
                .iter()
                .map(|x| {
                    if n.contains("sq")
                        || *n == "sum"
                        || n.contains("avg") && *n != "grad_avg"
                        || *n == "acc_delta"
                    {
                        x.abs() as f32
                    } else {
                        *x as f32
                    }
                })
                .collect();
            (*n, Tensor::from_vec(v, &[3]))
        })
        .collect();
    let _ = opt.set_state("p", c.step, &bufs);
    let bytes = opt.to_bytes().map_err(|e| e.to_string())?;
    let Ok(mut loaded) = Optimizer::<R, f32>::from_bytes(&bytes) else {
        return Ok(());
    };
    let mut p = Tensor::<f32>::from_vec(vec![0.5, -0.5, 0.25], &[3]);
    for k in 0..3 {
        let g = Tensor::from_vec(
            c.grads[3 * k..3 * k + 3]
                .iter()
                .map(|&x| x as f32)
                .collect(),
            &[3],
        );
        let grads = BTreeMap::from([("p".to_string(), g)]);
        if loaded.step_params([("p", &mut p)], &grads).is_err() {
            return Ok(());
        }
        if !p.as_slice().iter().all(|x| x.is_finite()) {
            return Err(format!("step {k}: {:?} from {:?}", p.to_vec(), loaded));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn after_any_ok_load_a_few_steps_stay_finite(c in case()) {
        let r = match c.rule {
            0 => roundtrip_and_use(Sgd::new(c.lr).weight_decay(c.wd).momentum(c.a).dampening(c.b * c.b).nesterov(c.flag && c.b == 0.0), &c),
            1 => roundtrip_and_use(Adam::new(c.lr).weight_decay(c.wd).betas(c.a, c.b).eps(c.eps).amsgrad(c.flag), &c),
            2 => roundtrip_and_use(AdamW::new(c.lr).weight_decay(c.wd).betas(c.a, c.b).eps(c.eps).maximize(c.flag), &c),
            3 => roundtrip_and_use(RmsProp::new(c.lr).weight_decay(c.wd).alpha(c.a).momentum(c.b).eps(c.eps).centered(c.flag), &c),
            4 => roundtrip_and_use(Adagrad::new(c.lr).weight_decay(c.wd).lr_decay(c.a).initial_accumulator_value(c.b).eps(c.eps), &c),
            _ => roundtrip_and_use(Adadelta::new(c.lr).weight_decay(c.wd).rho(c.a).eps(c.eps).maximize(c.flag), &c),
        };
        prop_assert!(r.is_ok(), "{:?}: {}", c, r.unwrap_err());
    }
}
