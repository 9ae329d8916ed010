//! Loads a checkpoint written by the `mnist` example (a training
//! checkpoint, or a plain model file) and classifies the test split (or
//! other IDX files) under `no_grad`, printing the accuracy and the
//! confusion matrix.
//!
//! ```sh
//! cargo run --release --example mnist -- --model lenet --epochs 3 --save lenet.safetensors
//! cargo run --release --example mnist_predict -- --model lenet --checkpoint lenet.safetensors
//! cargo run --release --example mnist_predict -- --model mlp --checkpoint mlp.safetensors --precision int8
//! ```
//!
//! With a `--precision` other than `f32` it also prints the largest and
//! the mean difference of the logits from the f32 model's.

use clap::{Parser, ValueEnum};
use forge::data::mnist::{Mnist, MnistOptions};
use forge::models::mnist::{argmax_rows, LeNet5, MnistMlp};
use forge::models::precision::round_weights;
use forge::prelude::*;
use forge::quant::{quantize_dynamic, Granularity};
use std::path::PathBuf;

/// Classify MNIST digits with a checkpoint written by the `mnist` example.
#[derive(Parser, Debug)]
#[command(about)]
struct Opts {
    /// The checkpoint (`mnist --save PATH`, or a model file).
    #[arg(long)]
    checkpoint: PathBuf,
    /// The network the checkpoint holds.
    #[arg(long, value_enum, default_value_t = Model::Lenet)]
    model: Model,
    /// Folder with the IDX files.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/data/mnist"))]
    data: PathBuf,
    /// The checkpoint was trained with --no-normalize.
    #[arg(long)]
    no_normalize: bool,
    /// Round the loaded weights to this storage type (arithmetic stays
    /// f32), or quantize the linear layers to int8 (`forge::quant`).
    #[arg(long, value_enum, default_value_t = Precision::F32)]
    precision: Precision,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Model {
    /// LeNet-5.
    Lenet,
    /// 784-512-256-10 ReLU.
    Mlp,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Precision {
    F32,
    Bf16,
    F16,
    /// Dynamic int8, one weight scale per output channel.
    Int8,
    /// Dynamic int8, one weight scale per layer.
    Int8PerTensor,
}

fn main() {
    let opts = Opts::parse();
    let result = match opts.model {
        Model::Lenet => run(LeNet5::new(&mut Rng::new(0)), &opts),
        Model::Mlp => run(MnistMlp::new(&mut Rng::new(0)), &opts),
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run<M>(mut model: M, opts: &Opts) -> Result<(), Box<dyn std::error::Error>>
where
    M: Layer + Forward<Tensor, Output = Tensor> + Clone,
{
    TrainingCheckpoint::load_model(&opts.checkpoint, &mut model)?;
    let mut reference = model.clone();
    reference.eval();
    match opts.precision {
        Precision::F32 => {}
        Precision::Bf16 => round_weights::<forge::half::bf16, f32, M>(&mut model),
        Precision::F16 => round_weights::<forge::half::f16, f32, M>(&mut model),
        Precision::Int8 => {
            quantize_dynamic(&mut model, Granularity::PerChannel);
        }
        Precision::Int8PerTensor => {
            quantize_dynamic(&mut model, Granularity::PerTensor);
        }
    }
    println!("weights stored as {:?}", opts.precision);
    model.eval();
    let (mut max_err, mut sum_err, mut count) = (0f32, 0f64, 0usize);
    let normalize = !opts.no_normalize;
    let data = Mnist::load_with(&opts.data, MnistOptions { normalize })?;
    let test: &InMemoryDataset = &data.test;
    let mut confusion = [[0usize; 10]; 10];
    let loader = DataLoader::new(test, 500);
    no_grad(|| {
        for (x, y) in loader.iter() {
            let logits = model.forward(x.clone());
            debug_assert!(!logits.is_tracked());
            if !matches!(opts.precision, Precision::F32) {
                let exact = reference.forward(x);
                for (a, b) in logits.as_slice().iter().zip(exact.as_slice()) {
                    let e = (a - b).abs();
                    max_err = max_err.max(e);
                    sum_err += f64::from(e);
                    count += 1;
                }
            }
            for (p, &t) in argmax_rows(&logits).into_iter().zip(y.as_slice()) {
                confusion[t as usize][p] += 1;
            }
        }
    });
    let correct: usize = (0..10).map(|d| confusion[d][d]).sum();
    println!(
        "{}: {} test images, accuracy {:.4}",
        opts.checkpoint.display(),
        test.len(),
        correct as f64 / test.len() as f64
    );
    if count > 0 {
        println!(
            "logits against f32: max |error| {max_err:.5}, mean |error| {:.6}",
            sum_err / count as f64
        );
    }
    println!("\nconfusion matrix (rows: true digit, columns: predicted)");
    print!("     ");
    for p in 0..10 {
        print!("{p:>5}");
    }
    println!("   recall");
    for (t, row) in confusion.iter().enumerate() {
        print!("{t:>5}");
        for n in row {
            print!("{n:>5}");
        }
        let total: usize = row.iter().sum();
        println!("   {:.3}", row[t] as f64 / total.max(1) as f64);
    }
    Ok(())
}
