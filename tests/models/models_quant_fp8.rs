//! Models with fp8-resident weights (`forge::quant::to_fp8`): every
//! reference model's `Linear`, `Conv2d`, `Lstm` and `Gru` layers converted
//! to 8-bit float bytes with `f32` scales give, bit for bit, the outputs
//! of the f32 model whose
//! weights are the dequantized values (`decode(byte) x scale`, rounded
//! once), at 1 and 2 threads; they save as an FP8 checkpoint (`F8_E4M3` /
//! `F8_E5M2` + `weight_scale`) that loads straight back (and into a plain
//! f32 model); damaged files give a `ForgeError`; `summary` shows the
//! 8-bit dtype and bytes; a backward pass through an fp8 layer panics.

use forge::checkpoint::LayerIo;
use forge::hub::{load_gpt2, Bert, CausalLm};
use forge::io::{read_safetensors, write_safetensors, AnyTensor};
use forge::models::gpt::{Gpt, GptConfig};
use forge::models::mnist::{LeNet5, MnistMlp};
use forge::models::resnet::resnet18;
use forge::nn::{summary, Conv2d, Gru, Layer, Lstm, RnnConfig};
use forge::prelude::*;
use forge::quant::{resident_bytes, to_fp8, Fp8Format, Granularity};
use forge::DType;
use std::collections::BTreeMap;
use std::path::PathBuf;

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "forge-models-fp8-{name}-{}.safetensors",
        std::process::id()
    ))
}

/// The state-dict names of an fp8 model's weight scales: `<w>_scale` for
/// a weight `<w>` (`weight`, `weight_ih_l0`, ...).
fn scale_keys(dict: &BTreeMap<String, Tensor<f32>>) -> Vec<String> {
    dict.keys()
        .filter(|k| {
            k.strip_suffix("_scale")
                .is_some_and(|w| w.rsplit('.').next().unwrap().starts_with("weight"))
        })
        .cloned()
        .collect()
}

/// The f32 state dict equivalent to an fp8 model's: each fp8 weight's
/// decoded values (exact) times its scale (one f32 rounding, as the
/// packing step computes it), the `_scale` entries dropped.
fn dequantized_dict<L: Layer<f32>>(model: &L) -> BTreeMap<String, Tensor<f32>> {
    let mut dict = model.state_dict();
    for s in scale_keys(&dict) {
        let scale = dict.remove(&s).unwrap();
        let w = s.strip_suffix("_scale").unwrap().to_string();
        let values = &dict[&w];
        // one scale per output row (dimension 0), broadcast over the rest
        let mut shape = vec![1; values.rank()];
        shape[0] = scale.numel();
        dict.insert(w, values.mul(&scale.reshape(&shape[..])));
    }
    dict
}

