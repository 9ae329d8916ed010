//! `bench --json`: the same plan, schedule and output schema as
//! `../shared/bench/torch_bench.py`, so that forge and PyTorch can be run
//! one after the other and compared row by row (`bench/compare.sh`).
//!
//! Each (model, mode, batch) is built afresh, warmed up at every thread
//! count, then timed in interleaved blocks: `rounds` times, for each thread
//! count, one untimed step after switching and `block` timed steps. One JSON
//! object per (model, mode, batch, threads) goes to stdout, with every timed
//! step in `ms` and the minor page faults per timed step in
//! `faults_per_step` (from `getrusage` over the timed steps only).
//!
//! Modes, as the script defines them: `train` = forward, loss, backward,
//! optimizer step (forge has no `zero_grad`: gradients are returned, not
//! accumulated in the parameters); `fwdbwd` = forward, loss, backward;
//! `fwd` = forward and loss with the tape recording; `infer` = eval mode
//! under `no_grad`; `infer_int8` = the same after `quantize_dynamic` (the
//! Linear and LSTM layers in int8, as `infer_bench.py`'s rows); `infer_bf16`
//! = `infer` under `forge::autocast(DType::BF16, ..)`.

use forge::hub::{generate, Bert, BertConfig, Flow, GenerateOptions};
use forge::models::gpt::{Gpt, GptConfig};
use forge::models::mnist::{LeNet5, MnistMlp};
use forge::models::resnet::resnet18;
use forge::nn::functional::{mse_loss_with, MseLossOptions, Reduction};
use forge::nn::{Forward, Layer, Linear, Lstm, RnnConfig};
use forge::optim::{Adam, AdamW, Sgd};
use forge::quant::{quantize_dynamic, Granularity};
use forge::runtime::set_num_threads;
use forge::{autocast, no_grad, DType, Rng, Tensor};
use std::hint::black_box;

use super::steps::{classes, classifier_step, LstmHead, Step};
use std::time::Instant;

/// Options mirroring `torch_bench.py`'s command line (flattened into
/// `bench`'s clap parser; they take effect with `--json`).
#[derive(clap::Args, Debug)]
pub struct JsonOpts {
    /// `--json`: the models to run, comma-separated (`gemm` is the sgemm table)
    #[arg(long, value_delimiter = ',', value_parser = model_name,
          default_values_t = DEFAULT_MODELS.iter().map(|s| s.to_string()))]
    pub models: Vec<String>,
    /// `--json`: the thread counts, comma-separated (0 counts as 1)
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 2])]
    pub threads: Vec<usize>,
    /// `--json`: untimed warm-up steps per thread count
    #[arg(long, default_value_t = 5)]
    pub warmup: usize,
    /// `--json`: timed rounds over the thread counts
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// `--json`: timed steps per round and thread count
    #[arg(long, default_value_t = 10)]
    pub block: usize,
    /// `--json`: the round number written into every row
    #[arg(long, default_value_t = 0)]
    pub round: usize,
    /// `--json`: skip the inference rows
    #[arg(long)]
    pub no_infer: bool,
    /// `--json`: run only these modes, comma-separated (train, fwdbwd, fwd,
    /// infer; default all), e.g. to profile one row
    #[arg(long, value_delimiter = ',')]
    pub modes: Vec<String>,
    /// `--json`: run only this batch size (default all), e.g. to profile
    /// one row
    #[arg(long)]
    pub batch: Option<usize>,
}

/// clap's parser for one `--models` name: a known model or an error that
/// lists them.
fn model_name(s: &str) -> Result<String, String> {
    if known_model(s) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "no model named {s} (models: {}, gemm)",
            DEFAULT_MODELS.join(", ")
        ))
    }
}

/// The models run when `--models` is not given.
pub const DEFAULT_MODELS: &[&str] = &["tiny", "mlp", "lenet", "gpt", "resnet18", "lstm"];

