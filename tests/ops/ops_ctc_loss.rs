//! `ctc_loss` / `ctc_loss_with` against PyTorch fixtures
//! (`nn/ctc_loss_*`, written by tests/fixtures/gen/gen_ops4.py: padded,
//! concatenated and unbatched targets, every reduction, a blank other than
//! 0, repeated labels, `zero_infinity` with a sample that has no
//! alignment) in f64 and f32, an f64 gradient check, bit-identical results
//! at 1 and 2 threads, and the missing second derivative (PyTorch has none).
//!
//! The fixtures differentiate `ctc_loss(log_softmax(logits))` with respect
//! to the logits: through `log_softmax`, forge's exact derivative and
//! PyTorch's (which adds `exp(log_probs)`) agree. Every option is read from
//! the metadata. Tolerances: the fixture's `rtol`/`atol` (1e-10 / 1e-12) in
//! f64 and `f32_rtol`/`f32_atol` in f32. gradcheck: central differences,
//! eps 1e-6, atol = rtol = 1e-6 (the loss is smooth where finite; the
//! fixtures' losses are O(10), whose rounding in the differences stays
//! below 1e-8).

use crate::common;
use common::Fixture;
use forge::nn::functional::{ctc_loss, ctc_loss_with, CtcLossOptions, Reduction};
use forge::{gradcheck, Float, Tensor};

fn files() -> Vec<Fixture> {
    let fs = common::fixtures_for_ops("nn", "ctc_loss_", &["ctc_loss"]);
    assert!(fs.len() >= 9, "ctc_loss: {} files", fs.len());
    fs.iter().map(|p| Fixture::load(p)).collect()
}

fn options(f: &Fixture) -> CtcLossOptions {
    CtcLossOptions {
        blank: f.parse("blank"),
        reduction: match f.meta("reduction") {
            "mean" => Reduction::Mean,
            "sum" => Reduction::Sum,
            "none" => Reduction::None,
            other => panic!("{}: reduction {other}", f.name),
        },
        zero_infinity: f.flag("zero_infinity"),
    }
}

fn lengths(f: &Fixture, name: &str) -> Vec<usize> {
    f.i(name).to_vec().iter().map(|&v| v as usize).collect()
}

/// The fixture's loss of `log_probs`.
fn loss<E: Float>(f: &Fixture, log_probs: &Tensor<E>) -> Tensor<E> {
    ctc_loss_with(
        log_probs,
        &f.i("targets"),
        &lengths(f, "input_lengths"),
        &lengths(f, "target_lengths"),
        options(f),
    )
}

fn check<E: Float>(f: &Fixture) {
    let logits = f.input::<E>("logits").requires_grad();
    let y = loss(f, &logits.log_softmax(-1));
    f.check_as("out", &y);
    let g = y.backward_with(&f.input::<E>("gout"), false);
    f.check_as("grad_logits", g.get(&logits).unwrap());
}

#[test]
fn ctc_loss_matches_pytorch_in_f64_and_f32() {
    for f in files() {
        check::<f64>(&f);
        check::<f32>(&f);
    }
}

#[test]
fn ctc_loss_passes_gradcheck_in_log_probs_and_logits() {
    for f in files() {
        let logits = f.t("logits");
        // Through log_softmax, as the fixtures.
        gradcheck(
            |v| loss(&f, &v[0].log_softmax(-1)),
            &[logits.clone()],
            1e-6,
            1e-6,
            1e-6,
        )
        .unwrap_or_else(|e| panic!("{} (logits): {e}", f.name));
        // Directly in unnormalised log-probabilities: the exact derivative.
        gradcheck(
            |v| loss(&f, &v[0]),
            &[logits.mul_scalar(0.3)],
            1e-6,
            1e-6,
            1e-6,
        )
        .unwrap_or_else(|e| panic!("{} (log_probs): {e}", f.name));
    }
}

#[test]
fn ctc_loss_is_bit_identical_at_1_and_2_threads() {
    let _lock = common::lock_thread_count();
    for f in files() {
        let run = || {
            let lp = f
                .input::<f32>("logits")
                .log_softmax(-1)
                .detach()
                .requires_grad();
            let y = loss(&f, &lp);
            let g = y.backward_with(&f.input::<f32>("gout"), false);
            let mut v: Vec<u32> = y.to_vec().iter().map(|x| x.to_bits()).collect();
            v.extend(g.get(&lp).unwrap().to_vec().iter().map(|x| x.to_bits()));
            v
        };
        let (one, two, _) = common::at_1_and_2_threads(run);
        assert_eq!(one, two, "{}", f.name);
    }
    forge::runtime::set_num_threads(2);
}

#[test]
fn ctc_loss_short_form_is_pytorchs_defaults() {
    // F.ctc_loss's defaults: blank 0, reduction 'mean', zero_infinity False.
    let o = CtcLossOptions::default();
    assert_eq!(
        (o.blank, o.reduction, o.zero_infinity),
        (0, Reduction::Mean, false)
    );
    // And a fixture made with exactly those options gives the same value.
    let f = files()
        .into_iter()
        .find(|f| options(f) == o && f.meta("layout") == "padded")
        .expect("a fixture with F.ctc_loss's defaults");
    let lp = f.t("logits").log_softmax(-1);
    let (il, tl) = (lengths(&f, "input_lengths"), lengths(&f, "target_lengths"));
    let short = ctc_loss(&lp, &f.i("targets"), &il, &tl);
    assert_eq!(short.item(), loss(&f, &lp).item());
    f.check("out", &short);
}

#[test]
#[should_panic(expected = "ctc_loss: no second derivative")]
fn ctc_loss_has_no_second_derivative() {
    let f = files().remove(0);
    let lp = f.t("logits").log_softmax(-1).detach().requires_grad();
    let g = loss(&f, &lp).backward_with_graph();
    let _ = g.get(&lp).unwrap().square().sum().backward();
}
