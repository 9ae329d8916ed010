//! 8-bit float storage (`forge::quant::Fp8Format`, `F8_E4M3` / `F8_E5M2`
//! in safetensors): the conversions against PyTorch's `float8_e4m3fn` /
//! `float8_e5m2` (every fixture of the kind: all 256 bytes decoded, and
//! ties, subnormals, overflow, infinities and NaN encoded), files that
//! round trip bit for bit, and FP8 checkpoints (weights + `<name>_scale`)
//! that load into an f32 model with `load_weights` alone.

use crate::common;

use common::{fixtures_for_ops, Fixture};
use forge::checkpoint::LayerIo;
use forge::io::{read_safetensors, write_safetensors, AnyTensor};
use forge::prelude::*;
use forge::quant::{fp8_tensors, Fp8Format};
use forge::DType;
use std::collections::BTreeMap;

fn format(f: &Fixture) -> Fp8Format {
    match f.meta("format") {
        "e4m3" => Fp8Format::E4M3,
        "e5m2" => Fp8Format::E5M2,
        other => panic!("{}: format {other}", f.name),
    }
}

#[test]
fn conversions_equal_pytorch_bit_for_bit() {
    let files = fixtures_for_ops("quant", "", &["fp8_conversion"]);
    assert!(files.len() >= 2, "{files:?}");
    for file in files {
        let f = Fixture::load(&file);
        let fmt = format(&f);
        for (&b, &want) in f.i("bits").to_vec().iter().zip(&f.t("decoded").to_vec()) {
            let got = fmt.decode(b as u8) as f64;
            assert!(
                got == want || (got.is_nan() && want.is_nan()),
                "{file}: byte {b:#04x} decodes to {got}, torch {want}"
            );
            if !want.is_nan() {
                assert_eq!(
                    got.is_sign_negative(),
                    want.is_sign_negative(),
                    "{file}: {b:#04x}"
                );
            }
        }
        let xs = f.t("x").to_vec();
        let want = f.i("encoded").to_vec();
        assert!(xs.len() > 500, "{file}: {} values", xs.len());
        for (&x, &e) in xs.iter().zip(&want) {
            assert_eq!(
                fmt.encode(x as f32) as i64,
                e,
                "{file}: {x:e} ({:#010x})",
                (x as f32).to_bits()
            );
        }
    }
}

#[test]
fn saturating_encode_never_gives_an_infinity() {
    for (fmt, over) in [
        (Fp8Format::E4M3, [f32::INFINITY, 1e30, 470.0, -1e9]),
        (Fp8Format::E5M2, [f32::INFINITY, 1e30, 60000.0, -1e9]),
    ] {
        for x in over {
            let v = fmt.decode(fmt.encode_saturating(x));
            assert_eq!(v.abs(), fmt.max_finite(), "{fmt:?} {x}");
        }
        assert!(fmt.decode(fmt.encode_saturating(f32::NAN)).is_nan());
    }
    // without saturation E5M2 overflows to infinity, E4M3 saturates
    assert_eq!(
        Fp8Format::E5M2.decode(Fp8Format::E5M2.encode(61440.0)),
        f32::INFINITY
    );
    assert_eq!(
        Fp8Format::E4M3.decode(Fp8Format::E4M3.encode(f32::INFINITY)),
        448.0
    );
}

#[test]
fn fp8_files_round_trip_bit_for_bit() {
    let path =
        std::env::temp_dir().join(format!("forge-fp8-io-{}.safetensors", std::process::id()));
    let bytes: Vec<u8> = (0..=255).collect();
    let mut tensors = BTreeMap::new();
    tensors.insert(
        "a".to_string(),
        AnyTensor::F8E4M3(Tensor::from_vec(bytes.clone(), &[16, 16])),
    );
    tensors.insert(
        "b".to_string(),
        AnyTensor::F8E5M2(Tensor::from_vec(bytes[..255].to_vec(), &[255])),
    );
    tensors.insert(
        "c".to_string(),
        AnyTensor::F32(Tensor::from_vec(vec![1.5], &[])),
    );
    write_safetensors(&path, &tensors, &BTreeMap::new()).unwrap();
    let back = read_safetensors(&path).unwrap();
    assert_eq!(back.tensors["a"].dtype(), DType::F8E4M3);
    assert_eq!(back.tensors["b"].dtype(), DType::F8E5M2);
    assert_eq!(back.tensors, tensors);
    // the header names the types as safetensors does
    let raw = std::fs::read(&path).unwrap();
    let len = u64::from_le_bytes(raw[..8].try_into().unwrap()) as usize;
    let header = String::from_utf8_lossy(&raw[8..8 + len]);
    assert!(
        header.contains("\"F8_E4M3\"") && header.contains("\"F8_E5M2\""),
        "{header}"
    );
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn fp8_checkpoints_load_into_an_f32_model_without_extra_code() {
    let mut rng = Rng::new(4);
    let model = forge::models::mnist::MnistMlp::new(&mut rng);
    let x = Tensor::<f32>::normal(&[8, 784], 0.0, 1.0, &mut rng);
    let exact = no_grad(|| model.forward(x.clone()));
    for fmt in [Fp8Format::E4M3, Fp8Format::E5M2] {
        let path = std::env::temp_dir().join(format!(
            "forge-fp8-ckpt-{fmt:?}-{}.safetensors",
            std::process::id()
        ));
        let tensors = fp8_tensors(&model.state_dict(), fmt);
        write_safetensors(&path, &tensors, &BTreeMap::new()).unwrap();
        let f32_bytes: usize = model.state_dict().values().map(|t| t.numel() * 4).sum();
        let file_len = std::fs::metadata(&path).unwrap().len() as usize;
        assert!(file_len * 3 < f32_bytes, "{file_len} vs {f32_bytes}");

        let mut loaded = forge::models::mnist::MnistMlp::new(&mut Rng::new(9));
        loaded.load_weights(&path).unwrap();
        // every weight is its fp8 value times its scale, exactly
        let file = read_safetensors(&path).unwrap();
        for (name, t) in loaded.state_dict() {
            let stored = &file.tensors[&name];
            if stored.dtype() == DType::F32 {
                assert_eq!(t.to_vec(), stored.to_float::<f32>().to_vec(), "{name}");
                continue;
            }
            let scale = file.tensors[&format!("{name}_scale")]
                .to_float::<f32>()
                .to_vec()[0];
            let want: Vec<f32> = stored
                .to_float::<f32>()
                .to_vec()
                .iter()
                .map(|v| v * scale)
                .collect();
            assert_eq!(t.to_vec(), want, "{name}");
            // and within half a step of the original: relative 2^-4 (E4M3,
            // 3 mantissa bits) or 2^-3 (E5M2), or half the smallest
            // subnormal step times the scale near zero
            let (rel, sub) = match fmt {
                Fp8Format::E4M3 => (2f32.powi(-4), 2f32.powi(-10)),
                Fp8Format::E5M2 => (2f32.powi(-3), 2f32.powi(-17)),
            };
            for (a, b) in t.to_vec().iter().zip(model.state_dict()[&name].to_vec()) {
                assert!(
                    (a - b).abs() <= b.abs() * rel + sub * scale,
                    "{name}: {a} vs {b}"
                );
            }
        }
        let approx = no_grad(|| loaded.forward(x.clone()));
        let err = exact.sub(&approx).abs().max().item();
        eprintln!("MnistMlp with {fmt:?} weights: max logit error {err:.4}");
        assert!(err < 0.5, "{fmt:?}: {err}");
        std::fs::remove_file(&path).unwrap();
    }
}
