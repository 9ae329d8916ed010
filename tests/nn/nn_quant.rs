//! Dynamic int8 quantization (`forge::quant`) against PyTorch's
//! `quantize_dynamic` (fbgemm) on the same float32 weights: every fixture
//! in `tests/fixtures/quant/`, read from its metadata. The quantized
//! weights and scales are PyTorch's exactly, and so are the activation
//! scale and zero point; the outputs agree within one quantization step
//! (see `parity_with_pytorch_quantize_dynamic`). Plus int8 checkpoints:
//! stored as `I8`, loaded with `load_weights`.

use crate::common;

use common::{fixtures_with_prefix, Fixture};
use forge::checkpoint::LayerIo;
use forge::io::read_safetensors;
use forge::prelude::*;
use forge::quant::{activation_params, quantize_dynamic, resident_bytes, Granularity};
use forge::DType;

fn granularity(f: &Fixture) -> Granularity {
    match f.meta("granularity") {
        "per_tensor" => Granularity::PerTensor,
        "per_channel" => Granularity::PerChannel,
        other => panic!("{}: granularity {other}", f.name),
    }
}

/// The fixture's float32 layer (weights stored exactly as F64).
fn layer(f: &Fixture) -> Linear<f32> {
    let bias = f.flag("bias").then(|| f.input::<f32>("bias"));
    let fc = Linear::from_weights(f.input::<f32>("weight"), bias).unwrap();
    assert_eq!(
        fc.in_features(),
        f.parse::<usize>("in_features"),
        "{}",
        f.name
    );
    assert_eq!(
        fc.out_features(),
        f.parse::<usize>("out_features"),
        "{}",
        f.name
    );
    fc
}

#[test]
fn parity_with_pytorch_quantize_dynamic() {
    let files = fixtures_with_prefix("quant", "linear");
    assert!(!files.is_empty());
    for file in files {
        let f = Fixture::load(&file);
        assert_eq!(f.meta("op"), "quantize_dynamic_linear", "{file}");
        let mut fc = layer(&f);
        assert_eq!(quantize_dynamic(&mut fc, granularity(&f)), 1);
        let q = fc.int8().unwrap();

        // the weight's integers and scales: PyTorch's, exactly
        let ints: Vec<i64> = q.values().iter().map(|&v| v as i64).collect();
        assert_eq!(ints, f.i("w_int").to_vec(), "{file}: weight integers");
        let scales: Vec<f32> = f.t("w_scale").to_vec().iter().map(|&s| s as f32).collect();
        assert_eq!(q.scales(), scales.as_slice(), "{file}: weight scales");

        // the activation parameters: PyTorch's, exactly
        let x = f.input::<f32>("x");
        let lo = x.as_slice().iter().cloned().fold(f32::INFINITY, f32::min);
        let hi = x
            .as_slice()
            .iter()
            .cloned()
            .fold(f32::NEG_INFINITY, f32::max);
        let (x_scale, x_zp) = activation_params(lo, hi);
        assert_eq!(
            x_scale,
            f.meta_f64("x_scale") as f32,
            "{file}: activation scale"
        );
        assert_eq!(
            x_zp as i64,
            f.parse::<i64>("x_zero_point"),
            "{file}: zero point"
        );

        // the outputs: within one quantization step of the product,
        // x_scale * w_scale[j] (one unit of the i32 accumulator), plus the
        // f32 rounding of the epilogue (2^-20 of the value): the integer
        // sums are the same, the float epilogues differ in their order
        let y = fc.forward(x).to_vec();
        let want = f.t("out").to_vec();
        let n = fc.out_features();
        let mut worst = 0f64;
        for (i, (&a, &b)) in y.iter().zip(&want).enumerate() {
            let step =
                x_scale as f64 * q.scales()[if q.scales().len() == 1 { 0 } else { i % n }] as f64;
            let err = (a as f64 - b).abs();
            assert!(
                err <= step + b.abs() * 2f64.powi(-20),
                "{file}[{i}]: {a} vs {b} (step {step})"
            );
            worst = worst.max(err / step);
        }
        eprintln!("{file}: worst error {worst:.3} quantization steps");
    }
}

