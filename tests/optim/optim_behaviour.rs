//! Optimizer behaviour beyond the update formulas: state keyed by path and
//! checked by shape, skipped parameters, parameter groups, reset, errors.

use forge::nn::{Forward, Linear};
use forge::optim::*;
use forge::{ForgeError, Gradients, Rng, Tensor};
use std::collections::BTreeMap;

fn grads_for(pairs: &[(&Tensor<f64>, Vec<f64>)]) -> Gradients<f64> {
    let mut g = Gradients::new();
    for (p, v) in pairs {
        g.insert(p, Tensor::from_vec(v.clone(), p.shape()));
    }
    g
}

#[test]
fn shape_change_is_a_state_error_naming_path_and_shapes() {
    let mut w = Tensor::<f64>::ones(&[2, 3]).requires_grad();
    let mut opt = Adam::new(0.1);
    let g = grads_for(&[(&w, vec![0.1; 6])]);
    opt.step_params(vec![("fc.weight", &mut w)], &g).unwrap();
    let mut other = Tensor::<f64>::ones(&[3, 2]).requires_grad();
    let g = grads_for(&[(&other, vec![0.1; 6])]);
    let e = opt
        .step_params(vec![("fc.weight", &mut other)], &g)
        .unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, ForgeError::State { .. }), "{e:?}");
    assert!(
        msg.contains("fc.weight") && msg.contains("[2, 3]") && msg.contains("[3, 2]"),
        "{msg}"
    );
    assert_eq!(other.to_vec(), vec![1.0; 6], "nothing changed");
}

#[test]
fn an_error_on_one_parameter_changes_no_parameter() {
    let mut a = Tensor::<f64>::ones(&[2]).requires_grad();
    let mut b = Tensor::<f64>::ones(&[2]).requires_grad();
    let mut opt = Sgd::new(0.1).momentum(0.9);
    let g = grads_for(&[(&a, vec![1.0, 1.0]), (&b, vec![1.0, 1.0])]);
    opt.step_params(vec![("a", &mut a), ("b", &mut b)], &g)
        .unwrap();
    let before = (a.to_vec(), opt.state("a").cloned());
    let mut b3 = Tensor::<f64>::ones(&[3]).requires_grad();
    let g = grads_for(&[(&a, vec![1.0, 1.0]), (&b3, vec![1.0; 3])]);
    assert!(opt
        .step_params(vec![("a", &mut a), ("b", &mut b3)], &g)
        .is_err());
    assert_eq!((a.to_vec(), opt.state("a").cloned()), before);
}

#[test]
fn a_parameter_without_gradient_is_skipped_and_its_state_kept() {
    let mut a = Tensor::<f64>::ones(&[1]).requires_grad();
    let mut b = Tensor::<f64>::ones(&[1]).requires_grad();
    let mut opt = Adam::new(0.1);
    let g = grads_for(&[(&a, vec![1.0]), (&b, vec![1.0])]);
    opt.step_params(vec![("a", &mut a), ("b", &mut b)], &g)
        .unwrap();
    let b_state = opt.state("b").cloned();
    let b_val = b.to_vec();
    let g = grads_for(&[(&a, vec![1.0])]);
    opt.step_params(vec![("a", &mut a), ("b", &mut b)], &g)
        .unwrap();
    assert_eq!(opt.state("a").unwrap().step(), 2);
    assert_eq!(opt.state("b").cloned(), b_state);
    assert_eq!(b.to_vec(), b_val);
}

