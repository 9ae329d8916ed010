//! A character-level GPT trained on a text file, then sampled.
//!
//! ```sh
//! cargo run --release --example gpt                      # the GPL v3 text in data/text/
//! cargo run --release --example gpt -- my.txt --steps 3000 --save gpt.safetensors
//! cargo run --release --example gpt -- --load gpt.safetensors --steps 0 --top-k 5
//! ```
//!
//! The tokenizer is the sorted set of distinct bytes of the text. Training
//! uses random windows, AdamW (betas 0.9/0.95, weight decay 0.1 on 2-D
//! weights only), a linear warm-up then cosine decay of the rate,
//! gradient-norm clipping at 1.0, and writes a checkpoint (safetensors:
//! the weights under nanoGPT's names, the vocabulary and the configuration
//! in the metadata) every `--eval-every` steps and at the end. Then it
//! samples with a temperature and top-k.

use forge::io::{read_safetensors, write_safetensors, AnyTensor};
use forge::models::gpt::{Gpt, GptConfig};
use forge::nn::Layer;
use forge::optim::{
    clip_grad_norm_with, AdamW, CosineAnnealingLr, LinearLr, LrScheduler, ParamGroup, SequentialLr,
};
use forge::{no_grad, Rng, Tensor};
use indicatif::{ProgressBar, ProgressStyle};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

const USAGE: &str = "\
usage: cargo run --release --example gpt -- [TEXT] [options]

  TEXT                  training text (default data/text/gpl3.txt, the GNU GPL v3)
  --steps N             optimizer steps (default 2000; 0 = only sample)
  --batch N             windows per step (default 16)
  --block N             context length (default 64)
  --layers N            transformer blocks (default 4)
  --heads N             attention heads (default 4)
  --embd N              width (default 128)
  --lr X                peak learning rate (default 3e-3)
  --min-lr X            final learning rate (default 3e-4)
  --warmup N            warm-up steps (default 100)
  --clip X              gradient-norm clip (default 1.0)
  --eval-every N        validation loss and checkpoint every N steps (default 250)
  --save PATH           checkpoint path (default gpt_char.safetensors)
  --load PATH           start from a checkpoint (its configuration wins)
  --sample-len N        characters to sample (default 500)
  --temperature X       sampling temperature (default 0.8)
  --top-k N             sample among the N likeliest characters (default 10; 0 = all)
  --prompt TEXT         start of the sample (default: a newline)
  --seed N              seed for weights, batches and sampling (default 1337)
  --quiet               no progress bar
";

struct Args {
    text: PathBuf,
    steps: usize,
    batch: usize,
    block: usize,
    layers: usize,
    heads: usize,
    embd: usize,
    lr: f64,
    min_lr: f64,
    warmup: usize,
    clip: f64,
    eval_every: usize,
    save: PathBuf,
    load: Option<PathBuf>,
    sample_len: usize,
    temperature: f64,
    top_k: usize,
    prompt: String,
    seed: u64,
    quiet: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        text: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/text/gpl3.txt"),
        steps: 2000,
        batch: 16,
        block: 64,
        layers: 4,
        heads: 4,
        embd: 128,
        lr: 3e-3,
        min_lr: 3e-4,
        warmup: 100,
        clip: 1.0,
        eval_every: 250,
        save: PathBuf::from("gpt_char.safetensors"),
        load: None,
        sample_len: 500,
        temperature: 0.8,
        top_k: 10,
        prompt: "\n".into(),
        seed: 1337,
        quiet: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        fn num<T: std::str::FromStr>(name: &str, v: String) -> Result<T, String> {
            v.parse().map_err(|_| format!("{name}: cannot parse {v:?}"))
        }
        match flag.as_str() {
            "-h" | "--help" => return Err(String::new()),
            "--steps" => a.steps = num("--steps", value("--steps")?)?,
            "--batch" => a.batch = num("--batch", value("--batch")?)?,
            "--block" => a.block = num("--block", value("--block")?)?,
            "--layers" => a.layers = num("--layers", value("--layers")?)?,
            "--heads" => a.heads = num("--heads", value("--heads")?)?,
            "--embd" => a.embd = num("--embd", value("--embd")?)?,
            "--lr" => a.lr = num("--lr", value("--lr")?)?,
            "--min-lr" => a.min_lr = num("--min-lr", value("--min-lr")?)?,
            "--warmup" => a.warmup = num("--warmup", value("--warmup")?)?,
            "--clip" => a.clip = num("--clip", value("--clip")?)?,
            "--eval-every" => a.eval_every = num("--eval-every", value("--eval-every")?)?,
            "--save" => a.save = value("--save")?.into(),
            "--load" => a.load = Some(value("--load")?.into()),
            "--sample-len" => a.sample_len = num("--sample-len", value("--sample-len")?)?,
            "--temperature" => a.temperature = num("--temperature", value("--temperature")?)?,
            "--top-k" => a.top_k = num("--top-k", value("--top-k")?)?,
            "--prompt" => a.prompt = value("--prompt")?,
            "--seed" => a.seed = num("--seed", value("--seed")?)?,
            "--quiet" => a.quiet = true,
            f if f.starts_with("--") => return Err(format!("unknown option {f}")),
            path => a.text = path.into(),
        }
    }
    if a.batch == 0 || a.block == 0 || a.eval_every == 0 || a.temperature <= 0.0 {
        return Err("--batch, --block and --eval-every must be positive, --temperature > 0".into());
    }
    Ok(a)
}

