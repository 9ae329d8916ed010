//! `forge::models::gpt::Gpt` against the trained nanoGPT-style model frozen
//! by PyTorch in every `tests/fixtures/models` file whose metadata `op` is
//! `gpt` (today `gpt.safetensors`; see the fixtures README, "The GPT
//! fixture"), configured from each file's metadata, in f64 with the file's
//! tolerances (rtol 1e-10, atol 1e-12):
//!
//! - the logits over 4 real windows of the text and the mean cross-entropy;
//! - the gradient of every one of the 28 parameters (the tied
//!   `transformer.wte.weight` holds both uses);
//! - the total norm returned by `clip_grad_norm_with(1.0)`;
//! - one AdamW step (step 400 -> 401, lr `next_lr`, betas (0.9, 0.95), eps
//!   1e-8, weight decay 0.1 on 2-D weights only) from the fixture's real
//!   optimizer state, with the clipped gradients;
//! - greedy generation, token for token.
//!
//! Measured relative errors, max |forge - torch| / max |torch| over each
//! tensor (2 threads; the figures printed by
//! `cargo test --test suite models_gpt_parity -- --nocapture`); the test
//! asserts each with a 10x margin (`QUOTED_FIGURES`):
//!
//! | quantity | max rel. error |
//! |---|---|
//! | logits | 4.5e-16 |
//! | loss | 0 (bit-identical) |
//! | gradients (worst parameter) | 2.4e-15 (`transformer.wpe.weight`) |
//! | clip_grad_norm_with total norm | 6.1e-16 |
//! | parameters after the AdamW step (worst) | 5.2e-14 (`transformer.h.0.attn.c_attn.bias`) |
//! | greedy generation | 20/20 tokens identical |

use crate::common;

use common::{assert_close, fixtures_for_ops, Fixture};
use forge::models::gpt::{Gpt, GptConfig};
use forge::nn::{Forward, Layer};
use forge::optim::{clip_grad_norm_with, AdamW, ParamGroup};
use forge::{Rng, Tensor};
use std::collections::{BTreeMap, BTreeSet};

/// The quoted errors above (logits, loss, worst gradient, clip norm,
/// worst parameter after the AdamW step); each is asserted with a 10x
/// margin. The loss is quoted as bit-identical; its bound is 10 units of
/// f64 round-off (2.2e-16) instead of 10 x 0.
const QUOTED_FIGURES: [(&str, f64); 5] = [
    ("logits", 4.5e-16),
    ("loss", 2.2e-16),
    ("gradients", 2.4e-15),
    ("clip_grad_norm", 6.1e-16),
    ("AdamW step", 5.2e-14),
];

fn assert_figure(what: &str, err: f64) {
    let quoted = QUOTED_FIGURES
        .iter()
        .find(|(n, _)| *n == what)
        .unwrap_or_else(|| panic!("no quoted figure for {what}"))
        .1;
    eprintln!("{what}: max rel err {err:.2e} (quoted {quoted:.1e})");
    assert!(
        err <= 10.0 * quoted,
        "{what}: relative error {err:e} exceeds 10x the quoted {quoted:e}"
    );
}

/// max |a - e| / max |e|: the error relative to the tensor's scale.
fn rel_err(actual: &Tensor<f64>, expected: &Tensor<f64>) -> f64 {
    let scale = expected
        .as_slice()
        .iter()
        .fold(0.0f64, |m, x| m.max(x.abs()));
    let diff = actual
        .as_slice()
        .iter()
        .zip(expected.as_slice())
        .fold(0.0f64, |m, (a, e)| m.max((a - e).abs()));
    diff / scale
}

fn config(f: &Fixture) -> GptConfig {
    let n = |k: &str| f.meta(k).parse::<usize>().unwrap();
    GptConfig {
        vocab_size: n("vocab_size"),
        block_size: n("block_size"),
        n_layer: n("n_layer"),
        n_head: n("n_head"),
        n_embd: n("n_embd"),
        bias: f.meta("bias") == "true",
    }
}

/// Every GPT fixture (metadata `op` = `gpt`) in `models/`: the tests
/// below run on each, reading the configuration from its metadata.
fn gpt_fixtures() -> Vec<String> {
    let files = fixtures_for_ops("models", "", &["gpt"]);
    assert!(!files.is_empty(), "no GPT fixture in tests/fixtures/models");
    files
}

