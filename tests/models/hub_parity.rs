//! forge::hub against transformers: every folder of tests/fixtures/hub with a
//! `reference.safetensors` (tiny random-weight GPT-2, Llama and BERT models
//! written by tests/fixtures/gen/gen_hub.py), every value read from the
//! folder, so other configurations of the same families pass unchanged.

use forge::checkpoint::LayerIo;
use forge::hub::{
    generate, load_causal_lm, Bert, CausalLm, Flow, GenerateOptions, HfConfig, HfTokenizer,
    Sampling,
};
use forge::io::{read_safetensors, SafeTensorsData};
use forge::nn::Layer;
use forge::{Element, Float, Tensor};
use std::path::PathBuf;

fn hub_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hub")
}

/// The fixture folders holding `file`, sorted.
fn folders_with(file: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(hub_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.join(file).exists()
                && p.join("config.json").exists() == (file == "reference.safetensors")
        })
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no fixture folder holds {file}");
    v
}

struct Reference {
    data: SafeTensorsData,
}

impl Reference {
    fn read(dir: &std::path::Path) -> Self {
        Reference {
            data: read_safetensors(dir.join("reference.safetensors")).unwrap(),
        }
    }
    fn f64(&self, name: &str) -> Tensor<f64> {
        self.data.tensors[name].to_float::<f64>()
    }
    fn ids(&self, name: &str) -> Tensor<i64> {
        self.data.tensors[name].get::<i64>().unwrap()
    }
    fn has(&self, name: &str) -> bool {
        self.data.tensors.contains_key(name)
    }
    fn meta(&self, key: &str) -> f64 {
        self.data.metadata[key].parse().unwrap()
    }
}

/// The largest `|a - b| / (atol + rtol |b|)`: at most 1 passes.
fn worst<E: Float>(a: &Tensor<E>, b: &Tensor<f64>, atol: f64, rtol: f64) -> f64 {
    assert_eq!(a.shape(), b.shape());
    a.as_slice()
        .iter()
        .zip(b.as_slice())
        .map(|(x, y)| (Element::to_f64(*x) - *y).abs() / (atol + rtol * y.abs()))
        .fold(0.0, f64::max)
}

fn rows(t: &Tensor<i64>) -> Vec<Vec<i64>> {
    t.as_slice().chunks(t.dim(1)).map(|r| r.to_vec()).collect()
}

fn greedy(n: usize) -> GenerateOptions {
    GenerateOptions {
        max_new_tokens: n,
        ..Default::default()
    }
}

fn is_decoder(dir: &std::path::Path) -> bool {
    HfConfig::from_dir(dir).unwrap().model_type().unwrap() != "bert"
}

#[test]
fn decoder_logits_and_greedy_tokens_match_transformers() {
    let mut n = 0;
    for dir in folders_with("reference.safetensors")
        .into_iter()
        .filter(|d| is_decoder(d))
    {
        let r = Reference::read(&dir);
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let ids = r.ids("input_ids");
        // f64: the float32 weights widened, as the reference ran them.
        let m64 = load_causal_lm::<f64>(&dir).unwrap();
        let w = worst(
            &m64.logits(&ids),
            &r.f64("logits_f64"),
            r.meta("atol"),
            r.meta("rtol"),
        );
        assert!(w <= 1.0, "{name}: f64 logits off by {w} x the tolerance");
        // f32: the bound the generator measured (10x transformers' own f32 error).
        let m32 = load_causal_lm::<f32>(&dir).unwrap();
        let w = worst(
            &m32.logits(&ids),
            &r.f64("logits_f32"),
            r.meta("f32_atol"),
            0.0,
        );
        assert!(w <= 1.0, "{name}: f32 logits off by {w} x f32_atol");
        // Greedy tokens equal to transformers' `generate` (float64 model).
        let want = r.ids("generated");
        let got = generate(
            m64.as_ref(),
            &rows(&r.ids("prompt")),
            &greedy(want.dim(1)),
            |_, _| Flow::Continue,
        );
        assert_eq!(got, rows(&want), "{name}: greedy tokens");
        n += 1;
    }
    assert!(n >= 3, "only {n} decoder fixtures");
}

#[test]
fn kv_cache_step_logits_equal_a_full_recompute() {
    for dir in folders_with("reference.safetensors")
        .into_iter()
        .filter(|d| is_decoder(d))
    {
        let r = Reference::read(&dir);
        let ids = r.ids("input_ids");
        let (b, t) = (ids.dim(0), ids.dim(1));
        let m = load_causal_lm::<f32>(&dir).unwrap();
        let full = m.logits(&ids);
        let v = m.vocab_size();
        let mut cache = m.new_cache();
        // The first 3 tokens at once, then one at a time.
        let mut steps = vec![m.forward_cached(&ids.narrow(1, 0, 3), None, &mut cache)];
        for i in 3..t {
            steps.push(m.forward_cached(&ids.narrow(1, i, 1), None, &mut cache));
        }
        assert_eq!(cache.len(), t);
        let inc = Tensor::cat(&steps.iter().collect::<Vec<_>>(), 1);
        assert_eq!(inc.shape(), &[b, t, v]);
        // f32 rounding: the two paths sum the same products in another
        // grouping (attention over 1 vs T queries); 1e-5 of the logits' scale.
        let scale = full.as_slice().iter().fold(1f32, |a, x| a.max(x.abs()));
        let diff = inc
            .as_slice()
            .iter()
            .zip(full.as_slice())
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(
            diff <= 1e-5 * scale,
            "{}: cached logits off by {diff} (scale {scale})",
            dir.display()
        );
    }
}

