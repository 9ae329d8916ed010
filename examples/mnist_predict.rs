//! Loads a checkpoint written by the `mnist` example and classifies the
//! test split (or other IDX files) under `no_grad`, printing the accuracy
//! and the confusion matrix.
//!
//! ```sh
//! cargo run --release --example mnist -- --model lenet --epochs 3 --save lenet.safetensors
//! cargo run --release --example mnist_predict -- --model lenet --checkpoint lenet.safetensors
//! ```

use forge::data::mnist::{Mnist, MnistOptions};
use forge::data::{DataLoader, Dataset, InMemoryDataset};
use forge::models::mnist::{argmax_rows, LeNet5, MnistMlp};
use forge::nn::{Forward, Layer};
use forge::{Rng, Tensor};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const USAGE: &str = "\
usage: cargo run --release --example mnist_predict -- --checkpoint PATH [options]

  --checkpoint PATH       weights saved by `mnist --save PATH` (required)
  --model mlp|lenet       the network the checkpoint holds (default lenet)
  --data DIR              folder with the IDX files (default data/mnist)
  --no-normalize          the checkpoint was trained with --no-normalize
  --precision f32|bf16|f16  round the loaded weights to this storage type
                          (arithmetic stays f32), as a half-precision check
";

struct Opts {
    checkpoint: PathBuf,
    model: String,
    data: PathBuf,
    normalize: bool,
    precision: String,
}

fn parse() -> Result<Opts, String> {
    let mut o = Opts {
        checkpoint: PathBuf::new(),
        model: "lenet".into(),
        data: PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/data/mnist")),
        normalize: true,
        precision: "f32".into(),
    };
    let mut have_checkpoint = false;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--checkpoint" => {
                o.checkpoint = value()?.into();
                have_checkpoint = true;
            }
            "--model" => o.model = value()?,
            "--data" => o.data = value()?.into(),
            "--no-normalize" => o.normalize = false,
            "--precision" => o.precision = value()?,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    if !have_checkpoint {
        return Err("--checkpoint is required".into());
    }
    Ok(o)
}

fn main() {
    let opts = match parse() {
        Ok(o) => o,
        Err(msg) => {
            if !msg.is_empty() {
                eprintln!("error: {msg}\n");
            }
            eprint!("{USAGE}");
            std::process::exit(if msg.is_empty() { 0 } else { 2 });
        }
    };
    let result = match opts.model.as_str() {
        "lenet" => run(LeNet5::new(&mut Rng::new(0)), &opts),
        "mlp" => run(MnistMlp::new(&mut Rng::new(0)), &opts),
        other => Err(format!("unknown model {other:?}").into()),
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run<M>(mut model: M, opts: &Opts) -> Result<(), Box<dyn std::error::Error>>
where
    M: Layer + Forward<Tensor, Output = Tensor>,
{
    load_checkpoint(&mut model, &opts.checkpoint)?;
    match opts.precision.as_str() {
        "f32" => {}
        "bf16" => forge::models::precision::round_weights::<forge::half::bf16, f32, M>(&mut model),
        "f16" => forge::models::precision::round_weights::<forge::half::f16, f32, M>(&mut model),
        other => return Err(format!("unknown precision {other:?} (f32, bf16 or f16)").into()),
    }
    println!("weights stored as {}", opts.precision);
    model.eval();
    let data = Mnist::load_with(
        &opts.data,
        MnistOptions {
            normalize: opts.normalize,
        },
    )?;
    let test: &InMemoryDataset = &data.test;
    let mut confusion = [[0usize; 10]; 10];
    let loader = DataLoader::new(test, 500);
    forge::no_grad(|| {
        for (x, y) in loader.iter() {
            let logits = model.forward(x);
            debug_assert!(!logits.is_tracked());
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

/// Loads weights saved by `mnist --save` into `model`.
fn load_checkpoint<M: Layer>(model: &mut M, path: &Path) -> forge::Result<()> {
    let file = forge::io::read_safetensors(path)?;
    let dict: BTreeMap<String, Tensor> = file
        .tensors
        .iter()
        .map(|(k, t)| (k.clone(), t.to_float()))
        .collect();
    model.load_state_dict(&dict)
}
