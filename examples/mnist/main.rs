//! Trains a network on the bundled MNIST digits and prints the test accuracy
//! after every epoch as `epoch N: test accuracy 0.XXXX`.
//!
//! ```sh
//! cargo run --release --example mnist                      # LeNet-5, 10 epochs
//! cargo run --release --example mnist -- --model mlp --epochs 5
//! cargo run --release --example mnist -- --save ck.safetensors --epochs 2
//! cargo run --release --example mnist -- --resume ck.safetensors --epochs 4
//! cargo run --release --example mnist -- --profile trace.json --epochs 1
//! cargo run --release --example mnist -- --help
//! ```
//!
//! Data-parallel over MPI (`--distributed`, a build with `--features mpi`;
//! `--batch-size` is the global batch, split across the processes; rank 0
//! prints and writes the checkpoints):
//!
//! ```sh
//! cargo build --release --features mpi --example mnist
//! mpirun -np 2 target/release/examples/mnist --distributed --threads 1
//! ```

mod plot;

use clap::{Parser, ValueEnum};
use forge::data::mnist::{Mnist, MnistOptions};
use forge::data::DistributedSampler;
use forge::distributed::{Communicator, DistributedDataParallel, LocalCommunicator};
use forge::prelude::*;
use indicatif::{ProgressBar, ProgressStyle};
use plot::EpochStats;
use std::path::PathBuf;
use std::time::Instant;