/// `(mode, batch)` pairs per model, as the script's `plan`.
fn plan(model: &str) -> Option<&'static [(&'static str, usize)]> {
    Some(match model {
        "tiny" => &[("train", 1), ("infer", 1)],
        "mlp" => &[
            ("train", 128),
            ("fwdbwd", 128),
            ("fwd", 128),
            ("infer", 1),
            // ort_bench.py's second MLP row (compare.sh --ort)
            ("infer", 128),
            ("infer_int8", 128),
        ],
        "lenet" => &[("train", 128)],
        "gpt" => &[("train", 16), ("fwdbwd", 16), ("fwd", 16), ("infer", 1)],
        // fwd/fwdbwd: PyTorch's side is bench/torch_phases.py (compare.sh --phases)
        "resnet18" => &[
            ("train", 16),
            ("fwdbwd", 16),
            ("fwd", 16),
            ("infer", 1),
            ("infer", 32),
            ("infer_bf16", 32),
        ],
        "lstm" => &[("train", 64), ("infer", 64), ("infer_int8", 64)],
        // infer_bench.py's hub rows (the PyTorch side is transformers)
        "gpt2s" => &[("generate", 1), ("generate_int8", 1)],
        "bert_base" => &[("infer", 8), ("infer_int8", 8), ("infer_bf16", 8)],
        _ => return None,
    })
}

/// Whether `model` is one this mode knows (`gemm` is the sgemm table).
pub fn known_model(model: &str) -> bool {
    model == "gemm" || plan(model).is_some()
}

/// The sgemm shapes of the README's gemm table, `(m, k, n, b_transposed)`
/// (as `bench/gemm_torch.py`): `b_transposed` is a Linear layer's
/// `x @ W^T` with `W` stored `[n, k]`.
pub const GEMM_SHAPES: &[(usize, usize, usize, bool)] = &[
    (64, 64, 64, false),
    (256, 256, 256, false),
    (1024, 1024, 1024, false),
    (128, 784, 512, true),
    (128, 84, 10, true),
    (128, 512, 10, true),
    (1, 784, 512, true),
];

/// FMA throughput of `threads` threads at once on independent
/// accumulators, GFLOP/s f32 summed over the threads: `(512-bit vectors,
/// 256-bit vectors)`, `None` off x86-64 or without AVX-512F / AVX2+FMA.
/// All threads run together (a barrier starts them; the time runs from
/// the first start to the last end, each read by its worker): a core's
/// clock can be lower while the other runs vector code too, so the
/// two-core peak is measured, not doubled (a Sapphire Rapids VM: 134-155
/// GFLOP/s on one thread, 245-268 on two, 512-bit).
#[allow(unreachable_code)]
pub(crate) fn fma_peak(iters: usize, threads: usize) -> (Option<f64>, Option<f64>) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        #[target_feature(enable = "avx512f")]
        fn zmm(iters: usize) -> f32 {
            let (a, b) = (_mm512_set1_ps(0.999_999), _mm512_set1_ps(1e-7));
            let mut acc = [_mm512_set1_ps(1.0); 12];
            for _ in 0..iters {
                for x in acc.iter_mut() {
                    *x = _mm512_fmadd_ps(*x, a, b);
                }
            }
            acc.iter().map(|&x| _mm512_reduce_add_ps(x)).sum()
        }
        #[target_feature(enable = "avx2,fma")]
        fn ymm(iters: usize) -> f32 {
            let (a, b) = (_mm256_set1_ps(0.999_999), _mm256_set1_ps(1e-7));
            let mut acc = [_mm256_set1_ps(1.0); 12];
            for _ in 0..iters {
                for x in acc.iter_mut() {
                    *x = _mm256_fmadd_ps(*x, a, b);
                }
            }
            let mut out = [0f32; 8];
            let mut s = 0.0;
            for x in acc {
                // SAFETY: `out` holds 8 floats.
                unsafe { _mm256_storeu_ps(out.as_mut_ptr(), x) };
                s += out.iter().sum::<f32>();
            }
            s
        }
        let time = |f: &(dyn Fn() -> f32 + Sync), flops: f64| time_threads(threads, f, flops);
        let z = is_x86_feature_detected!("avx512f").then(|| {
            // SAFETY: the CPU has AVX-512F.
            time(
                &|| unsafe { zmm(black_box(iters)) },
                (iters * 12 * 16 * 2) as f64,
            )
        });
        let y = (is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")).then(|| {
            // SAFETY: the CPU has AVX2 and FMA.
            time(
                &|| unsafe { ymm(black_box(iters)) },
                (iters * 12 * 8 * 2) as f64,
            )
        });
        return (z, y);
    }
    (None, None)
}

