//! Parity of forge's optimizers, learning-rate schedules and gradient
//! clipping with PyTorch (fixtures `optim/*`, see tests/fixtures/README.md).
//!
//! Optimizers: all five steps of parameters and the state after step 5
//! (every PyTorch state key, `step` included), in f64 with each file's
//! `rtol`/`atol` and in f32 with its `f32_rtol`/`f32_atol`.

use crate::common;
use common::{assert_close, Fixture};
use forge::optim::*;
use forge::{Float, Gradients, Tensor};

fn boolean(f: &Fixture, k: &str) -> bool {
    match f.meta(k) {
        "true" => true,
        "false" => false,
        other => panic!("{}: {k} = {other}", f.name),
    }
}

fn betas(f: &Fixture) -> (f64, f64) {
    let b = f.meta_list("betas");
    (b[0].parse().unwrap(), b[1].parse().unwrap())
}

/// Runs the fixture's five steps with `opt` in element type `E`, checking
/// parameters after every step and the state after the last.
fn run<R: UpdateRule, E: Float>(f: &Fixture, mut opt: Optimizer<R, E>, rtol: f64, atol: f64) {
    let n: usize = f.meta("n_params").parse().unwrap();
    let steps: usize = f.meta("n_steps").parse().unwrap();
    assert!(n > 0 && steps > 0, "{}", f.name);
    let path = |i: usize| format!("p.{i}");
    let mut params: Vec<Tensor<E>> = (0..n)
        .map(|i| f.t(&format!("p0_{i}")).cast::<E>().requires_grad())
        .collect();
    for k in 1..=steps {
        let mut grads = Gradients::new();
        for (i, p) in params.iter().enumerate() {
            grads.insert(p, f.t(&format!("g{k}_{i}")).cast::<E>());
        }
        let names: Vec<String> = (0..n).map(path).collect();
        opt.step_params(names.iter().zip(params.iter_mut()), &grads)
            .unwrap();
        for (i, p) in params.iter().enumerate() {
            assert!(p.is_tracked(), "updated parameters stay tracked leaves");
            let what = format!("{} ({}): p{k}_{i}", f.name, std::any::type_name::<E>());
            assert_close(
                &what,
                &p.cast::<f64>(),
                &f.t(&format!("p{k}_{i}")),
                rtol,
                atol,
            );
        }
    }
    let keys = f.meta_list("state_keys");
    for i in 0..n {
        let st = opt.state(&path(i)).expect("state after 5 steps");
        assert_eq!(st.shape(), f.t(&format!("p0_{i}")).shape());
        for key in &keys {
            let name = format!("state5_{key}_{i}");
            if key == "step" {
                assert_eq!(st.step() as i64, f.i(&name).item(), "{}: {name}", f.name);
            } else {
                let buf = st
                    .buffer(key)
                    .unwrap_or_else(|| panic!("{}: no buffer {key}", f.name));
                let what = format!("{} ({}): {name}", f.name, std::any::type_name::<E>());
                assert_close(&what, &buf.cast::<f64>(), &f.t(&name), rtol, atol);
            }
        }
        // Exactly PyTorch's state keys (besides the step count).
        let mut ours: Vec<&str> = st.buffer_names();
        ours.sort();
        let mut theirs: Vec<&str> = keys
            .iter()
            .map(String::as_str)
            .filter(|k| *k != "step")
            .collect();
        theirs.sort();
        assert_eq!(ours, theirs, "{}: state keys", f.name);
    }
}

/// `(expr, expr)` with the type `$t` standing for f64, then for f32: one
/// optimizer built twice, once per element type.
macro_rules! both {
    ($t:ident => $e:expr) => {
        (
            {
                type $t = f64;
                $e
            },
            {
                type $t = f32;
                $e
            },
        )
    };
}

fn run_both<R: UpdateRule>(f: &Fixture, make: impl Fn() -> (Optimizer<R, f64>, Optimizer<R, f32>)) {
    let (o64, o32) = make();
    let (rtol, atol) = f.tol();
    run(f, o64, rtol, atol);
    run(f, o32, f.meta_f64("f32_rtol"), f.meta_f64("f32_atol"));
}

