//! Tests written to kill the mutants `cargo mutants` left alive in
//! `forge/src/optim/` and `forge/src/ops/loss*.rs` (README, "How far the
//! tests can be trusted"). Each names the mutants it kills; the expected
//! values are computed by hand from PyTorch's formulas, in f64 on shapes
//! of a few elements.

use forge::nn::functional::{cross_entropy_with, CrossEntropyOptions, Reduction};
use forge::optim::*;
use forge::{ForgeError, Tensor};
use std::collections::BTreeMap;

/// One step of `opt` on the untracked parameter `w` (path "w") with
/// gradient `g`.
fn step<R: UpdateRule>(opt: &mut Optimizer<R, f64>, w: &mut Tensor<f64>, g: &[f64]) {
    let grads = BTreeMap::from([("w".to_string(), Tensor::from_vec(g.to_vec(), w.shape()))]);
    opt.step_params([("w", &mut *w)], &grads).unwrap();
}

// ---- Schedules that cycle the momentum reach every rule that has one ----

/// OneCycle (cycle_momentum, the default) starts at `max_momentum` = 0.95
/// and ends at `base_momentum` = 0.85, as PyTorch sets `momentum` (SGD,
/// RMSprop) or `betas[0]` (Adam, AdamW).
///
/// Kills `set_momentum -> bool with true/false` in adam.rs (Adam and
/// AdamW) and rmsprop.rs: the replaced body no longer sets the momentum.
#[test]
fn onecycle_cycles_beta1_of_adam_and_adamw_and_momentum_of_rmsprop() {
    let mut s = OneCycleLr::new(0.1, 10);
    let mut adam = Adam::<f64>::new(1e-3);
    let mut adamw = AdamW::<f64>::new(1e-3);
    let mut rms = RmsProp::<f64>::new(1e-3).momentum(0.5);
    s.apply(&mut adam);
    s.apply(&mut adamw);
    s.apply(&mut rms);
    assert_eq!(adam.adam_config().beta1, 0.95);
    assert_eq!(adamw.adam_config().beta1, 0.95);
    assert_eq!(rms.rule().momentum, 0.95);
    // Step 2 ends the warm-up phase (pct_start 0.3 of 10 steps), where
    // the momentum reaches base_momentum.
    for _ in 0..2 {
        s.step(&mut adam);
    }
    assert!((adam.adam_config().beta1 - 0.85).abs() < 1e-15);
    // beta2 is not cycled.
    assert_eq!(adam.adam_config().beta2, 0.999);
}

// ---- AMSGrad follows torch.maximum: a NaN wins and stays ---------------

/// `max_exp_avg_sq = torch.maximum(max_exp_avg_sq, exp_avg_sq)`: NaN
/// propagates, so after a NaN gradient the running maximum is NaN (and
/// stays NaN: `maximum(NaN, x) = NaN`).
///
/// Kills `delete !` in `AdamConfig::run` (line 302), which keeps the old
/// maximum (0) instead.
#[test]
fn amsgrad_maximum_propagates_nan_like_torch_maximum() {
    fn check<R: UpdateRule<State<f64> = AdamState<f64>>>(mut opt: Optimizer<R, f64>) {
        let mut w = Tensor::<f64>::from_vec(vec![1.0, 1.0], &[2]);
        let max_sq = |o: &Optimizer<R, f64>| {
            let st = o.state("w").unwrap();
            st.buffer("max_exp_avg_sq").unwrap().to_vec()
        };
        step(&mut opt, &mut w, &[f64::NAN, 0.5]);
        let m = max_sq(&opt);
        assert!(m[0].is_nan(), "{}: {m:?}", R::NAME);
        // exp_avg_sq = (1 - 0.999) * 0.5^2 for the finite element.
        assert!((m[1] - 0.001 * 0.25).abs() < 1e-18, "{}: {m:?}", R::NAME);
        assert!(w.to_vec()[0].is_nan());
        step(&mut opt, &mut w, &[0.5, 0.5]);
        assert!(max_sq(&opt)[0].is_nan(), "{}: NaN stays", R::NAME);
    }
    check(Adam::new(0.1).amsgrad(true));
    check(AdamW::new(0.1).amsgrad(true));
}

// ---- Settings that are finite in f64 but not in f32 are refused --------