/// `threads` threads running `f` at once, each `ops` operations: the
/// operations per second summed over the threads, in billions, best of 5.
/// A barrier starts the workers; each reads the clock itself after it (the
/// main thread, a third thread on two cores, may be scheduled late, so its
/// own clock would miss the start), and the time runs from the first start
/// to the last end.
pub(crate) fn time_threads(threads: usize, f: &(dyn Fn() -> f32 + Sync), ops: f64) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..5 {
        let start = std::sync::Barrier::new(threads);
        let spans: Vec<(Instant, Instant)> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        start.wait();
                        let t = Instant::now();
                        black_box(f());
                        (t, Instant::now())
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().expect("peak worker"))
                .collect()
        });
        let first = spans
            .iter()
            .map(|s| s.0)
            .min()
            .expect("one worker at least");
        let last = spans
            .iter()
            .map(|s| s.1)
            .max()
            .expect("one worker at least");
        best = best.min((last - first).as_secs_f64());
    }
    threads as f64 * ops / best / 1e9
}

/// The reduced-precision dot-product peaks of `threads` threads at once,
/// as [`fma_peak`] measures the f32 one: `(bf16, int8)`, the first in
/// GFLOP/s of AVX-512 BF16's `vdpbf16ps` (32 multiply-adds an instruction,
/// 2 FLOPs each), the second in GOP/s of AVX-512 VNNI's `vpdpbusd` (64 u8 x
/// i8 multiply-adds an instruction, 2 operations each); `None` where the
/// CPU lacks the instruction. These are the instructions forge's bf16 and
/// int8 kernels run outside AMX; on a CPU with AMX the bf16 and int8 rows
/// use the tiles, whose throughput this does not measure.
#[allow(unreachable_code)]
pub(crate) fn dot_peaks(iters: usize, threads: usize) -> (Option<f64>, Option<f64>) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        #[target_feature(enable = "avx512f,avx512bf16")]
        fn bf16(iters: usize) -> f32 {
            // 1.0 and 2^-20 in bf16 (exact): the sums grow by 2^-19 a step
            let one = _mm512_set1_ps(1.0);
            let tiny = _mm512_set1_ps(1.0 / 1_048_576.0);
            let (a, b) = (
                _mm512_cvtne2ps_pbh(one, one),
                _mm512_cvtne2ps_pbh(tiny, tiny),
            );
            let mut acc = [_mm512_set1_ps(1.0); 12];
            for _ in 0..iters {
                for x in acc.iter_mut() {
                    *x = _mm512_dpbf16_ps(*x, a, b);
                }
            }
            acc.iter().map(|&x| _mm512_reduce_add_ps(x)).sum()
        }
        #[target_feature(enable = "avx512f,avx512vnni")]
        fn int8(iters: usize) -> f32 {
            let (a, b) = (_mm512_set1_epi8(1), _mm512_set1_epi8(1));
            let mut acc = [_mm512_setzero_si512(); 12];
            for _ in 0..iters {
                for x in acc.iter_mut() {
                    *x = _mm512_dpbusd_epi32(*x, a, b);
                }
            }
            acc.iter().map(|&x| _mm512_reduce_add_epi32(x) as f32).sum()
        }
        let has = |f: &str| match f {
            "bf16" => is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bf16"),
            _ => is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vnni"),
        };
        let b = has("bf16").then(|| {
            // SAFETY: the CPU has AVX-512F and AVX-512 BF16.
            time_threads(
                threads,
                &|| unsafe { bf16(black_box(iters)) },
                (iters * 12 * 32 * 2) as f64,
            )
        });
        let i = has("int8").then(|| {
            // SAFETY: the CPU has AVX-512F and AVX-512 VNNI.
            time_threads(
                threads,
                &|| unsafe { int8(black_box(iters)) },
                (iters * 12 * 64 * 2) as f64,
            )
        });
        return (b, i);
    }
    (None, None)
}

