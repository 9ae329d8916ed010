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
//! in the metadata, through `LayerIo::save_with_metadata`) every
//! `--eval-every` steps and at the end. Then it samples with a temperature
//! and top-k through `forge::hub::generate`, the generation code of the
//! Hugging Face models (KV cache).

use clap::Parser;
use forge::checkpoint::{read_metadata, LayerIo};
use forge::hub::{generate, Flow, GenerateOptions, Sampling};
use forge::models::gpt::{Gpt, GptConfig};
use forge::nn::Layer;
use forge::optim::{
    clip_grad_norm, AdamW, CosineAnnealingLr, LinearLr, LrScheduler, ParamGroup, SequentialLr,
};
use forge::{no_grad, Rng, Tensor};
use indicatif::{ProgressBar, ProgressStyle};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

/// Train a character-level GPT on a text file, then sample from it.
#[derive(Parser, Debug)]
#[command(about)]
struct Args {
    /// The text to learn.
    #[arg(default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/data/text/gpl3.txt"))]
    text: PathBuf,
    /// Optimizer steps (0: only sample).
    #[arg(long, default_value_t = 2000)]
    steps: usize,
    /// Windows per step.
    #[arg(long, default_value_t = 16, value_parser = positive)]
    batch: usize,
    /// Context length.
    #[arg(long, default_value_t = 64, value_parser = positive)]
    block: usize,
    /// Transformer blocks.
    #[arg(long, default_value_t = 4)]
    layers: usize,
    /// Attention heads.
    #[arg(long, default_value_t = 4)]
    heads: usize,
    /// Width.
    #[arg(long, default_value_t = 128)]
    embd: usize,
    /// Peak learning rate.
    #[arg(long, default_value_t = 3e-3)]
    lr: f64,
    /// Final learning rate.
    #[arg(long, default_value_t = 3e-4)]
    min_lr: f64,
    /// Warm-up steps.
    #[arg(long, default_value_t = 100)]
    warmup: usize,
    /// Gradient-norm clip.
    #[arg(long, default_value_t = 1.0)]
    clip: f64,
    /// Validation loss and checkpoint every N steps.
    #[arg(long, default_value_t = 250, value_parser = positive)]
    eval_every: usize,
    /// Checkpoint path.
    #[arg(long, default_value = "gpt_char.safetensors")]
    save: PathBuf,
    /// Start from a checkpoint (its configuration wins).
    #[arg(long)]
    load: Option<PathBuf>,
    /// Characters to sample.
    #[arg(long, default_value_t = 500)]
    sample_len: usize,
    /// Sampling temperature (> 0).
    #[arg(long, default_value_t = 0.8)]
    temperature: f64,
    /// Sample among the N likeliest characters (0: all).
    #[arg(long, default_value_t = 10)]
    top_k: usize,
    /// Start of the sample.
    #[arg(long, default_value = "\n")]
    prompt: String,
    /// Seed for weights, batches and sampling.
    #[arg(long, default_value_t = 1337)]
    seed: u64,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

/// A count that must be at least 1.
fn positive(s: &str) -> Result<usize, String> {
    match s.parse() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("{e}")),
    }
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
    .chain([
        ("bias".to_string(), c.bias.to_string()),
        // The vocabulary: the bytes, as lower-case hex.
        (
            "vocab".to_string(),
            tok.vocab.iter().map(|b| format!("{b:02x}")).collect(),
        ),
    ])
    .collect();
    gpt.save_with_metadata(path, &meta)
}

fn load(path: &PathBuf) -> Result<(Gpt, Tokenizer), Box<dyn std::error::Error>> {
    let meta = read_metadata(path)?;
    let get = |k: &str| -> Result<&String, String> {
        meta.get(k)
            .ok_or(format!("{}: no metadata {k}", path.display()))
    };
    let num = |k: &str| -> Result<usize, Box<dyn std::error::Error>> { Ok(get(k)?.parse()?) };
    let config = GptConfig {
        vocab_size: num("vocab_size")?,
        block_size: num("block_size")?,
        n_layer: num("n_layer")?,
        n_head: num("n_head")?,
        n_embd: num("n_embd")?,
        bias: get("bias")? != "false",
    };
    let hex = get("vocab")?;
    let vocab = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2).unwrap_or("zz"), 16))
        .collect::<Result<Vec<u8>, _>>()
        .map_err(|_| format!("{}: metadata vocab is not hex bytes", path.display()))?;
    let gpt = Gpt::new(config, &mut Rng::new(0)).loaded(path)?;
    Ok((gpt, Tokenizer::new(vocab)))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    if args.temperature <= 0.0 {
        return Err("--temperature must be positive".into());
    }
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
        let mut sched = SequentialLr::for_optimizer(
            &mut opt,
            vec![
                LinearLr::new(args.lr, 1.0 / warmup as f64, 1.0, warmup).into(),
                CosineAnnealingLr::new(args.lr, (args.steps as u64 - warmup).max(1), args.min_lr)
                    .into(),
            ],
            &[warmup],
        );
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
            let mut norm = 0.0;
            let value = opt.backward_step_with(&mut gpt, loss, |grads| {
                norm = clip_grad_norm(grads, args.clip);
            })?;
            sched.step(&mut opt);
            bar.set_message(format!("loss {value:.4} |g| {norm:.2} lr {:.2e}", opt.lr()));
            bar.inc(1);
            if step % args.eval_every == 0 || step == args.steps {
                let v = eval_loss(&gpt, val, block, &mut rng);
                let line = format!(
                    "step {step}: train loss {value:.4}, val loss {v:.4}, {:.2} steps/s",
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
    let top_k = (args.top_k > 0).then_some(args.top_k);
    println!(
        "--- sample (temperature {}, top-k {:?}) ---",
        args.temperature, top_k
    );
    print!("{}", tok.decode(&prompt));
    // The hub's generation code (KV cache, sampling), streaming each
    // character. The cache holds at most `block_size` positions: when they
    // run out, decoding goes on from the last half block as a new prompt.
    let block = gpt.config.block_size;
    let mut context = prompt;
    let mut produced = 0;
    while produced < args.sample_len {
        let keep = context.len().min(block / 2).max(1);
        let start = context.len() - keep;
        let opts = GenerateOptions {
            max_new_tokens: (args.sample_len - produced).min(block - keep),
            sampling: Sampling::Sample {
                temperature: args.temperature,
                top_k,
                top_p: None,
            },
            seed: args.seed.wrapping_add(produced as u64),
            ..Default::default()
        };
        let new = generate(&gpt, &[context[start..].to_vec()], &opts, |_, id| {
            print!("{}", tok.decode(&[id]));
            let _ = std::io::stdout().flush();
            Flow::Continue
        })
        .remove(0);
        produced += new.len();
        context.extend(new);
    }
    println!();
    Ok(())
}