fn check_optimizer_file(file: &str) -> &'static str {
    let f = Fixture::load(file);
    let m = |k: &str| f.meta_f64(k);
    let lr = m("lr");
    let wd = m("weight_decay");
    let maximize = boolean(&f, "maximize");
    match f.meta("optimizer") {
        "SGD" => {
            run_both(&f, || {
                both!(T =>
                    Sgd::<T>::new(lr)
                        .momentum(m("momentum"))
                        .dampening(m("dampening"))
                        .nesterov(boolean(&f, "nesterov"))
                        .maximize(maximize)
                        .weight_decay(wd)
                )
            });
            "SGD"
        }
        name @ ("Adam" | "AdamW") => {
            let (b1, b2) = betas(&f);
            let amsgrad = boolean(&f, "amsgrad");
            if boolean(&f, "decoupled_weight_decay") {
                assert_eq!(name, "AdamW");
                run_both(&f, || {
                    both!(T =>
                        AdamW::<T>::new(lr)
                            .betas(b1, b2)
                            .eps(m("eps"))
                            .amsgrad(amsgrad)
                            .maximize(maximize)
                            .weight_decay(wd)
                    )
                });
                "AdamW"
            } else {
                run_both(&f, || {
                    both!(T =>
                        Adam::<T>::new(lr)
                            .betas(b1, b2)
                            .eps(m("eps"))
                            .amsgrad(amsgrad)
                            .maximize(maximize)
                            .weight_decay(wd)
                    )
                });
                "Adam"
            }
        }
        "Adagrad" => {
            run_both(&f, || {
                both!(T =>
                    Adagrad::<T>::new(lr)
                        .lr_decay(m("lr_decay"))
                        .initial_accumulator_value(m("initial_accumulator_value"))
                        .eps(m("eps"))
                        .maximize(maximize)
                        .weight_decay(wd)
                )
            });
            "Adagrad"
        }
        "Adadelta" => {
            run_both(&f, || {
                both!(T =>
                    Adadelta::<T>::new(lr)
                        .rho(m("rho"))
                        .eps(m("eps"))
                        .maximize(maximize)
                        .weight_decay(wd)
                )
            });
            "Adadelta"
        }
        "RMSprop" => {
            run_both(&f, || {
                both!(T =>
                    RmsProp::<T>::new(lr)
                        .alpha(m("alpha"))
                        .eps(m("eps"))
                        .momentum(m("momentum"))
                        .centered(boolean(&f, "centered"))
                        .maximize(maximize)
                        .weight_decay(wd)
                )
            });
            "RMSprop"
        }
        other => panic!("{file}: unknown optimizer {other}"),
    }
}

#[test]
fn every_optimizer_fixture_matches_pytorch() {
    let mut files = Vec::new();
    for prefix in ["sgd", "adam", "adagrad", "adadelta", "rmsprop"] {
        files.extend(common::fixtures_with_prefix("optim", prefix));
    }
    assert!(files.len() >= 26, "{files:?}");
    let mut kinds: Vec<&str> = files.iter().map(|f| check_optimizer_file(f)).collect();
    kinds.sort();
    kinds.dedup();
    assert_eq!(
        kinds,
        ["Adadelta", "Adagrad", "Adam", "AdamW", "RMSprop", "SGD"]
    );
}

