//! The losses follow `torch.nn.functional`'s names (issue 34, papercuts):
//! each has a short form under PyTorch's name taking only the tensors, with
//! PyTorch's defaults, and one `_with` form taking its options struct.
//!
//! Two rules, one test each: the short form equals its `_with` form given
//! `Default::default()` bit for bit; and those defaults are PyTorch's, read
//! from every loss fixture (`nn/loss_*`) that PyTorch computed with default
//! options (the metadata states the options; a file with a weight tensor or
//! any option off its default is skipped), whose output the short form must
//! reproduce within the file's f64 tolerances (1e-10 / 1e-12). Every loss
//! must have such a file.

use crate::common;
use common::Fixture;
use forge::nn::functional::*;
use forge::Tensor;

/// PyTorch's default of each option the fixtures state, per op (from the
/// signatures in torch.nn.functional).
fn pytorch_defaults(op: &str) -> &'static [(&'static str, &'static str)] {
    match op {
        "mse_loss" | "l1_loss" | "binary_cross_entropy" | "binary_cross_entropy_with_logits" => {
            &[("reduction", "mean")]
        }
        "smooth_l1_loss" => &[("reduction", "mean"), ("beta", "1.0")],
        "huber_loss" => &[("reduction", "mean"), ("delta", "1.0")],
        "kl_div" => &[("reduction", "mean"), ("log_target", "false")],
        "poisson_nll_loss" => &[
            ("reduction", "mean"),
            ("log_input", "true"),
            ("full", "false"),
            ("eps", "1e-08"),
        ],
        "gaussian_nll_loss" => &[("reduction", "mean"), ("full", "false"), ("eps", "1e-06")],
        "cosine_embedding_loss" | "margin_ranking_loss" => {
            &[("reduction", "mean"), ("margin", "0.0")]
        }
        "triplet_margin_loss" => &[
            ("reduction", "mean"),
            ("margin", "1.0"),
            ("p", "2.0"),
            ("eps", "1e-06"),
            ("swap", "false"),
        ],
        "multilabel_soft_margin_loss" => &[("reduction", "mean"), ("weight", "false")],
        "nll_loss" => &[("reduction", "mean"), ("ignore_index", "-100")],
        "cross_entropy" => &[
            ("reduction", "mean"),
            ("ignore_index", "-100"),
            ("label_smoothing", "0.0"),
        ],
        other => panic!("no defaults written for {other}"),
    }
}

/// Whether the fixture was computed with PyTorch's defaults: every stated
/// option at its default (numbers compared as numbers), no weight tensor.
fn is_default(f: &Fixture) -> bool {
    let optional_tensor = ["weight", "pos_weight"];
    if f.meta_list("inputs")
        .iter()
        .any(|n| optional_tensor.contains(&n.as_str()))
    {
        return false;
    }
    pytorch_defaults(f.meta("op")).iter().all(|(k, v)| {
        f.meta.get(*k).is_none_or(|s| {
            s == v || matches!((s.parse::<f64>(), v.parse::<f64>()), (Ok(a), Ok(b)) if a == b)
        })
    })
}

/// The short form of the fixture's loss.
fn short(f: &Fixture) -> Tensor<f64> {
    let t = |n: &str| f.t(n);
    match f.meta("op") {
        "mse_loss" => mse_loss(&t("input"), &t("target")),
        "l1_loss" => l1_loss(&t("input"), &t("target")),
        "smooth_l1_loss" => smooth_l1_loss(&t("input"), &t("target")),
        "huber_loss" => huber_loss(&t("input"), &t("target")),
        "binary_cross_entropy" => binary_cross_entropy(&t("input"), &t("target")),
        "binary_cross_entropy_with_logits" => {
            binary_cross_entropy_with_logits(&t("input"), &t("target"))
        }
        "kl_div" => kl_div(&t("input"), &t("target")),
        "poisson_nll_loss" => poisson_nll_loss(&t("input"), &t("target")),
        "gaussian_nll_loss" => gaussian_nll_loss(&t("input"), &t("target"), &t("var")),
        "cosine_embedding_loss" => cosine_embedding_loss(&t("x1"), &t("x2"), &t("y")),
        "margin_ranking_loss" => margin_ranking_loss(&t("x1"), &t("x2"), &t("y")),
        "triplet_margin_loss" => triplet_margin_loss(&t("anchor"), &t("positive"), &t("negative")),
        "multilabel_soft_margin_loss" => multilabel_soft_margin_loss(&t("input"), &t("target")),
        "nll_loss" => nll_loss(&t("input"), &f.i("target")),
        "cross_entropy" => cross_entropy(&t("input"), &f.i("target")),
        other => panic!("{}: op {other}", f.name),
    }
}

