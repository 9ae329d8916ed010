//! Int8 LSTM, GRU and Conv2d (`forge::quant`) against their references:
//! PyTorch's `quantize_dynamic` on `nn.LSTM` / `nn.GRU` (fbgemm), and for
//! Conv2d, which PyTorch cannot quantize dynamically, the integer reference
//! of `tests/fixtures/gen/gen_quant.py`. Every fixture of each op is read
//! from its metadata. Plus the quantized layers as layers: their state dict
//! round trip and their checkpoints.

use crate::common;

use common::{fixtures_for_ops, Fixture};
use forge::checkpoint::LayerIo;
use forge::io::read_safetensors;
use forge::nn::{Conv2d, Gru, Lstm, RnnConfig};
use forge::prelude::*;
use forge::quant::{quantize_dynamic, Granularity};
use forge::DType;
use std::collections::BTreeMap;

fn granularity(f: &Fixture) -> Granularity {
    match f.meta("granularity") {
        "per_tensor" => Granularity::PerTensor,
        "per_channel" => Granularity::PerChannel,
        other => panic!("{}: granularity {other}", f.name),
    }
}

fn rnn_config(f: &Fixture) -> RnnConfig {
    RnnConfig::new(f.parse("input_size"), f.parse("hidden_size"))
        .num_layers(f.parse("num_layers"))
        .bias(f.flag("bias"))
        .batch_first(f.flag("batch_first"))
        .bidirectional(f.flag("bidirectional"))
}

/// The fixture's float32 parameters (`param.<name>`), by name.
fn params(f: &Fixture, model: &impl Layer<f32>) -> BTreeMap<String, Tensor<f32>> {
    model
        .state_dict()
        .into_keys()
        .map(|k| {
            let t = f.input::<f32>(&format!("param.{k}"));
            (k, t)
        })
        .collect()
}

/// The largest error of `got` against the fixture's `name`, in units of
/// `unit`, after checking that it is below `bound` units.
fn check(f: &Fixture, name: &str, got: &Tensor<f32>, unit: f64, bound: f64) -> f64 {
    let want = f.t(name).to_vec();
    let got = got.to_vec();
    assert_eq!(got.len(), want.len(), "{}: {name} length", f.name);
    let mut worst = 0f64;
    for (i, (&a, &b)) in got.iter().zip(&want).enumerate() {
        let err = (a as f64 - b).abs() / unit;
        assert!(
            err <= bound,
            "{}: {name}[{i}] {a} vs {b}: {err:.2} steps > {bound}",
            f.name
        );
        worst = worst.max(err);
    }
    worst
}

/// The recurrent layers' bound. Each int8 product is within one
/// quantization step of PyTorch's (the integer sums are equal; the f32
/// epilogues differ in order), but a state that differs in its last bits
/// can quantize to a neighbouring integer at the next step, and a gate
/// amplifies nothing beyond its slope (at most 1): the outputs stay within
/// a few hidden-state steps. Unit: one activation step of a hidden state in
/// `[-1, 1]` (`2 / 127` times the largest weight scale, `max|w| / 127.5`),
/// i.e. the size of one integer of the hidden projection; bound 4 units
/// (observed: 0.000 to three decimals on every fixture, printed below:
/// the integers agree and the f32 gate arithmetic is the same).
const RNN_BOUND: f64 = 4.0;

fn rnn_unit(model: &impl Layer<f32>) -> f64 {
    let max_scale = model
        .state_dict()
        .iter()
        .filter(|(k, _)| k.ends_with("_scale"))
        .flat_map(|(_, t)| t.to_vec())
        .fold(0f32, f32::max) as f64;
    2.0 / 127.0 * max_scale * 127.5
}

#[test]
fn lstm_parity_with_pytorch_quantize_dynamic() {
    let files = fixtures_for_ops("quant", "", &["quantize_dynamic_lstm"]);
    assert!(files.len() >= 2, "{files:?}");
    for file in files {
        let f = Fixture::load(&file);
        let mut lstm = Lstm::<f32>::new(rnn_config(&f), &mut Rng::new(0));
        lstm.load_state_dict(&params(&f, &lstm)).unwrap();
        assert_eq!(quantize_dynamic(&mut lstm, granularity(&f)), 1);
        let (out, (h_n, c_n)) = no_grad(|| lstm.forward(f.input::<f32>("x")));
        let unit = rnn_unit(&lstm);
        let worst = [("out", &out), ("h_n", &h_n), ("c_n", &c_n)]
            .iter()
            .map(|(n, t)| check(&f, n, t, unit, RNN_BOUND))
            .fold(0f64, f64::max);
        eprintln!("{file}: worst error {worst:.3} units of {unit:.2e}");
    }
}