/// Converts `build()`'s model to fp8 (`expect` layers) with `format` and
/// `granularity`, and checks: its outputs equal the dequantized f32
/// model's (`==`, without autograd recording and with it, each against
/// the f32 model run the same way, 1 and 2 threads: the caller holds the
/// thread-count lock); its checkpoint holds 8-bit float weights, loads
/// into a fresh fp8 model and into a plain f32 model with the same
/// outputs; it is near the original f32 model (`tol`, relative to the
/// largest output). Returns the fp8 model's resident bytes over the f32
/// model's.
fn check_model<L: Layer<f32>>(
    name: &str,
    build: impl Fn() -> L,
    run: impl Fn(&L) -> Tensor<f32>,
    expect: usize,
    format: Fp8Format,
    granularity: Granularity,
    tol: f32,
) -> f64 {
    let mut model = build();
    let exact = no_grad(|| run(&model));
    let f32_bytes = resident_bytes(&model);
    assert_eq!(to_fp8(&mut model, format, granularity), expect, "{name}");
    let fp8_bytes = resident_bytes(&model);
    assert!(fp8_bytes < f32_bytes, "{name}: {fp8_bytes} vs {f32_bytes}");

    let mut reference = build();
    reference
        .load_state_dict(&dequantized_dict(&model))
        .unwrap();
    let mut out = None;
    for threads in [1, 2] {
        forge::runtime::set_num_threads(threads);
        let y = no_grad(|| run(&model));
        assert!(
            y.to_vec() == no_grad(|| run(&reference)).to_vec(),
            "{name} {format:?} {granularity:?}: fp8 vs dequantized f32, {threads} threads"
        );
        // with autograd recording (the f32 layer then packs its weight in
        // the call instead of using its cached panels, and a convolution
        // runs im2col + gemm instead of the direct kernel: the same bits
        // as the f32 model recording)
        assert!(
            run(&model).detach().to_vec() == run(&reference).detach().to_vec(),
            "{name} {format:?} {granularity:?}: recording, {threads} threads"
        );
        out = Some(y);
    }
    let approx = out.unwrap();
    let scale = exact.abs().max().item().max(1e-6);
    let err = exact.sub(&approx).abs().max().item() / scale;
    eprintln!(
        "{name} {format:?} {granularity:?}: {expect} layers, max error {err:.4} of the largest output, {:.3} of the f32 bytes",
        fp8_bytes as f64 / f32_bytes as f64
    );
    assert!(err <= tol, "{name}: {err}");

    let n_weights = scale_keys(&model.state_dict()).len();
    let path = temp(name);
    model.save(&path).unwrap();
    let file = read_safetensors(&path).unwrap();
    let fp8_dtype = match format {
        Fp8Format::E4M3 => DType::F8E4M3,
        Fp8Format::E5M2 => DType::F8E5M2,
    };
    let n8 = file
        .tensors
        .values()
        .filter(|t| t.dtype() == fp8_dtype)
        .count();
    assert_eq!(n8, n_weights, "{name}: 8-bit float tensors in the file");
    assert!(n_weights >= expect, "{name}: {n_weights} fp8 weights");
    // into a fresh fp8 model of the other format: the file's bytes and
    // format are taken as they are
    let mut other = build();
    let other_format = match format {
        Fp8Format::E4M3 => Fp8Format::E5M2,
        Fp8Format::E5M2 => Fp8Format::E4M3,
    };
    to_fp8(&mut other, other_format, Granularity::PerTensor);
    other.load_weights(&path).unwrap();
    assert!(
        no_grad(|| run(&other)).to_vec() == approx.to_vec(),
        "{name}: reloaded fp8"
    );
    // each state dict decodes every fp8 weight: build both once (inside
    // the loop, ResNet-18's 100-odd keys made this test take ~2 minutes)
    let (theirs, ours) = (other.state_dict(), model.state_dict());
    assert_eq!(theirs.len(), ours.len());
    for (k, v) in theirs {
        assert!(v.to_vec() == ours[&k].to_vec(), "{name}: {k}");
    }
    // into the f32 model: dequantized on loading, the same outputs
    let mut plain = build();
    plain.load_weights(&path).unwrap();
    assert!(
        no_grad(|| run(&plain)).to_vec() == approx.to_vec(),
        "{name}: fp8 file into the f32 model"
    );
    std::fs::remove_file(&path).unwrap();
    fp8_bytes as f64 / f32_bytes as f64
}

// Tolerances: E4M3 keeps 3 mantissa bits (a relative error of at most
// 1/16 per weight), E5M2 2 bits (1/8); the outputs are sums of many such
// products with errors of both signs, and the bounds (5% / 10% of the
// largest output for E4M3, twice that for E5M2, the deep models more)
// are several times what is observed (printed).

#[test]
fn mlp_and_lenet_run_with_fp8_weights() {
    // the thread count is set in check_model: no other test may change it
    let _threads = crate::common::lock_thread_count();
    let x = Tensor::<f32>::uniform(&[5, 1, 28, 28], 0.0, 1.0, &mut Rng::new(1));
    let xf = x.view(&[5, 784]);
    for (format, granularity, tol) in [
        (Fp8Format::E4M3, Granularity::PerChannel, 0.05),
        (Fp8Format::E5M2, Granularity::PerTensor, 0.10),
    ] {
        check_model(
            "mlp",
            || MnistMlp::new(&mut Rng::new(0)),
            |m| m.forward(xf.clone()),
            3,
            format,
            granularity,
            tol,
        );
        // LeNet-5: its 2 convolutions and 3 Linear layers
        let ratio = check_model(
            "lenet",
            || LeNet5::new(&mut Rng::new(0)),
            |m| m.forward(x.clone()),
            5,
            format,
            granularity,
            tol,
        );
        assert!(ratio <= 0.30, "lenet: {ratio} of the f32 bytes");
    }
}