/// Train a network on the bundled MNIST digits.
#[derive(Parser, Debug)]
#[command(about)]
struct Args {
    /// The network to train.
    #[arg(long, value_enum, default_value_t = ModelKind::Lenet)]
    model: ModelKind,
    /// Epochs in all (a resumed run continues up to this many).
    #[arg(long, default_value_t = 10)]
    epochs: u64,
    /// Samples per batch.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    batch_size: u64,
    /// Adam learning rate.
    #[arg(long, default_value_t = 1e-3)]
    lr: f64,
    /// Learning-rate schedule over the whole run.
    #[arg(long, value_enum, default_value_t = LrSchedule::Constant)]
    schedule: LrSchedule,
    /// Seed for the weights, dropout and shuffling.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Kernel threads (default: all cores).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    threads: Option<u64>,
    /// Folder with the IDX files.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/data/mnist"))]
    data: PathBuf,
    /// Write a training checkpoint (model, optimizer, schedule, loader
    /// position) here after every epoch.
    #[arg(long)]
    save: Option<PathBuf>,
    /// Also write the checkpoint every N steps (mid-epoch).
    #[arg(long, requires = "save")]
    save_every: Option<u64>,
    /// Continue from a training checkpoint written by --save.
    #[arg(long)]
    resume: Option<PathBuf>,
    /// Training-curve CSV (a PNG is written beside it) [default: mnist_<model>_curve.csv]
    #[arg(long)]
    curve: Option<PathBuf>,
    /// Feed pixels in [0, 1] instead of (x - 0.1307) / 0.3081.
    #[arg(long)]
    no_normalize: bool,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    /// Data-parallel training over MPI: start under `mpirun -np N`; each
    /// process trains on its 1/N of every batch of --batch-size (needs a
    /// build with `--features mpi`).
    #[arg(long)]
    distributed: bool,
    /// Profile the first --profile-steps training steps (forward, loss,
    /// backward, optimizer step; data loading left out): print a table of
    /// the time per op and write a Chrome trace (Perfetto,
    /// chrome://tracing) to this file.
    #[arg(long)]
    profile: Option<PathBuf>,
    /// How many steps --profile records.
    #[arg(long, default_value_t = 100, requires = "profile")]
    profile_steps: u64,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ModelKind {
    /// 784-512-256-10 ReLU.
    Mlp,
    /// LeNet-5.
    Lenet,
    /// A GRU reading the 28 rows as a sequence.
    Gru,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LrSchedule {
    /// The rate given by --lr throughout.
    Constant,
    /// Cosine annealing from --lr to 0 over all epochs.
    Cosine,
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

/// Runs with the processes of the run: MPI's with --distributed, this one
/// alone otherwise.
fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    if let Some(t) = args.threads {
        set_num_threads(t as usize);
    }
    if !args.distributed {
        return run_with(args, &LocalCommunicator);
    }
    #[cfg(feature = "mpi")]
    return run_with(args, &forge::distributed::MpiCommunicator::init()?);
    #[cfg(not(feature = "mpi"))]
    Err("--distributed needs a build with MPI: cargo build --release --features mpi --example mnist".into())
}

fn run_with<C: Communicator>(args: &Args, comm: &C) -> Result<(), Box<dyn std::error::Error>> {
    if !(args.batch_size as usize).is_multiple_of(comm.size()) {
        return Err(format!(
            "--batch-size {} does not split evenly over {} processes",
            args.batch_size,
            comm.size()
        )
        .into());
    }
    let normalize = !args.no_normalize;
    let data = Mnist::load_with(&args.data, MnistOptions { normalize })?;
    let processes = if args.distributed {
        format!(", {} processes", comm.size())
    } else {
        String::new()
    };
    root_println(comm, format!(
        "mnist: {} training and {} test images; model {:?}, {} epochs, batch {}, Adam lr {} ({:?}), seed {}, {} threads{processes}",
        data.train.len(),
        data.test.len(),
        args.model,
        args.epochs,
        args.batch_size,
        args.lr,
        args.schedule,
        args.seed,
        forge::runtime::num_threads()
    ));
    let mut rng = Rng::new(args.seed);
    match args.model {
        ModelKind::Lenet => train(
            forge::models::mnist::LeNet5::new(&mut rng),
            args,
            &data,
            comm,
        ),
        ModelKind::Mlp => train(
            forge::models::mnist::MnistMlp::new(&mut rng),
            args,
            &data,
            comm,
        ),
        ModelKind::Gru => train(MnistGru::new(&mut rng), args, &data, comm),
    }
}

/// Prints on rank 0 only (every line of a single-process run).
fn root_println<C: Communicator>(comm: &C, line: String) {
    if comm.is_root() {
        println!("{line}");
    }
}

/// Reads each image's 28 rows as a 28-step sequence (as DL4S's MNIST GRU
/// test does): a GRU with 128 hidden units, then a linear head on the last
/// hidden state.
#[derive(Layer)]
struct MnistGru {
    gru: Gru,
    head: Linear,
}

impl MnistGru {
    fn new(rng: &mut Rng) -> Self {
        MnistGru {
            gru: Gru::new(RnnConfig::new(28, 128).batch_first(true), rng),
            head: Linear::new(128, 10, rng),
        }
    }
}

impl Forward<Tensor> for MnistGru {
    type Output = Tensor;

    fn forward(&self, x: Tensor) -> Tensor {
        let n = x.dim(0) as isize;
        let (_, h_n) = self.gru.forward(x.reshape(&[n, 28, 28]));
        self.head.forward(h_n.reshape(&[n, 128]))
    }
}

/// The whole run for one model type.
fn train<M, C>(
    mut model: M,
    args: &Args,
    data: &Mnist,
    comm: &C,
) -> Result<(), Box<dyn std::error::Error>>
where
    M: Layer + Forward<Tensor, Output = Tensor>,
    C: Communicator,
{
    root_println(comm, format!("{} parameters", model.num_parameters()));
    // Shuffle with a stream separate from the weight initialisation. Each
    // process walks its shard of every epoch in batches of its share.
    let mut loader = DataLoader::new(&data.train, args.batch_size as usize / comm.size())
        .shuffle(args.seed ^ 0x5EED);
    if args.distributed {
        loader = loader.distributed(DistributedSampler::new(comm.rank(), comm.size()));
    }
    let mut opt = Adam::new(args.lr);
    let mut sched: Option<Schedule> = match args.schedule {
        LrSchedule::Constant => None,
        LrSchedule::Cosine => {
            let total = args.epochs * loader.num_batches() as u64;
            Some(CosineAnnealingLr::for_optimizer(&mut opt, total.max(1), 0.0).into())
        }
    };
    let mut step = 0;
    if let Some(path) = &args.resume {
        let s = sched
            .as_mut()
            .map(|s| s as &mut dyn forge::checkpoint::ScheduleState);
        // Every process loads the checkpoint rank 0 wrote.
        step = TrainingCheckpoint::load_into_with_loader(path, &mut model, &mut opt, s, &loader)?;
        root_println(
            comm,
            format!(
                "resumed from {} at step {step} (epoch {}, lr {})",
                path.display(),
                loader.epochs_done() + 1,
                opt.lr()
            ),
        );
    }
    // One process: a pass-through. Several: every process starts from
    // rank 0's weights and averages gradients before each step.
    let mut model = DistributedDataParallel::new(model, comm)?;
    let save = |model: &DistributedDataParallel<M, &C>,
                opt: &Adam,
                sched: &Option<Schedule>,
                step|
     -> forge::Result<()> {
        match &args.save {
            Some(path) => comm.run_on_root(|| {
                TrainingCheckpoint::save_with_loader(
                    path,
                    model,
                    opt,
                    sched.as_ref().map(|s| s as _),
                    &loader,
                    step,
                )
            }),
            None => Ok(()),
        }
    };

    let mut profiled = args
        .profile
        .as_ref()
        .map(|_| forge::tools::Profile::default());
    let mut curve = Vec::new();
    for epoch in loader.epochs_done() + 1..=args.epochs {
        let start = Instant::now();
        let comm_before = model.comm_time();
        model.train();
        let batches = loader.iter();
        let steps = batches.len();
        let bar = progress_bar(batches.len() as u64, epoch, args, comm);
        let (mut loss_sum, mut correct, mut seen) = (0.0f64, 0usize, 0usize);
        for (x, y) in batches {
            let n = y.numel();
            let body = || -> forge::Result<(f32, usize)> {
                let (loss, batch_correct) = {
                    let logits = model.forward(x);
                    (cross_entropy(&logits, &y), metrics::correct(&logits, &y))
                };
                // Gradients averaged over the ranks (DDP), the graph freed, the step.
                let value = opt.backward_step(&mut model, loss)?;
                Ok((value, batch_correct))
            };
            let (batch_loss, batch_correct) = match &mut profiled {
                Some(all) if step < args.profile_steps => {
                    let (r, p) = forge::tools::profile(body);
                    all.extend(p);
                    r?
                }
                _ => body()?,
            };
            loss_sum += batch_loss as f64 * n as f64;
            correct += batch_correct;
            seen += n;
            if let Some(s) = &mut sched {
                s.step(&mut opt);
            }
            step += 1;
            if step == args.profile_steps {
                finish_profile(args, profiled.take())?;
            }
            bar.inc(1);
            bar.set_message(format!(
                "loss {:.4}  acc {:.4}  {:.0} ex/s",
                loss_sum / seen as f64,
                correct as f64 / seen as f64,
                (seen * comm.size()) as f64 / start.elapsed().as_secs_f64().max(1e-9)
            ));
            if args.save_every.is_some_and(|n| step % n == 0) {
                save(&model, &opt, &sched, step)?;
            }
        }
        bar.finish_and_clear();
        // Every process's loss, hits and samples, summed.
        let mut totals = [loss_sum, correct as f64, seen as f64];
        comm.all_reduce_sum(&mut totals)?;
        let [loss_sum, correct, seen] = totals;
        let seconds = start.elapsed().as_secs_f64();
        let comm_ms = (model.comm_time() - comm_before).as_secs_f64() * 1e3 / steps.max(1) as f64;
        if !comm.is_root() {
            // The replicas are identical: rank 0 evaluates and reports.
            save(&model, &opt, &sched, step)?;
            continue;
        }
        let bar = progress_bar(0, epoch, args, comm);
        bar.set_message("test set");
        let test_accuracy = evaluate(model.module_mut(), &data.test, &bar)?;
        let stats = EpochStats {
            epoch,
            train_loss: loss_sum / seen.max(1.0),
            train_accuracy: correct / seen.max(1.0),
            test_accuracy,
            seconds,
        };
        let distributed = if args.distributed {
            format!(
                ", {} processes, gradient sync {comm_ms:.2} ms/step",
                comm.size()
            )
        } else {
            String::new()
        };
        println!(
            "epoch {epoch}: train loss {:.4}, train accuracy {:.4}, {seconds:.1} s, {:.0} examples/s{distributed}",
            stats.train_loss,
            stats.train_accuracy,
            seen / seconds
        );
        // The line scripts read: keep it alone on its line.
        println!("epoch {epoch}: test accuracy {test_accuracy:.4}");
        curve.push(stats);
        save(&model, &opt, &sched, step)?;
    }
    // A run shorter than --profile-steps: what it recorded.
    finish_profile(args, profiled.take())?;
    if !comm.is_root() {
        return Ok(());
    }
    if let Some(path) = &args.save {
        println!("checkpoint: {}", path.display());
    }
    let csv = args.curve.clone().unwrap_or_else(|| {
        format!("mnist_{:?}_curve.csv", args.model)
            .to_lowercase()
            .into()
    });
    plot::write_csv(&csv, &curve)?;
    let png = csv.with_extension("png");
    match plot::write_png(&png, &curve) {
        Ok(()) => println!("curve: {} and {}", csv.display(), png.display()),
        Err(e) => println!("curve: {} (no plot: {e})", csv.display()),
    }
    Ok(())
}

/// Prints the profile's table and writes its Chrome trace to --profile.
fn finish_profile(args: &Args, profile: Option<forge::tools::Profile>) -> forge::Result<()> {
    if let (Some(path), Some(p)) = (&args.profile, profile) {
        eprintln!(
            "profile of the first {} training steps (or all, if fewer):\n{}",
            args.profile_steps,
            p.table()
        );
        p.write_chrome_trace(path)?;
        eprintln!("trace: {}", path.display());
    }
    Ok(())
}

fn progress_bar<C: Communicator>(len: u64, epoch: u64, args: &Args, comm: &C) -> ProgressBar {
    if args.quiet || !comm.is_root() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("epoch {prefix} [{bar:30}] {pos}/{len} {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_prefix(format!("{epoch}/{}", args.epochs));
    bar
}

/// Test accuracy in eval mode, without recording a graph; `bar` follows
/// the batches through `forge::data::evaluate`'s progress handler (which
/// could also cancel the evaluation by answering `Flow::Cancel`).
fn evaluate<M>(model: &mut M, test: &InMemoryDataset, bar: &ProgressBar) -> forge::Result<f64>
where
    M: Layer + Forward<Tensor, Output = Tensor>,
{
    model.eval();
    let loader = DataLoader::new(test, 500);
    bar.set_length(loader.num_batches() as u64);
    let hits = forge::data::evaluate(
        &loader,
        |(x, y)| metrics::correct(&model.forward(x), &y),
        |done, _| {
            bar.set_position(done as u64);
            forge::runtime::Flow::Continue
        },
    );
    bar.finish_and_clear();
    model.train();
    Ok(hits?.iter().sum::<usize>() as f64 / test.len() as f64)
}