/// Each GPT fixture with its model, loaded by name from the file's state
/// dict (`lm_head.weight` included, as nanoGPT saves it).
fn loads() -> Vec<(Fixture, Gpt<f64>)> {
    gpt_fixtures().iter().map(|rel| load(rel)).collect()
}

/// The fixture `rel` and its model.
fn load(rel: &str) -> (Fixture, Gpt<f64>) {
    let f = Fixture::load(rel);
    let mut gpt = Gpt::<f64>::new(config(&f), &mut Rng::new(0));
    let mut sd: BTreeMap<String, Tensor<f64>> = f
        .meta_list("params")
        .into_iter()
        .map(|p| {
            let t = f.t(&p);
            (p, t)
        })
        .collect();
    sd.insert("lm_head.weight".into(), f.t("lm_head.weight"));
    gpt.load_state_dict(&sd).unwrap();
    (f, gpt)
}

#[test]
fn state_dict_names_and_shapes_match_the_fixture() {
    for (f, gpt) in loads() {
        let params = f.meta_list("params");
        let names: Vec<String> = gpt.named_parameters().into_iter().map(|(n, _)| n).collect();
        assert_eq!(
            names, params,
            "parameter order = nanoGPT's named_parameters()"
        );
        let sd = gpt.state_dict();
        assert_eq!(sd.len(), params.len(), "the tied head is stored once");
        assert!(f.has("lm_head.weight") && !params.iter().any(|p| p == "lm_head.weight"));
        for p in &params {
            assert_eq!(sd[p].shape(), f.t(p).shape(), "{p}");
            assert_eq!(
                sd[p].as_slice(),
                f.t(p).as_slice(),
                "{p} loaded bit for bit"
            );
        }
    }
}

#[test]
fn a_differing_lm_head_is_refused() {
    for (f, mut gpt) in loads() {
        let mut sd = gpt.state_dict();
        sd.insert(
            "lm_head.weight".into(),
            f.t("lm_head.weight").add_scalar(1e-3),
        );
        let err = gpt.load_state_dict(&sd).unwrap_err().to_string();
        assert!(err.contains("lm_head.weight"), "{err}");
    }
}

#[test]
fn logits_loss_gradients_clip_norm_and_adamw_step_match_pytorch() {
    for (f, mut gpt) in loads() {
        let (idx, targets) = (f.i("idx"), f.i("targets"));

        let (logits, loss) = gpt.logits_and_loss(&idx, &targets);
        f.check("logits", &logits);
        f.check("loss", &loss);
        assert_figure("logits", rel_err(&logits, &f.t("logits")));
        assert_figure("loss", rel_err(&loss, &f.t("loss")));

        let mut grads = loss.backward();
        let params = gpt.named_parameters();
        assert_eq!(grads.len(), params.len());
        let mut worst = (0.0f64, String::new());
        for (name, p) in &params {
            let g = grads
                .get(p)
                .unwrap_or_else(|| panic!("no gradient for {name}"));
            f.check(&format!("grad.{name}"), g);
            let e = rel_err(g, &f.t(&format!("grad.{name}")));
            if e > worst.0 {
                worst = (e, name.clone());
            }
        }
        eprintln!("worst gradient: {}", worst.1);
        assert_figure("gradients", worst.0);

        let total = clip_grad_norm_with(&mut grads, f.meta_f64("grad_clip"), 2.0);
        let (rtol, atol) = f.tol();
        let norm = Tensor::scalar(total);
        assert_close("clip_grad_norm", &norm, &f.t("clip_grad_norm"), rtol, atol);
        assert_figure("clip_grad_norm", rel_err(&norm, &f.t("clip_grad_norm")));

        // AdamW from the fixture's real state; weight decay only on the 2-D
        // weights listed in the metadata.
        let decayed: BTreeSet<String> = f
            .meta("weight_decay_params")
            .rsplit(": ")
            .next()
            .unwrap()
            .split(',')
            .map(str::to_string)
            .collect();
        // The metadata's list is exactly the parameters with two or more
        // dimensions (nanoGPT's rule).
        let two_d: BTreeSet<String> = params
            .iter()
            .filter(|(_, p)| p.rank() >= 2)
            .map(|(n, _)| n.clone())
            .collect();
        assert_eq!(decayed, two_d);
        let betas = f.meta_list("betas");
        let mut opt = AdamW::<f64>::new(f.meta_f64("next_lr"))
            .betas(betas[0].parse().unwrap(), betas[1].parse().unwrap())
            .eps(f.meta_f64("eps"))
            .weight_decay(f.meta_f64("weight_decay"))
            .with_group(ParamGroup::matching(move |p| !decayed.contains(p)).weight_decay(0.0));
        let step = f.i("step").item() as u64;
        for (name, _) in &params {
            let m = f.t(&format!("exp_avg.{name}"));
            let v = f.t(&format!("exp_avg_sq.{name}"));
            opt.set_state(name, step, &[("exp_avg", m), ("exp_avg_sq", v)])
                .unwrap();
        }
        let by_path: BTreeMap<String, Tensor<f64>> = params
            .iter()
            .map(|(n, p)| (n.clone(), grads.get(p).unwrap().clone()))
            .collect();
        opt.step(&mut gpt, &by_path).unwrap();
        let mut worst = (0.0f64, String::new());
        for (name, p) in gpt.named_parameters() {
            assert_eq!(opt.state(&name).unwrap().step(), step + 1);
            f.check(&format!("next.{name}"), &p);
            let e = rel_err(&p, &f.t(&format!("next.{name}")));
            if e > worst.0 {
                worst = (e, name.clone());
            }
        }
        eprintln!("worst parameter after the step: {}", worst.1);
        assert_figure("AdamW step", worst.0);
    }
}