/// One JSON line per (shape, threads): every timed `Tensor::matmul` /
/// `matmul_t` in `ms` (output allocated per call, as `torch.mm`).
fn run_gemm(o: &JsonOpts) {
    let num = |v: Option<f64>| v.map_or("null".to_string(), |g| format!("{g:.1}"));
    for &t in &o.threads {
        let (z, y) = fma_peak(20_000_000, t.max(1));
        let (bf, i8) = dot_peaks(20_000_000, t.max(1));
        let tile = crate::tile_peak::tile_peak(200, t.max(1));
        println!(
            "{{\"bench\": \"peak\", \"framework\": \"forge\", \"threads\": {}, \"round\": {}, \
             \"gflops_512\": {}, \"gflops_256\": {}, \"gflops_bf16\": {}, \"gops_int8\": {}, \
             \"gflops_tile\": {}}}",
            t.max(1),
            o.round,
            num(z),
            num(y),
            num(bf),
            num(i8),
            num(tile)
        );
    }
    for &(m, k, n, tb) in GEMM_SHAPES {
        let mut rng = Rng::new(0);
        let a = Tensor::<f32>::normal(&[m, k], 0.0, 1.0, &mut rng);
        let b = if tb {
            Tensor::<f32>::normal(&[n, k], 0.0, 1.0, &mut rng)
        } else {
            Tensor::<f32>::normal(&[k, n], 0.0, 1.0, &mut rng)
        };
        let step = || {
            black_box(if tb { a.matmul_t(&b) } else { a.matmul(&b) });
        };
        // about 2 ms per timed sample whatever the size
        let reps = ((2e6 / (2.0 * (m * k * n) as f64 / 100.0)) as usize).clamp(1, 1000);
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); o.threads.len()];
        for &t in &o.threads {
            set_num_threads(t);
            for _ in 0..o.warmup * reps {
                step();
            }
        }
        for _ in 0..o.rounds {
            for (ti, &t) in o.threads.iter().enumerate() {
                set_num_threads(t);
                step();
                for _ in 0..o.block {
                    let t0 = Instant::now();
                    for _ in 0..reps {
                        step();
                    }
                    times[ti].push(t0.elapsed().as_secs_f64() * 1e3 / reps as f64);
                }
            }
        }
        for (ti, &t) in o.threads.iter().enumerate() {
            let ms: Vec<String> = times[ti].iter().map(|v| format!("{v:.6e}")).collect();
            println!(
                "{{\"bench\": \"gemm\", \"framework\": \"forge\", \"m\": {m}, \"k\": {k}, \"n\": {n}, \
                 \"b_transposed\": {tb}, \"threads\": {t}, \"round\": {}, \"ms\": [{}]}}",
                o.round,
                ms.join(", ")
            );
        }
    }
}