#[test]
fn batched_prompts_of_different_lengths_decode_as_alone() {
    for dir in folders_with("reference.safetensors")
        .into_iter()
        .filter(|d| is_decoder(d))
    {
        let m = load_causal_lm::<f64>(&dir).unwrap();
        let v = m.vocab_size() as i64;
        let prompts = vec![
            vec![1 % v, 7 % v, 3 % v, 9 % v, 4 % v],
            vec![5 % v],
            vec![2 % v, 8 % v],
        ];
        let batched = generate(m.as_ref(), &prompts, &greedy(6), |_, _| Flow::Continue);
        for (p, b) in prompts.iter().zip(&batched) {
            let alone = generate(m.as_ref(), std::slice::from_ref(p), &greedy(6), |_, _| {
                Flow::Continue
            });
            assert_eq!(&alone[0], b, "{}: prompt {p:?}", dir.display());
        }
    }
}

#[test]
fn sampling_is_seeded_and_the_same_for_1_and_2_threads() {
    let _guard = crate::common::lock_thread_count();
    let dir = hub_dir().join("llama_gqa_tied");
    let m = load_causal_lm::<f32>(&dir).unwrap();
    let opts = GenerateOptions {
        max_new_tokens: 12,
        sampling: Sampling::Sample {
            temperature: 1.3,
            top_k: Some(20),
            top_p: Some(0.9),
        },
        repetition_penalty: 1.2,
        seed: 7,
        eos_token_ids: vec![],
    };
    let run = || generate(m.as_ref(), &[vec![1, 2, 3]], &opts, |_, _| Flow::Continue);
    let (one, two, _) = crate::common::at_1_and_2_threads(run);
    forge::runtime::set_num_threads(1);
    assert_eq!(one, two);
    let other = generate(
        m.as_ref(),
        &[vec![1, 2, 3]],
        &GenerateOptions {
            seed: 8,
            ..opts.clone()
        },
        |_, _| Flow::Continue,
    );
    assert_ne!(one, other, "another seed, the same 12 tokens");
}

#[test]
fn eos_and_the_callback_stop_generation() {
    let dir = hub_dir().join("gpt2_tiny");
    let m = load_causal_lm::<f64>(&dir).unwrap();
    let free = generate(m.as_ref(), &[vec![3, 4]], &greedy(8), |_, _| Flow::Continue);
    let eos = free[0][2];
    let first = free[0].iter().position(|&x| x == eos).unwrap();
    let opts = GenerateOptions {
        eos_token_ids: vec![eos],
        ..greedy(8)
    };
    let stopped = generate(m.as_ref(), &[vec![3, 4]], &opts, |_, _| Flow::Continue);
    assert_eq!(stopped[0], free[0][..=first].to_vec());
    let mut calls = 0;
    let cut = generate(m.as_ref(), &[vec![3, 4]], &greedy(8), |_, _| {
        calls += 1;
        if calls == 3 {
            Flow::Stop
        } else {
            Flow::Continue
        }
    });
    assert_eq!(cut[0], free[0][..3].to_vec());
}

#[test]
fn bert_hidden_states_and_pooler_match_transformers() {
    let mut n = 0;
    for dir in folders_with("reference.safetensors")
        .into_iter()
        .filter(|d| !is_decoder(d))
    {
        let r = Reference::read(&dir);
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let ids = r.ids("input_ids");
        let mask = r.ids("attention_mask");
        let mask = Tensor::<bool>::from_vec(
            mask.as_slice().iter().map(|&m| m != 0).collect(),
            mask.shape(),
        );
        let types = r.ids("token_type_ids");
        let m64 = Bert::<f64>::from_dir(&dir).unwrap();
        let h = m64.encode(&ids, Some(&mask), Some(&types));
        let w = worst(
            &h,
            &r.f64("last_hidden_state_f64"),
            r.meta("atol"),
            r.meta("rtol"),
        );
        assert!(
            w <= 1.0,
            "{name}: f64 hidden states off by {w} x the tolerance"
        );
        assert_eq!(m64.pooler.is_some(), r.has("pooler_output_f64"), "{name}");
        if let Some(p) = m64.pool(&h) {
            let w = worst(
                &p,
                &r.f64("pooler_output_f64"),
                r.meta("atol"),
                r.meta("rtol"),
            );
            assert!(w <= 1.0, "{name}: f64 pooler off by {w} x the tolerance");
        }
        let m32 = Bert::<f32>::from_dir(&dir).unwrap();
        let h = m32.encode(&ids, Some(&mask), Some(&types));
        let w = worst(&h, &r.f64("last_hidden_state_f32"), r.meta("f32_atol"), 0.0);
        assert!(w <= 1.0, "{name}: f32 hidden states off by {w} x f32_atol");
        n += 1;
    }
    assert!(n >= 2, "only {n} BERT fixtures");
}