#[test]
fn the_short_forms_have_pytorchs_defaults() {
    let mut seen = std::collections::BTreeSet::new();
    for rel in common::fixtures_with_prefix("nn", "loss_") {
        let f = Fixture::load(&rel);
        if !is_default(&f) {
            continue;
        }
        f.check("out", &short(&f));
        seen.insert(f.meta("op").to_string());
    }
    let all = [
        "mse_loss",
        "l1_loss",
        "smooth_l1_loss",
        "huber_loss",
        "binary_cross_entropy",
        "binary_cross_entropy_with_logits",
        "kl_div",
        "poisson_nll_loss",
        "gaussian_nll_loss",
        "cosine_embedding_loss",
        "margin_ranking_loss",
        "triplet_margin_loss",
        "multilabel_soft_margin_loss",
        "nll_loss",
        "cross_entropy",
    ];
    for op in all {
        assert!(
            seen.contains(op),
            "no fixture of {op} with PyTorch's defaults"
        );
    }
}

#[test]
fn every_short_form_equals_its_with_form_given_default_options() {
    let v = |n: usize, s: f64| Tensor::<f64>::from_fn(&[3, n], move |i| (i as f64 * s).sin());
    let (a, b) = (v(4, 0.7), v(4, 1.3));
    let p = a.sigmoid();
    let q = b.sigmoid();
    let pos = b.exp();
    let sign = b.sign();
    let row_sign = Tensor::<f64>::from_vec(vec![1.0, -1.0, 1.0], &[3]);
    let cls = Tensor::<i64>::from_vec(vec![0, 3, 1], &[3]);
    let same = |x: Tensor<f64>, y: Tensor<f64>, what: &str| {
        assert_eq!(x.to_vec(), y.to_vec(), "{what}");
    };
    same(
        mse_loss(&a, &b),
        mse_loss_with(&a, &b, Default::default()),
        "mse_loss",
    );
    same(
        l1_loss(&a, &b),
        l1_loss_with(&a, &b, Default::default()),
        "l1_loss",
    );
    same(
        smooth_l1_loss(&a, &b),
        smooth_l1_loss_with(&a, &b, Default::default()),
        "smooth_l1_loss",
    );
    same(
        huber_loss(&a, &b),
        huber_loss_with(&a, &b, Default::default()),
        "huber_loss",
    );
    same(
        binary_cross_entropy(&p, &q),
        binary_cross_entropy_with(&p, &q, BinaryCrossEntropyOptions::default()),
        "binary_cross_entropy",
    );
    same(
        binary_cross_entropy_with_logits(&a, &q),
        binary_cross_entropy_with_logits_with(
            &a,
            &q,
            BinaryCrossEntropyWithLogitsOptions::default(),
        ),
        "binary_cross_entropy_with_logits",
    );
    let lp = a.log_softmax(1);
    same(
        kl_div(&lp, &q.softmax(1)),
        kl_div_with(&lp, &q.softmax(1), Default::default()),
        "kl_div",
    );
    same(
        poisson_nll_loss(&a, &pos),
        poisson_nll_loss_with(&a, &pos, Default::default()),
        "poisson_nll_loss",
    );
    same(
        gaussian_nll_loss(&a, &b, &pos),
        gaussian_nll_loss_with(&a, &b, &pos, Default::default()),
        "gaussian_nll_loss",
    );
    same(
        cosine_embedding_loss(&a, &b, &row_sign),
        cosine_embedding_loss_with(&a, &b, &row_sign, Default::default()),
        "cosine_embedding_loss",
    );
    same(
        margin_ranking_loss(&a, &b, &sign),
        margin_ranking_loss_with(&a, &b, &sign, Default::default()),
        "margin_ranking_loss",
    );
    same(
        triplet_margin_loss(&a, &b, &q),
        triplet_margin_loss_with(&a, &b, &q, Default::default()),
        "triplet_margin_loss",
    );
    same(
        multilabel_soft_margin_loss(&a, &q.round()),
        multilabel_soft_margin_loss_with(
            &a,
            &q.round(),
            MultilabelSoftMarginLossOptions::default(),
        ),
        "multilabel_soft_margin_loss",
    );
    same(
        nll_loss(&lp, &cls),
        nll_loss_with(&lp, &cls, NllLossOptions::default()),
        "nll_loss",
    );
    same(
        cross_entropy(&a, &cls),
        cross_entropy_with(&a, &cls, CrossEntropyOptions::default()),
        "cross_entropy",
    );
    let (il, tl) = ([3usize, 2, 3], [2usize, 1, 0]);
    let targets = Tensor::<i64>::from_vec(vec![1, 2, 3], &[3]);
    let lp3 = a.view(&[3, 1, 4]).expand(&[3, 3, 4]).log_softmax(2);
    same(
        ctc_loss(&lp3, &targets, &il, &tl),
        ctc_loss_with(&lp3, &targets, &il, &tl, CtcLossOptions::default()),
        "ctc_loss",
    );
}
