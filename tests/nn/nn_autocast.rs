//! bf16 autocast (`forge::autocast`) against PyTorch's
//! `torch.autocast("cpu", dtype=torch.bfloat16)` on the same float32
//! networks: every fixture in `tests/fixtures/autocast/`, the network read
//! from its metadata.

use crate::common;

use common::{fixtures_with_prefix, Fixture};
use forge::prelude::*;
use forge::DType;

/// The fixture's network on `x` (the layers of its metadata `layers`).
fn run(f: &Fixture, x: Tensor<f32>) -> Tensor<f32> {
    let mut x = x;
    for (i, tok) in f.meta_list("layers").iter().enumerate() {
        let parts: Vec<&str> = tok.split(':').collect();
        let param = |p: &str| f.input::<f32>(&format!("l{i}.{p}"));
        x = match parts[0] {
            "linear" => x.linear(&param("weight"), Some(&param("bias"))),
            "conv" => {
                let n: Vec<usize> = parts[1..].iter().map(|v| v.parse().unwrap()).collect();
                x.conv2d(
                    &param("weight"),
                    Some(&param("bias")),
                    [n[0]; 2],
                    [n[1]; 2],
                    [1, 1],
                    n[2],
                )
            }
            "relu" => x.relu(),
            "flatten" => {
                let b = x.shape()[0];
                let rest = x.numel() / b;
                x.reshape(&[b, rest])
            }
            other => panic!("{}: layer {other}", f.name),
        };
    }
    x
}

fn max_abs_diff(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(p, q)| (p - q).abs())
        .fold(0.0, f64::max)
}

#[test]
fn parity_with_pytorch_autocast() {
    let files = fixtures_with_prefix("autocast", "");
    assert!(files.len() >= 3, "{files:?}");
    for file in files {
        let f = Fixture::load(&file);
        assert_eq!(f.meta("op"), "autocast_bf16", "{file}");
        let x = f.input::<f32>("x");
        let exact = forge::no_grad(|| run(&f, x.clone()));
        let mixed = forge::no_grad(|| forge::autocast(DType::BF16, || run(&f, x.clone())));
        let to64 =
            |t: &Tensor<f32>| -> Vec<f64> { t.as_slice().iter().map(|&v| f64::from(v)).collect() };
        let (exact, mixed) = (to64(&exact), to64(&mixed));
        let (t32, t16) = (f.t("out_f32").to_vec(), f.t("out_bf16").to_vec());
        // without autocast: PyTorch's f32 result (both sum in f32)
        let scale = t32.iter().fold(0f64, |m, v| m.max(v.abs()));
        assert!(max_abs_diff(&exact, &t32) <= 1e-5 * scale, "{file}: f32");
        // under autocast: every product layer rounds its inputs to bf16
        // (relative 2^-9 each, in both libraries) and PyTorch also rounds
        // each layer's output to bf16 (another 2^-9); over L product layers
        // the two results stay within (2 L + 1) 2^-8 of the output's scale
        let layers = f
            .meta_list("layers")
            .iter()
            .filter(|t| t.starts_with("linear") || t.starts_with("conv"))
            .count();
        let bound = (2 * layers + 1) as f64 * 2f64.powi(-8) * scale;
        let d = max_abs_diff(&mixed, &t16);
        let (e_forge, e_torch) = (max_abs_diff(&mixed, &t32), max_abs_diff(&t16, &t32));
        eprintln!(
            "{file}: |forge - torch| {d:.3e} (bound {bound:.3e}); from f32: forge {e_forge:.3e}, torch {e_torch:.3e}"
        );
        assert!(d <= bound, "{file}: {d} > {bound}");
        assert!(d > 0.0 && e_forge > 0.0, "{file}: autocast changed nothing");
        // forge keeps each layer's output in f32: no further from f32 than PyTorch
        assert!(
            e_forge <= e_torch,
            "{file}: forge {e_forge} vs torch {e_torch}"
        );
    }
}

#[test]
fn layers_use_autocast_and_recording_stays_f32() {
    let mut rng = Rng::new(5);
    let model = sequential![
        forge::nn::Conv2d::new(3, 8, 3, &mut rng).padding(1),
        Relu,
        forge::nn::Flatten,
        Linear::new(8 * 6 * 6, 4, &mut rng)
    ];
    let x = Tensor::<f32>::normal(&[2, 3, 6, 6], 0.0, 1.0, &mut rng);
    let exact = forge::no_grad(|| model.forward(x.clone()));
    let mixed = forge::no_grad(|| forge::autocast(DType::BF16, || model.forward(x.clone())));
    let err = exact.sub(&mixed).abs().max().item();
    assert!(err > 0.0 && err < 0.05, "{err}");
    // the weights are tracked: with recording on, autocast leaves the ops in f32
    let recorded = forge::autocast(DType::BF16, || model.forward(x.clone()));
    assert_eq!(recorded.to_vec(), exact.to_vec());
    // and autocast off inside autocast is f32 again
    let off = forge::no_grad(|| {
        forge::autocast(DType::BF16, || {
            forge::autocast(DType::F32, || model.forward(x.clone()))
        })
    });
    assert_eq!(off.to_vec(), exact.to_vec());
}
