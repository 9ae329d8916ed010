//! The `hf` example's interface, a module of its own so that the tests run
//! it in-process (tests/models/hub_cli.rs includes this file).
//!
//! - `logits --model DIR --ids 3,1,4 --out FILE.safetensors [--f64]` writes one
//!   f32 tensor: `logits` `[T, vocab]` for a causal model,
//!   `last_hidden_state` `[T, hidden]` for an encoder (`--f64` computes in
//!   f64 and still writes f32);
//! - `generate --model DIR (--prompt TEXT | --ids 3,1,4) --max-new-tokens N
//!   [--greedy | --temperature T --top-k K --top-p P --seed S] [--eos ID ...]`
//!   streams the text and ends with a line `ids: a,b,c` (the new ids, an end
//!   token included when one stopped it); without `--eos` the end tokens are
//!   the config's `eos_token_id`;
//! - `embed --model DIR --input FILE [--bf16]` reads one sentence per line
//!   (every line, empty ones included; a final newline ends the last line)
//!   and writes one JSON line `{"embedding": [...]}` per sentence, in order
//!   (`--bf16`: the values rounded to bf16).

use clap::{Args, Parser, Subcommand};
use forge::hub::{
    generate, generate_text, load_causal_lm, Bert, Flow, GenerateOptions, HfConfig, HfTokenizer,
    Sampling, SentenceEmbedder,
};
use forge::io::{write_safetensors, AnyTensor};
use forge::{Float, Tensor};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

#[derive(Parser, Debug)]
#[command(name = "hf", about = "Run a Hugging Face checkpoint folder with forge")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Write the logits (or an encoder's last hidden state) of token ids.
    Logits {
        /// The model folder (config.json, model.safetensors or shards).
        #[arg(long)]
        model: PathBuf,
        /// Token ids, comma-separated.
        #[arg(long, value_delimiter = ',', required = true)]
        ids: Vec<i64>,
        /// The safetensors file to write.
        #[arg(long)]
        out: PathBuf,
        /// Compute in f64 (the file still holds f32).
        #[arg(long)]
        f64: bool,
    },
    /// Generate text after a prompt.
    Generate(GenerateArgs),
    /// Embed one sentence per line of a file.
    Embed {
        /// The model folder (a sentence-transformers folder or a BERT one).
        #[arg(long)]
        model: PathBuf,
        /// The sentences, one per line.
        #[arg(long)]
        input: PathBuf,
        /// Write the embeddings rounded to bf16 (to nearest, ties to even),
        /// for stores that keep them in bf16.
        #[arg(long)]
        bf16: bool,
    },
}

#[derive(Args, Debug)]
struct GenerateArgs {
    /// The model folder.
    #[arg(long)]
    model: PathBuf,
    /// The prompt text (needs the folder's tokenizer.json).
    #[arg(long, conflicts_with = "ids", required_unless_present = "ids")]
    prompt: Option<String>,
    /// The prompt as token ids, comma-separated.
    #[arg(long, value_delimiter = ',')]
    ids: Option<Vec<i64>>,
    /// The most new tokens.
    #[arg(long)]
    max_new_tokens: usize,
    /// Choose the most likely token (the default).
    #[arg(long, conflicts_with_all = ["temperature", "top_k", "top_p"])]
    greedy: bool,
    /// Sample with this temperature.
    #[arg(long)]
    temperature: Option<f64>,
    /// Sample among the k most likely tokens.
    #[arg(long)]
    top_k: Option<usize>,
    /// Sample among the most likely tokens up to this total probability.
    #[arg(long)]
    top_p: Option<f64>,
    /// The sampling seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Hugging Face's repetition penalty (1: none).
    #[arg(long, default_value_t = 1.0)]
    repetition_penalty: f64,
    /// End tokens (default: the config's eos_token_id).
    #[arg(long, num_args = 1..)]
    eos: Option<Vec<i64>>,
    /// Stop once the text contains this string (repeatable).
    #[arg(long)]
    stop: Vec<String>,
}

