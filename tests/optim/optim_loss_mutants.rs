//! Tests written to kill the mutants `cargo mutants` left alive in
//! `forge/src/optim/` and `forge/src/ops/loss*.rs` (CONTRIBUTING.md,
//! "Mutation testing"). Each names the mutants it kills; the expected
//! values are computed by hand from PyTorch's formulas, in f64 on shapes
//! of a few elements.

use crate::composed_loss;

use forge::nn::functional::{
    cross_entropy_with, nll_loss_with, smooth_l1_loss_with, CrossEntropyOptions, NllLossOptions,
    Reduction, SmoothL1LossOptions,
};
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
/// Not centered, or with an alpha just above 2^-25 (1 - alpha rounds to
/// 1 - 2^-24 in f32, while 1 + alpha would round to 1), it is accepted.
///
/// Kills the mutants of that condition in `RmsPropConfig::validate`
/// (`- with +`, `- with /`, `&& with ||`, `== with !=`).
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
    for (alpha, centered) in [(1e-40, false), (1.5 * 2f64.powi(-25), true)] {
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
/// computes the smoothing sum with `ls = 0` and gets `0 * inf = NaN`. It
/// also killed `replace == with != in cross_entropy_with` (line 225, which
/// sends `(N, C)` logits down the composed path) while that path gave NaN
/// here (`-inf * 0` in the one-hot product); since `pick` (next test) both
/// paths compute the same function and that mutant only changes rounding
/// and speed: equivalent.
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

/// Centered RMSprop clamps a variance that rounding left a hair below 0
/// to 0 (where PyTorch's sqrt gives NaN), as its comment says. With
/// alpha = 0.5, `grad_avg = 1 + 2^-52`, `square_avg = grad_avg^2 =
/// 1 + 2^-51` (variance 0) and gradient `1 + 2^-51`, the new averages are
/// `1 + 3 * 2^-52` and (rounded to even) `1 + 2^-51`, whose square is
/// `1 + 2^-50`: the variance is `-2^-52`, so the step is `lr g / eps`.
///
/// Kills `replace < with == in <impl UpdateRule for RmsPropConfig>::update`
/// (the clamp), which takes the square root of `-2^-52`: NaN.
/// (`<` with `<=` is equivalent: both give 0 for a variance of 0.)
#[test]
fn centered_rmsprop_clamps_a_variance_rounded_below_zero() {
    let ga = 1.0 + f64::EPSILON;
    let sq = ga * ga;
    assert_eq!(sq, 1.0 + 2.0 * f64::EPSILON);
    let g = 1.0 + 2.0 * f64::EPSILON;
    let (lr, eps) = (1e-3, 1e-8);
    let mut opt = RmsProp::<f64>::new(lr).alpha(0.5).eps(eps).centered(true);
    let t = |v: f64| Tensor::from_vec(vec![v], &[1]);
    opt.set_state("w", 1, &[("square_avg", t(sq)), ("grad_avg", t(ga))])
        .unwrap();
    let mut w = t(1.0);
    step(&mut opt, &mut w, &[g]);
    let st = opt.state("w").unwrap();
    let (sq2, ga2) = (
        st.buffer("square_avg").unwrap().item(),
        st.buffer("grad_avg").unwrap().item(),
    );
    assert_eq!(
        (sq2, ga2),
        (1.0 + 3.0 * f64::EPSILON, 1.0 + 2.0 * f64::EPSILON)
    );
    assert!(sq2 - ga2 * ga2 < 0.0);
    assert_eq!(w.item(), 1.0 - lr * (g / eps));
}

/// `eps = inf` is refused by the eps rule itself ("finite and >= 1e-30"),
/// also in f64 where it is not an element-type overflow.
///
/// Kills `replace && with || in positive_eps` (adam.rs), which lets an
/// infinite eps through that check.
#[test]
fn an_infinite_eps_is_refused_as_not_finite() {
    fn refused<R: UpdateRule>(mut opt: Optimizer<R, f64>) {
        let mut w = Tensor::<f64>::from_vec(vec![1.0], &[1]);
        let grads = BTreeMap::from([("w".to_string(), Tensor::from_vec(vec![0.5], &[1]))]);
        let e = opt.step_params([("w", &mut w)], &grads).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("eps = inf must be finite and >= 1e-30"),
            "{}: {msg}",
            R::NAME
        );
    }
    refused(Adam::new(0.1).eps(f64::INFINITY));
    refused(AdamW::new(0.1).eps(f64::INFINITY));
    refused(RmsProp::new(0.1).eps(f64::INFINITY));
    refused(Adagrad::new(0.1).eps(f64::INFINITY));
    refused(Adadelta::new(0.1).eps(f64::INFINITY));
}