#[test]
fn greedy_generation_matches_token_for_token() {
    for (f, gpt) in loads() {
        let prompt = f.i("prompt");
        let expected = f.i("greedy_out");
        let n = expected.shape()[1];
        let out = gpt.generate_greedy(&prompt, n);
        assert_eq!(out.shape(), &[1, prompt.shape()[1] + n]);
        assert_eq!(&out.as_slice()[..prompt.shape()[1]], prompt.as_slice());
        assert_eq!(&out.as_slice()[prompt.shape()[1]..], expected.as_slice());
    }
}

#[test]
fn generation_crops_the_context_to_block_size() {
    // prompt + generated tokens > block_size: the later steps see a cropped
    // window, which must equal a forward pass over the last block_size tokens.
    for (f, gpt) in loads() {
        let prompt = f.i("prompt");
        let n = f.i("greedy_out").shape()[1];
        let block = gpt.config.block_size;
        // A fixture whose generation fits in one block checks the same rule
        // over its whole context.
        let out = gpt.generate_greedy(&prompt, n);
        let all = out.as_slice();
        let window = block.min(all.len() - 1);
        let last = &all[all.len() - 1 - window..all.len() - 1];
        let logits = forge::no_grad(|| gpt.forward(Tensor::from_vec(last.to_vec(), &[1, window])));
        let v = gpt.config.vocab_size;
        let row = &logits.as_slice()[(window - 1) * v..];
        let best = (0..v).max_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap();
        assert_eq!(best as i64, all[all.len() - 1]);
    }
}

/// The same model in f32 (the default element type) against the file's
/// `f32_rtol`/`f32_atol`: logits, loss and every gradient.
#[test]
fn logits_loss_and_gradients_match_pytorch_in_f32() {
    for rel in gpt_fixtures() {
        let f = Fixture::load(&rel);
        let mut gpt = Gpt::<f32>::new(config(&f), &mut Rng::new(0));
        let sd: BTreeMap<String, Tensor<f32>> = f
            .meta_list("params")
            .into_iter()
            .map(|p| {
                let t = f.input::<f32>(&p);
                (p, t)
            })
            .collect();
        gpt.load_state_dict(&sd).unwrap();
        let (logits, loss) = gpt.logits_and_loss(&f.i("idx"), &f.i("targets"));
        f.check_as("logits", &logits);
        f.check_as("loss", &loss);
        let grads = loss.backward();
        for (name, p) in gpt.named_parameters() {
            f.check_as(&format!("grad.{name}"), grads.get(&p).unwrap());
        }
    }
}