/// Builds `(step, items, unit)` for one row of the plan; every model starts
/// from the same seed, as the script's `torch.manual_seed(0)`.
fn make(model: &str, mode: &str, batch: usize) -> (Step, usize, &'static str) {
    let mut rng = Rng::new(0);
    let img = "img/s";
    match model {
        "tiny" => {
            let mut m = Linear::<f32>::new(16, 16, &mut rng);
            let x = Tensor::<f32>::normal(&[batch, 16], 0.0, 1.0, &mut rng);
            let y = Tensor::<f32>::normal(&[batch, 16], 0.0, 1.0, &mut rng);
            let mut opt = Sgd::<f32>::new(1e-3);
            let step: Step = match mode {
                "train" => Box::new(move || {
                    let grads = mse_loss_with(
                        &m.forward(x.clone()),
                        &y,
                        MseLossOptions {
                            reduction: Reduction::Mean,
                        },
                    )
                    .backward();
                    opt.step(&mut m, &grads).expect("shapes match");
                }),
                _ => {
                    m.eval();
                    Box::new(move || {
                        black_box(no_grad(|| m.forward(x.clone())));
                    })
                }
            };
            (step, batch, "step/s")
        }
        "mlp" | "lenet" => {
            let x = if model == "mlp" {
                Tensor::<f32>::normal(&[batch, 784], 0.0, 1.0, &mut rng)
            } else {
                Tensor::<f32>::normal(&[batch, 1, 28, 28], 0.0, 1.0, &mut rng)
            };
            let y = classes(&mut rng, batch, 10);
            let adam = Adam::<f32>::new(1e-3);
            let step = if model == "mlp" {
                classifier_step(MnistMlp::new(&mut rng), x, y, adam, mode)
            } else {
                classifier_step(LeNet5::new(&mut rng), x, y, adam, mode)
            };
            (step, batch, img)
        }
        "resnet18" => {
            let m = resnet18::<f32>(10, &mut rng);
            let x = Tensor::<f32>::normal(&[batch, 3, 32, 32], 0.0, 1.0, &mut rng);
            let y = classes(&mut rng, batch, 10);
            let sgd = Sgd::<f32>::new(0.01).momentum(0.9);
            (classifier_step(m, x, y, sgd, mode), batch, img)
        }
        "lstm" => {
            let m = LstmHead {
                lstm: Lstm::new(RnnConfig::new(128, 128).batch_first(true), &mut rng),
                head: Linear::new(128, 10, &mut rng),
            };
            let x = Tensor::<f32>::normal(&[batch, 32, 128], 0.0, 1.0, &mut rng);
            let y = classes(&mut rng, batch, 10);
            let adam = Adam::<f32>::new(1e-3);
            (classifier_step(m, x, y, adam, mode), batch, img)
        }
        "gpt" => {
            let cfg = GptConfig {
                vocab_size: 256,
                block_size: 64,
                n_layer: 4,
                n_head: 4,
                n_embd: 128,
                bias: true,
            };
            let mut m = Gpt::<f32>::new(cfg, &mut rng);
            let x = Tensor::<i64>::from_fn(&[batch, 64], |_| rng.below(256) as i64);
            let y = Tensor::<i64>::from_fn(&[batch, 64], |_| rng.below(256) as i64);
            let mut opt = AdamW::<f32>::new(3e-4).weight_decay(0.1);
            let step: Step = match mode {
                "train" => Box::new(move || {
                    let grads = m.loss(&x, &y).backward();
                    opt.step(&mut m, &grads).expect("shapes match");
                }),
                "fwdbwd" => Box::new(move || {
                    black_box(m.loss(&x, &y).backward());
                }),
                "fwd" => Box::new(move || {
                    black_box(m.loss(&x, &y));
                }),
                _ => {
                    m.eval();
                    Box::new(move || {
                        black_box(no_grad(|| m.forward(x.clone())));
                    })
                }
            };
            let (items, unit) = if mode == "infer" {
                (batch, "seq/s")
            } else {
                (batch * 64, "tok/s")
            };
            (step, items, unit)
        }
        // infer_bench.py's gpt2s row: GPT-2 small's shape with random
        // weights, a 32-token prompt then 64 new tokens, greedy, with the
        // KV cache; one step is the whole call
        "gpt2s" => {
            let mut m = Gpt::<f32>::new(GptConfig::gpt2_small(), &mut rng);
            m.eval();
            // generate_int8: the Linear layers quantized per tensor, as the
            // script's quantize_dynamic with PyTorch's default qconfig, and
            // the tied head in int8 too, as there (its lm_head is an
            // nn.Linear, quantized with the rest; forge's runs on the int8
            // table of quantize_embeddings, per row)
            if mode == "generate_int8" {
                quantize_dynamic(&mut m, Granularity::PerTensor);
                forge::quant::quantize_embeddings(&mut m);
            }
            let prompt: Vec<i64> = (0..32).map(|_| rng.below(50257) as i64).collect();
            let opts = GenerateOptions {
                max_new_tokens: 64,
                ..Default::default()
            };
            let step: Step = Box::new(move || {
                let out = generate(&m, std::slice::from_ref(&prompt), &opts, |_, _| {
                    Flow::Continue
                });
                assert_eq!(out[0].len(), 64, "gpt2s: 64 new tokens");
                black_box(out);
            });
            (step, 64, "tok/s")
        }
        // infer_bench.py's bert_base row: BERT-base's shape with random
        // weights, [batch, 128] ids, the last hidden state
        "bert_base" => {
            let mut m = Bert::<f32>::new(BertConfig::bert_base(), false, &mut rng);
            m.eval();
            let ids = Tensor::<i64>::from_fn(&[batch, 128], |_| rng.below(30522) as i64);
            let step: Step = match mode {
                // infer_bf16: under autocast entered in each timed call, as
                // the script's `with torch.autocast(...)` around the call
                "infer_bf16" => Box::new(move || {
                    black_box(no_grad(|| {
                        autocast(DType::BF16, || m.encode(&ids, None, None))
                    }));
                }),
                _ => {
                    if mode == "infer_int8" {
                        quantize_dynamic(&mut m, Granularity::PerTensor);
                    }
                    Box::new(move || {
                        black_box(no_grad(|| m.encode(&ids, None, None)));
                    })
                }
            };
            (step, batch, "seq/s")
        }
        _ => unreachable!("model {model}"),
    }
}

