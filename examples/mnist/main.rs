//! Trains a network on the bundled MNIST digits and prints the test accuracy
//! after every epoch as `epoch N: test accuracy 0.XXXX`.
//!
//! ```sh
//! cargo run --release --example mnist                      # LeNet-5, 10 epochs
//! cargo run --release --example mnist -- --model mlp --epochs 5
//! cargo run --release --example mnist -- --help
//! ```

mod args;
mod plot;

use args::{Args, ModelKind};
use forge::data::mnist::{Mnist, MnistOptions};
use forge::data::{DataLoader, Dataset, InMemoryDataset};
use forge::models::mnist::{argmax_rows, LeNet5, MnistMlp};
use forge::nn::functional::{cross_entropy_with, CrossEntropyOptions};
use forge::nn::{Forward, Gru, Layer, Linear, RnnConfig};
use forge::optim::Adam;
use forge::{Gradients, Rng, Tensor};
use indicatif::{ProgressBar, ProgressStyle};
use plot::EpochStats;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

fn main() {
    let args = Args::from_env();
    if let Err(e) = run(&args) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    if let Some(t) = args.threads {
        forge::cpu::set_num_threads(t);
    }
    let data = Mnist::load_with(
        &args.data,
        MnistOptions {
            normalize: args.normalize,
        },
    )?;
    println!(
        "mnist: {} training and {} test images; model {}, {} epochs, batch {}, Adam lr {}, seed {}, {} threads",
        data.train.len(),
        data.test.len(),
        args.model.name(),
        args.epochs,
        args.batch_size,
        args.lr,
        args.seed,
        forge::cpu::num_threads()
    );
    let mut rng = Rng::new(args.seed);
    match args.model {
        ModelKind::Lenet => train(LeNet5::new(&mut rng), args, &data),
        ModelKind::Mlp => train(MnistMlp::new(&mut rng), args, &data),
        ModelKind::Gru => train(MnistGru::new(&mut rng), args, &data),
    }
}

/// Reads each image's 28 rows as a 28-step sequence (as DL4S's MNIST GRU
/// test does): a GRU with 128 hidden units, then a linear head on the last
/// hidden state.
#[derive(forge::nn::Layer)]
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
fn train<M>(mut model: M, args: &Args, data: &Mnist) -> Result<(), Box<dyn std::error::Error>>
where
    M: Layer + Forward<Tensor, Output = Tensor>,
{
    if let Some(path) = &args.resume {
        load_checkpoint(&mut model, path)?;
        println!("resumed from {}", path.display());
    }
    println!("{} parameters", model.num_parameters());
    let mut opt = Adam::<f32>::new(args.lr);
    // Shuffle with a stream separate from the weight initialisation.
    let loader = DataLoader::new(&data.train, args.batch_size).shuffle(args.seed ^ 0x5EED);
    let mut curve = Vec::new();
    for epoch in 1..=args.epochs {
        let start = Instant::now();
        model.train();
        let bar = progress_bar(loader.num_samples() as u64, epoch, args);
        let (mut loss_sum, mut correct, mut seen) = (0.0f64, 0usize, 0usize);
        for (x, y) in loader.iter() {
            let b = y.numel();
            let logits = model.forward(x);
            let loss = cross_entropy_with(&logits, &y, CrossEntropyOptions::default());
            let grads = loss.backward();
            adam_step(&mut opt, &mut model, &grads)?;
            loss_sum += loss.item() as f64 * b as f64;
            correct += count_correct(&logits, &y);
            seen += b;
            bar.inc(b as u64);
            let rate = seen as f64 / start.elapsed().as_secs_f64().max(1e-9);
            bar.set_message(format!(
                "loss {:.4}  acc {:.4}  {:.0} ex/s",
                loss_sum / seen as f64,
                correct as f64 / seen as f64,
                rate
            ));
        }
        bar.finish_and_clear();
        let train_time = start.elapsed().as_secs_f64();
        let test_accuracy = evaluate(&mut model, &data.test);
        let stats = EpochStats {
            epoch,
            train_loss: loss_sum / seen.max(1) as f64,
            train_accuracy: correct as f64 / seen.max(1) as f64,
            test_accuracy,
            seconds: train_time,
        };
        println!(
            "epoch {epoch}: train loss {:.4}, train accuracy {:.4}, {:.1} s, {:.0} examples/s",
            stats.train_loss,
            stats.train_accuracy,
            train_time,
            seen as f64 / train_time
        );
        // The line scripts read: keep it alone on its line.
        println!("epoch {epoch}: test accuracy {test_accuracy:.4}");
        curve.push(stats);
        if let Some(path) = &args.save {
            save_checkpoint(&model, path)?;
        }
    }
    if let Some(path) = &args.save {
        println!("checkpoint: {}", path.display());
    }
    plot::write_csv(&args.curve, &curve)?;
    let png = args.curve.with_extension("png");
    plot::write_png(&png, &curve)?;
    println!("curve: {} and {}", args.curve.display(), png.display());
    Ok(())
}

fn progress_bar(len: u64, epoch: usize, args: &Args) -> ProgressBar {
    if args.quiet {
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

/// The number of rows of `logits` whose largest entry is the label.
fn count_correct(logits: &Tensor, labels: &Tensor<i64>) -> usize {
    argmax_rows(logits)
        .iter()
        .zip(labels.as_slice())
        .filter(|(p, y)| **p as i64 == **y)
        .count()
}

/// Test accuracy in eval mode, without recording a graph.
fn evaluate<M>(model: &mut M, test: &InMemoryDataset) -> f64
where
    M: Layer + Forward<Tensor, Output = Tensor>,
{
    model.eval();
    let loader = DataLoader::new(test, 500);
    let correct: usize = forge::no_grad(|| {
        loader
            .iter()
            .map(|(x, y)| count_correct(&model.forward(x), &y))
            .sum()
    });
    model.train();
    correct as f64 / test.len() as f64
}

/// One Adam step over every trainable parameter of `model`, keyed by path.
fn adam_step<M: Layer>(opt: &mut Adam, model: &mut M, grads: &Gradients<f32>) -> forge::Result<()> {
    let mut result = Ok(());
    model.for_each_parameter_mut(&mut |path, p| {
        if result.is_ok() {
            result = opt.step_params(vec![(path, p)], grads);
        }
    });
    result
}

/// Writes the model's state dict as safetensors.
fn save_checkpoint<M: Layer>(model: &M, path: &Path) -> forge::Result<()> {
    let tensors = model
        .state_dict()
        .into_iter()
        .map(|(k, t)| (k, forge::io::AnyTensor::from(t)))
        .collect();
    forge::io::write_safetensors(path, &tensors, &BTreeMap::new())
}

/// Loads weights saved by [`save_checkpoint`] into `model`.
fn load_checkpoint<M: Layer>(model: &mut M, path: &Path) -> forge::Result<()> {
    let file = forge::io::read_safetensors(path)?;
    let dict: BTreeMap<String, Tensor> = file
        .tensors
        .iter()
        .map(|(k, t)| (k.clone(), t.to_float()))
        .collect();
    model.load_state_dict(&dict)
}
