//! Parity of every loss with PyTorch (every fixture `nn/loss_*`: output and
//! every listed input gradient), finite-difference gradient checks in f64
//! (first and second order), and the edge cases PyTorch defines.
//!
//! Every file is checked in f64 and in f32 (its `f32_rtol`/`f32_atol`).
//!
//! Tolerances: each fixture's own `rtol`/`atol` (1e-10 / 1e-12 in f64);
//! see tests/fixtures/README.md for how they were established.

use crate::common;
use crate::second_order;
use common::Fixture;
use forge::nn::functional::*;
use forge::{gradcheck, Float, Tensor};

fn reduction(f: &Fixture) -> Reduction {
    match f.meta("reduction") {
        "mean" => Reduction::Mean,
        "sum" => Reduction::Sum,
        "none" => Reduction::None,
        r => panic!("{}: reduction {r}", f.name),
    }
}

/// `ignore_index` and `label_smoothing` from the metadata, with PyTorch's
/// defaults when the file does not state them (the older files state them
/// only when they differ from the default).
fn ignore_index(f: &Fixture) -> i64 {
    f.meta
        .get("ignore_index")
        .map_or(-100, |_| f.parse("ignore_index"))
}

fn label_smoothing(f: &Fixture) -> f64 {
    f.meta
        .get("label_smoothing")
        .map_or(0.0, |_| f.meta_f64("label_smoothing"))
}

/// The loss of fixture `f` with float inputs `v` in metadata `inputs` order
/// (integer inputs are taken from the file).
fn apply<E: Float>(f: &Fixture, v: &[Tensor<E>]) -> Tensor<E> {
    let names = float_inputs(f);
    let get = |n: &str| v[names.iter().position(|x| x == n).unwrap()].clone();
    let opt = |n: &str| names.iter().any(|x| x == n).then(|| get(n));
    let input = get("input");
    let known = ["input", "target", "weight", "pos_weight"];
    for n in &names {
        assert!(known.contains(&n.as_str()), "{}: unknown input {n}", f.name);
    }
    match f.meta("op") {
        "cross_entropy" => {
            let o = CrossEntropyOptions {
                weight: opt("weight"),
                ignore_index: ignore_index(f),
                label_smoothing: label_smoothing(f),
                reduction: reduction(f),
            };
            cross_entropy_with(&input, &f.i("target"), o)
        }
        "nll_loss" => nll_loss_with(
            &input,
            &f.i("target"),
            NllLossOptions {
                weight: opt("weight"),
                ignore_index: ignore_index(f),
                reduction: reduction(f),
            },
        ),
        "mse_loss" => mse_loss_with(
            &input,
            &get("target"),
            MseLossOptions {
                reduction: reduction(f),
            },
        ),
        "l1_loss" => l1_loss_with(
            &input,
            &get("target"),
            L1LossOptions {
                reduction: reduction(f),
            },
        ),
        "smooth_l1_loss" => smooth_l1_loss_with(
            &input,
            &get("target"),
            SmoothL1LossOptions {
                beta: f.meta_f64("beta"),
                reduction: reduction(f),
            },
        ),
        "huber_loss" => huber_loss_with(
            &input,
            &get("target"),
            HuberLossOptions {
                delta: f.meta_f64("delta"),
                reduction: reduction(f),
            },
        ),
        "binary_cross_entropy" => binary_cross_entropy_with(
            &input,
            &get("target"),
            BinaryCrossEntropyOptions {
                weight: opt("weight").as_ref().cloned(),
                reduction: reduction(f),
            },
        ),
        "binary_cross_entropy_with_logits" => binary_cross_entropy_with_logits_with(
            &input,
            &get("target"),
            BinaryCrossEntropyWithLogitsOptions {
                weight: opt("weight").as_ref().cloned(),
                pos_weight: opt("pos_weight").as_ref().cloned(),
                reduction: reduction(f),
            },
        ),
        "kl_div" => {
            let r = match f.meta("reduction") {
                "batchmean" => KlDivReduction::BatchMean,
                "mean" => KlDivReduction::Mean,
                "sum" => KlDivReduction::Sum,
                "none" => KlDivReduction::None,
                other => panic!("{}: reduction {other}", f.name),
            };
            kl_div_with(
                &input,
                &get("target"),
                KlDivOptions {
                    reduction: r,
                    log_target: f.flag("log_target"),
                },
            )
        }
        op => panic!("{}: unknown op {op}", f.name),
    }
}