#[test]
fn gpt_and_hub_models_run_with_fp8_weights() {
    // the thread count is set in check_model: no other test may change it
    let _threads = crate::common::lock_thread_count();
    let cfg = GptConfig {
        vocab_size: 64,
        block_size: 16,
        n_layer: 2,
        n_head: 2,
        n_embd: 48,
        bias: true,
    };
    let ids = Tensor::<i64>::from_vec((0..26).map(|i| (i * 7) % 64).collect(), &[2, 13]);
    check_model(
        "gpt",
        || Gpt::<f32>::new(cfg, &mut Rng::new(0)),
        |m| m.logits(&ids),
        8,
        Fp8Format::E4M3,
        Granularity::PerChannel,
        0.10,
    );
    // one row: the matrix-vector path
    let one = Tensor::<i64>::from_vec(vec![3], &[1, 1]);
    check_model(
        "gpt_one_token",
        || Gpt::<f32>::new(cfg, &mut Rng::new(0)),
        |m| m.logits(&one),
        8,
        Fp8Format::E4M3,
        Granularity::PerTensor,
        0.10,
    );
    let hub = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hub");
    let ids = Tensor::<i64>::from_vec(vec![5, 6, 7, 8, 9, 10], &[2, 3]);
    let bert_dir = hub.join("bert_pooler");
    let build = || Bert::<f32>::from_dir(&bert_dir).unwrap();
    let n_bert = to_fp8(&mut build(), Fp8Format::E4M3, Granularity::PerChannel);
    assert!(n_bert >= 7, "{n_bert}");
    check_model(
        "bert",
        build,
        |m| m.encode(&ids, None, None),
        n_bert,
        Fp8Format::E4M3,
        Granularity::PerChannel,
        0.10,
    );
    let gpt2_dir = hub.join("gpt2_tiny");
    let build = || load_gpt2::<f32>(&gpt2_dir).unwrap();
    let n_gpt2 = to_fp8(&mut build(), Fp8Format::E4M3, Granularity::PerChannel);
    assert!(n_gpt2 >= 4, "{n_gpt2}");
    check_model(
        "gpt2",
        build,
        |m| m.logits(&ids),
        n_gpt2,
        Fp8Format::E4M3,
        Granularity::PerChannel,
        0.10,
    );
}

#[test]
fn summary_shows_fp8_layers_with_their_bytes() {
    let mut model = MnistMlp::new(&mut Rng::new(0));
    let before = summary(&model, &[2, 784]);
    to_fp8(&mut model, Fp8Format::E4M3, Granularity::PerChannel);
    let s = summary(&model, &[2, 784]);
    assert_eq!(s.bytes, resident_bytes(&model));
    let fc = s.rows.iter().find(|r| r.type_name == "Linear").unwrap();
    let fc_before = before.rows.iter().find(|r| r.path == fc.path).unwrap();
    assert!(fc.dtypes.contains("float8_e4m3"), "{}", fc.dtypes);
    assert!(
        fc.bytes * 3 < fc_before.bytes,
        "{} vs {}",
        fc.bytes,
        fc_before.bytes
    );
    // the 8-bit values and their scales count as frozen elements
    assert_eq!(
        s.trainable + s.frozen,
        before.trainable + before.frozen + 512 + 256 + 10
    );
    assert!(s.to_string().contains("float8_e4m3"), "{s}");
}