fn schedule_for(f: &Fixture) -> Schedule {
    let m = |k: &str| f.meta_f64(k);
    let u = |k: &str| f.meta(k).parse::<u64>().unwrap();
    let base = m("base_lr");
    match f.meta("scheduler") {
        "StepLR" => StepLr::new(base, u("step_size"), m("gamma")).into(),
        "MultiStepLR" => {
            let ms: Vec<u64> = f
                .meta_list("milestones")
                .iter()
                .map(|s| s.parse().unwrap())
                .collect();
            MultiStepLr::new(base, &ms, m("gamma")).into()
        }
        "ExponentialLR" => ExponentialLr::new(base, m("gamma")).into(),
        "CosineAnnealingLR" => CosineAnnealingLr::new(base, u("T_max"), m("eta_min")).into(),
        "SequentialLR" => {
            assert_eq!(f.meta("schedulers"), "LinearLR,CosineAnnealingLR");
            let ms: Vec<u64> = f
                .meta_list("milestones")
                .iter()
                .map(|s| s.parse().unwrap())
                .collect();
            SequentialLr::new(
                vec![
                    LinearLr::new(
                        base,
                        m("linear_start_factor"),
                        m("linear_end_factor"),
                        u("linear_total_iters"),
                    )
                    .into(),
                    CosineAnnealingLr::new(base, u("cosine_T_max"), m("cosine_eta_min")).into(),
                ],
                &ms,
            )
            .into()
        }
        "OneCycleLR" => {
            let anneal = match f.meta("anneal_strategy") {
                "cos" => Anneal::Cos,
                "linear" => Anneal::Linear,
                other => panic!("{}: anneal_strategy {other}", f.name),
            };
            OneCycleLr {
                pct_start: m("pct_start"),
                anneal,
                cycle_momentum: boolean(f, "cycle_momentum"),
                base_momentum: m("base_momentum"),
                max_momentum: m("max_momentum"),
                div_factor: m("div_factor"),
                final_div_factor: m("final_div_factor"),
                three_phase: boolean(f, "three_phase"),
                ..OneCycleLr::new(m("max_lr"), u("total_steps"))
            }
            .into()
        }
        other => panic!("{}: unknown scheduler {other}", f.name),
    }
}

#[test]
fn every_schedule_fixture_matches_pytorch() {
    let files = common::fixtures_with_prefix("optim", "sched_");
    assert!(files.len() >= 6, "{files:?}");
    for file in files {
        let f = Fixture::load(&file);
        let mut sched = schedule_for(&f);
        let n: usize = f.meta("n_steps").parse().unwrap();
        // Drive a real optimizer the way PyTorch's loop does: read the rate
        // before each optimizer step, then step the schedule.
        let mut opt = Sgd::<f64>::new(0.0).momentum(0.9);
        sched.apply(&mut opt);
        let (mut lrs, mut moms) = (Vec::new(), Vec::new());
        for _ in 0..n {
            lrs.push(opt.lr());
            moms.push(opt.rule().momentum);
            sched.step(&mut opt);
        }
        let (rtol, atol) = f.tol();
        f.check("lr", &Tensor::from_vec(lrs.clone(), &[n]));
        let direct: Vec<f64> = (0..n as u64).map(|k| sched.lr_at(k)).collect();
        assert_eq!(direct, lrs, "{file}: lr_at agrees with stepping");
        if f.has("momentum") {
            assert_close(
                &format!("{file}: momentum"),
                &Tensor::from_vec(moms, &[n]),
                &f.t("momentum"),
                rtol,
                atol,
            );
        }
    }
}

fn clip_grads(f: &Fixture) -> (Vec<Tensor<f64>>, Gradients<f64>) {
    let mut params = Vec::new();
    let mut grads = Gradients::new();
    let mut i = 0;
    while f.has(&format!("g_{i}")) {
        let g = f.t(&format!("g_{i}"));
        let p = Tensor::<f64>::zeros(g.shape()).requires_grad();
        grads.insert(&p, g);
        params.push(p);
        i += 1;
    }
    assert!(i >= 3, "{}", f.name);
    (params, grads)
}

#[test]
fn every_clip_fixture_matches_pytorch() {
    let files = common::fixtures_with_prefix("optim", "clip_grad_");
    assert!(files.len() >= 7, "{files:?}");
    for file in files {
        let f = Fixture::load(&file);
        let (params, mut grads) = clip_grads(&f);
        if f.has("total_norm") {
            let norm_type = match f.meta("norm_type") {
                "inf" => f64::INFINITY,
                s => s.parse().unwrap(),
            };
            let total = clip_grad_norm_with(&mut grads, f.meta_f64("max_norm"), norm_type);
            f.check("total_norm", &Tensor::scalar(total));
        } else {
            clip_grad_value(&mut grads, f.meta_f64("clip_value"));
        }
        for (i, p) in params.iter().enumerate() {
            let c = grads.get(p).unwrap().clone();
            f.check(&format!("clipped_{i}"), &c);
            if f.meta_f64("rtol") == 0.0 {
                assert_eq!(
                    c.to_vec(),
                    f.t(&format!("clipped_{i}")).to_vec(),
                    "{file}: bitwise"
                );
            }
        }
    }
}