/// The float inputs in call order.
fn float_inputs(f: &Fixture) -> Vec<String> {
    f.meta_list("inputs")
        .into_iter()
        .filter(|n| f.floats.contains_key(n))
        .collect()
}

fn check_file<E: Float>(f: &Fixture) {
    let names = float_inputs(f);
    let grads = f.meta_list("grads");
    assert!(!grads.is_empty(), "{}: no gradients listed", f.name);
    let inputs: Vec<Tensor<E>> = names
        .iter()
        .map(|n| {
            let t = f.input::<E>(n);
            if grads.contains(n) {
                t.requires_grad()
            } else {
                t
            }
        })
        .collect();
    let out = apply(f, &inputs);
    f.check_as("out", &out);
    let g = out.backward_with(&f.input::<E>("gout"), false);
    for n in &grads {
        let i = names.iter().position(|x| x == n).unwrap();
        let gi = g
            .get(&inputs[i])
            .unwrap_or_else(|| panic!("{}: no gradient for {n}", f.name));
        f.check_as(&format!("grad_{n}"), gi);
    }
}

/// The losses this file checks (the margin, ranking and likelihood losses
/// have their own tests in tests/ops/ops_margin_losses.rs).
const LOSSES: &[&str] = &[
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "cross_entropy",
    "huber_loss",
    "kl_div",
    "l1_loss",
    "mse_loss",
    "nll_loss",
    "smooth_l1_loss",
];

fn files() -> Vec<String> {
    common::fixtures_for_ops("nn", "loss_", LOSSES)
}

#[test]
fn every_loss_matches_pytorch() {
    let files = files();
    assert!(files.len() >= LOSSES.len(), "{files:?}");
    let mut ops = std::collections::BTreeSet::new();
    for file in files {
        let f = Fixture::load(&file);
        check_file::<f64>(&f);
        check_file::<f32>(&f);
        if f.meta("reduction") == "none" {
            ops.insert(f.meta("op").to_string());
        }
    }
    // Reduction::None is covered for every loss.
    assert_eq!(ops.len(), LOSSES.len(), "{ops:?}");
}

#[test]
fn every_loss_passes_gradcheck() {
    for file in files() {
        let f = Fixture::load(&file);
        let inputs: Vec<Tensor<f64>> = float_inputs(&f).iter().map(|n| f.t(n)).collect();
        gradcheck(|v| apply::<f64>(&f, v), &inputs, 1e-6, 1e-6, 1e-6)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
    }
}

#[test]
fn every_loss_second_order() {
    for file in files() {
        let f = Fixture::load(&file);
        let names = float_inputs(&f);
        let all: Vec<Tensor<f64>> = names.iter().map(|n| f.t(n)).collect();
        second_order::check(
            &file,
            |x| {
                let mut v = all.clone();
                v[0] = x.clone();
                apply(&f, &v)
            },
            &all[0],
            1e-6,
        );
    }
}

fn logits() -> Tensor<f64> {
    Tensor::from_vec(
        vec![
            0.2, -1.0, 0.5, 1.5, 0.0, -0.3, 2.0, 0.1, -0.7, 0.4, 0.9, -1.2,
        ],
        &[4, 3],
    )
}

