//! Half-precision weights (`forge::models::precision::round_weights` and
//! `LayerIo::save_as`): a bf16 / f16 checkpoint of a GPT is half the size
//! of an f32 one, loads into an f32 model, and the loaded model computes
//! exactly what the in-place rounded model computes; the trained GPT fixture keeps its loss within a few per mille
//! with bf16 or f16 weights.

use crate::common;

use common::Fixture;
use forge::checkpoint::LayerIo;
use forge::half::{bf16, f16};
use forge::models::gpt::{Gpt, GptConfig};
use forge::models::precision::round_weights;
use forge::nn::Layer;
use forge::DType;
use forge::{Rng, Tensor};
use std::collections::BTreeMap;
use std::path::PathBuf;

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("forge_precision_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[test]
fn half_precision_checkpoints_are_half_the_size_and_load_into_f32() {
    let cfg = GptConfig {
        vocab_size: 65,
        block_size: 32,
        n_layer: 2,
        n_head: 4,
        n_embd: 64,
        bias: true,
    };
    let gpt = Gpt::<f32>::new(cfg, &mut Rng::new(5));
    let (p32, pbf, p16) = (
        tmp("gpt_f32.safetensors"),
        tmp("gpt_bf16.safetensors"),
        tmp("gpt_f16.safetensors"),
    );
    gpt.save_as(&p32, DType::F32).unwrap();
    gpt.save_as(&pbf, DType::BF16).unwrap();
    gpt.save_as(&p16, DType::F16).unwrap();
    let size = |p: &PathBuf| std::fs::metadata(p).unwrap().len() as f64;
    let data_bytes = 4.0 * gpt.state_dict().values().map(|t| t.numel()).sum::<usize>() as f64;
    assert!(size(&p32) >= data_bytes);
    for p in [&pbf, &p16] {
        let ratio = size(p) / size(&p32);
        eprintln!(
            "{}: {} bytes, {:.3} of the f32 file ({} bytes)",
            p.display(),
            size(p),
            ratio,
            size(&p32)
        );
        assert!((0.49..0.52).contains(&ratio), "{ratio}");
    }

    let idx = Tensor::<i64>::from_vec((0..64).map(|i| (i * 7 % 65) as i64).collect(), &[2, 32]);
    for (path, rounded) in [
        (&pbf, round_to::<bf16>(&gpt)),
        (&p16, round_to::<f16>(&gpt)),
    ] {
        let mut loaded = Gpt::<f32>::new(cfg, &mut Rng::new(6));
        loaded.load_weights(path).unwrap();
        let (a, b) = (loaded.state_dict(), rounded.state_dict());
        assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
        for (k, t) in &a {
            assert_eq!(t.as_slice(), b[k].as_slice(), "{k}");
        }
        let a = forge::no_grad(|| loaded.loss(&idx, &idx)).item();
        let b = forge::no_grad(|| rounded.loss(&idx, &idx)).item();
        assert_eq!(a.to_bits(), b.to_bits(), "{}", path.display());
    }
    std::fs::remove_dir_all(p32.parent().unwrap()).unwrap();
}

fn round_to<H: forge::Element>(gpt: &Gpt<f32>) -> Gpt<f32> {
    let mut g = gpt.clone();
    round_weights::<H, _, _>(&mut g);
    g
}

#[test]
fn the_trained_gpt_keeps_its_loss_with_half_precision_weights() {
    let files = common::fixtures_for_ops("models", "", &["gpt"]);
    assert!(!files.is_empty(), "no GPT fixture in tests/fixtures/models");
    for rel in files {
        let f = Fixture::load(&rel);
        let n = |k: &str| f.meta(k).parse::<usize>().unwrap();
        let cfg = GptConfig {
            vocab_size: n("vocab_size"),
            block_size: n("block_size"),
            n_layer: n("n_layer"),
            n_head: n("n_head"),
            n_embd: n("n_embd"),
            bias: f.meta("bias") == "true",
        };
        let sd: BTreeMap<String, Tensor<f32>> = f
            .meta_list("params")
            .into_iter()
            .map(|p| {
                let t = f.t(&p).cast::<f32>();
                (p, t)
            })
            .collect();
        let mut gpt = Gpt::<f32>::new(cfg, &mut Rng::new(0));
        gpt.load_state_dict(&sd).unwrap();
        let (idx, tgt) = (f.i("idx"), f.i("targets"));
        let loss = |g: &Gpt<f32>| forge::no_grad(|| g.loss(&idx, &tgt)).item() as f64;
        let reference = f.t("loss").item();
        let l32 = loss(&gpt);
        let lbf = loss(&round_to::<bf16>(&gpt));
        let l16 = loss(&round_to::<f16>(&gpt));
        eprintln!(
        "GPT fixture loss: f64 {reference:.6}, f32 weights {l32:.6}, bf16 {lbf:.6}, f16 {l16:.6}"
    );
        assert!((l32 - reference).abs() < 1e-5 * reference);
        assert!((lbf - reference).abs() < 2e-3 * reference, "{lbf}");
        assert!((l16 - reference).abs() < 5e-4 * reference, "{l16}");
        let prompt = f.i("prompt");
        let expected = f.i("greedy_out");
        let greedy = gpt.generate_greedy(&prompt, expected.shape()[1]);
        assert_eq!(
            &greedy.as_slice()[prompt.shape()[1]..],
            expected.as_slice(),
            "f32 greedy text"
        );
    }
}
