//! The `hf` example's command line (examples/hf/cli.rs, included here and
//! run in-process) on the tiny fixtures of tests/fixtures/hub.

#[path = "../../examples/hf/cli.rs"]
mod cli;

use forge::hub::{generate, load_causal_lm, Bert, Flow, GenerateOptions, HfTokenizer};
use forge::io::read_safetensors;
use forge::Tensor;
use std::path::PathBuf;

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hub")
        .join(name)
        .display()
        .to_string()
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("forge_hf_cli_{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn run(args: &[&str]) -> String {
    let mut out = Vec::new();
    let argv: Vec<String> = std::iter::once("hf")
        .chain(args.iter().copied())
        .map(String::from)
        .collect();
    cli::run(&argv, &mut out).unwrap_or_else(|e| panic!("hf {args:?}: {e}"));
    String::from_utf8(out).unwrap()
}

#[test]
fn logits_writes_the_causal_logits_and_the_encoder_state() {
    let out = tmp("logits.safetensors");
    let o = out.to_str().unwrap();
    let dir = fixture("llama_gqa_tied");
    run(&["logits", "--model", &dir, "--ids", "3,1,4", "--out", o]);
    let f = read_safetensors(&out).unwrap();
    let got = f.tensors["logits"].get::<f32>().unwrap();
    let want = load_causal_lm::<f32>(&dir)
        .unwrap()
        .logits(&Tensor::from_vec(vec![3, 1, 4], &[1, 3]));
    assert_eq!(got.shape(), &[3, 64]);
    assert_eq!(got.to_vec(), want.to_vec());
    run(&[
        "logits", "--model", &dir, "--ids", "3,1,4", "--out", o, "--f64",
    ]);
    let f64_run = read_safetensors(&out).unwrap().tensors["logits"]
        .get::<f32>()
        .unwrap();
    let d = f64_run
        .as_slice()
        .iter()
        .zip(want.as_slice())
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(d < 1e-4 && d > 0.0, "f64 run differs by {d}");
    let bert = fixture("bert_pooler");
    run(&["logits", "--model", &bert, "--ids", "5,6", "--out", o]);
    let f = read_safetensors(&out).unwrap();
    let h = f.tensors["last_hidden_state"].get::<f32>().unwrap();
    let want = Bert::<f32>::from_dir(&bert).unwrap().encode(
        &Tensor::from_vec(vec![5, 6], &[1, 2]),
        None,
        None,
    );
    assert_eq!(h.shape(), &[2, 16]);
    assert_eq!(h.to_vec(), want.to_vec());
}

#[test]
fn generate_streams_text_and_lists_the_new_ids() {
    let dir = fixture("gpt2_tiny");
    let model = load_causal_lm::<f32>(&dir).unwrap();
    let tok = HfTokenizer::from_dir(&dir).unwrap();
    let prompt = tok.encode("The quick brown", true).unwrap();
    let opts = GenerateOptions {
        max_new_tokens: 6,
        ..Default::default()
    };
    let want = generate(
        model.as_ref(),
        std::slice::from_ref(&prompt),
        &opts,
        |_, _| Flow::Continue,
    )
    .remove(0);
    // No end token among these: --eos picks one that never comes.
    let out = run(&[
        "generate",
        "--model",
        &dir,
        "--prompt",
        "The quick brown",
        "--max-new-tokens",
        "6",
        "--greedy",
        "--eos",
        "299",
    ]);
    let want_ids: Vec<String> = want.iter().map(|i| i.to_string()).collect();
    let last = out.lines().last().unwrap();
    assert_eq!(last, format!("ids: {}", want_ids.join(",")), "{out}");
    let text: String = out
        .lines()
        .take(out.lines().count() - 1)
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(text, tok.decode(&want, true).unwrap());
    // An end token stops it and is listed.
    let eos = want[2].to_string();
    let out = run(&[
        "generate",
        "--model",
        &dir,
        "--ids",
        &prompt
            .iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(","),
        "--max-new-tokens",
        "6",
        "--eos",
        &eos,
    ]);
    let n = want.iter().position(|t| t.to_string() == eos).unwrap();
    assert_eq!(
        out.lines().last().unwrap(),
        format!("ids: {}", want_ids[..=n].join(","))
    );
    // Seeded sampling repeats.
    let args = [
        "generate",
        "--model",
        &dir,
        "--ids",
        "5,6",
        "--max-new-tokens",
        "8",
        "--temperature",
        "1.5",
        "--top-k",
        "50",
        "--top-p",
        "0.95",
        "--seed",
        "3",
    ];
    assert_eq!(run(&args), run(&args));
}

