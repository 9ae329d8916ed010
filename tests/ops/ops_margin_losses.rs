//! The margin, embedding and likelihood losses (`cosine_embedding_loss`,
//! `margin_ranking_loss`, `triplet_margin_loss`,
//! `multilabel_soft_margin_loss`, `poisson_nll_loss`, `gaussian_nll_loss`)
//! against PyTorch fixtures (`nn/loss_cosine_embedding_*`, ...
//! `nn/loss_gaussian_nll_*`, written by tests/fixtures/gen/gen_ops3.py) in
//! f64 and f32, an f64 gradient check and a second-order check of each
//! (`common::assert_hvp` on `sum(loss * gout) * sum(loss)`).
//!
//! Every option (margin, p, swap, log_input, full, eps, reduction) is read
//! from the fixture's metadata. Tolerances: each fixture's own
//! `rtol`/`atol` (1e-10 / 1e-12 in f64) and `f32_rtol`/`f32_atol` in f32.
//! gradcheck: central differences with eps 1e-6 and atol = rtol = 1e-6
//! (the project's standard; the fixtures keep the hinges at least 0.05
//! from their kink, or are random draws far from it).

use crate::common;
use common::Fixture;
use forge::nn::functional::{
    cosine_embedding_loss_with, gaussian_nll_loss_with, margin_ranking_loss_with,
    multilabel_soft_margin_loss_with, poisson_nll_loss_with, triplet_margin_loss_with,
    CosineEmbeddingLossOptions, GaussianNllLossOptions, MarginRankingLossOptions,
    MultilabelSoftMarginLossOptions, PoissonNllLossOptions, Reduction, TripletMarginLossOptions,
};
use forge::{gradcheck, Float, Tensor};

const KINDS: [(&str, usize); 6] = [
    ("loss_cosine_embedding_", 3),
    ("loss_margin_ranking_", 2),
    ("loss_triplet_margin_", 3),
    ("loss_multilabel_soft_margin_", 3),
    ("loss_poisson_nll_", 4),
    ("loss_gaussian_nll_", 4),
];

fn files() -> Vec<Fixture> {
    let mut all = Vec::new();
    for (prefix, min) in KINDS {
        let fs = common::fixtures_with_prefix("nn", prefix);
        assert!(fs.len() >= min, "{prefix}: {} files", fs.len());
        all.extend(fs.iter().map(|p| Fixture::load(p)));
    }
    all
}

fn reduction(f: &Fixture) -> Reduction {
    match f.meta("reduction") {
        "mean" => Reduction::Mean,
        "sum" => Reduction::Sum,
        "none" => Reduction::None,
        r => panic!("{}: reduction {r}", f.name),
    }
}

/// The fixture's loss on inputs looked up by name.
fn loss<E: Float>(f: &Fixture, get: &dyn Fn(&str) -> Tensor<E>) -> Tensor<E> {
    let r = reduction(f);
    match f.meta("op") {
        "cosine_embedding_loss" => cosine_embedding_loss_with(
            &get("x1"),
            &get("x2"),
            &get("y"),
            CosineEmbeddingLossOptions {
                margin: f.meta_f64("margin"),
                reduction: r,
            },
        ),
        "margin_ranking_loss" => margin_ranking_loss_with(
            &get("x1"),
            &get("x2"),
            &get("y"),
            MarginRankingLossOptions {
                margin: f.meta_f64("margin"),
                reduction: r,
            },
        ),
        "triplet_margin_loss" => triplet_margin_loss_with(
            &get("anchor"),
            &get("positive"),
            &get("negative"),
            TripletMarginLossOptions {
                margin: f.meta_f64("margin"),
                p: f.meta_f64("p"),
                eps: f.meta_f64("eps"),
                swap: f.flag("swap"),
                reduction: r,
            },
        ),
        "multilabel_soft_margin_loss" => {
            let w = f.flag("weight").then(|| get("weight"));
            multilabel_soft_margin_loss_with(
                &get("input"),
                &get("target"),
                MultilabelSoftMarginLossOptions {
                    weight: w.as_ref().cloned(),
                    reduction: r,
                },
            )
        }
        "poisson_nll_loss" => poisson_nll_loss_with(
            &get("input"),
            &get("target"),
            PoissonNllLossOptions {
                log_input: f.flag("log_input"),
                full: f.flag("full"),
                eps: f.meta_f64("eps"),
                reduction: r,
            },
        ),
        "gaussian_nll_loss" => gaussian_nll_loss_with(
            &get("input"),
            &get("target"),
            &get("var"),
            GaussianNllLossOptions {
                full: f.flag("full"),
                eps: f.meta_f64("eps"),
                reduction: r,
            },
        ),
        other => panic!("{}: op {other}", f.name),
    }
}

fn check<E: Float>(f: &Fixture) {
    let grads = f.meta_list("grads");
    let tracked: Vec<(String, Tensor<E>)> = grads
        .iter()
        .map(|n| (n.clone(), f.input::<E>(n).requires_grad()))
        .collect();
    let get = |n: &str| match tracked.iter().find(|(m, _)| m == n) {
        Some((_, t)) => t.clone(),
        None => f.input::<E>(n),
    };
    let y = loss(f, &get);
    f.check_as("out", &y);
    let g = y.backward_with(&f.input::<E>("gout"), false);
    for (n, t) in &tracked {
        f.check_as(&format!("grad_{n}"), g.get(t).unwrap());
    }
}