// ---- Optimizer: products of settings that overflow f32 -----------------

/// Each factor fits in f32 but a product the update uses does not:
/// `lr * weight_decay`, `lr * lr_scale` and `lr * lr_scale * weight_decay`
/// of a group are each refused by name (and the f64 optimizer accepts them).
///
/// Kills `replace * with + / /` in `Optimizer::validate_ranges` (the three
/// products, four operators).
#[test]
fn products_of_settings_that_overflow_f32_are_refused_by_name() {
    fn refused(opt: Sgd<f32>, field: &str) {
        let mut opt = opt;
        let mut w = Tensor::<f32>::from_vec(vec![1.0], &[1]);
        let grads = BTreeMap::from([("w".to_string(), Tensor::<f32>::from_vec(vec![0.5], &[1]))]);
        let e = opt.step_params([("w", &mut w)], &grads).unwrap_err();
        assert!(matches!(e, ForgeError::Invalid { .. }), "{e:?}");
        assert!(
            e.to_string().contains(&format!("{field} = ")),
            "{field}: {e}"
        );
        assert!(e.to_string().contains("overflows f32"), "{field}: {e}");
    }
    refused(Sgd::new(1e20).weight_decay(1e20), "lr * weight_decay");
    refused(
        Sgd::new(1e20).with_group(ParamGroup::prefix("w").lr_scale(1e20)),
        "lr * groups[0].lr_scale",
    );
    refused(
        Sgd::new(1e10).with_group(ParamGroup::prefix("w").lr_scale(1e10).weight_decay(1e20)),
        "lr * groups[0].lr_scale * weight_decay",
    );
    // Each factor alone is fine in f32, and the products are fine in f64.
    let mut ok = Sgd::<f64>::new(1e10)
        .weight_decay(1e20)
        .with_group(ParamGroup::prefix("w").lr_scale(1e10).weight_decay(1e20));
    let mut w = Tensor::<f64>::from_vec(vec![0.0], &[1]);
    step(&mut ok, &mut w, &[0.0]);
}

// ---- Optimizer and group accessors --------------------------------------

/// `state_paths` lists every parameter with state, `groups` the groups
/// added, `rule_mut` changes the rule the next step uses, and a rule
/// without state has no buffers.
///
/// Kills `state_paths -> .. with ::std::iter::empty()`, `groups -> .. with
/// Vec::leak(..)`, `rule_mut -> .. with Box::leak(..)` (optimizer.rs) and
/// the non-empty `NoState::buffers` replacements (`vec![]` is the same as
/// the original `Vec::new()`: equivalent).
#[test]
fn accessors_return_the_optimizers_own_parts() {
    let mut opt = Sgd::<f64>::new(0.5)
        .with_group(ParamGroup::suffix("bias").weight_decay(0.0))
        .with_group(ParamGroup::prefix("enc.").lr_scale(0.25));
    let groups = opt.groups();
    assert_eq!(groups.len(), 2);
    assert_eq!(
        (groups[1].lr_scale, groups[0].weight_decay),
        (0.25, Some(0.0))
    );
    let grads = BTreeMap::from([
        ("b".to_string(), Tensor::from_vec(vec![1.0], &[1])),
        ("a".to_string(), Tensor::from_vec(vec![1.0], &[1])),
    ]);
    let (mut a, mut b) = (Tensor::<f64>::zeros(&[1]), Tensor::<f64>::zeros(&[1]));
    opt.step_params([("b", &mut b), ("a", &mut a)], &grads)
        .unwrap();
    assert_eq!(opt.state_paths().collect::<Vec<_>>(), ["a", "b"]);
    opt.rule_mut().maximize = true;
    assert!(opt.rule().maximize);
    opt.step_params([("a", &mut a)], &grads).unwrap();
    assert_eq!(a.item(), 0.0, "-0.5 then +0.5 (maximize)");
    assert!(NoState::<f64>::default().buffers().is_empty());
}