#[test]
fn fp8_layers_are_frozen_and_refuse_backward() {
    let mut fc = Linear::<f32>::new(8, 40, &mut Rng::new(0));
    to_fp8(&mut fc, Fp8Format::E4M3, Granularity::PerChannel);
    // the weight is not a parameter: only the bias is
    assert_eq!(fc.parameters().len(), 1);
    let x = Tensor::<f32>::normal(&[3, 8], 0.0, 1.0, &mut Rng::new(1));
    let y = fc.forward(x.clone().requires_grad());
    let Err(err) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| y.sum().backward()))
    else {
        panic!("backward through an fp8 layer returned");
    };
    let msg = err
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(msg.contains("fp8 weight is inference only"), "{msg}");
    // under no_grad nothing is recorded
    assert!(!no_grad(|| fc.forward(x.requires_grad())).is_tracked());
}

fn unchanged<L: Layer<f32>>(m: &L, before: &BTreeMap<String, Tensor<f32>>) {
    for (k, v) in m.state_dict() {
        assert!(
            v.to_vec() == before[&k].to_vec(),
            "{k} changed by a failed load"
        );
    }
}

#[test]
fn damaged_fp8_checkpoints_give_errors() {
    let mut rng = Rng::new(0);
    let mut model = sequential![
        Linear::<f32>::new(6, 40, &mut rng),
        Relu,
        Linear::new(40, 3, &mut rng)
    ];
    to_fp8(&mut model, Fp8Format::E4M3, Granularity::PerChannel);
    let path = temp("damaged");
    model.save(&path).unwrap();
    let good = read_safetensors(&path).unwrap().tensors;
    let fresh = || {
        let mut m = sequential![
            Linear::<f32>::new(6, 40, &mut Rng::new(5)),
            Relu,
            Linear::new(40, 3, &mut Rng::new(6))
        ];
        to_fp8(&mut m, Fp8Format::E4M3, Granularity::PerChannel);
        m
    };
    let before = fresh().state_dict();
    let write =
        |t: &BTreeMap<String, AnyTensor>| write_safetensors(&path, t, &BTreeMap::new()).unwrap();

    // a weight of the wrong shape
    let mut t = good.clone();
    t.insert(
        "0.weight".into(),
        AnyTensor::F8E4M3(Tensor::from_vec(vec![0x38; 40 * 5], &[40, 5])),
    );
    write(&t);
    let mut m = fresh();
    let e = m.load_weights(&path).unwrap_err();
    assert!(matches!(e, ForgeError::StateDict { .. }), "{e}");
    unchanged(&m, &before);

    // a scale that is neither one value nor one per row
    let mut t = good.clone();
    t.insert(
        "0.weight_scale".into(),
        AnyTensor::F32(Tensor::from_vec(vec![1.0; 7], &[7, 1])),
    );
    write(&t);
    let mut m = fresh();
    let e = m.load_weights(&path).unwrap_err();
    assert!(matches!(e, ForgeError::Shape { .. }), "{e}");
    unchanged(&m, &before);

    // a scale of integers
    let mut t = good.clone();
    t.insert(
        "2.weight_scale".into(),
        AnyTensor::I64(Tensor::from_vec(vec![1; 3], &[3, 1])),
    );
    write(&t);
    let mut m = fresh();
    let e = m.load_weights(&path).unwrap_err();
    assert!(matches!(e, ForgeError::DType { .. }), "{e}");
    unchanged(&m, &before);

    // a missing weight, an unexpected tensor
    let mut t = good.clone();
    t.remove("2.weight");
    t.insert(
        "extra".into(),
        AnyTensor::F32(Tensor::from_vec(vec![1.0], &[1])),
    );
    write(&t);
    let mut m = fresh();
    match m.load_weights(&path).unwrap_err() {
        ForgeError::StateDict {
            missing,
            unexpected,
            ..
        } => {
            assert!(missing.contains(&"2.weight".to_string()), "{missing:?}");
            assert!(unexpected.contains(&"extra".to_string()), "{unexpected:?}");
        }
        e => panic!("{e}"),
    }
    unchanged(&m, &before);

    // a truncated file
    write(&good);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 10]).unwrap();
    let mut m = fresh();
    assert!(m.load_weights(&path).is_err());
    unchanged(&m, &before);

    // an f32 checkpoint loads into the fp8 model, quantized as it was
    let f32_model = sequential![
        Linear::<f32>::new(6, 40, &mut Rng::new(8)),
        Relu,
        Linear::new(40, 3, &mut Rng::new(9))
    ];
    f32_model.save(&path).unwrap();
    let mut m = fresh();
    m.load_weights(&path).unwrap();
    let mut want = sequential![
        Linear::<f32>::new(6, 40, &mut Rng::new(8)),
        Relu,
        Linear::new(40, 3, &mut Rng::new(9))
    ];
    to_fp8(&mut want, Fp8Format::E4M3, Granularity::PerChannel);
    for (k, v) in m.state_dict() {
        assert!(v.to_vec() == want.state_dict()[&k].to_vec(), "{k}");
    }
    std::fs::remove_file(&path).unwrap();
}