#[test]
fn int8_checkpoints_store_bytes_and_load_without_extra_code() {
    let mut rng = Rng::new(3);
    let build = |rng: &mut Rng| {
        sequential![
            Linear::<f32>::new(200, 100, rng),
            Relu,
            Linear::new(100, 5, rng)
        ]
    };
    let mut model = build(&mut rng);
    let x = Tensor::<f32>::normal(&[6, 200], 0.0, 1.0, &mut rng);
    quantize_dynamic(&mut model, Granularity::PerChannel);
    let y = model.forward(x.clone());

    let dir = std::env::temp_dir();
    let int8_path = dir.join(format!(
        "forge-quant-test-{}.safetensors",
        std::process::id()
    ));
    model.save(&int8_path).unwrap();
    let file = read_safetensors(&int8_path).unwrap();
    assert_eq!(file.tensors["0.weight"].dtype(), DType::I8);
    assert_eq!(file.tensors["0.weight"].shape(), &[100, 200]);
    assert_eq!(file.tensors["0.weight_scale"].shape(), &[100]);
    assert_eq!(file.tensors["2.bias"].dtype(), DType::F32);

    // an f32 checkpoint of the same architecture is about 4x larger
    let f32_path = dir.join(format!(
        "forge-quant-test-f32-{}.safetensors",
        std::process::id()
    ));
    build(&mut rng).save(&f32_path).unwrap();
    let (int8_len, f32_len) = (
        std::fs::metadata(&int8_path).unwrap().len(),
        std::fs::metadata(&f32_path).unwrap().len(),
    );
    assert!(int8_len * 3 < f32_len, "{int8_len} vs {f32_len}");

    // loading: a model quantized the same way, then load_weights
    let mut other = build(&mut rng);
    quantize_dynamic(&mut other, Granularity::PerChannel);
    assert_ne!(other.forward(x.clone()).to_vec(), y.to_vec());
    other.load_weights(&int8_path).unwrap();
    assert_eq!(other.forward(x).to_vec(), y.to_vec());
    // a per-tensor model does not take per-channel scales
    let mut per_tensor = build(&mut rng);
    quantize_dynamic(&mut per_tensor, Granularity::PerTensor);
    assert!(per_tensor.load_weights(&int8_path).is_err());
    std::fs::remove_file(&int8_path).unwrap();
    std::fs::remove_file(&f32_path).unwrap();
}

#[test]
fn quantized_layers_freeze_and_switch_modes_unchanged() {
    let mut rng = Rng::new(5);
    let mut fc = Linear::<f32>::new(9, 4, &mut rng);
    quantize_dynamic(&mut fc, Granularity::PerTensor);
    let before = fc.int8().unwrap().values();
    fc.eval();
    fc.freeze();
    assert_eq!(fc.int8().unwrap().values(), before);
    assert_eq!(fc.weight.shape(), &[0, 9]);
    assert_eq!(quantize_dynamic(&mut fc, Granularity::PerTensor), 0);
}

#[test]
fn int8_mlp_holds_under_30_percent_of_the_f32_bytes() {
    let mut mlp = forge::models::mnist::MnistMlp::new(&mut Rng::new(0));
    let f32_bytes = resident_bytes(&mlp);
    assert_eq!(f32_bytes, 535_818 * 4);
    assert_eq!(quantize_dynamic(&mut mlp, Granularity::PerChannel), 3);
    let int8_bytes = resident_bytes(&mlp);
    let ratio = int8_bytes as f64 / f32_bytes as f64;
    eprintln!("MnistMlp resident weights: f32 {f32_bytes} B, int8 {int8_bytes} B ({ratio:.3})");
    assert!(ratio <= 0.30, "{ratio}");
}