/// The held-out text for the trained GPT: the repository's
/// `LICENSE-APACHE` (licence prose the model never saw: it was trained on
/// the GPL), its bytes mapped to the fixture's vocabulary (bytes outside
/// it dropped), cut into non-overlapping windows of `block_size + 1`:
/// `(idx, targets)`, each `[windows, block_size]`.
fn held_out_windows(f: &Fixture) -> (Tensor<i64>, Tensor<i64>) {
    let vocab = &f.bytes["vocab"];
    let text = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/LICENSE-APACHE")).unwrap();
    let ids: Vec<i64> = text
        .iter()
        .filter_map(|b| vocab.iter().position(|v| v == b))
        .map(|i| i as i64)
        .collect();
    let t = config(f).block_size;
    let n = ids.len() / (t + 1);
    assert!(n >= 100, "only {n} held-out windows");
    let (mut idx, mut targets) = (Vec::new(), Vec::new());
    for w in ids.chunks_exact(t + 1).take(n) {
        idx.extend_from_slice(&w[..t]);
        targets.extend_from_slice(&w[1..]);
    }
    (
        Tensor::from_vec(idx, &[n, t]),
        Tensor::from_vec(targets, &[n, t]),
    )
}

/// The trained GPT in every reduced precision against the f32 model (the
/// GPT table of docs/src/quantization.md): bf16-rounded weights, bf16
/// autocast, fp8 E4M3 / E5M2 checkpoints (per-tensor scales) loaded back
/// into f32, its `Linear` layers in int8 (per channel, per tensor; the tied
/// output head and the embeddings in f32), then its embeddings and tied
/// head in int8 too. For each: the loss on the fixture's batch (training
/// text) and on held-out text (`held_out_windows`), the largest and mean
/// logit error and the positions whose greedy token (argmax) is the f32
/// model's, both over the held-out text.
///
/// Bounds (each from the figure measured at the commit the docs name, with
/// a margin; a scale skipped or a format mixed up breaks them by far):
/// the held-out loss within `loss_tol` (relative) of f32's, the largest
/// logit error under `max_err`, the greedy tokens equal at `min_same` of
/// the positions or more.
#[test]
fn int8_and_bf16_gpt_stay_close_to_f32() {
    use forge::checkpoint::LayerIo;
    use forge::models::precision::round_weights;
    use forge::quant::{
        fp8_tensors, quantize_dynamic, quantize_embeddings, resident_bytes, Fp8Format, Granularity,
    };
    for rel in gpt_fixtures() {
        let f = Fixture::load(&rel);
        let cfg = config(&f);
        let mut gpt = Gpt::<f32>::new(cfg, &mut Rng::new(0));
        let sd: BTreeMap<String, Tensor<f32>> = f
            .meta_list("params")
            .into_iter()
            .map(|p| {
                let t = f.input::<f32>(&p);
                (p, t)
            })
            .collect();
        gpt.load_state_dict(&sd).unwrap();
        gpt.eval();
        let (idx, targets) = (f.i("idx"), f.i("targets"));
        let (hidx, htargets) = held_out_windows(&f);
        // (batch loss, held-out logits, held-out loss) of a model, with
        // autocast to bf16 or not
        let eval = |m: &Gpt<f32>, bf16: bool| {
            let dtype = if bf16 {
                forge::DType::BF16
            } else {
                forge::DType::F32
            };
            forge::no_grad(|| {
                forge::autocast(dtype, || {
                    let batch = m.logits_and_loss(&idx, &targets).1.item();
                    let (logits, held) = m.logits_and_loss(&hidx, &htargets);
                    (batch, logits, held.item())
                })
            })
        };
        let argmax = |l: &Tensor<f32>| -> Vec<usize> {
            let v = cfg.vocab_size;
            l.as_slice()
                .chunks(v)
                .map(|r| {
                    (0..v)
                        .max_by(|&a, &b| r[a].total_cmp(&r[b]).then(b.cmp(&a)))
                        .unwrap()
                })
                .collect()
        };
        let (loss, logits, held) = eval(&gpt, false);
        let greedy = argmax(&logits);
        let f32_bytes = resident_bytes(&gpt);
        eprintln!(
            "| model | weights | batch loss | held-out loss | max logit error | mean logit error | greedy tokens equal | resident bytes |"
        );
        eprintln!("|---|---|---|---|---|---|---|---|");
        eprintln!(
            "| GPT | f32 | {loss:.5} | {held:.5} | 0 | 0 | {n} / {n} | {f32_bytes} |",
            n = greedy.len()
        );
        // one row of the table, and its bounds
        let row = |label: &str, m: &Gpt<f32>, bf16: bool, bounds: (f64, f32, f64)| {
            let (loss_tol, max_err, min_same) = bounds;
            let (bl, l, hl) = eval(m, bf16);
            let (a, b) = (logits.as_slice(), l.as_slice());
            let max = a
                .iter()
                .zip(b)
                .map(|(p, q)| (p - q).abs())
                .fold(0f32, f32::max);
            let mean = a
                .iter()
                .zip(b)
                .map(|(p, q)| f64::from((p - q).abs()))
                .sum::<f64>()
                / a.len() as f64;
            let same = argmax(&l)
                .iter()
                .zip(&greedy)
                .filter(|(p, q)| p == q)
                .count();
            eprintln!(
                "| GPT | {label} | {bl:.5} | {hl:.5} | {max:.5} | {mean:.6} | {same} / {} | {} |",
                greedy.len(),
                resident_bytes(m)
            );
            assert!(
                f64::from((hl - held).abs()) <= loss_tol * f64::from(held),
                "{label}: held-out loss {hl} vs f32 {held}"
            );
            assert!(max <= max_err, "{label}: max logit error {max}");
            assert!(
                same as f64 >= min_same * greedy.len() as f64,
                "{label}: {same} of {} greedy tokens equal",
                greedy.len()
            );
        };
        let mut bf16 = gpt.clone();
        round_weights::<forge::half::bf16, f32, _>(&mut bf16);
        row("bf16 weights", &bf16, false, BOUNDS[0]);
        // bf16 compute: the f32 model's products under autocast
        row("bf16 autocast", &gpt, true, BOUNDS[1]);
        // fp8 checkpoints (per-tensor scales), loaded back into f32
        for (fmt, bounds) in [(Fp8Format::E4M3, BOUNDS[2]), (Fp8Format::E5M2, BOUNDS[3])] {
            let path = std::env::temp_dir().join(format!(
                "forge-gpt-fp8-{fmt:?}-{}.safetensors",
                std::process::id()
            ));
            let t = fp8_tensors(&gpt.state_dict(), fmt);
            forge::io::write_safetensors(&path, &t, &BTreeMap::new()).unwrap();
            let mut f8 = gpt.clone();
            f8.load_weights(&path).unwrap();
            std::fs::remove_file(&path).unwrap();
            row(&format!("fp8 {fmt:?} weights"), &f8, false, bounds);
        }
        for (label, g, tables, bounds) in [
            (
                "int8 per channel",
                Granularity::PerChannel,
                false,
                BOUNDS[4],
            ),
            ("int8 per tensor", Granularity::PerTensor, false, BOUNDS[5]),
            // quantize_embeddings too: wte (and the tied head on its
            // bytes) and wpe in int8, one scale per row
            (
                "int8 per channel + int8 embeddings",
                Granularity::PerChannel,
                true,
                BOUNDS[6],
            ),
        ] {
            let mut q = gpt.clone();
            assert_eq!(quantize_dynamic(&mut q, g), 4 * cfg.n_layer);
            if tables {
                assert_eq!(quantize_embeddings(&mut q), 2);
            }
            row(label, &q, false, bounds);
        }
    }
}

