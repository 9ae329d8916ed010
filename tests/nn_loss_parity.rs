//! Parity of every loss with PyTorch (every fixture `nn/loss_*`: output and
//! every listed input gradient), finite-difference gradient checks in f64
//! (first and second order), and the edge cases PyTorch defines.
//!
//! Tolerances: each fixture's own `rtol`/`atol` (1e-10 / 1e-12 in f64);
//! see tests/fixtures/README.md for how they were established.

mod common;
mod second_order;
use common::Fixture;
use forge::nn::functional::*;
use forge::{gradcheck, Tensor};

fn reduction(f: &Fixture) -> Reduction {
    match f.meta("reduction") {
        "mean" => Reduction::Mean,
        "sum" => Reduction::Sum,
        "none" => Reduction::None,
        r => panic!("{}: reduction {r}", f.name),
    }
}

/// The loss of fixture `f` with float inputs `v` in metadata `inputs` order
/// (integer inputs are taken from the file).
fn apply(f: &Fixture, v: &[Tensor<f64>]) -> Tensor<f64> {
    let names = float_inputs(f);
    let get = |n: &str| v[names.iter().position(|x| x == n).unwrap()].clone();
    let (input, r) = (get("input"), reduction_or_mean(f));
    match f.meta("op") {
        "cross_entropy" => {
            let o = CrossEntropyOptions {
                weight: f.has("weight").then(|| get("weight")),
                ignore_index: f
                    .meta
                    .get("ignore_index")
                    .map_or(-100, |s| s.parse().unwrap()),
                label_smoothing: f
                    .meta
                    .get("label_smoothing")
                    .map_or(0.0, |s| s.parse().unwrap()),
                reduction: r,
            };
            cross_entropy_with(&input, &f.i("target"), o)
        }
        "nll_loss" => nll_loss(
            &input,
            &f.i("target"),
            NllLossOptions {
                reduction: r,
                ..Default::default()
            },
        ),
        "mse_loss" => mse_loss(&input, &get("target"), r),
        "l1_loss" => l1_loss(&input, &get("target"), r),
        "smooth_l1_loss" => smooth_l1_loss(&input, &get("target"), f.meta_f64("beta"), r),
        "huber_loss" => huber_loss(&input, &get("target"), f.meta_f64("delta"), r),
        "binary_cross_entropy" => binary_cross_entropy(&input, &get("target"), None, r),
        "binary_cross_entropy_with_logits" => {
            let pw = f.has("pos_weight").then(|| get("pos_weight"));
            binary_cross_entropy_with_logits(&input, &get("target"), None, pw.as_ref(), r)
        }
        "kl_div" => {
            assert_eq!(f.meta("reduction"), "batchmean");
            kl_div(
                &input,
                &get("target"),
                KlDivReduction::BatchMean,
                f.meta("log_target") == "true",
            )
        }
        op => panic!("{}: unknown op {op}", f.name),
    }
}

fn reduction_or_mean(f: &Fixture) -> Reduction {
    if f.meta("reduction") == "batchmean" {
        Reduction::Mean
    } else {
        reduction(f)
    }
}

/// The float inputs in call order.
fn float_inputs(f: &Fixture) -> Vec<String> {
    f.meta_list("inputs")
        .into_iter()
        .filter(|n| f.floats.contains_key(n))
        .collect()
}

#[test]
fn every_loss_matches_pytorch() {
    let files = common::fixtures_with_prefix("nn", "loss_");
    assert_eq!(files.len(), 16, "expected 16 loss fixtures");
    for file in files {
        let f = Fixture::load(&file);
        let names = float_inputs(&f);
        let grads = f.meta_list("grads");
        let inputs: Vec<Tensor<f64>> = names
            .iter()
            .map(|n| {
                let t = f.t(n);
                if grads.contains(n) {
                    t.requires_grad()
                } else {
                    t
                }
            })
            .collect();
        let out = apply(&f, &inputs);
        f.check("out", &out);
        let g = out.backward_with(&f.t("gout"), false);
        assert!(!grads.is_empty(), "{file}: no gradients listed");
        for n in &grads {
            let i = names.iter().position(|x| x == n).unwrap();
            let gi = g
                .get(&inputs[i])
                .unwrap_or_else(|| panic!("{file}: no gradient for {n}"));
            f.check(&format!("grad_{n}"), gi);
        }
    }
}

#[test]
fn every_loss_passes_gradcheck() {
    for file in common::fixtures_with_prefix("nn", "loss_") {
        let f = Fixture::load(&file);
        let inputs: Vec<Tensor<f64>> = float_inputs(&f).iter().map(|n| f.t(n)).collect();
        gradcheck(|v| apply(&f, v), &inputs, 1e-6, 1e-6, 1e-6)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
    }
}

#[test]
fn every_loss_second_order() {
    for file in common::fixtures_with_prefix("nn", "loss_") {
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
    let nll = nll_loss(&x.log_softmax(1), &t, NllLossOptions::default());
    assert_eq!(ce.item(), nll.item());
}

#[test]
fn bce_with_logits_is_stable_for_huge_logits() {
    let x = Tensor::<f32>::from_vec(vec![1e4, -1e4, 1e4, -1e4], &[4]).requires_grad();
    let t = Tensor::<f32>::from_vec(vec![1.0, 0.0, 0.0, 1.0], &[4]);
    let l = binary_cross_entropy_with_logits(&x, &t, None, None, Reduction::None);
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
    mse_loss(&logits(), &Tensor::zeros(&[3]), Reduction::Mean);
}