#[test]
fn untracked_parameters_stay_untracked_and_path_maps_work() {
    let mut w = Tensor::<f64>::from_vec(vec![1.0, 2.0], &[2]);
    let mut grads = BTreeMap::new();
    grads.insert(
        "w".to_string(),
        Tensor::<f64>::from_vec(vec![1.0, 1.0], &[2]),
    );
    let mut opt = Sgd::new(0.5);
    opt.step_params(vec![("w", &mut w)], &grads).unwrap();
    assert_eq!(w.to_vec(), vec![0.5, 1.5]);
    assert!(!w.is_tracked());
    // A wrong-shaped gradient is a shape error.
    grads.insert("w".to_string(), Tensor::<f64>::ones(&[3]));
    let e = opt.step_params(vec![("w", &mut w)], &grads).unwrap_err();
    assert!(matches!(e, ForgeError::Shape { .. }), "{e:?}");
}

#[test]
fn groups_set_weight_decay_and_scale_the_rate_by_path() {
    let mut w = Tensor::<f64>::from_vec(vec![1.0], &[1]).requires_grad();
    let mut b = Tensor::<f64>::from_vec(vec![1.0], &[1]).requires_grad();
    let mut e = Tensor::<f64>::from_vec(vec![1.0], &[1]).requires_grad();
    let mut opt = Sgd::new(0.1)
        .weight_decay(0.5)
        .with_group(ParamGroup::matching(|p| p.ends_with("bias")).weight_decay(0.0))
        .with_group(ParamGroup::prefix("encoder.").lr_scale(0.1));
    let g = grads_for(&[(&w, vec![0.0]), (&b, vec![0.0]), (&e, vec![1.0])]);
    opt.step_params(
        vec![
            ("fc.weight", &mut w),
            ("fc.bias", &mut b),
            ("encoder.w", &mut e),
        ],
        &g,
    )
    .unwrap();
    assert_eq!(w.item(), 1.0 - 0.1 * 0.5); // decayed
    assert_eq!(b.item(), 1.0); // no decay on biases
    assert!((e.item() - (1.0 - 0.01 * (1.0 + 0.5))).abs() < 1e-15); // lr 0.01, wd 0.5
                                                                    // A schedule changing the rate keeps the group's ratio.
    opt.set_lr(0.2);
    assert!((opt.hyper_for("encoder.w").lr - 0.02).abs() < 1e-15);
}

#[test]
fn reset_forgets_state_and_restarts_bias_correction() {
    let mut w = Tensor::<f64>::ones(&[1]).requires_grad();
    let mut opt = Adam::new(0.1);
    let g = grads_for(&[(&w, vec![1.0])]);
    opt.step_params(vec![("w", &mut w)], &g).unwrap();
    let first = 1.0 - w.item();
    opt.reset();
    assert_eq!(opt.state_paths().count(), 0);
    let before = w.item();
    let g = grads_for(&[(&w, vec![1.0])]);
    opt.step_params(vec![("w", &mut w)], &g).unwrap();
    assert_eq!(before - w.item(), first);
    assert_eq!(opt.state("w").unwrap().step(), 1);
}

#[test]
fn out_of_range_settings_are_invalid_errors() {
    let mut w = Tensor::<f64>::ones(&[1]).requires_grad();
    let g = grads_for(&[(&w, vec![1.0])]);
    let e = Sgd::new(-1.0)
        .step_params(vec![("w", &mut w)], &g)
        .unwrap_err();
    assert!(matches!(e, ForgeError::Invalid { .. }), "{e:?}");
    let e = Sgd::new(0.1)
        .nesterov(true)
        .step_params(vec![("w", &mut w)], &g)
        .unwrap_err();
    assert!(matches!(e, ForgeError::Invalid { .. }), "{e:?}");
    // Nesterov with dampening: PyTorch 2.15 raises "Nesterov momentum
    // requires a momentum and zero dampening", so there is no fixture; forge
    // refuses it the same way.
    let e = Sgd::new(0.1)
        .momentum(0.9)
        .dampening(0.1)
        .nesterov(true)
        .step_params(vec![("w", &mut w)], &g)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("Nesterov momentum requires a momentum and zero dampening"),
        "{e}"
    );
    let e = Adam::new(0.1)
        .betas(1.0, 0.9)
        .step_params(vec![("w", &mut w)], &g)
        .unwrap_err();
    assert!(matches!(e, ForgeError::Invalid { .. }), "{e:?}");
    assert_eq!(w.item(), 1.0);
}