/// FLOPs of one forward pass of a bench model at `batch`, counting the
/// matrix products and convolutions (2 per multiply-add), which are all
/// but a few percent of every model's work; `None` for a model this table
/// does not know.
fn forward_flops(model: &str, batch: usize) -> Option<f64> {
    let b = batch as f64;
    // A k x k convolution from `cin` to `cout` channels with an `hw`-pixel output.
    let conv = |cin: f64, cout: f64, k: f64, hw: f64| 2.0 * b * cout * hw * cin * k * k;
    let linear = |i: f64, o: f64| 2.0 * b * i * o;
    Some(match model {
        "tiny" => linear(16.0, 16.0),
        "mlp" => linear(784.0, 512.0) + linear(512.0, 256.0) + linear(256.0, 10.0),
        "lenet" => {
            conv(1.0, 6.0, 5.0, 784.0)
                + conv(6.0, 16.0, 5.0, 100.0)
                + linear(400.0, 120.0)
                + linear(120.0, 84.0)
                + linear(84.0, 10.0)
        }
        // 32x32 input: stem to 16x16, max pool to 8x8, stages at 8, 4, 2, 1.
        "resnet18" => {
            let mut f = conv(3.0, 64.0, 7.0, 256.0);
            let mut cin = 64.0;
            for (cout, hw) in [(64.0, 64.0), (128.0, 16.0), (256.0, 4.0), (512.0, 1.0)] {
                f += conv(cin, cout, 3.0, hw) + 3.0 * conv(cout, cout, 3.0, hw);
                if cin != cout {
                    f += conv(cin, cout, 1.0, hw);
                }
                cin = cout;
            }
            f + linear(512.0, 10.0)
        }
        // 32 steps of a 128 -> 128 LSTM (four gates over input and hidden), then the head.
        "lstm" => 32.0 * linear(256.0, 512.0) + linear(128.0, 10.0),
        // 64 tokens, 4 layers of width 128 (qkv, projection, 4x MLP), full
        // 64 x 64 attention products, the 256-word head.
        "gpt" => {
            let per_token = 4.0 * (2.0 * 128.0 * (384.0 + 128.0 + 1024.0) + 4.0 * 64.0 * 128.0)
                + 2.0 * 128.0 * 256.0;
            b * 64.0 * per_token
        }
        // 128 tokens, 12 layers of width 768 (q, k, v, output, two 3072-wide
        // MLP products), the 128 x 128 attention products
        "bert_base" => {
            let per_token =
                12.0 * (2.0 * 768.0 * (4.0 * 768.0 + 2.0 * 3072.0) + 4.0 * 128.0 * 768.0);
            b * 128.0 * per_token
        }
        _ => return None,
    })
}

/// GFLOP of one timed step of a row: the forward's for `fwd` and `infer`,
/// three times it with a backward (the two products of each backward
/// matrix product), the optimizer's few FLOPs per weight left out. The
/// bf16 and int8 rows count the same products (an int8 row's figure is
/// operations, most of them integer; its attention products stay f32).
fn step_gflop(model: &str, mode: &str, batch: usize) -> Option<f64> {
    if model == "gpt2s" && (mode == "generate" || mode == "generate_int8") {
        return Some(gpt2s_generate_flops() / 1e9);
    }
    let f = forward_flops(model, batch)?;
    let times = match mode {
        "fwd" | "infer" | "infer_bf16" | "infer_int8" => 1.0,
        "fwdbwd" | "train" => 3.0,
        _ => return None,
    };
    Some(times * f / 1e9)
}