/// Bytes <-> token ids: id `i` is byte `vocab[i]`.
struct Tokenizer {
    vocab: Vec<u8>,
    ids: [Option<i64>; 256],
}

impl Tokenizer {
    fn new(vocab: Vec<u8>) -> Self {
        let mut ids = [None; 256];
        for (i, &b) in vocab.iter().enumerate() {
            ids[b as usize] = Some(i as i64);
        }
        Tokenizer { vocab, ids }
    }
    fn from_text(text: &[u8]) -> Self {
        let mut v = text.to_vec();
        v.sort_unstable();
        v.dedup();
        Self::new(v)
    }
    /// Unknown bytes are dropped.
    fn encode(&self, text: &[u8]) -> Vec<i64> {
        text.iter().filter_map(|&b| self.ids[b as usize]).collect()
    }
    fn decode(&self, ids: &[i64]) -> String {
        let bytes: Vec<u8> = ids.iter().map(|&i| self.vocab[i as usize]).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// `batch` random windows of `block + 1` tokens: inputs and next tokens.
fn batch(data: &[i64], batch: usize, block: usize, rng: &mut Rng) -> (Tensor<i64>, Tensor<i64>) {
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for _ in 0..batch {
        let s = rng.below(data.len() - block);
        x.extend_from_slice(&data[s..s + block]);
        y.extend_from_slice(&data[s + 1..s + block + 1]);
    }
    (
        Tensor::from_vec(x, &[batch, block]),
        Tensor::from_vec(y, &[batch, block]),
    )
}

fn eval_loss(gpt: &Gpt, data: &[i64], block: usize, rng: &mut Rng) -> f32 {
    no_grad(|| {
        let n = 8;
        (0..n)
            .map(|_| {
                let (x, y) = batch(data, 16, block, rng);
                gpt.loss(&x, &y).item()
            })
            .sum::<f32>()
            / n as f32
    })
}

fn save(gpt: &Gpt, tok: &Tokenizer, path: &PathBuf) -> forge::Result<()> {
    let mut tensors: BTreeMap<String, AnyTensor> = gpt
        .state_dict()
        .into_iter()
        .map(|(k, v)| (k, v.into()))
        .collect();
    tensors.insert(
        "vocab".into(),
        Tensor::from_vec(tok.vocab.clone(), &[tok.vocab.len()]).into(),
    );
    let c = gpt.config;
    let meta: BTreeMap<String, String> = [
        ("vocab_size", c.vocab_size),
        ("block_size", c.block_size),
        ("n_layer", c.n_layer),
        ("n_head", c.n_head),
        ("n_embd", c.n_embd),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .chain([("bias".to_string(), c.bias.to_string())])
    .collect();
    write_safetensors(path, &tensors, &meta)
}

fn load(path: &PathBuf) -> Result<(Gpt, Tokenizer), Box<dyn std::error::Error>> {
    let file = read_safetensors(path)?;
    let num = |k: &str| -> Result<usize, Box<dyn std::error::Error>> {
        Ok(file
            .metadata
            .get(k)
            .ok_or(format!("{}: no metadata {k}", path.display()))?
            .parse()?)
    };
    let config = GptConfig {
        vocab_size: num("vocab_size")?,
        block_size: num("block_size")?,
        n_layer: num("n_layer")?,
        n_head: num("n_head")?,
        n_embd: num("n_embd")?,
        bias: file.metadata.get("bias").map(String::as_str) != Some("false"),
    };
    let mut tensors = file.tensors;
    let vocab = tensors
        .remove("vocab")
        .and_then(|t| t.get::<u8>())
        .ok_or(format!("{}: no u8 tensor `vocab`", path.display()))?;
    let sd: BTreeMap<String, Tensor> = tensors
        .iter()
        .map(|(k, v)| (k.clone(), v.to_float()))
        .collect();
    let mut gpt = Gpt::new(config, &mut Rng::new(0));
    gpt.load_state_dict(&sd)?;
    Ok((gpt, Tokenizer::new(vocab.to_vec())))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprint!(
                "{}{USAGE}",
                if e.is_empty() {
                    e
                } else {
                    format!("error: {e}\n\n")
                }
            );
            std::process::exit(2);
        }
    };
    let text = std::fs::read(&args.text).map_err(|e| format!("{}: {e}", args.text.display()))?;
    let mut rng = Rng::new(args.seed);
    let (mut gpt, tok) = match &args.load {
        Some(p) => load(p)?,
        None => {
            let tok = Tokenizer::from_text(&text);
            let config = GptConfig {
                vocab_size: tok.vocab.len(),
                block_size: args.block,
                n_layer: args.layers,
                n_head: args.heads,
                n_embd: args.embd,
                bias: true,
            };
            (Gpt::new(config, &mut rng), tok)
        }
    };
    let block = gpt.config.block_size;
    let data = tok.encode(&text);
    let split = data.len() * 9 / 10;
    let (train, val) = (&data[..split], &data[split..]);
    if train.len() <= block + 1 || val.len() <= block + 1 {
        return Err(format!(
            "{}: {} tokens are too few for block size {block}",
            args.text.display(),
            data.len()
        )
        .into());
    }
    println!(
        "{}: {} characters, vocabulary {}, {} parameters ({} layers, {} heads, width {}, context {block})",
        args.text.display(),
        data.len(),
        tok.vocab.len(),
        gpt.num_parameters(),
        gpt.config.n_layer,
        gpt.config.n_head,
        gpt.config.n_embd
    );

    if args.steps > 0 {
        // Weight decay on the 2-D weights only (nanoGPT's groups).
        let no_decay: Vec<String> = gpt
            .named_parameters()
            .into_iter()
            .filter(|(_, p)| p.rank() < 2)
            .map(|(n, _)| n)
            .collect();
        let mut opt = AdamW::<f32>::new(args.lr)
            .betas(0.9, 0.95)
            .weight_decay(0.1)
            .with_group(
                ParamGroup::matching(move |p| no_decay.iter().any(|n| n == p)).weight_decay(0.0),
            );
        let warmup = args.warmup.clamp(1, args.steps) as u64;
        let mut sched = SequentialLr::new(
            vec![
                LinearLr::new(args.lr, 1.0 / warmup as f64, 1.0, warmup).into(),
                CosineAnnealingLr::new(args.lr, (args.steps as u64 - warmup).max(1), args.min_lr)
                    .into(),
            ],
            &[warmup],
        );
        sched.apply(&mut opt);
        let bar = if args.quiet {
            ProgressBar::hidden()
        } else {
            ProgressBar::new(args.steps as u64)
        };
        bar.set_style(
            ProgressStyle::with_template("[{elapsed_precise}] [{bar:30}] {pos}/{len} {msg}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        let start = Instant::now();
        for step in 1..=args.steps {
            let (x, y) = batch(train, args.batch, block, &mut rng);
            let loss = gpt.loss(&x, &y);
            let mut grads = loss.backward();
            let norm = clip_grad_norm_with(&mut grads, args.clip, 2.0);
            opt.step(&mut gpt, &grads)?;
            sched.step(&mut opt);
            bar.set_message(format!(
                "loss {:.4} |g| {norm:.2} lr {:.2e}",
                loss.item(),
                opt.lr()
            ));
            bar.inc(1);
            if step % args.eval_every == 0 || step == args.steps {
                let v = eval_loss(&gpt, val, block, &mut rng);
                let line = format!(
                    "step {step}: train loss {:.4}, val loss {v:.4}, {:.2} steps/s",
                    loss.item(),
                    step as f64 / start.elapsed().as_secs_f64()
                );
                if args.quiet {
                    println!("{line}");
                } else {
                    bar.println(line);
                }
                save(&gpt, &tok, &args.save)?;
            }
        }
        bar.finish_and_clear();
        println!(
            "trained {} steps in {:.1}s; checkpoint {}",
            args.steps,
            start.elapsed().as_secs_f64(),
            args.save.display()
        );
    }

    let mut prompt = tok.encode(args.prompt.as_bytes());
    if prompt.is_empty() {
        prompt.push(0);
    }
    let n = prompt.len();
    let top_k = (args.top_k > 0).then_some(args.top_k);
    let out = gpt.generate(
        &Tensor::from_vec(prompt, &[1, n]),
        args.sample_len,
        args.temperature,
        top_k,
        &mut rng,
    );
    println!(
        "--- sample (temperature {}, top-k {:?}) ---",
        args.temperature, top_k
    );
    println!("{}", tok.decode(out.as_slice()));
    Ok(())
}
