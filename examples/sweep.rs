//! The shape sweep: models of other shapes than the bench plan's, built
//! from a spec on the command line, timed with `bench --json`'s schedule and
//! printed in its JSON-lines schema, so that `bench/compare_table.py`
//! tabulates forge against its twin `bench/sweep_torch.py`.
//!
//! ```sh
//! cargo run --release --example sweep -- 'gpt:L=8,d=256,h=8,T=128,B=8' \
//!     'mlp:sizes=784-1000-333-10,B=100' --threads 1,2 --modes train,infer
//! python3 bench/sweep_torch.py 'gpt:L=8,d=256,h=8,T=128,B=8' ... (same arguments)
//! ```
//!
//! A spec is `kind:key=value,...`; `B` is the batch (the JSON row's
//! `batch`), the rest names the model (the row's `model` is the spec
//! without `B`). Kinds, their keys and defaults:
//!
//! - `gpt`: the bench's nanoGPT (`L` layers, `d` wide, `h` heads, block and
//!   sequence `T`, vocab `V` = 256), AdamW(3e-4, wd 0.1), loss over every
//!   token; infer = the logits.
//! - `mlp`: `sizes=784-1000-333-10` Linear layers with ReLU between,
//!   Adam(1e-3), cross-entropy.
//! - `cnn`: `ch=64-64-M-128-M` 3x3 convolutions (`k`, padding `k/2`) with
//!   bias and ReLU, `M` a 2x2 max pool, over `in`-channel (3) `S`x`S` (32)
//!   images, then one Linear to `C` (10) classes; SGD(0.01, momentum 0.9),
//!   as the bench's ResNet-18.
//! - `enc`: `L` post-norm Transformer encoder layers (`d`, `h`, `ff`, ReLU,
//!   dropout 0, batch first) over `[B, T, d]` and a Linear(d, `C`=10) on
//!   every token; AdamW(3e-4, wd 0.1), cross-entropy per token.
//! - `lstm`: the bench's LSTM head with input `I`, hidden `H`, `T` steps
//!   and a Linear(H, 10); Adam(1e-3).
//! - `resnet18`: the bench's ResNet-18 on `S`x`S` (32) images; SGD(0.01, 0.9).
//! - `lenet`: the bench's LeNet-5; Adam(1e-3).
//!
//! Each row also carries `gflop`, the FLOPs of one step's matrix products
//! and convolutions (`bench_sections/sweep_flops.rs`: the least any
//! implementation must do), from which `bench/compare_table.py` prints the
//! share of the measured FMA peak and the `floor / PyTorch` ratio when the
//! run's peak lines (`bench --json --models gemm --rounds 0`) are among its
//! inputs, as `run.sh` in each sweep folder does.
//!
//! Each spec is built afresh (seed 0) for each mode, warmed up at every
//! thread count, then timed in interleaved blocks as `bench --json`: for
//! `rounds`, at each thread count one untimed step and `block` timed ones.

use clap::Parser;
use forge::models::gpt::{Gpt, GptConfig};
use forge::models::mnist::LeNet5;
use forge::models::resnet::resnet18;
use forge::models::vgg::Stage;
use forge::nn::{
    Conv2d, Forward, Layer, Linear, Lstm, MaxPool2d, RnnConfig, TransformerConfig,
    TransformerEncoderLayer,
};
use forge::optim::{Adam, AdamW, Sgd};
use forge::runtime::set_num_threads;
use forge::{no_grad, Rng, Tensor};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Instant;

#[path = "bench_sections/steps.rs"]
mod steps;
#[path = "bench_sections/sweep_flops.rs"]
mod sweep_flops;
use steps::{classes, classifier_step, LstmHead, Step};

#[derive(Parser, Debug)]
#[command(about = "forge's shape sweep (JSON lines as bench --json)")]
struct Opts {
    /// Model specs, e.g. `gpt:L=8,d=256,h=8,T=128,B=8` (see the file's docs)
    #[arg(required = true)]
    specs: Vec<String>,
    /// Thread counts, comma-separated
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 2])]
    threads: Vec<usize>,
    /// Modes, comma-separated: train, infer
    #[arg(long, value_delimiter = ',', default_values_t = ["train".to_string(), "infer".to_string()])]
    modes: Vec<String>,
    /// Untimed warm-up steps per thread count
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// Timed rounds over the thread counts
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Timed steps per round and thread count
    #[arg(long, default_value_t = 3)]
    block: usize,
    /// The round number written into every row
    #[arg(long, default_value_t = 0)]
    round: usize,
    /// After the timing, run each step once more under forge's profiler
    /// (at each of `--threads`) and print its per-op table on stderr
    #[arg(long)]
    profile: bool,
}

/// A parsed spec: the kind, its keys, and the row's model name (the spec
/// without `B`).
struct Spec {
    kind: String,
    keys: BTreeMap<String, String>,
    name: String,
}

