//! Hugging Face checkpoints from the command line: logits, text generation
//! and sentence embeddings (see `cli.rs` for the interface).
//!
//! ```sh
//! cargo run --release --example hf -- logits --model DIR --ids 3,1,4 --out logits.safetensors
//! cargo run --release --example hf -- generate --model DIR --prompt "Hello" --max-new-tokens 20 --greedy
//! cargo run --release --example hf -- embed --model DIR --input sentences.txt
//! ```

mod cli;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let stdout = std::io::stdout();
    if let Err(e) = cli::run(&args, &mut stdout.lock()) {
        eprintln!("hf: {e}");
        std::process::exit(1);
    }
}
