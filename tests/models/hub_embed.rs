//! Sentence embeddings on the BERT fixtures (no download needed): pooling
//! over the real tokens only (padding left out of the mean and the max),
//! and the bf16 output.

use forge::half::bf16;
use forge::hub::{Bert, Pooling, SentenceEmbedder};
use forge::Tensor;
use std::path::PathBuf;

fn hub_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hub")
}

/// Every BERT fixture folder (`model_type` bert), sorted.
fn bert_folders() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(hub_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            std::fs::read_to_string(p.join("config.json"))
                .is_ok_and(|c| c.contains("\"model_type\": \"bert\""))
        })
        .collect();
    v.sort();
    assert!(v.len() >= 2, "only {} BERT fixtures", v.len());
    v
}

fn embedder(dir: &std::path::Path) -> SentenceEmbedder<f32> {
    let tok = hub_dir().join("tok_wordpiece/tokenizer.json");
    SentenceEmbedder::<f32>::from_parts(dir, tok).unwrap()
}

/// Sentences of different lengths, so a batch pads all but the longest.
const SENTENCES: [&str; 3] = ["a", "hello world", "the quick brown fox jumps over the dog"];

#[test]
fn pooling_leaves_padding_out_of_the_mean_and_the_max() {
    for dir in bert_folders() {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let mut e = embedder(&dir);
        let h = e.model.config.hidden_size;
        for pooling in [Pooling::Mean, Pooling::Max, Pooling::Cls] {
            e.pooling = pooling;
            let batch = e.embed(&SENTENCES).unwrap();
            for (i, s) in SENTENCES.iter().enumerate() {
                // the sentence alone, pooled here from the hidden state
                let ids = e.tokenizer.encode(s, true).unwrap();
                let t = ids.len();
                let hidden = e.model.encode(&Tensor::from_vec(ids, &[1, t]), None, None);
                let hs = hidden.as_slice();
                let want: Vec<f32> = (0..h)
                    .map(|j| {
                        let col = (0..t).map(|r| hs[r * h + j]);
                        match pooling {
                            Pooling::Mean => col.sum::<f32>() / t as f32,
                            Pooling::Max => col.fold(f32::MIN, f32::max),
                            Pooling::Cls => hs[j],
                        }
                    })
                    .collect();
                let got = &batch.as_slice()[i * h..(i + 1) * h];
                let err = got
                    .iter()
                    .zip(&want)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0f32, f32::max);
                // f32 rounding of 2-layer encoders (values of order 1):
                // padded and unpadded attention sum in different orders,
                // and the sum above is f32 where pool's is f64
                assert!(err <= 1e-5, "{name} {pooling:?} {s:?}: off by {err}");
            }
        }
    }
}

#[test]
fn bf16_embeddings_are_the_f32_ones_rounded_to_nearest() {
    for dir in bert_folders() {
        let mut e = embedder(&dir);
        for normalize in [false, true] {
            e.normalize = normalize;
            let f = e.embed(&SENTENCES).unwrap();
            let b: Tensor<bf16> = e.embed_bf16(&SENTENCES).unwrap();
            assert_eq!(b.shape(), f.shape());
            let mut changed = 0;
            for (&x, &y) in f.as_slice().iter().zip(b.as_slice()) {
                assert_eq!(y, bf16::from_f32(x), "{x} rounds to {}", bf16::from_f32(x));
                // bf16 keeps 8 significant bits: within half a unit of the last
                assert!((y.to_f32() - x).abs() <= x.abs() / 256.0, "{x} vs {y}");
                changed += usize::from(y.to_f32() != x);
            }
            assert!(changed > 0, "nothing was rounded");
        }
    }
}

#[test]
fn a_random_bert_base_shaped_encoder_runs() {
    // The bench's bert_base row builds its model this way; a small one here.
    let mut c = forge::hub::BertConfig::bert_base();
    (c.num_hidden_layers, c.vocab_size) = (1, 64);
    let bert = Bert::<f32>::new(c, true, &mut forge::Rng::new(0));
    let ids = Tensor::<i64>::from_fn(&[2, 5], |i| i as i64);
    let h = bert.encode(&ids, None, None);
    assert_eq!(h.shape(), &[2, 5, 768]);
    assert!(h.as_slice().iter().all(|x| x.is_finite()));
    assert_eq!(bert.pool(&h).unwrap().shape(), &[2, 768]);
}
