//! Learning-rate schedules beyond the PyTorch fixtures: the step counter
//! and the rate set on the optimizer agree with `lr_at` for every schedule,
//! schedules that do not cycle the momentum leave it alone, `SequentialLr`
//! with several milestones and a momentum-cycling phase, the Noam formula
//! (PyTorch has no Noam scheduler, so no fixture), and the largest step
//! counter a schedule file may hold. Written for the mutation check
//! (issue 13): each test kills mutants the fixture tests let through.

use forge::optim::*;
use forge::ForgeError;

/// The largest step counter forge accepts (2^53 - 1, see `MAX_STEP`).
const LAST_STEP: u64 = (1 << 53) - 1;

/// One schedule of every kind, with whether it cycles the momentum.
fn every_kind() -> Vec<(Schedule, bool)> {
    vec![
        (StepLr::new(0.1, 3, 0.5).into(), false),
        (MultiStepLr::new(0.1, &[2, 5], 0.3).into(), false),
        (ExponentialLr::new(0.1, 0.9).into(), false),
        (CosineAnnealingLr::new(0.1, 6, 0.01).into(), false),
        (LinearLr::new(0.1, 0.25, 1.0, 4).into(), false),
        (OneCycleLr::new(0.1, 12).into(), true),
        (
            OneCycleLr {
                cycle_momentum: false,
                ..OneCycleLr::new(0.1, 12)
            }
            .into(),
            false,
        ),
        (NoamLr::new(2.0, 16, 4).into(), false),
        (
            SequentialLr::new(
                vec![
                    LinearLr::new(0.1, 0.5, 1.0, 3).into(),
                    ExponentialLr::new(0.1, 0.8).into(),
                ],
                &[3],
            )
            .into(),
            false,
        ),
    ]
}

/// Stepping a schedule `n` times after `apply`: before optimizer step `k`
/// the schedule is at step `k`, its `lr()` and the optimizer's rate are
/// `lr_at(k)`, and the optimizer's momentum is `momentum_at(k)` for a
/// schedule that cycles it, else the optimizer's own 0.9, untouched.
#[test]
fn every_schedule_counts_its_steps_and_sets_the_rate_of_each_step() {
    let kinds = every_kind();
    assert_eq!(kinds.len(), 9);
    for (mut s, cycles) in kinds {
        let mut opt = Sgd::<f64>::new(0.5).momentum(0.9);
        s.apply(&mut opt);
        let mut rates = Vec::new();
        for k in 0..12u64 {
            assert_eq!(s.current_step(), k, "{s:?}");
            assert_eq!(s.lr(), s.lr_at(k), "{s:?} at {k}");
            assert_eq!(opt.lr(), s.lr_at(k), "{s:?} at {k}");
            match s.momentum_at(k) {
                Some(m) => {
                    assert!(cycles, "{s:?} at {k}: momentum {m}");
                    assert_eq!(opt.rule().momentum, m, "{s:?} at {k}");
                }
                None => {
                    assert!(!cycles, "{s:?} at {k}: no momentum");
                    assert_eq!(opt.rule().momentum, 0.9, "{s:?} at {k}");
                }
            }
            rates.push(opt.lr());
            s.step(&mut opt);
        }
        assert_eq!(s.current_step(), 12);
        // Every one of these schedules changes the rate within 12 steps.
        assert!(rates.iter().any(|&r| r != rates[0]), "{s:?}: {rates:?}");
        // Moving the counter by hand moves the rate with it.
        s.set_step(7);
        assert_eq!((s.current_step(), s.lr()), (7, s.lr_at(7)));
    }
}

/// The Noam rate `scale * d_model^-0.5 * min(n^-0.5, n * warmup^-1.5)`,
/// `n = k + 1`, at points where it is exact in binary: d_model 16 and
/// warm-up 4 give `d_model^-0.5 = 1/4` and `warmup^-1.5 = 1/8`.
#[test]
fn noam_follows_the_paper_formula_on_both_sides_of_the_peak() {
    let s = NoamLr::new(2.0, 16, 4);
    // k: (n = k + 1) warm-up n / 8 while n <= 4, then n^-0.5.
    let expected = [
        (0, 2.0 * 0.25 / 8.0),  // n = 1: 1 / 8
        (1, 2.0 * 0.25 / 4.0),  // n = 2: 2 / 8 (< 2^-0.5)
        (3, 2.0 * 0.25 / 2.0),  // n = 4: the peak, 4 / 8 = 4^-0.5
        (15, 2.0 * 0.25 / 4.0), // n = 16: 16^-0.5 (< 16 / 8)
        (63, 2.0 * 0.25 / 8.0), // n = 64: 64^-0.5
    ];
    for (k, want) in expected {
        let got = s.lr_at(k);
        assert!(
            (got - want).abs() <= 1e-15 * want,
            "step {k}: {got} != {want}"
        );
    }
    // The peak is scale / sqrt(d_model * warmup) and the rate rises to it
    // and falls after it.
    assert!(s.lr_at(2) < s.lr_at(3) && s.lr_at(4) < s.lr_at(3));
}