/// Every kind of path matcher, its Debug form, and which matchers are
/// unbound (a closure lost in a file round trip).
///
/// Kills `PathMatch::matches -> bool with true/false`, `== with !=` in the
/// `Exact` arm, `is_unbound -> bool with true/false`, the deleted `Custom`
/// arm of `is_unbound`, and `Debug::fmt -> Ok(Default::default())`.
#[test]
fn path_matchers_match_print_and_report_unbound_closures() {
    use forge::optim::PathMatch;
    use std::sync::Arc;
    let exact = PathMatch::Exact(vec!["fc.weight".into(), "fc.bias".into()]);
    let cases: [(PathMatch, &str, bool, &str); 6] = [
        (
            PathMatch::Prefix("enc.".into()),
            "enc.w",
            true,
            "Prefix(\"enc.\")",
        ),
        (
            PathMatch::Suffix("bias".into()),
            "enc.w",
            false,
            "Suffix(\"bias\")",
        ),
        (
            PathMatch::Contains("c.w".into()),
            "enc.w",
            true,
            "Contains(\"c.w\")",
        ),
        (
            exact.clone(),
            "fc.bias",
            true,
            "Exact([\"fc.weight\", \"fc.bias\"])",
        ),
        (
            PathMatch::Custom(Some(Arc::new(|p: &str| p.len() == 5))),
            "enc.w",
            true,
            "Custom(<closure>)",
        ),
        (PathMatch::Custom(None), "enc.w", false, "Custom(<unbound>)"),
    ];
    for (m, path, want, debug) in &cases {
        assert_eq!(m.matches(path), *want, "{debug} on {path}");
        assert_eq!(format!("{m:?}"), *debug);
        assert_eq!(m.is_unbound(), *debug == "Custom(<unbound>)", "{debug}");
    }
    assert!(!exact.matches("fc"), "Exact matches whole paths only");
    assert!(!PathMatch::Prefix("enc.".into()).matches("dec.w"));
    assert!(PathMatch::Suffix("bias".into()).matches("fc.bias"));
}

/// `nll_loss` and the composed (K-dimensional) cross-entropy pick the
/// target entry; a `-inf` in another class contributes 0, as in PyTorch
/// (2.x: `nll_loss([[-1.3, -inf, -0.3]], [0])` = 1.3 with gradient
/// `[-1, 0, 0]`; `cross_entropy` of `(1, 3, 2)` logits with columns
/// `[0, -inf, 1]` (target 0) and `[2, 0, -inf]` (target 1) =
/// `[ln(1 + e), ln(e^2 + 1)]`). Before `pick` both gave NaN (`-inf * 0`).
#[test]
fn nll_and_kdim_cross_entropy_ignore_a_masked_class() {
    let inf = f64::INFINITY;
    let lp = Tensor::<f64>::from_vec(vec![-1.3, -inf, -0.3], &[1, 3]).requires_grad();
    let t = Tensor::<i64>::from_vec(vec![0], &[1]);
    let l = nll_loss_with(&lp, &t, NllLossOptions::default());
    assert_eq!(l.item(), 1.3);
    assert_eq!(
        l.backward().get(&lp).unwrap().to_vec(),
        vec![-1.0, 0.0, 0.0]
    );
    let w = Tensor::<f64>::from_vec(vec![2.0, 1.0, 1.0], &[3]);
    let o = NllLossOptions {
        weight: Some(w),
        ..Default::default()
    };
    assert_eq!(nll_loss_with(&lp, &t, o).item(), 1.3);

    let x =
        Tensor::<f64>::from_vec(vec![0.0, 2.0, -inf, 0.0, 1.0, -inf], &[1, 3, 2]).requires_grad();
    let t = Tensor::<i64>::from_vec(vec![0, 1], &[1, 2]);
    let opts = CrossEntropyOptions {
        reduction: Reduction::None,
        ..Default::default()
    };
    let l = cross_entropy_with(&x, &t, opts);
    let (e, e2) = (1f64.exp(), 1f64.exp().powi(2));
    let want = [(1.0 + e).ln(), (e2 + 1.0).ln()];
    for (a, b) in l.to_vec().iter().zip(want) {
        assert!((a - b).abs() < 1e-15, "{:?} vs {want:?}", l.to_vec());
    }
    let g = l.sum().backward().get(&x).unwrap().to_vec();
    // p - onehot, laid out (class, position).
    let want = [
        1.0 / (1.0 + e) - 1.0,
        e2 / (e2 + 1.0),
        0.0,
        1.0 / (e2 + 1.0) - 1.0,
        e / (1.0 + e),
        0.0,
    ];
    for (a, b) in g.iter().zip(want) {
        assert!((a - b).abs() < 1e-15, "{g:?} vs {want:?}");
    }
}

