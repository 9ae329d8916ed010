//! forge's micro-benchmarks. Every reference figure is measured in the same
//! run on the same machine (the FMA peak, `matrixmultiply`'s sgemm/dgemm on
//! the same operands, a plain slice copy): figures from other machines are
//! not ratios anyone can act on.
//!
//! ```sh
//! cargo run --release --example bench                     # every section
//! cargo run --release --example bench -- --only gemm      # one section (comma-separated list)
//! cargo run --release --example bench -- --list           # the sections
//! cargo run --release --example bench -- --quick          # fewer repetitions
//! cargo run --release --example bench -- --json           # JSON lines, as torch_bench.py
//! cargo run --release --example bench -- --json --models mlp,gpt --threads 1,2
//! ```
//!
//! `--json` runs the plan of `../shared/bench/torch_bench.py` (same models,
//! modes, batches, schedule and output schema; see `bench_sections/json.rs`)
//! and prints nothing but one JSON object per line on stdout; it accepts the
//! script's `--models`, `--threads`, `--warmup`, `--rounds`, `--block`,
//! `--round` and `--no-infer`. `bench/compare.sh` runs both and tabulates.
//!
//! To add a section: write `fn my_section(opts: &Opts)` printing its lines
//! (use [`measure`] and [`Row`]) and add it to [`SECTIONS`].

use clap::Parser;
use forge::models::gpt::{Gpt, GptConfig};
use forge::models::resnet::resnet18;
use forge::nn::functional::cross_entropy_with;
use forge::nn::{Forward, Lstm, RnnConfig};
use forge::optim::{AdamW, Sgd};
use forge::runtime::set_num_threads;
use forge::{Float, Rng, Tensor};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Command-line options shared by every section.
struct Opts {
    /// Fewer repetitions (a smoke run).
    quick: bool,
}

/// A section: its name for `--only`, what it measures, and its function.
type Section = (&'static str, &'static str, fn(&Opts));

const SECTIONS: &[Section] = &[
    (
        "gemm",
        "sgemm/dgemm GFLOP/s at 256, 512, 1024 (Tensor::matmul), 1 and 2 threads",
        gemm,
    ),
    (
        "elementwise",
        "add and exp throughput on 1M and 16M f32, 1 and 2 threads",
        elementwise,
    ),
    (
        "conv2d",
        "Conv2d 3->64, 3x3, padding 1, batch 64, 32x32, f32: forward and forward+backward, 1 and 2 threads",
        conv2d,
    ),
    (
        "gpt",
        "GPT training step (4 layers, 4 heads, n_embd 128, block 64, vocab 256, batch 16, AdamW), 1 and 2 threads",
        gpt_train,
    ),
    (
        "resnet18",
        "ResNet-18 training step (10 classes, batch 16, 3x32x32, SGD momentum), 1 and 2 threads",
        resnet18_train,
    ),
    (
        "lstm",
        "LSTM step: forward + backward of a 1-layer nn::Lstm, batch 64, seq 32, 128 -> 128, f32",
        lstm_step,
    ),
    (
        "dispatch",
        "the cost of handing work to the worker pool (caller's time, worker wake-up delay), 2 threads",
        dispatch,
    ),
    (
        "placement",
        "cache-line round trip between two threads: shared last-level cache (tens of ns) or not (hundreds)",
        placement,
    ),
    (
        "mnist",
        "LeNet-5 and MLP training step (forward, loss, backward, Adam) at batch 64/128, 1 and 2 threads, vs PyTorch",
        mnist,
    ),
];

#[path = "bench_sections/mnist.rs"]
mod mnist_section;

#[path = "bench_sections/dispatch.rs"]
mod dispatch_section;

/// The `dispatch` section (in `bench_sections/dispatch.rs`).
fn dispatch(opts: &Opts) {
    dispatch_section::run(opts.quick);
}

#[path = "bench_sections/placement.rs"]
mod placement_section;

/// The `placement` section (in `bench_sections/placement.rs`).
fn placement(opts: &Opts) {
    placement_section::run(opts.quick);
}

#[path = "bench_sections/json.rs"]
mod json_section;

#[path = "bench_sections/tile_peak.rs"]
mod tile_peak;

#[path = "bench_sections/steps.rs"]
mod steps;

/// The `mnist` section (in `bench_sections/mnist.rs`).
fn mnist(opts: &Opts) {
    mnist_section::run(opts.quick);
}

// ---- Reference figures ------------------------------------------------------

/// Square sizes of the gemm section.
const GEMM_SIZES: [usize; 3] = [256, 512, 1024];