/// `SequentialLr` with three phases restarts each phase from its own step
/// 0 at its milestone, and passes a phase's cycled momentum through.
#[test]
fn sequential_runs_each_phase_from_its_milestone_with_its_momentum() {
    let warm = LinearLr::new(0.1, 0.5, 1.0, 3);
    let cycle = OneCycleLr::new(0.1, 6);
    let decay = StepLr::new(0.05, 2, 0.5);
    let s = SequentialLr::new(
        vec![
            warm.clone().into(),
            cycle.clone().into(),
            decay.clone().into(),
        ],
        &[3, 9],
    );
    for k in 0..14u64 {
        let (lr, momentum) = match k {
            0..=2 => (warm.lr_at(k), warm.momentum_at(k)),
            3..=8 => (cycle.lr_at(k - 3), cycle.momentum_at(k - 3)),
            _ => (decay.lr_at(k - 9), decay.momentum_at(k - 9)),
        };
        assert_eq!(s.lr_at(k), lr, "step {k}");
        assert_eq!(s.momentum_at(k), momentum, "step {k}");
    }
    assert!(s.momentum_at(3).is_some() && s.momentum_at(9).is_none());
}

/// Milestones that do not increase are refused: by `new` (a panic) and in
/// a file (`ForgeError::Invalid`).
#[test]
fn sequential_milestones_that_do_not_increase_are_refused() {
    let phases = || -> Vec<Phase> {
        vec![
            StepLr::new(0.1, 1, 0.5).into(),
            ExponentialLr::new(0.1, 0.9).into(),
            StepLr::new(0.01, 1, 0.5).into(),
        ]
    };
    let good = SequentialLr::new(phases(), &[2, 5]);
    let bytes = |milestones: Vec<u64>| {
        Schedule::from(SequentialLr {
            milestones,
            ..good.clone()
        })
        .to_bytes()
        .unwrap()
    };
    assert!(Schedule::from_bytes(&bytes(vec![2, 5])).is_ok());
    for bad in [vec![5, 5], vec![5, 2]] {
        let e = Schedule::from_bytes(&bytes(bad.clone())).unwrap_err();
        assert!(
            matches!(e, ForgeError::Invalid { .. }) && e.to_string().contains("must increase"),
            "{bad:?}: {e}"
        );
        let r = std::panic::catch_unwind(|| SequentialLr::new(phases(), &bad));
        assert!(r.is_err(), "{bad:?}");
    }
}

/// A schedule file may hold any step counter up to 2^53 - 1 and none
/// beyond, for every kind (its counter must stay exact as an `f64`).
#[test]
fn schedule_files_take_step_counters_up_to_two_to_the_53_minus_one() {
    for (s, _) in every_kind() {
        let mut last = s.clone();
        last.set_step(LAST_STEP);
        let back = Schedule::from_bytes(&last.to_bytes().unwrap()).unwrap();
        assert_eq!(back.current_step(), LAST_STEP);
        let mut beyond = s;
        beyond.set_step(LAST_STEP + 1);
        let e = Schedule::from_bytes(&beyond.to_bytes().unwrap()).unwrap_err();
        assert!(
            matches!(e, ForgeError::State { .. }) && e.to_string().contains("9007199254740992"),
            "{e}"
        );
    }
}

/// `OneCycleLr` refuses a `pct_start` outside (0, 1) naming it, before the
/// phase check (which would refuse it too, with a message about phase
/// lengths the user did not set).
#[test]
fn onecycle_pct_start_outside_zero_one_is_refused_naming_it() {
    for pct in [0.0, 1.0, 1.5, -0.2, f64::NAN] {
        let s = OneCycleLr {
            pct_start: pct,
            ..OneCycleLr::new(0.1, 30)
        };
        let e = Schedule::from_bytes(&Schedule::from(s).to_bytes().unwrap()).unwrap_err();
        assert!(
            matches!(e, ForgeError::Invalid { .. })
                && e.to_string()
                    .contains(&format!("pct_start = {pct} must be in (0, 1)")),
            "pct_start = {pct}: {e}"
        );
    }
    for pct in [0.1, 0.5, 0.9] {
        let s = OneCycleLr {
            pct_start: pct,
            ..OneCycleLr::new(0.1, 30)
        };
        assert!(Schedule::from_bytes(&Schedule::from(s).to_bytes().unwrap()).is_ok());
    }
}

/// Past `total_steps` (where PyTorch raises) the rate and the momentum stay
/// at their values of step `total_steps`, in both variants.
#[test]
fn onecycle_past_total_steps_keeps_the_rate_of_the_last_step() {
    for three_phase in [false, true] {
        let s = OneCycleLr {
            three_phase,
            ..OneCycleLr::new(0.1, 20)
        };
        let (lr, m) = (s.lr_at(20), s.momentum_at(20));
        assert!(lr.is_finite() && lr > 0.0 && lr < 0.1 / 25.0, "{lr}");
        assert!(m.is_some_and(|m| (0.85..=0.95).contains(&m)), "{m:?}");
        for k in [21, 100, LAST_STEP] {
            assert_eq!((s.lr_at(k), s.momentum_at(k)), (lr, m), "step {k}");
        }
    }
}
