//! The layer-by-layer diff against PyTorch (`forge::tools::diff`) for
//! forge's reference models: reads a file written by
//! `scripts/torch_layer_diff.py`, runs the forge model the file names from
//! the same weights on the same inputs, and prints per layer path the max
//! absolute and relative error of the outputs, the loss, the gradients and
//! (when recorded) one optimizer step, marking the first over the
//! tolerance.
//!
//! ```text
//! python3 scripts/torch_layer_diff.py lenet /tmp/lenet.safetensors --step sgd --perturb conv2
//! cargo run --release --example layer_diff -- /tmp/lenet.safetensors [--tol 1e-4]
//! ```
//!
//! Exits with status 1 when a row is over the tolerance.

mod models;

use forge::tools::diff::Reference;

fn main() -> forge::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args
        .iter()
        .find(|a| !a.starts_with("--") && !is_value_of_flag(&args, a))
    else {
        eprintln!("usage: layer_diff FILE [--tol T]");
        std::process::exit(2);
    };
    let reference = Reference::load(path)?;
    let tolerance = match args.iter().position(|a| a == "--tol") {
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("--tol takes a number")),
        None => models::default_tolerance(&reference),
    };
    let report = models::diff_reference_model(&reference, tolerance)?;
    println!(
        "{} ({}), {}",
        path,
        reference.meta("model").unwrap_or("?"),
        reference
            .meta("perturbed")
            .map_or("nothing perturbed".to_string(), |p| format!(
                "perturbed: {p}"
            ))
    );
    println!("{report}");
    if report.first_over().is_some() {
        std::process::exit(1);
    }
    Ok(())
}

/// Whether `a` is the value of a `--tol` flag.
fn is_value_of_flag(args: &[String], a: &String) -> bool {
    args.windows(2)
        .any(|w| w[0] == "--tol" && std::ptr::eq(&w[1], a))
}