impl Spec {
    fn parse(s: &str) -> Spec {
        let (kind, rest) = s.split_once(':').unwrap_or((s, ""));
        let mut keys = BTreeMap::new();
        let mut named = Vec::new();
        for kv in rest.split(',').filter(|p| !p.is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .unwrap_or_else(|| panic!("spec {s}: `{kv}` is not key=value"));
            keys.insert(k.to_string(), v.to_string());
            if k != "B" {
                named.push(kv);
            }
        }
        let name = if named.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}:{}", named.join(","))
        };
        Spec {
            kind: kind.to_string(),
            keys,
            name,
        }
    }

    fn num(&self, k: &str, default: usize) -> usize {
        self.keys.get(k).map_or(default, |v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{}: {k}={v} is not a number", self.name))
        })
    }

    fn list(&self, k: &str, default: &str) -> Vec<String> {
        self.keys
            .get(k)
            .map_or(default, |v| v.as_str())
            .split('-')
            .map(str::to_string)
            .collect()
    }
}

/// Layers applied in order, then a flatten and the head.
#[derive(Layer)]
struct Cnn {
    features: Vec<Stage>,
    head: Linear,
}

impl Forward<Tensor> for Cnn {
    type Output = Tensor;
    fn forward(&self, x: Tensor) -> Tensor {
        // (outside autograd each convolution takes its ReLU in its output
        // pass: `vgg::run`)
        let x = forge::models::vgg::run(&self.features, x);
        self.head.forward(x.flatten(1, -1))
    }
}

/// Linear layers with ReLU between.
#[derive(Layer)]
struct Mlp {
    layers: Vec<Linear>,
}

impl Forward<Tensor> for Mlp {
    type Output = Tensor;
    fn forward(&self, mut x: Tensor) -> Tensor {
        let n = self.layers.len();
        for (i, l) in self.layers.iter().enumerate() {
            x = l.forward(x);
            if i + 1 < n {
                x = x.relu();
            }
        }
        x
    }
}

/// Encoder layers and a per-token head, `[B, T, d]` -> `[B * T, C]`.
#[derive(Layer)]
struct Encoder {
    layers: Vec<TransformerEncoderLayer>,
    head: Linear,
}

impl Forward<Tensor> for Encoder {
    type Output = Tensor;
    fn forward(&self, mut x: Tensor) -> Tensor {
        for l in &self.layers {
            x = l.forward(x);
        }
        let d = x.shape()[2] as isize;
        self.head.forward(x.reshape(&[-1, d]))
    }
}

