//! The layer-by-layer diff (`forge::tools::diff`) on the reference files of
//! tests/fixtures/diff/, written by `scripts/torch_layer_diff.py` (PyTorch
//! forward hooks): every file is run through the `layer_diff` example's
//! model code (each file's metadata names the model, its dtype, its
//! optimizer and, when a layer was perturbed on the PyTorch side, which).
//!
//! - A clean file: every output, the loss, every gradient and every
//!   stepped parameter within the dtype's tolerance (1e-4 relative in f32:
//!   a few ulps per op in a different summation order; 1e-9 in f64), and
//!   every parameterised layer compared (forge and PyTorch name them
//!   alike).
//! - A perturbed file (one module's output scaled by 1.01 in PyTorch): the
//!   first row over the tolerance is that module's output, and every
//!   output before it is within the tolerance.
//! - A layer perturbed on forge's side (a bias of the clean file's model
//!   moved by 1e-2) is pointed at the same way.

#[path = "../../examples/layer_diff/models.rs"]
mod models;

use forge::tools::diff::{compare, Kind, Reference};
use forge::{Forward, Layer};

fn files() -> Vec<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/diff");
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "safetensors"))
        .collect();
    v.sort();
    assert!(v.len() >= 3, "{v:?}");
    v
}

#[test]
fn the_diff_passes_clean_files_and_points_at_the_perturbed_layer() {
    let (mut clean, mut perturbed) = (0, 0);
    for path in files() {
        let reference = Reference::load(&path).unwrap();
        let tol = models::default_tolerance(&reference);
        let report = models::diff_reference_model(&reference, tol).unwrap();
        eprintln!("{}\n{report}\n", path.display());
        let outputs = report
            .rows
            .iter()
            .filter(|r| r.kind == Kind::Output)
            .count();
        // Every parameterised module of the reference has its forge row.
        let params: std::collections::BTreeSet<String> = reference
            .state_dict::<f64>()
            .keys()
            .filter_map(|k| k.rsplit_once('.').map(|(m, _)| m.to_string()))
            .filter(|m| m != "lm_head") // tied to transformer.wte in forge
            .collect();
        for m in &params {
            assert!(
                report
                    .rows
                    .iter()
                    .any(|r| r.kind == Kind::Output && &r.path == m),
                "{}: no output row for {m}",
                path.display()
            );
        }
        assert!(outputs > params.len().min(3), "{}", path.display());
        if reference.has_step() {
            assert!(report.rows.iter().any(|r| r.kind == Kind::Step));
        }
        match reference.meta("perturbed") {
            None => {
                clean += 1;
                assert!(
                    report.first_over().is_none(),
                    "{}: {report}",
                    path.display()
                );
            }
            Some(p) => {
                perturbed += 1;
                let layer = p.split_whitespace().next().unwrap();
                let first = report.first_over().expect("a perturbed layer is found");
                assert_eq!(
                    (first.kind, first.path.as_str()),
                    (Kind::Output, layer),
                    "{report}"
                );
                // The layers before it agree.
                let before = report
                    .rows
                    .iter()
                    .take_while(|r| r.path != layer)
                    .filter(|r| r.kind == Kind::Output)
                    .count();
                assert!(before > 0, "{report}");
            }
        }
    }
    assert!(
        clean >= 2 && perturbed >= 1,
        "{clean} clean, {perturbed} perturbed"
    );
}

#[test]
fn a_layer_perturbed_on_forges_side_is_pointed_at() {
    let path = files()
        .into_iter()
        .find(|p| p.ends_with("mlp.safetensors"))
        .unwrap();
    let reference = Reference::load(&path).unwrap();
    let mut m = forge::models::mnist::MnistMlp::new(&mut forge::Rng::new(1));
    let mut weights = reference.state_dict::<f32>();
    let off = weights["fc2.bias"].add_scalar(1e-2);
    weights.insert("fc2.bias".into(), off);
    m.load_state_dict(&weights).unwrap();
    let (x, y) = (
        reference.input::<f32>("x").unwrap(),
        reference.input_ids("y").unwrap(),
    );
    let (report, _) = compare(&m, &reference, 1e-4, || {
        forge::nn::functional::cross_entropy(&m.forward(x.clone()), &y)
    });
    let first = report.first_over().unwrap();
    assert_eq!(
        (first.kind, first.path.as_str()),
        (Kind::Output, "fc2"),
        "{report}"
    );
    assert!(
        report.to_string().contains("fc2")
            && report.to_string().contains("<-- first over tolerance")
    );
}

#[test]
fn a_file_of_another_format_is_refused() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/func/vjp_exp_sin.safetensors");
    let err = Reference::load(&path).unwrap_err().to_string();
    assert!(err.contains("format"), "{err}");
}