/// The FMA peak of `threads` threads measured now (512-bit vectors where
/// the CPU has them, else 256-bit), GFLOP/s f32; f64 is half of it.
fn measured_peak(threads: usize) -> Option<f64> {
    let (zmm, ymm) = json_section::fma_peak(20_000_000, threads);
    zmm.or(ymm)
}

// ---- Timing -----------------------------------------------------------------

/// The median and the best time of `f` in seconds, after one warm-up call,
/// over at least `min_reps` calls and about `budget` of wall time. The
/// machine is shared: the median is the figure, the best shows what the
/// code reaches when it has the cores to itself.
fn measure(opts: &Opts, min_reps: usize, budget: Duration, mut f: impl FnMut()) -> Timing {
    f();
    let (min_reps, budget) = if opts.quick {
        (min_reps.min(3), budget / 10)
    } else {
        (min_reps, budget)
    };
    let start = Instant::now();
    let mut times = Vec::new();
    while times.len() < min_reps || (start.elapsed() < budget && times.len() < 10_000) {
        let t = Instant::now();
        f();
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Timing {
        median: times[times.len() / 2],
        best: times[0],
    }
}

/// Seconds per call.
#[derive(Clone, Copy)]
struct Timing {
    median: f64,
    best: f64,
}

impl Timing {
    /// `(median rate, best rate)` for `work` units per call.
    fn rate(self, work: f64) -> (f64, f64) {
        (work / self.median, work / self.best)
    }
}

/// One printed line: a label, a measured figure, and references with ratios.
struct Row {
    label: String,
    /// The figure from the median time.
    value: f64,
    /// The figure from the best time.
    best: f64,
    unit: &'static str,
    refs: Vec<(&'static str, f64)>,
    note: String,
}

impl Row {
    fn print(&self) {
        let mut s = format!(
            "{:<16} {:>8.2} {:<7} (best {:>7.2})",
            self.label, self.value, self.unit, self.best
        );
        for (name, r) in &self.refs {
            s.push_str(&format!(" | {name} {r:.1} ({:.2}x)", self.value / r));
        }
        if !self.note.is_empty() {
            s.push_str(&format!(" | {}", self.note));
        }
        println!("{s}");
    }
}

// ---- Sections ---------------------------------------------------------------

fn square<E: Float>(n: usize, rng: &mut Rng) -> Tensor<E> {
    Tensor::from_fn(&[n, n], |_| E::from_f64(rng.uniform() * 2.0 - 1.0))
}

fn gemm_one<E: Float>(opts: &Opts, n: usize, threads: usize) -> (f64, f64) {
    let mut rng = Rng::new(n as u64);
    let a = square::<E>(n, &mut rng);
    let b = square::<E>(n, &mut rng);
    set_num_threads(threads);
    let t = measure(opts, 10, Duration::from_millis(700), || {
        black_box(black_box(&a).matmul(black_box(&b)));
    });
    t.rate(2.0 * (n * n * n) as f64 / 1e9)
}

/// `matrixmultiply`'s `sgemm` / `dgemm`: `(m, k, n, alpha, a, rsa, csa, b,
/// rsb, csb, beta, c, rsc, csc)`.
type MmGemm<T> = unsafe fn(
    usize,
    usize,
    usize,
    T,
    *const T,
    isize,
    isize,
    *const T,
    isize,
    isize,
    T,
    *mut T,
    isize,
    isize,
);

/// `matrixmultiply`'s single-threaded product of the same operands as
/// [`gemm_one`] (same seed), output allocated per call as
/// `Tensor::matmul`'s: the same-run reference, GFLOP/s.
fn matrixmultiply_one<E: Float>(opts: &Opts, n: usize, product: MmGemm<E>) -> f64 {
    let mut rng = Rng::new(n as u64);
    let a = square::<E>(n, &mut rng).to_vec();
    let b = square::<E>(n, &mut rng).to_vec();
    let s = n as isize;
    let t = measure(opts, 10, Duration::from_millis(700), || {
        let mut c = vec![E::zero(); n * n];
        // SAFETY: `a`, `b` and `c` hold `n * n` elements each, row-major
        // with row stride `n` and column stride 1, the strides given, so
        // every index the product forms is inside its buffer.
        unsafe {
            product(
                n,
                n,
                n,
                E::one(),
                a.as_ptr(),
                s,
                1,
                b.as_ptr(),
                s,
                1,
                E::zero(),
                c.as_mut_ptr(),
                s,
                1,
            );
        }
        black_box(c);
    });
    t.rate(2.0 * (n * n * n) as f64 / 1e9).0
}

fn gemm(opts: &Opts) {
    println!(
        "gemm: C = A B, square f32/f64, through Tensor::matmul (output allocated per call);\n\
         references measured in this run: matrixmultiply 0.3 on one thread (same operands)\n\
         and the FMA peak of 1 and 2 threads (f64 peak: half the f32 one)"
    );
    let peaks = [measured_peak(1), measured_peak(2)];
    // A peak read while other processes run is too low (and a percentage
    // above 100 says so): the load goes with every figure.
    if let Ok(load) = std::fs::read_to_string("/proc/loadavg") {
        let avg: Vec<&str> = load.split_whitespace().take(3).collect();
        println!(
            "load average (1, 5, 15 min) as the peak was measured: {}",
            avg.join(", ")
        );
    }
    for (bits, name) in [(32, "sgemm"), (64, "dgemm")] {
        for n in GEMM_SIZES {
            let mm = if bits == 32 {
                matrixmultiply_one::<f32>(opts, n, matrixmultiply::sgemm)
            } else {
                matrixmultiply_one::<f64>(opts, n, matrixmultiply::dgemm)
            };
            for threads in [1, 2] {
                let (g, best) = if bits == 32 {
                    gemm_one::<f32>(opts, n, threads)
                } else {
                    gemm_one::<f64>(opts, n, threads)
                };
                let note = match peaks[threads - 1] {
                    Some(p) => {
                        let peak = if bits == 32 { p } else { p / 2.0 };
                        format!("{:.0}% of the measured peak {peak:.0}", 100.0 * g / peak)
                    }
                    None => "no FMA peak measured on this CPU".to_string(),
                };
                Row {
                    label: format!("{name} {n:>4} {threads}T"),
                    value: g,
                    best,
                    unit: "GFLOP/s",
                    refs: vec![("matrixmultiply 1T", mm)],
                    note,
                }
                .print();
            }
        }
    }
}

fn elementwise(opts: &Opts) {
    println!(
        "elementwise f32 (output allocated per call); GB/s counts bytes read + written.\n\
         The reference is a plain\n\
         slice copy of the same size (read n + write n floats) measured in this run."
    );
    let mut rng = Rng::new(7);
    for n in [1usize << 20, 1 << 24] {
        let a = Tensor::<f32>::from_fn(&[n], |_| rng.uniform() as f32 * 4.0 - 2.0);
        let b = Tensor::<f32>::from_fn(&[n], |_| rng.uniform() as f32 * 4.0 - 2.0);
        let budget = Duration::from_millis(if n > 1 << 20 { 1500 } else { 500 });
        let src = a.as_slice();
        let copy = measure(opts, 10, budget, || {
            let v: Vec<f32> = black_box(src).to_vec();
            black_box(v);
        });
        let (copy_gbs, copy_best) = copy.rate((8 * n) as f64 / 1e9);
        let label_n = if n == 1 << 20 { "1M" } else { "16M" };
        Row {
            label: format!("copy {label_n:>3}"),
            value: copy_gbs,
            best: copy_best,
            unit: "GB/s",
            refs: vec![],
            note: format!("{:.2} Gelem/s", copy.rate(n as f64 / 1e9).0),
        }
        .print();
        for threads in [1, 2] {
            set_num_threads(threads);
            let add = measure(opts, 10, budget, || {
                black_box(black_box(&a) + black_box(&b));
            });
            let exp = measure(opts, 10, budget, || {
                black_box(black_box(&a).exp());
            });
            for (op, t, bytes) in [("add", add, 12), ("exp", exp, 8)] {
                let (gbs, best) = t.rate((bytes * n) as f64 / 1e9);
                Row {
                    label: format!("{op} {label_n:>3} {threads}T"),
                    value: gbs,
                    best,
                    unit: "GB/s",
                    refs: vec![("copy", copy_gbs)],
                    note: format!("{:.2} Gelem/s", t.rate(n as f64 / 1e9).0),
                }
                .print();
            }
        }
    }
}

fn conv2d(opts: &Opts) {
    println!(
        "conv2d: forge::nn::Conv2d 3->64, 3x3, padding 1, input [64, 3, 32, 32] f32 (im2col + gemm).\n\
         GFLOP/s counts 2 N O OH OW C kh kw = 0.226 GFLOP per forward, twice that per\n\
         gradient (input, weight)."
    );
    use forge::nn::Conv2d;
    use forge::Forward;
    let mut rng = Rng::new(11);
    let conv = Conv2d::<f32>::new(3, 64, 3, &mut rng).padding(1);
    let x = Tensor::<f32>::normal(&[64, 3, 32, 32], 0.0, 1.0, &mut rng);
    let xg = x.requires_grad();
    let gout = Tensor::<f32>::normal(&[64, 64, 32, 32], 0.0, 1.0, &mut rng);
    let gflop = 2.0 * (64 * 64 * 32 * 32 * 3 * 9) as f64 / 1e9;
    for threads in [1, 2] {
        set_num_threads(threads);
        let budget = Duration::from_millis(1500);
        let fwd = measure(opts, 10, budget, || {
            black_box(forge::no_grad(|| conv.forward(black_box(x.clone()))));
        });
        let fwd_bwd_w = measure(opts, 10, budget, || {
            let y = conv.forward(black_box(x.clone()));
            black_box(y.backward_with(&gout, false));
        });
        let fwd_bwd_xw = measure(opts, 10, budget, || {
            let y = conv.forward(black_box(xg.clone()));
            black_box(y.backward_with(&gout, false));
        });
        for (what, t, work) in [
            ("forward", fwd, gflop),
            ("fwd+bwd w,b", fwd_bwd_w, 2.0 * gflop),
            ("fwd+bwd x,w,b", fwd_bwd_xw, 3.0 * gflop),
        ] {
            let (g, _) = t.rate(work);
            Row {
                label: format!("{what} {threads}T"),
                value: t.median * 1e3,
                best: t.best * 1e3,
                unit: "ms",
                refs: vec![],
                note: format!("{g:.1} GFLOP/s"),
            }
            .print();
        }
    }
}

// ---- Models (GPT, ResNet18) -------------------------------------------------
// forge's time alone: the ratio to PyTorch comes from `bench/compare.sh`,
// which runs torch_bench.py interleaved with `--json` on the same machine.

fn gpt_train(opts: &Opts) {
    println!(
        "GPT training step (forward, cross-entropy, backward, AdamW), batch 16 x 64 tokens,\n\
         4 layers, 4 heads, n_embd 128, vocab 256, f32 (forge's GELU is the tanh form,\n\
         the PyTorch script's the erf form; same shapes and FLOPs, 5.50 GFLOP per step;\n\
         PyTorch's time in the same run: bench/compare.sh --models gpt)"
    );
    let cfg = GptConfig {
        vocab_size: 256,
        block_size: 64,
        n_layer: 4,
        n_head: 4,
        n_embd: 128,
        bias: true,
    };
    let mut rng = Rng::new(0);
    let mut gpt = Gpt::<f32>::new(cfg, &mut rng);
    let x = Tensor::<i64>::from_fn(&[16, 64], |_| rng.below(256) as i64);
    let y = Tensor::<i64>::from_fn(&[16, 64], |_| rng.below(256) as i64);
    let mut opt = AdamW::<f32>::new(3e-4).weight_decay(0.1);
    for threads in [1, 2] {
        set_num_threads(threads);
        let t = measure(opts, 5, Duration::from_secs(4), || {
            let grads = gpt.loss(&x, &y).backward();
            opt.step(&mut gpt, &grads).expect("shapes match");
        });
        Row {
            label: format!("gpt train b16 {threads}T"),
            value: t.median * 1e3,
            best: t.best * 1e3,
            unit: "ms",
            refs: vec![],
            note: format!(
                "{:.0} tok/s; {:.1} GFLOP/s",
                16.0 * 64.0 / t.median,
                5.50 / t.median
            ),
        }
        .print();
    }
}

fn resnet18_train(opts: &Opts) {
    println!(
        "ResNet-18 training step (forward, cross-entropy, backward, SGD momentum 0.9),\n\
         torchvision's network with 10 classes, batch 16 x 3x32x32, f32, training-mode\n\
         batch norm (3.48 GFLOP per step; PyTorch's time in the same run:\n\
         bench/compare.sh --models resnet18)"
    );
    let mut rng = Rng::new(0);
    let mut m = resnet18::<f32>(10, &mut rng);
    let x = Tensor::<f32>::normal(&[16, 3, 32, 32], 0.0, 1.0, &mut rng);
    let y = Tensor::<i64>::from_fn(&[16], |_| rng.below(10) as i64);
    let mut opt = Sgd::<f32>::new(0.01).momentum(0.9);
    for threads in [1, 2] {
        set_num_threads(threads);
        let t = measure(opts, 5, Duration::from_secs(4), || {
            // the loss (and its graph) dropped before the step, as in `--json`
            let grads =
                cross_entropy_with(&m.forward(x.clone()), &y, Default::default()).backward();
            opt.step(&mut m, &grads).expect("shapes match");
        });
        Row {
            label: format!("resnet18 train b16 {threads}T"),
            value: t.median * 1e3,
            best: t.best * 1e3,
            unit: "ms",
            refs: vec![],
            note: format!(
                "{:.0} img/s; {:.1} GFLOP/s",
                16.0 / t.median,
                3.48 / t.median
            ),
        }
        .print();
    }
}

fn lstm_step(opts: &Opts) {
    println!(
        "LSTM step (f32): x [T 32, N 64, I 128] -> H 128, one layer; forward (out, h_n, c_n)\n\
         then backward of out.sum() to x and every weight; GFLOP/s counts the 6 matmuls' flops (2 forward + 4 backward)."
    );
    let (t, n, i, h) = (32, 64, 128, 128);
    let mut rng = Rng::new(11);
    let lstm = Lstm::<f32>::new(RnnConfig::new(i, h), &mut rng);
    let x = Tensor::<f32>::uniform(&[t, n, i], -1.0, 1.0, &mut rng).requires_grad();
    // forward: x W_ih^T and h W_hh^T over all steps; backward: two products each
    let flops = 3.0 * 2.0 * (t * n * 4 * h * (i + h)) as f64 / 1e9;
    for threads in [1, 2] {
        set_num_threads(threads);
        let fwd = measure(opts, 5, Duration::from_millis(1500), || {
            black_box(lstm.forward(black_box(x.clone())));
        });
        let step = measure(opts, 5, Duration::from_millis(3000), || {
            let (out, _) = lstm.forward(black_box(x.clone()));
            black_box(out.sum().backward());
        });
        for (what, tm, work) in [("forward", fwd, flops / 3.0), ("fwd+bwd", step, flops)] {
            Row {
                label: format!("lstm {what} {threads}T"),
                value: tm.median * 1e3,
                best: tm.best * 1e3,
                unit: "ms",
                refs: vec![],
                note: format!("{:.1} GFLOP/s", tm.rate(work).0),
            }
            .print();
        }
    }
}

// ---- Driver -----------------------------------------------------------------

/// forge's micro-benchmarks (human-readable sections), or with `--json` the
/// plan of bench/torch_bench.py as JSON lines for bench/compare.sh.
#[derive(Parser, Debug)]
#[command(name = "bench", after_help = sections_help())]
struct Cli {
    /// Run only these sections, comma-separated (see --list)
    #[arg(long, value_delimiter = ',', value_parser = section_name)]
    only: Option<Vec<String>>,
    /// Print the sections and what each measures, then exit
    #[arg(long)]
    list: bool,
    /// Fewer repetitions (a smoke run)
    #[arg(long)]
    quick: bool,
    /// Print torch_bench.py's JSON lines instead of the sections
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    json_opts: json_section::JsonOpts,
}

/// clap's parser for one `--only` name: a section or an error that lists them.
fn section_name(s: &str) -> Result<String, String> {
    if SECTIONS.iter().any(|(name, _, _)| *name == s) {
        Ok(s.to_string())
    } else {
        let names: Vec<&str> = SECTIONS.iter().map(|s| s.0).collect();
        Err(format!(
            "no section named {s} (sections: {})",
            names.join(", ")
        ))
    }
}

/// The `--help` epilogue: the section names.
fn sections_help() -> String {
    let names: Vec<&str> = SECTIONS.iter().map(|s| s.0).collect();
    format!("Sections: {}", names.join(", "))
}

fn main() {
    let mut cli = Cli::parse();
    if cli.list {
        for (name, what, _) in SECTIONS {
            println!("{name:<12} {what}");
        }
        return;
    }
    if cli.json {
        for t in &mut cli.json_opts.threads {
            *t = (*t).max(1);
        }
        json_section::run_all(&cli.json_opts);
        return;
    }
    let opts = Opts { quick: cli.quick };
    let default_threads = forge::runtime::num_threads();
    println!(
        "forge bench ({} build), {} hardware threads",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    if let Ok(load) = std::fs::read_to_string("/proc/loadavg") {
        println!("load average before the run: {}", load.trim());
    }
    for (name, _, run) in SECTIONS {
        let selected = match &cli.only {
            None => true,
            Some(o) => o.iter().any(|n| n == name),
        };
        if selected {
            println!();
            run(&opts);
            set_num_threads(default_threads);
        }
    }
}