/// Builds the step of `spec` in `mode` at batch `b` (seed 0).
fn make(spec: &Spec, mode: &str, b: usize) -> Step {
    let mut rng = Rng::new(0);
    match spec.kind.as_str() {
        "gpt" => {
            let t = spec.num("T", 64);
            let v = spec.num("V", 256);
            let cfg = GptConfig {
                vocab_size: v,
                block_size: t,
                n_layer: spec.num("L", 4),
                n_head: spec.num("h", 4),
                n_embd: spec.num("d", 128),
                bias: true,
            };
            let mut m = Gpt::<f32>::new(cfg, &mut rng);
            let x = Tensor::<i64>::from_fn(&[b, t], |_| rng.below(v) as i64);
            let y = Tensor::<i64>::from_fn(&[b, t], |_| rng.below(v) as i64);
            let mut opt = AdamW::<f32>::new(3e-4).weight_decay(0.1);
            if mode == "train" {
                Box::new(move || {
                    let grads = m.loss(&x, &y).backward();
                    opt.step(&mut m, &grads).expect("shapes match");
                })
            } else {
                m.eval();
                Box::new(move || {
                    black_box(no_grad(|| m.forward(x.clone())));
                })
            }
        }
        "mlp" => {
            let sizes: Vec<usize> = spec
                .list("sizes", "784-512-256-10")
                .iter()
                .map(|s| s.parse().expect("mlp sizes are numbers"))
                .collect();
            let layers = sizes
                .windows(2)
                .map(|w| Linear::new(w[0], w[1], &mut rng))
                .collect();
            let x = Tensor::<f32>::normal(&[b, sizes[0]], 0.0, 1.0, &mut rng);
            let y = classes(&mut rng, b, *sizes.last().expect("sizes"));
            classifier_step(Mlp { layers }, x, y, Adam::<f32>::new(1e-3), mode)
        }
        "cnn" => {
            let (k, s, cin, c) = (
                spec.num("k", 3),
                spec.num("S", 32),
                spec.num("in", 3),
                spec.num("C", 10),
            );
            let mut features = Vec::new();
            let (mut ch, mut hw) = (cin, s);
            for item in spec.list("ch", "64-64-M-128-M") {
                if item == "M" {
                    features.push(Stage::MaxPool(MaxPool2d::new(2)));
                    hw /= 2;
                } else {
                    let out: usize = item.parse().expect("cnn channels are numbers or M");
                    let conv = Conv2d::new(ch, out, k, &mut rng).padding(k / 2);
                    features.push(Stage::Conv(conv));
                    features.push(Stage::Relu);
                    ch = out;
                }
            }
            let head = Linear::new(ch * hw * hw, c, &mut rng);
            let x = Tensor::<f32>::normal(&[b, cin, s, s], 0.0, 1.0, &mut rng);
            let y = classes(&mut rng, b, c);
            let sgd = Sgd::<f32>::new(0.01).momentum(0.9);
            classifier_step(Cnn { features, head }, x, y, sgd, mode)
        }
        "enc" => {
            let (d, t, c) = (spec.num("d", 256), spec.num("T", 128), spec.num("C", 10));
            let cfg = TransformerConfig {
                dim_feedforward: spec.num("ff", 4 * d),
                dropout: 0.0,
                batch_first: true,
                ..TransformerConfig::new(d, spec.num("h", 4))
            };
            let layers = (0..spec.num("L", 4))
                .map(|_| TransformerEncoderLayer::new(cfg, &mut rng))
                .collect();
            let head = Linear::new(d, c, &mut rng);
            let x = Tensor::<f32>::normal(&[b, t, d], 0.0, 1.0, &mut rng);
            let y = classes(&mut rng, b * t, c);
            let adamw = AdamW::<f32>::new(3e-4).weight_decay(0.1);
            classifier_step(Encoder { layers, head }, x, y, adamw, mode)
        }
        "lstm" => {
            let (i, h, t) = (spec.num("I", 128), spec.num("H", 128), spec.num("T", 32));
            let m = LstmHead {
                lstm: Lstm::new(RnnConfig::new(i, h).batch_first(true), &mut rng),
                head: Linear::new(h, 10, &mut rng),
            };
            let x = Tensor::<f32>::normal(&[b, t, i], 0.0, 1.0, &mut rng);
            let y = classes(&mut rng, b, 10);
            classifier_step(m, x, y, Adam::<f32>::new(1e-3), mode)
        }
        "resnet18" => {
            let s = spec.num("S", 32);
            let m = resnet18::<f32>(10, &mut rng);
            let x = Tensor::<f32>::normal(&[b, 3, s, s], 0.0, 1.0, &mut rng);
            let y = classes(&mut rng, b, 10);
            let sgd = Sgd::<f32>::new(0.01).momentum(0.9);
            classifier_step(m, x, y, sgd, mode)
        }
        "lenet" => {
            let m = LeNet5::new(&mut rng);
            let x = Tensor::<f32>::normal(&[b, 1, 28, 28], 0.0, 1.0, &mut rng);
            let y = classes(&mut rng, b, 10);
            classifier_step(m, x, y, Adam::<f32>::new(1e-3), mode)
        }
        k => panic!("no model kind {k} (gpt, mlp, cnn, enc, lstm, resnet18, lenet)"),
    }
}

/// Python's `json.dumps` spelling of a float.
fn py_float(v: f64) -> String {
    let s = format!("{v}");
    if s.contains('.') || s.contains('e') {
        s
    } else {
        format!("{s}.0")
    }
}

fn main() {
    let o = Opts::parse();
    for spec_text in &o.specs {
        let spec = Spec::parse(spec_text);
        let b = spec.num("B", 16);
        for mode in &o.modes {
            let mut step = make(&spec, mode, b);
            let mut times: Vec<Vec<f64>> = vec![Vec::new(); o.threads.len()];
            for &t in &o.threads {
                set_num_threads(t);
                for _ in 0..o.warmup {
                    step();
                }
            }
            for _ in 0..o.rounds {
                for (ti, &t) in o.threads.iter().enumerate() {
                    set_num_threads(t);
                    step(); // one untimed step after switching
                    for _ in 0..o.block {
                        let t0 = Instant::now();
                        step();
                        times[ti].push(t0.elapsed().as_secs_f64() * 1e3);
                    }
                }
            }
            let gflop = sweep_flops::step_gflop(&spec.kind, &spec.keys, b, mode)
                .map_or("null".to_string(), py_float);
            for (ti, &t) in o.threads.iter().enumerate() {
                let ms: Vec<String> = times[ti]
                    .iter()
                    .map(|v| py_float((v * 1e4).round() / 1e4))
                    .collect();
                println!(
                    "{{\"bench\": \"train\", \"framework\": \"forge\", \"model\": \"{}\", \
                     \"mode\": \"{mode}\", \"batch\": {b}, \"threads\": {t}, \"items\": {b}, \
                     \"unit\": \"step\", \"round\": {}, \"ms\": [{}], \"gflop\": {gflop}}}",
                    spec.name,
                    o.round,
                    ms.join(", ")
                );
            }
            if o.profile {
                for &t in &o.threads {
                    set_num_threads(t);
                    step(); // one untimed step after switching
                    let ((), prof) = forge::tools::profile(&mut step);
                    eprintln!("{} {mode} B={b} threads={t}\n{}", spec.name, prof.table());
                }
            }
        }
    }
}