#[test]
fn loaded_models_train_save_and_load_back_with_forge_checkpoints() {
    let tmp = std::env::temp_dir().join(format!("forge_hub_ckpt_{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    for dir in folders_with("reference.safetensors")
        .into_iter()
        .filter(|d| !is_decoder(d))
    {
        let bert = Bert::<f64>::from_dir(&dir).unwrap();
        let ids = Tensor::<i64>::from_vec(vec![1, 2, 3], &[1, 3]);
        let h = bert.encode(&ids, None, None);
        // The pooler's tensors take part only through its output.
        let loss = match bert.pool(&h) {
            Some(p) => h.square().mean().add(&p.square().mean()),
            None => h.square().mean(),
        };
        let grads = loss.backward();
        assert_eq!(
            grads.len(),
            bert.parameters().len(),
            "every tensor is trainable"
        );
        let path = tmp.join("bert.safetensors");
        bert.save(&path).unwrap();
        let mut other = Bert::<f64>::from_dir(&dir).unwrap();
        other.encoder.layer[0].output.dense.weight =
            Tensor::zeros(other.encoder.layer[0].output.dense.weight.shape());
        other.load_weights(&path).unwrap();
        assert_eq!(other.state_dict().len(), bert.state_dict().len());
        assert_eq!(
            other.encode(&ids, None, None).to_vec(),
            bert.encode(&ids, None, None).to_vec()
        );
    }
    let dir = hub_dir().join("llama_mha_untied");
    let llama = forge::hub::Llama::<f32>::from_dir(&dir).unwrap();
    let path = tmp.join("llama.safetensors");
    llama.save(&path).unwrap();
    let back = forge::hub::Llama::<f32>::from_dir(&dir)
        .unwrap()
        .loaded(&path)
        .unwrap();
    let ids = Tensor::<i64>::from_vec(vec![1, 2], &[1, 2]);
    assert_eq!(back.logits(&ids).to_vec(), llama.logits(&ids).to_vec());
    std::fs::remove_dir_all(&tmp).ok();
}

#[test]
fn unsupported_checkpoints_fail_with_a_message_that_names_the_option() {
    let tmp = std::env::temp_dir().join(format!("forge_hub_bad_{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let src = hub_dir().join("llama_mha_untied");
    std::fs::copy(src.join("model.safetensors"), tmp.join("model.safetensors")).unwrap();
    let config = std::fs::read_to_string(src.join("config.json")).unwrap();
    for (from, to, named) in [
        (
            "\"model_type\": \"llama\"",
            "\"model_type\": \"falcon\"",
            "falcon",
        ),
        (
            "\"hidden_act\": \"silu\"",
            "\"hidden_act\": \"relu\"",
            "hidden_act",
        ),
        (
            "\"rope_type\": \"default\"",
            "\"rope_type\": \"yarn\"",
            "yarn",
        ),
    ] {
        assert!(config.contains(from), "{from}");
        std::fs::write(tmp.join("config.json"), config.replace(from, to)).unwrap();
        let e = load_causal_lm::<f32>(&tmp).err().expect("refused");
        assert!(e.to_string().contains(named), "{e}");
        assert_eq!(e.kind(), "unsupported", "{e}");
    }
    std::fs::remove_dir_all(&tmp).ok();
}

#[test]
fn tokenizer_ids_match_the_python_tokenizers_package() {
    for dir in folders_with("tokens.json")
        .into_iter()
        .filter(|d| d.join("tokenizer.json").exists())
    {
        let tok = HfTokenizer::from_dir(&dir).unwrap();
        check_tokens(&tok, &dir);
    }
}

pub(crate) fn check_tokens(tok: &HfTokenizer, dir: &std::path::Path) {
    let text = std::fs::read_to_string(dir.join("tokens.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let cases = json["cases"].as_array().unwrap();
    assert!(cases.len() >= 10);
    for c in cases {
        let s = c["text"].as_str().unwrap();
        let special = c["add_special_tokens"].as_bool().unwrap();
        let want: Vec<i64> = c["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_i64().unwrap())
            .collect();
        let got = tok.encode(s, special).unwrap();
        assert_eq!(
            got,
            want,
            "{}: {s:?} (special tokens {special})",
            dir.display()
        );
        assert_eq!(
            tok.decode(&got, true).unwrap(),
            c["decoded"].as_str().unwrap(),
            "{}: {s:?}",
            dir.display()
        );
    }
}
