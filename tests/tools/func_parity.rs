//! Functional transforms against torch.func (fixtures `func/*`, written by
//! `tests/fixtures/gen/gen_func.py`): vjp, jvp, jacobian, hessian, hvp and
//! per-sample gradients, each on several functions, a small MLP's loss
//! among them. The transform, the function, the inputs, which of them are
//! differentiated (and for per-sample gradients which are parameters and
//! which the batch) all come from each file's metadata; results are also
//! bit-identical for 1 and 2 threads. `per_sample_gpt_block` runs
//! forge's own `models::gpt::Block` (built from the file's tensors, its
//! head count from the metadata) for the per-sample gradients of a GPT
//! block.
//!
//! Tolerances: each file's own `rtol`/`atol` (1e-10 / 1e-12, float64:
//! the same formulas differentiated by two libraries, whose summation
//! orders differ by a few ulps).

use crate::common::{self, Fixture};
use forge::models::gpt::{Block, CausalSelfAttention, Mlp};
use forge::nn::{Forward, LayerNorm, Linear};
use forge::tools;
use forge::Tensor;
use std::collections::BTreeMap;

/// The functions the fixtures name, written with forge's ops, and the
/// formula each file must state for it.
fn call(function: &str, v: &BTreeMap<String, Tensor<f64>>) -> Tensor<f64> {
    match function {
        "tanh_matmul" => v["x"].matmul(&v["W"]).tanh(),
        "exp_sin" => &v["x"].sin().exp() * &v["x"],
        "mlp_mse" => {
            let h = v["X"].matmul_t(&v["W1"]).add(&v["b1"]).tanh();
            h.matmul_t(&v["W2"])
                .add(&v["b2"])
                .sub(&v["Y"])
                .square()
                .mean()
        }
        "lse_matmul" => v["x"].matmul(&v["W"]).exp().sum().log(),
        "gpt_block" => gpt_block(v)
            .forward(v["X"].clone())
            .sub(&v["Y"])
            .square()
            .mean(),
        other => panic!("no function {other}"),
    }
}

/// forge's GPT block (`models::gpt::Block`) holding the given tensors
/// under nanoGPT's names, with the heads the fixture's metadata names.
fn gpt_block(v: &BTreeMap<String, Tensor<f64>>) -> Block<f64> {
    let n_head = v["n_head"].item() as usize;
    let linear = |p: &str| Linear {
        weight: v[&format!("{p}.weight")].clone(),
        bias: Some(v[&format!("{p}.bias")].clone()),
    };
    let norm = |p: &str| LayerNorm {
        weight: Some(v[&format!("{p}.weight")].clone()),
        bias: Some(v[&format!("{p}.bias")].clone()),
        normalized_shape: v[&format!("{p}.weight")].shape().to_vec(),
        eps: 1e-5,
    };
    Block {
        ln_1: norm("ln_1"),
        attn: CausalSelfAttention {
            c_attn: linear("attn.c_attn"),
            c_proj: linear("attn.c_proj"),
            n_head,
        },
        ln_2: norm("ln_2"),
        mlp: Mlp {
            c_fc: linear("mlp.c_fc"),
            c_proj: linear("mlp.c_proj"),
        },
    }
}

fn formula(function: &str) -> &'static str {
    match function {
        "tanh_matmul" => "tanh(x @ W)",
        "exp_sin" => "exp(sin(x)) * x",
        "mlp_mse" => "mean((tanh(X @ W1^T + b1) @ W2^T + b2 - Y)^2)",
        "lse_matmul" => "log(sum(exp(x @ W)))",
        "gpt_block" => concat!(
            "mean((block(X) - Y)^2), block = nanoGPT pre-LayerNorm block: ",
            "x + c_proj(causal_attention(c_attn(ln_1(x)), n_head 2)), then ",
            "x + c_proj(gelu_tanh(c_fc(ln_2(x)))), LayerNorm eps 1e-5"
        ),
        other => panic!("no function {other}"),
    }
}