/// `eps = 1e39` is finite in f64 and infinite in f32: an f32 optimizer
/// refuses it on the first step, naming the field (`settings()` lists
/// `eps` for every rule that has one), and an f64 optimizer accepts it.
///
/// Kills the `settings -> Vec<..> with vec![]` / `vec![("", ..)]` /
/// `vec![("xyzzy", ..)]` mutants of Adam, AdamW, RMSprop, Adagrad and
/// Adadelta.
#[test]
fn an_eps_that_overflows_f32_is_refused_for_every_rule_with_eps() {
    fn refused<R: UpdateRule>(mut opt: Optimizer<R, f32>, ok: Optimizer<R, f64>) {
        let mut w = Tensor::<f32>::from_vec(vec![1.0], &[1]);
        let grads = BTreeMap::from([("w".to_string(), Tensor::<f32>::from_vec(vec![0.5], &[1]))]);
        let e = opt.step_params([("w", &mut w)], &grads).unwrap_err();
        assert!(matches!(e, ForgeError::Invalid { .. }), "{e:?}");
        let msg = e.to_string();
        assert!(
            msg.contains("eps = 1000000000000000000000000000000000000000 overflows f32"),
            "{}: {msg}",
            R::NAME
        );
        assert_eq!(w.to_vec(), vec![1.0], "unchanged");
        let mut ok = ok;
        let mut w = Tensor::<f64>::from_vec(vec![1.0], &[1]);
        step(&mut ok, &mut w, &[0.5]);
    }
    refused(Adam::new(0.1).eps(1e39), Adam::new(0.1).eps(1e39));
    refused(AdamW::new(0.1).eps(1e39), AdamW::new(0.1).eps(1e39));
    refused(RmsProp::new(0.1).eps(1e39), RmsProp::new(0.1).eps(1e39));
    refused(Adagrad::new(0.1).eps(1e39), Adagrad::new(0.1).eps(1e39));
    refused(Adadelta::new(0.1).eps(1e39), Adadelta::new(0.1).eps(1e39));
}

// ---- RMSprop: a centered alpha that leaves the variance at exactly 0 ----

/// Centered RMSprop with an alpha whose `1 - alpha` rounds to 1 in f32
/// (here 1e-40, drawn by `optim_validation`'s proptest) has `square_avg =
/// g^2` and `grad_avg = g` exactly after a step from zero state, so the
/// variance is 0 and the step is `lr g / eps`: refused like alpha = 0.
/// Not centered, or with a usable alpha, it is accepted.
#[test]
fn centered_rmsprop_refuses_an_alpha_that_rounds_the_variance_to_zero() {
    for alpha in [0.0, 1e-40, 2f64.powi(-25)] {
        let mut opt = RmsProp::<f32>::new(0.1).alpha(alpha).centered(true);
        let mut w = Tensor::<f32>::from_vec(vec![1.0], &[1]);
        let grads = BTreeMap::from([("w".to_string(), Tensor::<f32>::from_vec(vec![0.5], &[1]))]);
        let e = opt.step_params([("w", &mut w)], &grads).unwrap_err();
        assert!(matches!(e, ForgeError::Invalid { .. }), "{alpha}: {e:?}");
        assert!(
            e.to_string().contains("leaves the variance estimate at 0"),
            "{e}"
        );
        let bytes = RmsProp::<f32>::new(0.1)
            .alpha(alpha)
            .centered(true)
            .to_bytes()
            .unwrap();
        assert!(
            RmsProp::<f32>::from_bytes(&bytes).is_err(),
            "{alpha}: load refused"
        );
    }
    for (alpha, centered) in [(1e-40, false), (2f64.powi(-23), true)] {
        let mut opt = RmsProp::<f64>::new(0.1).alpha(alpha).centered(centered);
        let mut w = Tensor::<f64>::from_vec(vec![1.0], &[1]);
        step(&mut opt, &mut w, &[0.5]);
        assert!(w.item().is_finite());
    }
}

// ---- Cross-entropy: a -inf logit (a masked class) ----------------------

/// A class masked with a `-inf` logit has probability 0 and, as in
/// PyTorch, the loss and gradient stay finite when it is not the target
/// and no label smoothing is asked for: row `[0, -inf, 1]`, target 0 has
/// loss `ln(1 + e)` and gradient `p - onehot = [1/(1+e) - 1, 0, e/(1+e)]`.
///
/// Kills `replace > with >= in cross_entropy_fused` (line 320), which
/// computes the smoothing sum with `ls = 0` and gets `0 * inf = NaN`.
#[test]
fn fused_cross_entropy_with_a_masked_class_is_finite_without_smoothing() {
    let inf = f64::INFINITY;
    let x = Tensor::<f64>::from_vec(vec![0.0, -inf, 1.0, 2.0, 0.0, -inf], &[2, 3]).requires_grad();
    let t = Tensor::<i64>::from_vec(vec![0, 1], &[2]);
    let opts = CrossEntropyOptions {
        reduction: Reduction::None,
        ..Default::default()
    };
    let l = cross_entropy_with(&x, &t, opts);
    let e = 1f64.exp();
    let e2 = e * e;
    let want = [(1.0 + e).ln(), (e2 + 1.0).ln()];
    for (a, b) in l.to_vec().iter().zip(want) {
        assert!((a - b).abs() < 1e-15, "{:?} vs {want:?}", l.to_vec());
    }
    let g = l.sum().backward();
    let want = [
        1.0 / (1.0 + e) - 1.0,
        0.0,
        e / (1.0 + e),
        e2 / (e2 + 1.0),
        1.0 / (e2 + 1.0) - 1.0,
        0.0,
    ];
    let got = g.get(&x).unwrap().to_vec();
    for (a, b) in got.iter().zip(want) {
        assert!((a - b).abs() < 1e-15, "{got:?} vs {want:?}");
    }
}