/// The bounds of `int8_and_bf16_gpt_stay_close_to_f32`, row by row:
/// (relative change of the held-out loss, largest logit error, share of
/// the 10,976 held-out positions whose greedy token is f32's). Measured
/// (the table in docs/src/quantization.md):
///
/// | row | loss change | max error | greedy equal |
/// |---|---|---|---|
/// | bf16 weights | 0.002% | 0.0283 | 99.85% |
/// | bf16 autocast | 0.004% | 0.0198 | 99.92% |
/// | fp8 E4M3 | 0.34% | 0.372 | 96.8% |
/// | fp8 E5M2 | 0.57% | 0.551 | 93.7% |
/// | int8 per channel | 0.002% | 0.252 | 98.3% |
/// | int8 per tensor | 0.003% | 0.273 | 98.4% |
/// | int8 + embeddings | 0.03% | 0.238 | 98.1% |
///
/// Each bound allows twice the measured figure: twice the loss change
/// (at least 0.1%: smaller changes are round-off), twice the largest
/// error, twice as many positions whose greedy token differs.
const BOUNDS: [(f64, f32, f64); 7] = [
    (0.001, 0.057, 0.997),
    (0.001, 0.040, 0.998),
    (0.007, 0.75, 0.937),
    (0.012, 1.11, 0.874),
    (0.001, 0.51, 0.966),
    (0.001, 0.55, 0.967),
    (0.001, 0.48, 0.962),
];