/// Runs the file's transform; returns every result by its fixture name.
fn run(f: &Fixture) -> BTreeMap<String, Tensor<f64>> {
    let function = f.meta("function").to_string();
    assert_eq!(f.meta("formula"), formula(&function), "{}", f.name);
    let mut inputs: BTreeMap<String, Tensor<f64>> = f
        .meta_list("inputs")
        .into_iter()
        .map(|k| (k.clone(), f.t(&k)))
        .collect();
    if f.meta.contains_key("n_head") {
        // Not differentiated: carried to the function as a scalar.
        inputs.insert("n_head".into(), Tensor::scalar(f.meta_f64("n_head")));
    }
    let wrt = f.meta_list("wrt");
    let wrt_vals: Vec<Tensor<f64>> = wrt.iter().map(|k| inputs[k].clone()).collect();
    // The function of the differentiated inputs, the others held fixed.
    let bound = |names: &[String], xs: &[Tensor<f64>]| {
        let mut v = inputs.clone();
        for (k, x) in names.iter().zip(xs) {
            v.insert(k.clone(), x.clone());
        }
        call(&function, &v)
    };
    let fw = |xs: &[Tensor<f64>]| bound(&wrt, xs);
    let per_input = |prefix: &str| -> Vec<Tensor<f64>> {
        wrt.iter().map(|k| f.t(&format!("{prefix}{k}"))).collect()
    };
    let mut out = BTreeMap::new();
    match f.meta("transform") {
        "vjp" => {
            let (y, g) = tools::vjp(fw, &wrt_vals, &f.t("v"));
            out.insert("out".to_string(), y);
            for (k, g) in wrt.iter().zip(g) {
                out.insert(format!("vjp_{k}"), g);
            }
        }
        "jvp" => {
            let (y, jt) = tools::jvp(fw, &wrt_vals, &per_input("t_"));
            out.insert("out".to_string(), y);
            out.insert("jvp".to_string(), jt);
        }
        "jacobian" => {
            for (k, j) in wrt.iter().zip(tools::jacobian(fw, &wrt_vals)) {
                out.insert(format!("jac_{k}"), j);
            }
        }
        "hessian" => {
            for (a, row) in wrt.iter().zip(tools::hessian(fw, &wrt_vals)) {
                for (b, block) in wrt.iter().zip(row) {
                    out.insert(format!("hess_{a}_{b}"), block);
                }
            }
        }
        "hvp" => {
            for (k, h) in wrt.iter().zip(tools::hvp(fw, &wrt_vals, &per_input("v_"))) {
                out.insert(format!("hvp_{k}"), h);
            }
        }
        "per_sample_grads" => {
            let (params, batch) = (f.meta_list("params"), f.meta_list("batch"));
            let pv: Vec<Tensor<f64>> = params.iter().map(|k| inputs[k].clone()).collect();
            let bv: Vec<Tensor<f64>> = batch.iter().map(|k| inputs[k].clone()).collect();
            let g = tools::per_sample_grads(
                |p, s| {
                    let mut v = inputs.clone();
                    for (k, x) in params.iter().chain(&batch).zip(p.iter().chain(s)) {
                        v.insert(k.clone(), x.clone());
                    }
                    call(&function, &v)
                },
                &pv,
                &bv,
            );
            for (k, g) in params.iter().zip(g) {
                out.insert(format!("psg_{k}"), g);
            }
        }
        other => panic!("{}: unknown transform {other}", f.name),
    }
    out
}

fn files() -> Vec<String> {
    let files = common::fixtures_with_prefix("func", "");
    assert!(files.len() >= 15, "{files:?}");
    files
}

#[test]
fn transforms_match_torch_func() {
    let mut transforms = BTreeMap::<String, usize>::new();
    for name in files() {
        let f = Fixture::load(&name);
        let results = run(&f);
        // Every stored result of the file is checked, and nothing else.
        let stored: Vec<&String> = f
            .floats
            .keys()
            .filter(|k| {
                ["out", "jvp"].contains(&k.as_str())
                    || ["vjp_", "jac_", "hess_", "hvp_", "psg_"]
                        .iter()
                        .any(|p| k.starts_with(p))
            })
            .collect();
        for k in &stored {
            if let Some(actual) = results.get(*k) {
                f.check(k, actual);
            } else {
                assert_eq!(k.as_str(), "out", "{name}: {k} not computed");
            }
        }
        assert!(results.keys().all(|k| f.floats.contains_key(k)), "{name}");
        *transforms
            .entry(f.meta("transform").to_string())
            .or_default() += 1;
    }
    // Several functions for each transform.
    assert_eq!(transforms.len(), 6, "{transforms:?}");
    assert!(transforms.values().all(|&n| n >= 2), "{transforms:?}");
}

#[test]
fn transforms_are_bit_identical_for_1_and_2_threads() {
    let _lock = common::lock_thread_count();
    let before = forge::runtime::num_threads();
    let mut by_threads = Vec::new();
    for n in [1, 2] {
        forge::runtime::set_num_threads(n);
        let all: Vec<Vec<u64>> = files()
            .iter()
            .flat_map(|name| run(&Fixture::load(name)).into_values())
            .map(|t| t.to_vec().iter().map(|x| x.to_bits()).collect())
            .collect();
        by_threads.push(all);
    }
    forge::runtime::set_num_threads(before);
    assert!(by_threads[0] == by_threads[1]);
}