#[test]
fn gru_parity_with_pytorch_quantize_dynamic() {
    let files = fixtures_for_ops("quant", "", &["quantize_dynamic_gru"]);
    assert!(files.len() >= 2, "{files:?}");
    for file in files {
        let f = Fixture::load(&file);
        let mut gru = Gru::<f32>::new(rnn_config(&f), &mut Rng::new(0));
        gru.load_state_dict(&params(&f, &gru)).unwrap();
        assert_eq!(quantize_dynamic(&mut gru, granularity(&f)), 1);
        let (out, h_n) = no_grad(|| gru.forward(f.input::<f32>("x")));
        let unit = rnn_unit(&gru);
        let worst = [("out", &out), ("h_n", &h_n)]
            .iter()
            .map(|(n, t)| check(&f, n, t, unit, RNN_BOUND))
            .fold(0f64, f64::max);
        eprintln!("{file}: worst error {worst:.3} units of {unit:.2e}");
    }
}

#[test]
fn conv2d_matches_the_integer_reference() {
    let files = fixtures_for_ops("quant", "", &["int8_conv2d"]);
    assert!(files.len() >= 2, "{files:?}");
    for file in files {
        let f = Fixture::load(&file);
        let bias = f.flag("bias").then(|| f.input::<f32>("bias"));
        let mut conv = Conv2d::from_weights(f.input::<f32>("weight"), bias)
            .unwrap()
            .stride(f.meta_pair("stride"))
            .padding(f.meta_pair("padding"))
            .dilation(f.meta_pair("dilation"));
        assert_eq!(conv.in_channels(), f.parse::<usize>("in_channels"));
        assert_eq!(conv.out_channels(), f.parse::<usize>("out_channels"));
        assert_eq!(quantize_dynamic(&mut conv, granularity(&f)), 1);
        let q = conv.int8().unwrap();
        let ints: Vec<i64> = q.values().iter().map(|&v| v as i64).collect();
        assert_eq!(ints, f.i("w_int").to_vec(), "{file}: weight integers");
        let scales: Vec<f32> = f.t("w_scale").to_vec().iter().map(|&s| s as f32).collect();
        assert_eq!(q.scales(), scales.as_slice(), "{file}: weight scales");
        let y = conv.forward(f.input::<f32>("x"));
        // one step of the product (x_scale x the largest w_scale) plus the
        // f32 rounding of the epilogue: the integer sums are the same
        let x_scale = f.meta_f64("x_scale");
        let unit = x_scale * scales.iter().cloned().fold(0f32, f32::max) as f64;
        let worst = check(&f, "out", &y, unit, 1.0);
        eprintln!("{file}: worst error {worst:.3} steps");
    }
}