/// Runs the command line `args` (program name first), writing to `out`.
pub fn run(args: &[String], out: &mut dyn Write) -> Res<()> {
    let cli = Cli::try_parse_from(args)?;
    match cli.cmd {
        Cmd::Logits {
            model,
            ids,
            out: path,
            f64,
        } => {
            let t = if f64 {
                hidden::<f64>(&model, &ids)?.cast::<f32>()
            } else {
                hidden::<f32>(&model, &ids)?
            };
            let name = if is_encoder(&model)? {
                "last_hidden_state"
            } else {
                "logits"
            };
            let tensors = BTreeMap::from([(name.to_string(), AnyTensor::F32(t))]);
            write_safetensors(&path, &tensors, &BTreeMap::new())?;
            writeln!(out, "wrote {name} to {}", path.display())?;
        }
        Cmd::Generate(g) => run_generate(g, out)?,
        Cmd::Embed { model, input, bf16 } => {
            let e = SentenceEmbedder::<f32>::from_dir(&model)?;
            let text = std::fs::read_to_string(&input)?;
            let mut lines: Vec<&str> = text.split('\n').collect();
            if text.ends_with('\n') || text.is_empty() {
                lines.pop();
            }
            let lines: Vec<&str> = lines
                .iter()
                .map(|l| l.strip_suffix('\r').unwrap_or(l))
                .collect();
            // Batches of 32 sentences keep padding and memory small.
            for chunk in lines.chunks(32) {
                // bf16 values are exact in f32, so JSON's numbers carry them
                let v = if bf16 {
                    e.embed_bf16(chunk)?.cast::<f32>()
                } else {
                    e.embed(chunk)?
                };
                let h = v.dim(1);
                for row in v.as_slice().chunks(h.max(1)).take(chunk.len()) {
                    writeln!(out, "{}", serde_json::json!({ "embedding": row }))?;
                }
            }
        }
    }
    Ok(())
}

fn is_encoder(model: &Path) -> Res<bool> {
    Ok(HfConfig::from_dir(model)?.model_type()? == "bert")
}

/// `[T, vocab]` logits or `[T, hidden]` hidden states of one sequence.
fn hidden<E: Float>(model: &Path, ids: &[i64]) -> Res<Tensor<E>> {
    let x = Tensor::from_vec(ids.to_vec(), &[1, ids.len()]);
    let y = if is_encoder(model)? {
        Bert::<E>::from_dir(model)?.encode(&x, None, None)
    } else {
        forge::no_grad(|| load_causal_lm::<E>(model).map(|m| m.logits(&x)))?
    };
    Ok(y.squeeze(0))
}

fn run_generate(g: GenerateArgs, out: &mut dyn Write) -> Res<()> {
    let model = load_causal_lm::<f32>(&g.model)?;
    let tokenizer = if g.model.join("tokenizer.json").exists() {
        Some(HfTokenizer::from_dir(&g.model)?)
    } else {
        None
    };
    let prompt = match (&g.prompt, &g.ids) {
        (_, Some(ids)) => ids.clone(),
        (Some(p), None) => tokenizer
            .as_ref()
            .ok_or("--prompt needs the model folder's tokenizer.json (or give --ids)")?
            .encode(p, true)?,
        (None, None) => return Err("give --prompt or --ids".into()),
    };
    let sampling =
        if g.greedy || (g.temperature.is_none() && g.top_k.is_none() && g.top_p.is_none()) {
            Sampling::Greedy
        } else {
            Sampling::Sample {
                temperature: g.temperature.unwrap_or(1.0),
                top_k: g.top_k,
                top_p: g.top_p,
            }
        };
    let eos = match g.eos {
        Some(e) => e,
        None => HfConfig::from_dir(&g.model)?.eos_token_ids(),
    };
    let opts = GenerateOptions {
        max_new_tokens: g.max_new_tokens,
        sampling,
        repetition_penalty: g.repetition_penalty,
        seed: g.seed,
        eos_token_ids: eos,
    };
    let mut failed = None;
    let ids = match &tokenizer {
        Some(tok) => {
            let stops: Vec<&str> = g.stop.iter().map(String::as_str).collect();
            let r = generate_text(
                model.as_ref(),
                tok,
                &prompt,
                &opts,
                &stops,
                |piece| match write!(out, "{piece}").and_then(|_| out.flush()) {
                    Ok(()) => Flow::Continue,
                    Err(e) => {
                        failed = Some(e);
                        Flow::Stop
                    }
                },
            )?;
            r.ids
        }
        None => {
            if !g.stop.is_empty() {
                return Err("--stop needs the model folder's tokenizer.json".into());
            }
            generate(model.as_ref(), &[prompt], &opts, |_, _| Flow::Continue).remove(0)
        }
    };
    if let Some(e) = failed {
        return Err(e.into());
    }
    let list: Vec<String> = ids.iter().map(i64::to_string).collect();
    writeln!(out)?;
    writeln!(out, "ids: {}", list.join(","))?;
    Ok(())
}