#[test]
fn maximize_moves_uphill() {
    let mut w = Tensor::<f64>::ones(&[1]).requires_grad();
    let g = grads_for(&[(&w, vec![1.0])]);
    Sgd::new(0.1)
        .maximize(true)
        .step_params(vec![("w", &mut w)], &g)
        .unwrap();
    assert_eq!(w.item(), 1.1);
}

#[test]
fn onecycle_three_phase_and_linear_anneal_follow_pytorch_formulas() {
    // PyTorch (three_phase=True, linear): phases end at 2, 4, 9 for 10 steps, pct 0.3.
    let s = OneCycleLr {
        three_phase: true,
        anneal: Anneal::Linear,
        ..OneCycleLr::new(1.0, 10)
    };
    let lrs: Vec<f64> = (0..10).map(|k| s.lr_at(k)).collect();
    assert_eq!(lrs[0], 0.04);
    assert_eq!(lrs[2], 1.0);
    assert!((lrs[4] - 0.04).abs() < 1e-15);
    assert!(lrs[3] > 0.04 && lrs[5] < 0.04);
    assert!((lrs[9] - 0.04 / 1e4).abs() < 1e-15);
    assert!((lrs[1] - 0.52).abs() < 1e-15);
}

/// PyTorch's `clip_grad_norm_` (torch 2.15, `error_if_nonfinite=False`)
/// computes `clip_coef = max_norm / (total + 1e-6)` and multiplies every
/// gradient by `clamp(clip_coef, max=1)`. A NaN anywhere makes the total
/// NaN, the clamp keeps the NaN, and so every gradient becomes NaN (checked
/// with torch for p = 1, 2, 3 and inf). `f64::min(NaN, 1.0)` is 1.0, which
/// would leave the other gradients untouched and hide the NaN from them.
#[test]
fn clip_grad_norm_with_a_nan_gradient_makes_every_gradient_nan_as_pytorch() {
    for p in [1.0, 2.0, 3.0, f64::INFINITY] {
        let a = Tensor::<f64>::zeros(&[2]).requires_grad();
        let b = Tensor::<f64>::zeros(&[2]).requires_grad();
        let mut g = grads_for(&[(&a, vec![f64::NAN, 1.0]), (&b, vec![3.0, 4.0])]);
        let total = clip_grad_norm_with(&mut g, 1.0, p);
        assert!(total.is_nan(), "p = {p}: total {total}");
        for t in [&a, &b] {
            let v = g.get(t).unwrap().to_vec();
            assert!(v.iter().all(|x| x.is_nan()), "p = {p}: {v:?}");
        }
    }
}

/// The documented cost of stepping with the loss alive: the graph holds the
/// weight, so the step writes a copy (the graph's values are left as the
/// forward saw them, for another backward); once the loss is dropped the
/// step updates the weight's own buffer. Same values either way.
#[test]
fn a_step_updates_in_place_once_the_loss_is_dropped() {
    let x = Tensor::<f64>::normal(&[4, 3], 0.0, 1.0, &mut Rng::new(4));
    // Two models with the same values and buffers of their own (a clone
    // would share them).
    let mut alive = Linear::<f64>::new(3, 2, &mut Rng::new(5));
    let mut dropped = Linear::<f64>::new(3, 2, &mut Rng::new(5));
    let mut opt_a = Sgd::new(0.1).momentum(0.9);
    let mut opt_d = Sgd::new(0.1).momentum(0.9);
    for _ in 0..2 {
        let loss = alive.forward(x.clone()).square().sum();
        let grads = loss.backward();
        let (before, ptr) = (alive.weight.to_vec(), alive.weight.as_slice().as_ptr());
        opt_a.step(&mut alive, &grads).unwrap();
        assert_ne!(
            alive.weight.as_slice().as_ptr(),
            ptr,
            "stepped into the graph's buffer"
        );
        // The graph still sees the values it was recorded with.
        let again = loss.backward();
        assert!(
            again.get(&alive.weight).is_none(),
            "a new weight, not the graph's"
        );
        assert_ne!(alive.weight.to_vec(), before);

        let grads = dropped.forward(x.clone()).square().sum().backward();
        let ptr = dropped.weight.as_slice().as_ptr();
        opt_d.step(&mut dropped, &grads).unwrap();
        assert_eq!(
            dropped.weight.as_slice().as_ptr(),
            ptr,
            "copied with no graph alive"
        );
        assert_eq!(dropped.weight.to_vec(), alive.weight.to_vec());
    }
}