#[test]
fn quantized_recurrent_and_conv_layers_round_trip_through_checkpoints() {
    let mut rng = Rng::new(11);
    let path = std::env::temp_dir().join(format!(
        "forge-quant-layers-{}.safetensors",
        std::process::id()
    ));
    let cfg = RnnConfig::new(6, 8).num_layers(2).bidirectional(true);

    let mut lstm = Lstm::<f32>::new(cfg, &mut rng);
    quantize_dynamic(&mut lstm, Granularity::PerChannel);
    let x = Tensor::<f32>::normal(&[5, 2, 6], 0.0, 1.0, &mut rng);
    let (y, _) = lstm.forward(x.clone());
    lstm.save(&path).unwrap();
    let file = read_safetensors(&path).unwrap();
    assert_eq!(file.tensors["weight_ih_l1_reverse"].dtype(), DType::I8);
    assert_eq!(file.tensors["weight_ih_l1_reverse"].shape(), &[32, 16]);
    assert_eq!(file.tensors["weight_hh_l0_scale"].shape(), &[32]);
    let mut other = Lstm::<f32>::new(cfg, &mut rng);
    quantize_dynamic(&mut other, Granularity::PerChannel);
    other.load_weights(&path).unwrap();
    assert_eq!(other.forward(x).0.to_vec(), y.to_vec());

    let mut gru = Gru::<f32>::new(cfg, &mut rng);
    quantize_dynamic(&mut gru, Granularity::PerTensor);
    let x = Tensor::<f32>::normal(&[3, 4, 6], 0.0, 1.0, &mut rng);
    let (y, _) = gru.forward(x.clone());
    gru.save(&path).unwrap();
    let mut other = Gru::<f32>::new(cfg, &mut rng);
    quantize_dynamic(&mut other, Granularity::PerTensor);
    other.load_weights(&path).unwrap();
    assert_eq!(other.forward(x).0.to_vec(), y.to_vec());

    let mut conv = Conv2d::<f32>::new(3, 8, 3, &mut rng).padding(1).stride(2);
    quantize_dynamic(&mut conv, Granularity::PerChannel);
    let x = Tensor::<f32>::normal(&[2, 3, 9, 9], 0.0, 1.0, &mut rng);
    let y = conv.forward(x.clone());
    assert_eq!(y.shape(), &[2, 8, 5, 5]);
    conv.save(&path).unwrap();
    let file = read_safetensors(&path).unwrap();
    assert_eq!(file.tensors["weight"].dtype(), DType::I8);
    assert_eq!(file.tensors["weight"].shape(), &[8, 3, 3, 3]);
    let mut other = Conv2d::<f32>::new(3, 8, 3, &mut rng).padding(1).stride(2);
    quantize_dynamic(&mut other, Granularity::PerChannel);
    other.load_weights(&path).unwrap();
    assert_eq!(other.forward(x).to_vec(), y.to_vec());
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn grouped_convolutions_and_elman_rnns_stay_f32() {
    let mut rng = Rng::new(2);
    let mut conv = Conv2d::<f32>::new(4, 4, 3, &mut rng).groups(2);
    assert_eq!(quantize_dynamic(&mut conv, Granularity::PerChannel), 0);
    let mut rnn = forge::nn::Rnn::<f32>::new(RnnConfig::new(3, 4), &mut rng);
    assert_eq!(quantize_dynamic(&mut rnn, Granularity::PerChannel), 0);
}

/// Runs `backward` expecting a panic and returns its message.
fn backward_panic(backward: impl FnOnce()) -> String {
    let Err(err) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(backward)) else {
        panic!("backward through an int8 layer must panic");
    };
    err.downcast_ref::<String>().cloned().unwrap_or_default()
}

#[test]
fn backward_through_int8_recurrent_and_conv_layers_panics_naming_the_layer() {
    let mut rng = Rng::new(12);
    // a trainable f32 layer before each quantized one: without the panic
    // it would silently get no gradient
    let first = Linear::<f32>::new(4, 6, &mut rng);
    let x = Tensor::<f32>::normal(&[5, 2, 4], 0.0, 1.0, &mut rng);
    let cfg = RnnConfig::new(6, 8).batch_first(true);
    let mut lstm = Lstm::<f32>::new(cfg, &mut rng);
    quantize_dynamic(&mut lstm, Granularity::PerTensor);
    let (y, (h, c)) = lstm.forward(first.forward(x.clone()));
    for out in [y, h, c] {
        let msg = backward_panic(|| drop(out.sum().backward()));
        assert!(
            msg.contains("LSTM(6 -> 8) with int8 weights is inference only"),
            "{msg}"
        );
    }
    let plain = no_grad(|| lstm.forward(first.forward(x.clone())).0);
    assert_eq!(
        plain.to_vec(),
        lstm.forward(first.forward(x.clone())).0.to_vec()
    );

    let mut gru = Gru::<f32>::new(cfg.bidirectional(true), &mut rng);
    quantize_dynamic(&mut gru, Granularity::PerChannel);
    let (y, h) = gru.forward(first.forward(x.clone()));
    for out in [y, h] {
        let msg = backward_panic(|| drop(out.sum().backward()));
        assert!(
            msg.contains("GRU(6 -> 8) with int8 weights is inference only"),
            "{msg}"
        );
    }

    let stem = Conv2d::<f32>::new(2, 3, 1, &mut rng);
    let mut conv = Conv2d::<f32>::new(3, 5, 3, &mut rng).padding(1);
    quantize_dynamic(&mut conv, Granularity::PerChannel);
    let img = Tensor::<f32>::normal(&[2, 2, 6, 6], 0.0, 1.0, &mut rng);
    let y = conv.forward(stem.forward(img.clone()));
    let msg = backward_panic(|| drop(y.sum().backward()));
    assert!(
        msg.contains("Conv2d(3 -> 5, kernel [3, 3]) with an int8 weight is inference only"),
        "{msg}"
    );
    // unbatched input takes the same path
    let y = conv.forward(stem.forward(img.narrow(0, 0, 1).view(&[2, 6, 6])));
    assert!(backward_panic(|| drop(y.sum().backward())).contains("inference only"));
    let plain = no_grad(|| conv.forward(stem.forward(img.clone())));
    assert_eq!(plain.to_vec(), conv.forward(stem.forward(img)).to_vec());
}