/// Median milliseconds of `runs` calls of `f`.
fn median_ms(runs: usize, mut f: impl FnMut()) -> f64 {
    let mut t: Vec<f64> = (0..runs)
        .map(|_| {
            let start = std::time::Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[runs / 2]
}

/// One row of the fp8 speed and memory table: the `Linear` layers of
/// `shapes` (`(in, out)`, each applied to its own input of `rows` rows, as
/// the layers of one transformer block are), in f32 and in fp8 E4M3 per
/// channel, timed alternately (median of 15 after 3 warm-up calls, under
/// `no_grad`: the f32 layers use their cached packed weights).
fn speed_row(name: &str, rows: usize, shapes: &[(usize, usize)]) {
    let mut rng = Rng::new(0);
    let f32_layers: Vec<Linear> = shapes
        .iter()
        .map(|&(i, o)| Linear::new(i, o, &mut rng))
        .collect();
    let mut fp8_layers = f32_layers.clone();
    for l in &mut fp8_layers {
        to_fp8(l, Fp8Format::E4M3, Granularity::PerChannel);
    }
    let inputs: Vec<Tensor<f32>> = shapes
        .iter()
        .map(|&(i, _)| Tensor::normal(&[rows, i], 0.0, 1.0, &mut rng))
        .collect();
    let bytes = |ls: &[Linear]| ls.iter().map(resident_bytes).sum::<usize>();
    let run = |ls: &[Linear]| {
        no_grad(|| {
            for (l, x) in ls.iter().zip(&inputs) {
                std::hint::black_box(l.forward(x.clone()));
            }
        })
    };
    for _ in 0..3 {
        run(&f32_layers);
        run(&fp8_layers);
    }
    let (mut tf, mut t8) = (Vec::new(), Vec::new());
    for _ in 0..15 {
        tf.push(median_ms(1, || run(&f32_layers)));
        t8.push(median_ms(1, || run(&fp8_layers)));
    }
    tf.sort_by(f64::total_cmp);
    t8.sort_by(f64::total_cmp);
    let (bf, b8) = (bytes(&f32_layers), bytes(&fp8_layers));
    eprintln!(
        "| {name} | {rows} | {bf} | {b8} | {:.3} | {:.3} | {:.3} | {:.2} |",
        b8 as f64 / bf as f64,
        tf[7],
        t8[7],
        t8[7] / tf[7]
    );
}

#[test]
#[ignore = "times BERT-base and GPT-2-small-shaped Linear stacks in f32 and fp8 (about a minute): the fp8 speed and memory table of docs/src/quantization.md"]
fn fp8_resident_bytes_and_speed() {
    let threads = forge::runtime::num_threads();
    eprintln!("threads: {threads}");
    eprintln!(
        "| layers | rows | f32 bytes | fp8 bytes | fp8 / f32 | f32 ms | fp8 ms | fp8 / f32 time |"
    );
    eprintln!("|---|---|---|---|---|---|---|---|");
    let mlp = [(784, 512), (512, 256), (256, 10)];
    speed_row("MLP (784-512-256-10)", 128, &mlp);
    let bert = [
        (768, 768),
        (768, 768),
        (768, 768),
        (768, 768),
        (768, 3072),
        (3072, 768),
    ];
    speed_row("BERT-base block", 8 * 128, &bert);
    let gpt2 = [(768, 2304), (768, 768), (768, 3072), (3072, 768)];
    speed_row("GPT-2 small block", 64, &gpt2);
    speed_row("GPT-2 small block", 1, &gpt2);
}

/// The panic message of `f`, which must panic.
fn panic_message(f: impl FnOnce()) -> String {
    let Err(err) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) else {
        panic!("expected a panic");
    };
    err.downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

// ResNet-18 is 20 convolutions deep (plus the classifier): the rounding of
// every layer's weights adds up, hence the wider bounds (observed values
// are printed by check_model).

#[test]
fn resnet18_runs_with_fp8_weights() {
    // the thread count is set in check_model: no other test may change it
    let _threads = crate::common::lock_thread_count();
    let build = || {
        let mut m = resnet18::<f32>(10, &mut Rng::new(0));
        m.eval();
        m
    };
    // batch 1 (the direct kernel, the batch norms folded into it) and
    // batch 3 at 48x48 (im2col + gemm for the early layers)
    let one = Tensor::<f32>::uniform(&[1, 3, 32, 32], -1.0, 1.0, &mut Rng::new(1));
    let three = Tensor::<f32>::uniform(&[3, 3, 48, 48], -1.0, 1.0, &mut Rng::new(2));
    for (x, format, granularity, tol) in [
        (&one, Fp8Format::E4M3, Granularity::PerChannel, 0.15),
        (&three, Fp8Format::E5M2, Granularity::PerTensor, 0.30),
    ] {
        let ratio = check_model(
            "resnet18",
            build,
            |m| m.forward(x.clone()),
            21,
            format,
            granularity,
            tol,
        );
        assert!(ratio <= 0.30, "resnet18: {ratio} of the f32 bytes");
    }
}

/// The outputs and final states of a recurrent layer, as one vector.
fn flat(parts: &[&Tensor<f32>]) -> Tensor<f32> {
    let flats: Vec<Tensor<f32>> = parts.iter().map(|t| t.flatten(0, -1)).collect();
    let refs: Vec<&Tensor<f32>> = flats.iter().collect();
    Tensor::cat(&refs, 0)
}

#[test]
fn lstm_and_gru_run_with_fp8_weights() {
    // the thread count is set in check_model: no other test may change it
    let _threads = crate::common::lock_thread_count();
    let x = Tensor::<f32>::uniform(&[7, 3, 32], -1.0, 1.0, &mut Rng::new(1));
    // two stacked bidirectional layers, and one batch-first layer; under
    // no_grad the LSTM runs its projected path (the weights packed for the
    // call), recording the time-major loop. Hidden size 64: the biases and
    // the per-row scales (f32) are a small share of the bytes
    let configs = [
        RnnConfig::new(32, 64).num_layers(2).bidirectional(true),
        RnnConfig::new(32, 64).batch_first(true),
    ];
    for (cfg, format, granularity, tol) in [
        (configs[0], Fp8Format::E4M3, Granularity::PerChannel, 0.10),
        (configs[1], Fp8Format::E5M2, Granularity::PerTensor, 0.20),
    ] {
        let ratio = check_model(
            "lstm",
            || Lstm::<f32>::new(cfg, &mut Rng::new(0)),
            |m| {
                let (y, (h, c)) = m.forward(x.clone());
                flat(&[&y, &h, &c])
            },
            1,
            format,
            granularity,
            tol,
        );
        assert!(ratio <= 0.30, "lstm: {ratio} of the f32 bytes");
        let ratio = check_model(
            "gru",
            || Gru::<f32>::new(cfg, &mut Rng::new(0)),
            |m| {
                let (y, h) = m.forward(x.clone());
                flat(&[&y, &h])
            },
            1,
            format,
            granularity,
            tol,
        );
        assert!(ratio <= 0.30, "gru: {ratio} of the f32 bytes");
    }
}

#[test]
fn fp8_convolutions_and_recurrent_layers_refuse_backward() {
    let mut rng = Rng::new(3);
    let mut conv = Conv2d::<f32>::new(3, 8, 3, &mut rng);
    to_fp8(&mut conv, Fp8Format::E4M3, Granularity::PerChannel);
    assert_eq!(conv.parameters().len(), 1, "only the bias is a parameter");
    let img = Tensor::<f32>::normal(&[2, 3, 6, 6], 0.0, 1.0, &mut rng).requires_grad();
    let y = conv.forward(img.clone());
    let msg = panic_message(|| {
        y.sum().backward();
    });
    assert!(
        msg.contains("Conv2d(3 -> 8, kernel [3, 3]) with an fp8 weight is inference only"),
        "{msg}"
    );
    assert!(!no_grad(|| conv.forward(img.clone())).is_tracked());

    let x = Tensor::<f32>::normal(&[4, 2, 5], 0.0, 1.0, &mut rng).requires_grad();
    let mut lstm = Lstm::<f32>::new(RnnConfig::new(5, 6), &mut rng);
    to_fp8(&mut lstm, Fp8Format::E5M2, Granularity::PerTensor);
    let (_, (_, c)) = lstm.forward(x.clone());
    let msg = panic_message(|| {
        c.sum().backward();
    });
    assert!(
        msg.contains("Lstm(5 -> 6) with fp8 weights is inference only"),
        "{msg}"
    );
    let mut gru = Gru::<f32>::new(RnnConfig::new(5, 6), &mut rng);
    to_fp8(&mut gru, Fp8Format::E4M3, Granularity::PerChannel);
    let (y, _) = gru.forward(x.clone());
    let msg = panic_message(|| {
        y.sum().backward();
    });
    assert!(
        msg.contains("Gru(5 -> 6) with fp8 weights is inference only"),
        "{msg}"
    );
}

#[test]
fn damaged_fp8_convolution_checkpoints_give_errors() {
    let build = |seed| {
        let mut m = LeNet5::new(&mut Rng::new(seed));
        to_fp8(&mut m, Fp8Format::E4M3, Granularity::PerChannel);
        m
    };
    let model = build(0);
    let path = temp("damaged_conv");
    model.save(&path).unwrap();
    let good = read_safetensors(&path).unwrap().tensors;
    assert_eq!(good["conv2.weight"].shape(), &[16, 6, 5, 5]);
    assert_eq!(good["conv2.weight"].dtype(), DType::F8E4M3);
    let before = build(1).state_dict();
    let write =
        |t: &BTreeMap<String, AnyTensor>| write_safetensors(&path, t, &BTreeMap::new()).unwrap();

    // a convolution weight of the wrong kernel size
    let mut t = good.clone();
    t.insert(
        "conv2.weight".into(),
        AnyTensor::F8E4M3(Tensor::from_vec(vec![0x38; 16 * 6 * 9], &[16, 6, 3, 3])),
    );
    write(&t);
    let mut m = build(1);
    let e = m.load_weights(&path).unwrap_err();
    assert!(matches!(e, ForgeError::StateDict { .. }), "{e}");
    unchanged(&m, &before);

    // a 1-d weight
    let mut t = good.clone();
    t.insert(
        "conv1.weight".into(),
        AnyTensor::F8E4M3(Tensor::from_vec(vec![0x38; 150], &[150])),
    );
    write(&t);
    let mut m = build(1);
    let e = m.load_weights(&path).unwrap_err();
    assert!(matches!(e, ForgeError::Shape { .. }), "{e}");
    unchanged(&m, &before);

    // a truncated file
    write(&good);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 10]).unwrap();
    let mut m = build(1);
    assert!(m.load_weights(&path).is_err());
    unchanged(&m, &before);

    // the good file loads straight into a converted model: the same bytes
    write(&good);
    let mut m = build(1);
    m.load_weights(&path).unwrap();
    let want = model.state_dict();
    for (k, v) in m.state_dict() {
        assert!(v.to_vec() == want[&k].to_vec(), "{k}");
    }
    std::fs::remove_file(&path).unwrap();
}