#[test]
fn embed_writes_one_json_line_per_input_line() {
    // A sentence-transformers folder: the BERT fixture, a WordPiece
    // tokenizer of the same vocabulary size and modules.json with CLS
    // pooling and normalisation.
    let dir = tmp("st_model");
    std::fs::create_dir_all(dir.join("1_Pooling")).unwrap();
    let bert = PathBuf::from(fixture("bert_pooler"));
    for f in ["config.json", "model.safetensors"] {
        std::fs::copy(bert.join(f), dir.join(f)).unwrap();
    }
    std::fs::copy(
        PathBuf::from(fixture("tok_wordpiece")).join("tokenizer.json"),
        dir.join("tokenizer.json"),
    )
    .unwrap();
    std::fs::write(dir.join("modules.json"), r#"[{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},
        {"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"},
        {"idx":2,"name":"2","path":"2_Normalize","type":"sentence_transformers.models.Normalize"}]"#).unwrap();
    std::fs::write(dir.join("1_Pooling/config.json"), r#"{"word_embedding_dimension": 16, "pooling_mode_cls_token": true,
        "pooling_mode_mean_tokens": false, "pooling_mode_max_tokens": false, "pooling_mode_mean_sqrt_len_tokens": false}"#).unwrap();
    let input = tmp("sentences.txt");
    std::fs::write(&input, "hello world\n\nthe fox\n").unwrap();
    let out = run(&[
        "embed",
        "--model",
        dir.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
    ]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    let tok = HfTokenizer::from_dir(&dir).unwrap();
    let model = Bert::<f32>::from_dir(&dir).unwrap();
    for (line, s) in lines.iter().zip(["hello world", "", "the fox"]) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let got: Vec<f64> = v["embedding"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        let ids = tok.encode(s, true).unwrap();
        let h = model.encode(&Tensor::from_vec(ids.clone(), &[1, ids.len()]), None, None);
        let cls = &h.as_slice()[..16];
        let norm = cls.iter().map(|x| x * x).sum::<f32>().sqrt();
        for (g, w) in got.iter().zip(cls) {
            assert!(
                (g - f64::from(w / norm)).abs() < 1e-5,
                "{s:?}: {g} vs {}",
                w / norm
            );
        }
    }
    // --bf16: the same embeddings rounded to bf16 (each value's low 16
    // bits as f32 are zero, and it is within half a bf16 unit of the f32
    // value: 8 significant bits, so a relative 2^-8 at most; the 1.0001
    // covers the f32 output's shortest decimal form).
    let out16 = run(&[
        "embed",
        "--model",
        dir.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
        "--bf16",
    ]);
    let values = |line: &str| -> Vec<f64> {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        v["embedding"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    };
    assert_eq!(out16.lines().count(), 3, "{out16}");
    let mut rounded = 0;
    for (l32, l16) in out.lines().zip(out16.lines()) {
        for (a, b) in values(l32).iter().zip(values(l16)) {
            let b32 = b as f32;
            assert_eq!(b32.to_bits() & 0xFFFF, 0, "{b} is not a bf16 value");
            assert!(
                (a - b).abs() <= a.abs() * 2f64.powi(-8) * 1.0001,
                "{a} -> {b}"
            );
            rounded += usize::from(*a != b);
        }
    }
    assert!(rounded > 0, "--bf16 changed nothing");
    // Without a final newline the last line still counts; an empty file has none.
    std::fs::write(&input, "a\nb").unwrap();
    assert_eq!(
        run(&[
            "embed",
            "--model",
            dir.to_str().unwrap(),
            "--input",
            input.to_str().unwrap()
        ])
        .lines()
        .count(),
        2
    );
    std::fs::write(&input, "").unwrap();
    assert_eq!(
        run(&[
            "embed",
            "--model",
            dir.to_str().unwrap(),
            "--input",
            input.to_str().unwrap()
        ])
        .lines()
        .count(),
        0
    );
}