/// `backward_step` is `loss.backward()`, then `step`, with the loss (and
/// its graph) dropped in between: the same weights to the bit as the two
/// calls with the loss dropped first, each weight updated in place (the
/// same buffer before and after), and the loss's value returned. Stepping
/// with the loss still alive instead writes every weight into a new buffer.
#[test]
fn backward_step_frees_the_graph_and_updates_in_place() {
    let mut rng = Rng::new(5);
    let x = Tensor::<f64>::normal(&[6, 4], 0.0, 1.0, &mut rng);
    let mut a = Linear::<f64>::new(4, 3, &mut rng);
    // the same values in buffers of its own
    let copy = |t: &Tensor<f64>| Tensor::from_vec(t.to_vec(), t.shape()).requires_grad();
    let mut b = Linear::from_weights(copy(&a.weight), a.bias.as_ref().map(copy)).unwrap();
    let (mut oa, mut ob) = (Adam::new(0.01), Adam::new(0.01));
    for step in 0..3 {
        let ptr = a.weight.as_slice().as_ptr();
        let loss = a.forward(x.clone()).square().mean();
        let want = loss.item();
        let value = oa.backward_step(&mut a, loss).unwrap();
        assert_eq!(value, want, "step {step}: the loss's value");
        assert_eq!(a.weight.as_slice().as_ptr(), ptr, "step {step}: in place");

        let loss = b.forward(x.clone()).square().mean();
        let grads = loss.backward();
        drop(loss);
        ob.step(&mut b, &grads).unwrap();
        assert_eq!(a.weight.to_vec(), b.weight.to_vec(), "step {step}");
        assert_eq!(
            a.bias.as_ref().unwrap().to_vec(),
            b.bias.as_ref().unwrap().to_vec()
        );
    }
    // The loss kept alive across the step: the graph holds the weight, so
    // the step writes a copy.
    let ptr = b.weight.as_slice().as_ptr();
    let loss = b.forward(x.clone()).square().mean();
    let grads = loss.backward();
    ob.step(&mut b, &grads).unwrap();
    assert_ne!(
        b.weight.as_slice().as_ptr(),
        ptr,
        "a shared weight is copied"
    );
    drop(loss);
}

/// `backward_step_with` hands the gradients to its closure after the
/// backward pass and steps with what the closure leaves: zeroed gradients
/// leave plain SGD's weights where they were.
#[test]
fn backward_step_with_steps_with_the_prepared_gradients() {
    let mut rng = Rng::new(6);
    let mut fc = Linear::<f64>::new(3, 2, &mut rng);
    let before = fc.weight.to_vec();
    let x = Tensor::<f64>::ones(&[2, 3]);
    let mut opt = Sgd::new(0.1);
    let mut seen = 0;
    let loss = fc.forward(x).sum();
    opt.backward_step_with(&mut fc, loss, |g| {
        seen = g.len();
        for t in g.iter_mut() {
            *t = Tensor::zeros(t.shape());
        }
    })
    .unwrap();
    assert_eq!(seen, 2, "the weight's and the bias's gradients");
    assert_eq!(fc.weight.to_vec(), before);
}
