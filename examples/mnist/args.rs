//! Command-line options of the MNIST example (hand-parsed: no extra crate).

use std::path::PathBuf;

/// Which network to train.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelKind {
    /// 784-512-256-10 ReLU.
    Mlp,
    /// LeNet-5.
    Lenet,
    /// A GRU reading the 28 rows as a sequence.
    Gru,
}

impl ModelKind {
    pub fn name(self) -> &'static str {
        match self {
            ModelKind::Mlp => "mlp",
            ModelKind::Lenet => "lenet",
            ModelKind::Gru => "gru",
        }
    }
}

/// Every option, with its default.
#[derive(Clone, Debug)]
pub struct Args {
    pub model: ModelKind,
    pub epochs: usize,
    pub batch_size: usize,
    pub lr: f64,
    pub seed: u64,
    pub threads: Option<usize>,
    pub data: PathBuf,
    pub save: Option<PathBuf>,
    pub resume: Option<PathBuf>,
    pub curve: PathBuf,
    pub normalize: bool,
    pub quiet: bool,
}

pub const USAGE: &str = "\
usage: cargo run --release --example mnist -- [options]

  --model mlp|lenet|gru   network to train (default lenet)
  --epochs N              epochs (default 10)
  --batch-size N          batch size (default 64)
  --lr X                  Adam learning rate (default 0.001)
  --seed N                seed for weights and shuffling (default 0)
  --threads N             kernel threads (default: all cores)
  --data DIR              folder with the IDX files (default data/mnist)
  --save PATH             write a checkpoint (safetensors) after every epoch
  --resume PATH           start from a checkpoint's weights
  --curve PATH            training curve CSV (default mnist_<model>_curve.csv)
  --no-normalize          feed pixels in [0, 1] instead of (x - 0.1307) / 0.3081
  --quiet                 no progress bar
";

impl Args {
    /// Parses `std::env::args()`; prints the usage and exits on `--help`
    /// or on a bad option.
    pub fn from_env() -> Args {
        match Args::parse(std::env::args().skip(1)) {
            Ok(a) => a,
            Err(msg) => {
                if msg.is_empty() {
                    print!("{USAGE}");
                    std::process::exit(0);
                }
                eprintln!("error: {msg}\n\n{USAGE}");
                std::process::exit(2);
            }
        }
    }

    /// Parses options; `Err("")` means help was asked for.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Args, String> {
        let mut a = Args {
            model: ModelKind::Lenet,
            epochs: 10,
            batch_size: 64,
            lr: 1e-3,
            seed: 0,
            threads: None,
            data: PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/data/mnist")),
            save: None,
            resume: None,
            curve: PathBuf::new(),
            normalize: true,
            quiet: false,
        };
        let mut curve = None;
        let mut it = args.into_iter();
        while let Some(flag) = it.next() {
            let (flag, inline) = match flag.split_once('=') {
                Some((f, v)) => (f.to_string(), Some(v.to_string())),
                None => (flag, None),
            };
            let mut value = |name: &str| {
                inline
                    .clone()
                    .or_else(|| it.next())
                    .ok_or_else(|| format!("{name} needs a value"))
            };
            fn num<T: std::str::FromStr>(name: &str, v: String) -> Result<T, String> {
                v.parse().map_err(|_| format!("{name}: cannot parse {v:?}"))
            }
            match flag.as_str() {
                "-h" | "--help" => return Err(String::new()),
                "--model" => {
                    a.model = match value("--model")?.as_str() {
                        "mlp" => ModelKind::Mlp,
                        "lenet" => ModelKind::Lenet,
                        "gru" => ModelKind::Gru,
                        other => return Err(format!("--model: unknown model {other:?}")),
                    }
                }
                "--epochs" => a.epochs = num("--epochs", value("--epochs")?)?,
                "--batch-size" => a.batch_size = num("--batch-size", value("--batch-size")?)?,
                "--lr" => a.lr = num("--lr", value("--lr")?)?,
                "--seed" => a.seed = num("--seed", value("--seed")?)?,
                "--threads" => a.threads = Some(num("--threads", value("--threads")?)?),
                "--data" => a.data = value("--data")?.into(),
                "--save" => a.save = Some(value("--save")?.into()),
                "--resume" => a.resume = Some(value("--resume")?.into()),
                "--curve" => curve = Some(PathBuf::from(value("--curve")?)),
                "--no-normalize" => a.normalize = false,
                "--quiet" => a.quiet = true,
                other => return Err(format!("unknown option {other:?}")),
            }
        }
        if a.batch_size == 0 {
            return Err("--batch-size must be at least 1".into());
        }
        if a.threads == Some(0) {
            return Err("--threads must be at least 1".into());
        }
        a.curve = curve.unwrap_or_else(|| format!("mnist_{}_curve.csv", a.model.name()).into());
        Ok(a)
    }
}
