//! forge's side of the reference models `scripts/torch_layer_diff.py`
//! writes files for: each file's metadata `model` picks the forge model,
//! which is loaded from the file's weights, run on its inputs with the same
//! loss, compared layer by layer, and stepped with the file's optimizer
//! when it recorded one. Shared by the `layer_diff` example and the test
//! in tests/tools/layer_diff.rs.

use forge::models::gpt::{Gpt, GptConfig};
use forge::models::mnist::{LeNet5, MnistMlp};
use forge::nn::functional::cross_entropy;
use forge::nn::{Forward, Layer};
use forge::optim::{AdamW, Sgd};
use forge::tools::diff::{compare, Reference, Report};
use forge::{Float, ForgeError, Gradients, Result, Rng};

/// The relative tolerance for a file's `dtype`: f32 runs differ from
/// PyTorch's by summation order, a few ulps per op growing with depth
/// (the clean files measure at most ~3e-6, see docs/src/tools.md); f64
/// ones by ~1e-14.
pub fn default_tolerance(reference: &Reference) -> f64 {
    match reference.meta("dtype") {
        Some("float64") => 1e-9,
        _ => 1e-4,
    }
}

/// The number after `key ` in an optimizer description such as
/// `AdamW lr 1e-3 betas (0.9, 0.95) eps 1e-8 weight_decay 0.1`.
fn number_after(desc: &str, key: &str) -> Result<f64> {
    let words: Vec<&str> = desc.split_whitespace().collect();
    words
        .iter()
        .position(|w| *w == key)
        .and_then(|i| words.get(i + 1))
        .and_then(|w| {
            w.trim_matches(|c| c == '(' || c == ',' || c == ')')
                .parse()
                .ok()
        })
        .ok_or_else(|| ForgeError::invalid("optimizer", format!("no `{key}` in {desc:?}")))
}

/// Steps `model` with the optimizer the file describes (`SGD lr ..` or
/// `AdamW lr .. betas (.., ..) eps .. weight_decay ..`) and adds the step's
/// rows to `report`.
fn step<E: Float, L: Layer<E>>(
    model: &mut L,
    grads: &Gradients<E>,
    reference: &Reference,
    report: &mut Report,
) -> Result<()> {
    let Some(desc) = reference.meta("optimizer") else {
        return Ok(());
    };
    if desc.starts_with("SGD") {
        Sgd::<E>::new(number_after(desc, "lr")?).step(model, grads)?;
    } else if desc.starts_with("AdamW") {
        let b1 = number_after(desc, "betas")?;
        let words: Vec<&str> = desc.split_whitespace().collect();
        let b2 = words
            .iter()
            .position(|w| *w == "betas")
            .and_then(|i| words.get(i + 2))
            .and_then(|w| w.trim_matches(|c| c == ')' || c == ',').parse().ok())
            .ok_or_else(|| ForgeError::invalid("optimizer", desc.to_string()))?;
        AdamW::<E>::new(number_after(desc, "lr")?)
            .betas(b1, b2)
            .eps(number_after(desc, "eps")?)
            .weight_decay(number_after(desc, "weight_decay")?)
            .step(model, grads)?;
    } else {
        return Err(ForgeError::invalid(
            "optimizer",
            format!("unknown optimizer {desc:?}"),
        ));
    }
    report.add_step(model, reference);
    Ok(())
}

fn usize_meta(reference: &Reference, key: &str) -> Result<usize> {
    reference
        .meta(key)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| {
            ForgeError::invalid(key, "missing or not a number in the reference's metadata")
        })
}

/// Loads the forge model the file names, runs the comparison (and the
/// step, if recorded) and returns the report.
///
/// # Errors
/// An unknown `model`, missing inputs or metadata, weights that do not fit
/// the model, an unknown optimizer.
pub fn diff_reference_model(reference: &Reference, tolerance: f64) -> Result<Report> {
    let mut rng = Rng::new(0);
    match reference.meta("model") {
        Some(name @ ("mlp" | "lenet")) => {
            let (x, y) = (reference.input::<f32>("x")?, reference.input_ids("y")?);
            if name == "mlp" {
                let mut m = MnistMlp::new(&mut rng);
                m.load_state_dict(&reference.state_dict())?;
                let (mut report, grads) = compare(&m, reference, tolerance, || {
                    cross_entropy(&m.forward(x.clone()), &y)
                });
                step(&mut m, &grads, reference, &mut report)?;
                Ok(report)
            } else {
                let mut m = LeNet5::new(&mut rng);
                m.load_state_dict(&reference.state_dict())?;
                let (mut report, grads) = compare(&m, reference, tolerance, || {
                    cross_entropy(&m.forward(x.clone()), &y)
                });
                step(&mut m, &grads, reference, &mut report)?;
                Ok(report)
            }
        }
        Some("gpt") => {
            let config = GptConfig {
                vocab_size: usize_meta(reference, "vocab")?,
                block_size: usize_meta(reference, "block")?,
                n_layer: usize_meta(reference, "layers")?,
                n_head: usize_meta(reference, "heads")?,
                n_embd: usize_meta(reference, "c")?,
                bias: true,
            };
            let mut m = Gpt::<f64>::new(config, &mut rng);
            m.load_state_dict(&reference.state_dict())?;
            let (idx, targets) = (reference.input_ids("idx")?, reference.input_ids("targets")?);
            let (mut report, grads) = compare(&m, reference, tolerance, || m.loss(&idx, &targets));
            step(&mut m, &grads, reference, &mut report)?;
            Ok(report)
        }
        other => Err(ForgeError::invalid(
            "model",
            format!("no forge reference model {other:?} (mlp, lenet, gpt)"),
        )),
    }
}