#[test]
fn margin_and_likelihood_losses_match_pytorch_in_f64_and_f32() {
    for f in files() {
        check::<f64>(&f);
        check::<f32>(&f);
    }
}

/// Whether `f` has a variance clamped in value only. Skipped by the
/// difference checks: `var`'s gradient is by design not the derivative of
/// the clamped value, and the other inputs' loss is divided by a variance
/// of 1e-6, so f64 rounding in the differences (about 1e-16 of a loss near
/// 1e6, over a step of 1e-6) exceeds their tolerance. The parity test checks
/// these gradients against PyTorch's.
fn clamped(f: &Fixture) -> bool {
    f.has("var") && f.t("var").to_vec().iter().any(|&v| v < f.meta_f64("eps"))
}

#[test]
fn margin_and_likelihood_losses_pass_gradcheck_and_second_order_checks() {
    for f in files() {
        let grads = f.meta_list("grads");
        let xs: Vec<Tensor<f64>> = grads.iter().map(|n| f.t(n)).collect();
        let run = |v: &[Tensor<f64>]| {
            let get = |n: &str| match grads.iter().position(|m| m == n) {
                Some(k) => v[k].clone(),
                None => f.t(n),
            };
            loss(&f, &get)
        };
        if clamped(&f) {
            continue;
        }
        for k in 0..xs.len() {
            gradcheck(
                |v| {
                    let mut all = xs.clone();
                    all[k] = v[0].clone();
                    run(&all)
                },
                std::slice::from_ref(&xs[k]),
                1e-6,
                1e-6,
                1e-6,
            )
            .unwrap_or_else(|e| panic!("{} ({}): {e}", f.name, grads[k]));
            let gout = f.t("gout");
            let scalar = |x: &Tensor<f64>| {
                let mut v = xs.clone();
                v[k] = x.clone();
                // Squared in effect (`sum(y gout) sum(y)`), so piecewise
                // linear losses have a second derivative too.
                let y = run(&v);
                y.mul(&gout).sum().mul(&y.sum())
            };
            common::assert_hvp(
                scalar,
                &xs[k],
                21 + k as u64,
                &format!("{} ({})", f.name, grads[k]),
            );
        }
    }
}

#[test]
fn gaussian_nll_clamps_the_variance_in_value_only() {
    // PyTorch clamps var to eps under no_grad: the loss uses eps, the
    // gradient is that of the formula at eps, passed to var unchanged.
    let x = Tensor::<f64>::from_vec(vec![1.0], &[1]);
    let t = Tensor::<f64>::zeros(&[1]);
    let var = Tensor::<f64>::from_vec(vec![1e-9], &[1]).requires_grad();
    let l = gaussian_nll_loss_with(
        &x,
        &t,
        &var,
        GaussianNllLossOptions {
            full: false,
            eps: 1e-6,
            reduction: Reduction::Sum,
        },
    );
    assert!((l.item() - 0.5 * (1e-6f64.ln() + 1e6)).abs() < 1e-6);
    let g = l.backward();
    let want = 0.5 * (1.0 / 1e-6 - 1.0 / 1e-12);
    assert!((g.get(&var).unwrap().item() / want - 1.0).abs() < 1e-12);
}

/// The loss of one sample by its definition: the mean over the classes of
/// `-(t log σ(x) + (1 - t) log σ(-x))`.
fn multilabel_by_hand(x: &[f64], t: &[f64]) -> f64 {
    let log_sigmoid = |v: f64| -(1.0 + (-v).exp()).ln();
    let s: f64 = x
        .iter()
        .zip(t)
        .map(|(&x, &t)| -(t * log_sigmoid(x) + (1.0 - t) * log_sigmoid(-x)))
        .sum();
    s / x.len() as f64
}

#[test]
fn multilabel_soft_margin_sums_the_last_dim_at_rank_one_and_three() {
    // The fixtures are [N, C], where dim 1 is the last one; PyTorch sums
    // over the last dim at any rank: a [C] input is one sample and a
    // [A, B, C] input has A * B samples (summing dim 1 instead is wrong
    // at both ranks). Tolerance 1e-12: a few f64 roundings of O(1) terms.
    let x = [0.3, -1.2, 2.0, 0.7, -0.4, 1.5];
    let t = [1.0, 0.0, 1.0, 0.0, 0.0, 1.0];
    let one = multilabel_soft_margin_loss_with(
        &Tensor::<f64>::from_vec(x.to_vec(), &[6]),
        &Tensor::<f64>::from_vec(t.to_vec(), &[6]),
        MultilabelSoftMarginLossOptions {
            weight: None,
            reduction: Reduction::Sum,
        },
    );
    assert_eq!(one.shape(), &[] as &[usize]);
    assert!((one.item() - multilabel_by_hand(&x, &t)).abs() < 1e-12);

    let three = multilabel_soft_margin_loss_with(
        &Tensor::<f64>::from_vec(x.to_vec(), &[1, 2, 3]),
        &Tensor::<f64>::from_vec(t.to_vec(), &[1, 2, 3]),
        MultilabelSoftMarginLossOptions {
            weight: None,
            reduction: Reduction::None,
        },
    );
    assert_eq!(three.shape(), &[1, 2]);
    let got = three.to_vec();
    for (k, g) in got.iter().enumerate() {
        let want = multilabel_by_hand(&x[3 * k..3 * k + 3], &t[3 * k..3 * k + 3]);
        assert!((g - want).abs() < 1e-12, "sample {k}: {g} vs {want}");
    }
}