// ---- Smooth L1 at |d| = beta takes PyTorch's linear branch --------------

/// PyTorch's smooth L1 is `0.5 z^2 / beta` for `z < beta` and
/// `z - 0.5 beta` otherwise, so at `z = beta` it is `z - 0.5 beta`: with
/// beta = 0.1 that is exactly 0.05 (torch 2.x, f64), where the quadratic
/// form rounds to 0.05000000000000001; beta = 0.9 likewise (0.45 against
/// 0.45000000000000007). The gradient there is the sign.
///
/// Kills `replace < with <= in smooth_l1_raw` (loss_pointwise.rs), which
/// takes the quadratic branch at the boundary.
#[test]
fn smooth_l1_at_the_boundary_uses_the_linear_branch_like_pytorch() {
    let x = Tensor::<f64>::from_vec(vec![0.1, -0.1], &[2]).requires_grad();
    let zero = Tensor::<f64>::zeros(&[2]);
    let l = smooth_l1_loss_with(
        &x,
        &zero,
        SmoothL1LossOptions {
            beta: 0.1,
            reduction: Reduction::None,
        },
    );
    assert_eq!(l.to_vec(), vec![0.05, 0.05]);
    assert_eq!(
        l.sum().backward().get(&x).unwrap().to_vec(),
        vec![1.0, -1.0]
    );
    let x = Tensor::<f64>::from_vec(vec![0.9], &[1]);
    let l = smooth_l1_loss_with(
        &x,
        &Tensor::zeros(&[1]),
        SmoothL1LossOptions {
            beta: 0.9,
            reduction: Reduction::None,
        },
    );
    assert_eq!(l.to_vec(), vec![0.45]);
}

// ---- Fused cross-entropy: the create_graph gradient is the gradient ----

/// Under `create_graph` the fused cross-entropy's backward is rebuilt from
/// tensor ops (`fused_ce_backward_graph`); its first-order value must be
/// the plain backward's, for every reduction, with weights, label
/// smoothing and an ignored target. (The second-order checks cannot see
/// the one-hot term: it is constant in the logits.)
///
/// Kills `replace * with + / /` in `fused_ce_backward_graph` (loss.rs:411,
/// the one-hot index `i * c + t`).
#[test]
fn fused_cross_entropy_gradient_under_create_graph_equals_the_plain_one() {
    let x = Tensor::<f64>::from_vec(
        (0..12).map(|k| ((k * 7 % 5) as f64 - 2.0) * 0.37).collect(),
        &[3, 4],
    )
    .requires_grad();
    let t = Tensor::<i64>::from_vec(vec![1, 3, -100], &[3]);
    let w = Tensor::<f64>::from_vec(vec![0.5, 2.0, 1.5, 1.0], &[4]);
    for (weight, ls) in [(None, 0.0), (Some(w.clone()), 0.2)] {
        for r in [Reduction::Mean, Reduction::Sum, Reduction::None] {
            let l = || {
                let o = CrossEntropyOptions {
                    weight: weight.clone(),
                    label_smoothing: ls,
                    reduction: r,
                    ..Default::default()
                };
                cross_entropy_with(&x, &t, o).sum()
            };
            let plain = l().backward().get(&x).unwrap().to_vec();
            let graph = l().backward_with_graph().get(&x).unwrap().to_vec();
            for (a, b) in plain.iter().zip(&graph) {
                assert!(
                    (a - b).abs() < 1e-15,
                    "{r:?} ls {ls}: {plain:?} vs {graph:?}"
                );
            }
            assert!(plain[8..].iter().all(|&v| v == 0.0), "ignored row");
        }
    }
}

