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

/// The trained GPT with its `Linear` layers in int8 (`forge::quant`; the
/// tied output head and the embeddings in f32, then also in int8) and with bf16-rounded
/// weights: loss and logit errors against the f32 model on the fixture's
/// batch (the table in docs/src/quantization.md). The int8 loss must stay
/// within 2% of the f32 loss.
#[test]
fn int8_and_bf16_gpt_stay_close_to_f32() {
    use forge::models::precision::round_weights;
    use forge::quant::{quantize_dynamic, resident_bytes, Granularity};
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
        gpt.eval();
        let (idx, targets) = (f.i("idx"), f.i("targets"));
        let (logits, loss) = forge::no_grad(|| gpt.logits_and_loss(&idx, &targets));
        let loss = loss.item();
        let f32_bytes = resident_bytes(&gpt);
        eprintln!("| GPT | f32 | loss {loss:.5} | 0 | 0 | {f32_bytes} |");
        let errors = |other: &Tensor<f32>| {
            let (a, b) = (logits.as_slice(), other.as_slice());
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
            (max, mean)
        };
        let mut bf16 = gpt.clone();
        round_weights::<forge::half::bf16, f32, _>(&mut bf16);
        let (l16, loss16) = forge::no_grad(|| bf16.logits_and_loss(&idx, &targets));
        let (max, mean) = errors(&l16);
        eprintln!(
            "| GPT | bf16 weights | loss {:.5} | {max:.5} | {mean:.6} | {f32_bytes} |",
            loss16.item()
        );
        // bf16 compute: the f32 model's products under autocast
        let (lac, lossac) = forge::no_grad(|| {
            forge::autocast(forge::DType::BF16, || gpt.logits_and_loss(&idx, &targets))
        });
        let (max, mean) = errors(&lac);
        let lossac = lossac.item();
        eprintln!(
            "| GPT | bf16 autocast | loss {lossac:.5} | {max:.5} | {mean:.6} | {f32_bytes} |"
        );
        assert!(
            (lossac - loss).abs() <= 0.01 * loss,
            "bf16 autocast: loss {lossac} vs {loss}"
        );
        // fp8 checkpoints (per-tensor scales), loaded back into f32
        for fmt in [forge::quant::Fp8Format::E4M3, forge::quant::Fp8Format::E5M2] {
            use forge::checkpoint::LayerIo;
            let path = std::env::temp_dir().join(format!(
                "forge-gpt-fp8-{fmt:?}-{}.safetensors",
                std::process::id()
            ));
            let t = forge::quant::fp8_tensors(&gpt.state_dict(), fmt);
            forge::io::write_safetensors(&path, &t, &BTreeMap::new()).unwrap();
            let mut f8 = gpt.clone();
            f8.load_weights(&path).unwrap();
            std::fs::remove_file(&path).unwrap();
            let (l8, loss8) = forge::no_grad(|| f8.logits_and_loss(&idx, &targets));
            let (max, mean) = errors(&l8);
            eprintln!(
                "| GPT | fp8 {fmt:?} weights | loss {:.5} | {max:.5} | {mean:.6} | {f32_bytes} |",
                loss8.item()
            );
        }
        // the greedy token (argmax) of every position
        let argmax = |l: &Tensor<f32>| -> Vec<usize> {
            let v = config(&f).vocab_size;
            l.as_slice()
                .chunks(v)
                .map(|r| {
                    (0..v)
                        .max_by(|&a, &b| r[a].total_cmp(&r[b]).then(b.cmp(&a)))
                        .unwrap()
                })
                .collect()
        };
        let greedy = argmax(&logits);
        for (label, g, tables) in [
            ("int8 per channel", Granularity::PerChannel, false),
            ("int8 per tensor", Granularity::PerTensor, false),
            // quantize_embeddings too: wte (and the tied head on its
            // bytes) and wpe in int8, one scale per row
            (
                "int8 per channel + int8 embeddings",
                Granularity::PerChannel,
                true,
            ),
        ] {
            let mut q = gpt.clone();
            assert_eq!(quantize_dynamic(&mut q, g), 4 * config(&f).n_layer);
            if tables {
                assert_eq!(forge::quant::quantize_embeddings(&mut q), 2);
            }
            let (l8, loss8) = forge::no_grad(|| q.logits_and_loss(&idx, &targets));
            let (max, mean) = errors(&l8);
            let loss8 = loss8.item();
            let same = argmax(&l8)
                .iter()
                .zip(&greedy)
                .filter(|(a, b)| a == b)
                .count();
            eprintln!(
                "| GPT | {label} | loss {loss8:.5} | {max:.5} | {mean:.6} | {} | {same} / {} greedy tokens equal |",
                resident_bytes(&q),
                greedy.len()
            );
            assert!(
                (loss8 - loss).abs() <= 0.02 * loss,
                "{label}: loss {loss8} vs {loss}"
            );
        }
    }
}
