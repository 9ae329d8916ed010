//! BERT's inference path (forge/src/hub/bert_infer.rs: attention heads read
//! in place, residual add + layer norm in one pass, and under bf16 autocast
//! the chain of bf16 products) against the composed ops and an f64
//! reference, on every BERT folder of tests/fixtures/hub with a
//! `reference.safetensors` (shapes, ids and masks read from the folder).

use forge::hub::{Bert, HfConfig};
use forge::io::read_safetensors;
use forge::nn::Layer;
use forge::runtime::set_num_threads;
use forge::{autocast, no_grad, DType, Element, Float, Tensor};
use std::path::PathBuf;

/// A BERT fixture: its name, folder, ids, padding mask and token types.
type Fixture = (String, PathBuf, Tensor<i64>, Tensor<bool>, Tensor<i64>);

/// The BERT fixture folders with their inputs.
fn berts() -> Vec<Fixture> {
    let hub = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hub");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(hub)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.join("reference.safetensors").exists()
                && p.join("config.json").exists()
                && HfConfig::from_dir(p).unwrap().model_type().unwrap() == "bert"
        })
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 2, "only {} BERT fixtures", dirs.len());
    dirs.into_iter()
        .map(|dir| {
            let r = read_safetensors(dir.join("reference.safetensors")).unwrap();
            let ids = r.tensors["input_ids"].get::<i64>().unwrap();
            let m = r.tensors["attention_mask"].get::<i64>().unwrap();
            let mask =
                Tensor::<bool>::from_vec(m.as_slice().iter().map(|&v| v != 0).collect(), m.shape());
            let types = r.tensors["token_type_ids"].get::<i64>().unwrap();
            let name = dir.file_name().unwrap().to_string_lossy().to_string();
            (name, dir, ids, mask, types)
        })
        .collect()
}

/// The composed ops' result (recording on: the parameters are tracked, so
/// `encode` takes the op-by-op path) and the inference path's (no_grad).
fn both<E: Float>(
    m: &Bert<E>,
    ids: &Tensor<i64>,
    mask: &Tensor<bool>,
    types: &Tensor<i64>,
) -> (Vec<E>, Vec<E>) {
    assert!(m.parameters().iter().all(|p| p.is_tracked()));
    let composed = m.encode(ids, Some(mask), Some(types)).to_vec();
    let fused = no_grad(|| m.encode(ids, Some(mask), Some(types))).to_vec();
    (composed, fused)
}

#[test]
fn the_inference_path_equals_the_composed_ops_bit_for_bit() {
    for (name, dir, ids, mask, types) in berts() {
        assert!(
            mask.to_vec().contains(&false),
            "{name}: the fixture has no padding to mask"
        );
        let (c, f) = both(&Bert::<f64>::from_dir(&dir).unwrap(), &ids, &mask, &types);
        assert_eq!(c, f, "{name}: f64");
        let (c, f) = both(&Bert::<f32>::from_dir(&dir).unwrap(), &ids, &mask, &types);
        assert_eq!(c, f, "{name}: f32");
    }
}

#[test]
fn int8_inference_path_equals_the_composed_ops_bit_for_bit_on_1_and_2_threads() {
    use forge::quant::{quantize_dynamic, Granularity};
    let _threads = crate::common::lock_thread_count();
    // the inference path quantizes each layer's input once for the query,
    // key and value products: the same bytes as each Linear's own pass
    for (name, dir, ids, mask, types) in berts() {
        for g in [Granularity::PerTensor, Granularity::PerChannel] {
            let mut m = Bert::<f32>::from_dir(&dir).unwrap();
            assert!(
                quantize_dynamic(&mut m, g) >= 6,
                "{name}: layers not quantized"
            );
            // the biases stay tracked: the composed ops run op by op
            assert!(m.parameters().iter().all(|p| p.is_tracked()));
            let composed = m.encode(&ids, Some(&mask), Some(&types)).to_vec();
            for threads in [1, 2] {
                set_num_threads(threads);
                let fused = no_grad(|| m.encode(&ids, Some(&mask), Some(&types))).to_vec();
                set_num_threads(0);
                assert_eq!(composed, fused, "{name}: int8 {g:?}, {threads} threads");
            }
        }
        // an f64 model's int8 layers quantize its input as f32 values
        let mut m = Bert::<f64>::from_dir(&dir).unwrap();
        quantize_dynamic(&mut m, Granularity::PerChannel);
        let (c, f) = both(&m, &ids, &mask, &types);
        assert_eq!(c, f, "{name}: int8 in f64");
    }
}

/// The largest absolute difference over the rows whose mask is true
/// (padded positions attend like any other, but their values are not
/// compared by users).
fn max_err(a: &[f32], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (Element::to_f64(*x) - y).abs())
        .fold(0.0, f64::max)
}

#[test]
fn bf16_autocast_is_within_its_bound_of_f64_and_the_same_bits_for_1_and_2_threads() {
    let _threads = crate::common::lock_thread_count();
    for (name, dir, ids, mask, types) in berts() {
        let exact = no_grad(|| {
            Bert::<f64>::from_dir(&dir)
                .unwrap()
                .encode(&ids, Some(&mask), Some(&types))
        })
        .to_vec();
        let m = Bert::<f32>::from_dir(&dir).unwrap();
        let run = |threads: usize| {
            set_num_threads(threads);
            let y = no_grad(|| autocast(DType::BF16, || m.encode(&ids, Some(&mask), Some(&types))));
            set_num_threads(0);
            y.to_vec()
        };
        let (one, two) = (run(1), run(2));
        assert_eq!(one, two, "{name}: bf16 bits differ between 1 and 2 threads");
        // Every product rounds both inputs to bf16 (relative error 2^-9
        // each); the layer-normed outputs are O(1), so after a few layers
        // the error is a few bf16 steps at 1: 0.05 is ~12 steps of 2^-8
        // and 3x the largest error measured on the fixtures (0.0151 and
        // 0.0168, 2026-12-05).
        let err = max_err(&one, &exact);
        assert!(err > 0.0, "{name}: no bf16 rounding at all");
        assert!(err < 0.05, "{name}: bf16 hidden states off by {err}");
    }
}

#[test]
fn masked_keys_do_not_change_the_bf16_output_of_real_positions() {
    for (name, dir, ids, mask, types) in berts() {
        let m = Bert::<f32>::from_dir(&dir).unwrap();
        let y = no_grad(|| autocast(DType::BF16, || m.encode(&ids, Some(&mask), Some(&types))))
            .to_vec();
        // the padded keys' ids changed: no real position may see it
        let other: Vec<i64> = ids
            .as_slice()
            .iter()
            .zip(mask.as_slice())
            .map(|(&i, &keep)| if keep { i } else { (i + 1) % 5 })
            .collect();
        let other = Tensor::<i64>::from_vec(other, ids.shape());
        let z = no_grad(|| autocast(DType::BF16, || m.encode(&other, Some(&mask), Some(&types))))
            .to_vec();
        let h = y.len() / mask.numel();
        for (r, &keep) in mask.as_slice().iter().enumerate() {
            if keep {
                assert_eq!(
                    y[r * h..(r + 1) * h],
                    z[r * h..(r + 1) * h],
                    "{name}: row {r}"
                );
            }
        }
    }
}