#[test]
fn cross_entropy_reductions_are_consistent() {
    let t = Tensor::<i64>::from_vec(vec![2, 0, -100, 1], &[4]);
    let x = logits();
    let w = Tensor::<f64>::from_vec(vec![0.5, 2.0, 1.5], &[3]);
    let opts = |reduction| CrossEntropyOptions {
        weight: Some(w.clone()),
        label_smoothing: 0.2,
        reduction,
        ..Default::default()
    };
    let none = cross_entropy_with(&x, &t, opts(Reduction::None));
    assert_eq!(none.shape(), &[4]);
    assert_eq!(none.to_vec()[2], 0.0, "ignored target contributes nothing");
    let sum = cross_entropy_with(&x, &t, opts(Reduction::Sum)).item();
    assert!((none.sum().item() - sum).abs() < 1e-14);
    // Mean divides by the weights of the non-ignored targets: 1.5 + 0.5 + 2.0.
    let mean = cross_entropy_with(&x, &t, opts(Reduction::Mean)).item();
    assert!((mean - sum / 4.0).abs() < 1e-14);
    let inputs = [x, w];
    for r in [Reduction::None, Reduction::Sum, Reduction::Mean] {
        gradcheck(
            |v| {
                let o = CrossEntropyOptions {
                    weight: Some(v[1].clone()),
                    label_smoothing: 0.2,
                    reduction: r,
                    ..Default::default()
                };
                cross_entropy_with(&v[0], &t, o)
            },
            &inputs,
            1e-6,
            1e-6,
            1e-6,
        )
        .unwrap();
    }
}

#[test]
fn cross_entropy_is_nll_of_log_softmax() {
    let t = Tensor::<i64>::from_vec(vec![2, 0, 1, 1], &[4]);
    let x = logits();
    let ce = cross_entropy_with(&x, &t, CrossEntropyOptions::default());
    let nll = nll_loss_with(&x.log_softmax(1), &t, NllLossOptions::default());
    assert_eq!(ce.item(), nll.item());
}

#[test]
fn bce_with_logits_is_stable_for_huge_logits() {
    let x = Tensor::<f32>::from_vec(vec![1e4, -1e4, 1e4, -1e4], &[4]).requires_grad();
    let t = Tensor::<f32>::from_vec(vec![1.0, 0.0, 0.0, 1.0], &[4]);
    let l = binary_cross_entropy_with_logits_with(
        &x,
        &t,
        BinaryCrossEntropyWithLogitsOptions {
            weight: None,
            pos_weight: None,
            reduction: Reduction::None,
        },
    );
    assert_eq!(l.to_vec(), vec![0.0, 0.0, 1e4, 1e4]);
    let g = l.sum().backward();
    assert_eq!(g.get(&x).unwrap().to_vec(), vec![0.0, 0.0, 1.0, -1.0]);
}

#[test]
fn penalties_sum_over_parameters() {
    let a = Tensor::<f64>::from_vec(vec![1.0, -2.0], &[2]).requires_grad();
    let b = Tensor::<f64>::from_vec(vec![0.5], &[1]).requires_grad();
    let p = l1_penalty([&a, &b]).add(&l2_penalty([&a, &b]));
    assert_eq!(p.item(), 3.5 + 5.25);
    let g = p.backward();
    assert_eq!(g.get(&a).unwrap().to_vec(), vec![3.0, -5.0]);
    assert_eq!(g.get(&b).unwrap().to_vec(), vec![2.0]);
}

#[test]
#[should_panic(expected = "cross_entropy: target 3 is out of range for 3 classes")]
fn cross_entropy_rejects_bad_target() {
    let t = Tensor::<i64>::from_vec(vec![0, 1, 2, 3], &[4]);
    cross_entropy_with(&logits(), &t, CrossEntropyOptions::default());
}

#[test]
#[should_panic(expected = "cross_entropy: input shape [4, 3] needs targets of shape [4], got [3]")]
fn cross_entropy_rejects_bad_target_shape() {
    let t = Tensor::<i64>::from_vec(vec![0, 1, 2], &[3]);
    cross_entropy_with(&logits(), &t, CrossEntropyOptions::default());
}

#[test]
#[should_panic(expected = "mse_loss: input shape [4, 3] and target shape [3] differ")]
fn mse_rejects_mismatched_shapes() {
    mse_loss_with(
        &logits(),
        &Tensor::zeros(&[3]),
        MseLossOptions {
            reduction: Reduction::Mean,
        },
    );
}