/// FLOPs of the gpt2s row's call, counting the matrix products (2 per
/// multiply-add): 64 new tokens after a 32-token prompt take 32 + 63
/// positions through the 12 blocks (q, k, v, output and the two
/// 3072-wide MLP products, width 768, and the attention products over the
/// positions so far), and the 50,257-word head at the 64 positions whose
/// logits pick a token (the prompt's last, then each new token but the
/// last).
fn gpt2s_generate_flops() -> f64 {
    let (c, layers, vocab) = (768.0, 12.0, 50257.0);
    let (prompt, new) = (32.0, 64.0);
    let positions = prompt + new - 1.0;
    let blocks = layers * 2.0 * c * (3.0 * c + c + 2.0 * 4.0 * c);
    // the position at index p attends to p + 1 keys: q k^T and the
    // weighted sum of the values, c multiply-adds per key each
    let keys = positions * (positions + 1.0) / 2.0;
    let attention = layers * 4.0 * c * keys;
    positions * blocks + attention + new * 2.0 * c * vocab
}

/// Minor page faults of the whole process so far.
fn minor_faults() -> u64 {
    // SAFETY: getrusage only writes the struct it is given, which is a
    // properly sized, zero-initialised `rusage`.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut u) == 0 {
            u.ru_minflt as u64
        } else {
            0
        }
    }
}

/// Python's `json.dumps` spelling of a float (always with a fraction).
fn py_float(v: f64) -> String {
    let s = format!("{v}");
    if s.contains('.') || s.contains('e') || s.contains("inf") || s.contains("NaN") {
        s
    } else {
        format!("{s}.0")
    }
}

/// Runs one (model, mode, batch) at every thread count, as the script's
/// `run`, and prints its rows.
#[allow(clippy::too_many_arguments)]
fn run(model: &str, mode: &str, batch: usize, o: &JsonOpts, warmup: usize, block: usize) {
    let (mut step, items, unit) = make(model, mode, batch);
    let threads = &o.threads;
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); threads.len()];
    let mut faults = vec![0u64; threads.len()];
    for &t in threads {
        set_num_threads(t);
        for _ in 0..warmup {
            step();
        }
    }
    for _ in 0..o.rounds {
        for (ti, &t) in threads.iter().enumerate() {
            set_num_threads(t);
            step(); // one untimed step after switching the thread count
            for _ in 0..block {
                let f0 = minor_faults();
                let t0 = Instant::now();
                step();
                let dt = t0.elapsed().as_secs_f64() * 1e3;
                faults[ti] += minor_faults() - f0;
                times[ti].push(dt);
            }
        }
    }
    for (ti, &t) in threads.iter().enumerate() {
        // to the nanosecond: the script rounds to 0.1 us, a tenth of
        // forge's one-microsecond steps (the tiny and batch-1 rows), which
        // made equal steps read 0.9 and 1.0 us
        let ms: Vec<String> = times[ti]
            .iter()
            .map(|v| py_float((v * 1e6).round() / 1e6))
            .collect();
        let n = times[ti].len().max(1);
        println!(
            "{{\"bench\": \"train\", \"framework\": \"forge\", \"model\": \"{model}\", \
             \"mode\": \"{mode}\", \"batch\": {batch}, \"threads\": {t}, \"items\": {items}, \
             \"unit\": \"{unit}\", \"round\": {}, \"ms\": [{}], \"faults_per_step\": {}, \
             \"gflop\": {}}}",
            o.round,
            ms.join(", "),
            py_float((faults[ti] as f64 / n as f64 * 1e4).round() / 1e4),
            step_gflop(model, mode, batch).map_or("null".to_string(), py_float)
        );
    }
}

/// The whole plan for the selected models.
pub fn run_all(o: &JsonOpts) {
    for model in &o.models {
        if model == "gemm" {
            run_gemm(o);
            continue;
        }
        let Some(rows) = plan(model) else {
            continue;
        };
        for &(mode, batch) in rows {
            let skip = (!o.modes.is_empty() && !o.modes.iter().any(|m| m == mode))
                || o.batch.is_some_and(|b| b != batch);
            if skip || mode.starts_with("infer") && o.no_infer {
                continue;
            }
            // tiny / batch-1 inference are sub-ms: more steps, as the script
            let long = model == "tiny" || (mode.starts_with("infer") && batch == 1);
            // the hub rows take a second or more a step: infer_bench.py's
            // one warm-up and 2 steps a block (scaled with --block)
            let (warmup, block) = if matches!(model.as_str(), "gpt2s" | "bert_base") {
                (1, (o.block / 5).max(1))
            } else {
                (
                    o.warmup * if long { 10 } else { 1 },
                    o.block * if long { 10 } else { 1 },
                )
            };
            run(model, mode, batch, o, warmup, block);
        }
    }
}