/// The fused cross-entropy computes its rows in fixed blocks of about
/// 2^14 logits and reads each row's (log-sum-exp, loss) pair back from its
/// block (`(i / rows) * chunk_len + 2 * (i % rows)`); with a few rows there
/// is one block, and `*` with `/` there reads block 0 for every row. 5000
/// rows of 7 classes make three blocks; each row must equal the composed
/// ops (`composed_loss`), value and gradient.
#[test]
fn fused_cross_entropy_over_several_row_blocks_equals_the_composed_one() {
    let (n, c) = (5000, 7);
    let x =
        forge::Tensor::<f64>::normal(&[n, c], 0.0, 1.5, &mut forge::Rng::new(11)).requires_grad();
    let t: Vec<i64> = (0..n as i64)
        .map(|i| if i % 13 == 5 { -1 } else { (i * 5) % 7 })
        .collect();
    let t = Tensor::<i64>::from_vec(t, &[n]);
    let w = Tensor::<f64>::from_vec(vec![0.5, 2.0, 1.5, 1.0, 0.25, 1.25, 0.75], &[c]);
    let opts = CrossEntropyOptions {
        weight: Some(w.clone()),
        ignore_index: -1,
        label_smoothing: 0.1,
        reduction: Reduction::None,
    };
    let fused = cross_entropy_with(&x, &t, opts);
    let composed = composed_loss::class_loss(&x, &t, Some(&w), -1, 0.1, Reduction::None, true);
    let (a, b) = (fused.to_vec(), composed.to_vec());
    assert_eq!(a.len(), n);
    for (i, (a, b)) in a.iter().zip(&b).enumerate() {
        assert!((a - b).abs() < 1e-12, "row {i}: fused {a}, composed {b}");
    }
    let ga = fused.sum().backward().get(&x).unwrap().to_vec();
    let gb = composed.sum().backward().get(&x).unwrap().to_vec();
    for (j, (a, b)) in ga.iter().zip(&gb).enumerate() {
        assert!((a - b).abs() < 1e-12, "grad {j}: {a} vs {b}");
    }
}

// ---- Mutants of scripts/mutants.sh (docs/src/reliability.md) ----

/// `clip_grad_norm` (the 2-norm) and `try_clip_grad_norm` on finite
/// gradients return the total norm before clipping and scale as
/// `clip_grad_norm_with` does. Gradients [3, 4] and [12]: total
/// sqrt(9 + 16 + 144) = 13 exactly, scale 1 / (13 + 1e-6).
///
/// Kills, in clip.rs: `clip_grad_norm -> E with Default::default()` and
/// `try_clip_grad_norm -> Result<E> with Ok(Default::default())` (both
/// returned 0 with the gradients still clipped), and in
/// `try_clip_grad_norm`'s `error_if_nonfinite && !total.is_finite()` both
/// `&&` -> `||` and `delete !` (each an error on a finite norm).
#[test]
fn clip_grad_norm_and_its_checked_form_return_the_total_norm() {
    let a = Tensor::<f64>::zeros(&[2]).requires_grad();
    let b = Tensor::<f64>::zeros(&[1]).requires_grad();
    let fresh = || {
        let mut g = forge::Gradients::new();
        g.insert(&a, Tensor::from_vec(vec![3.0, 4.0], &[2]));
        g.insert(&b, Tensor::from_vec(vec![12.0], &[1]));
        g
    };
    let scale = 1.0 / (13.0 + 1e-6);
    let mut g1 = fresh();
    let mut g2 = fresh();
    let totals = [
        clip_grad_norm(&mut g1, 1.0),
        try_clip_grad_norm(&mut g2, 1.0, 2.0, true).unwrap(),
    ];
    for (total, g) in totals.iter().zip([&g1, &g2]) {
        assert_eq!(*total, 13.0);
        let ga = g.get(&a).unwrap().to_vec();
        // One f64 rounding of x * scale: exact to 1e-15 relative.
        assert!((ga[0] - 3.0 * scale).abs() < 1e-15 && (ga[1] - 4.0 * scale).abs() < 1e-15);
        assert!((g.get(&b).unwrap().to_vec()[0] - 12.0 * scale).abs() < 1e-15);
    }
}
