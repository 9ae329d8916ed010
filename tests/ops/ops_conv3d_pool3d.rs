//! `conv3d` / `nn::Conv3d`, `max_pool3d` (with indices) / `nn::MaxPool3d`,
//! `avg_pool3d` / `nn::AvgPool3d`, the adaptive 3-d poolings and the
//! adaptive max poolings' `return_indices` forms against PyTorch fixtures
//! (`nn/conv3d_*`, `nn/max_pool3d_*`, `nn/avg_pool3d_*`,
//! `nn/adaptive_pool_*`, written by tests/fixtures/gen/gen_ops4.py) in f64
//! and f32, the layers in f64, an f64 gradient check, a second-order check
//! and bit-identical results at 1 and 2 threads.
//!
//! Every option is read from the fixture's metadata. Tolerances: each
//! fixture's own `rtol`/`atol` (1e-10 / 1e-12 in f64) and
//! `f32_rtol`/`f32_atol` in f32; indices exactly. gradcheck: central
//! differences with eps 1e-6 and atol = rtol = 1e-6 (the project's
//! standard; these ops are linear or piecewise linear in each input and the
//! fixtures have no ties, so the differences are exact to rounding).

use crate::common;
use common::Fixture;
use forge::nn::{
    AdaptiveAvgPool3d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AdaptiveMaxPool3d, AvgPool3d, Conv3d,
    Forward, MaxPool3d,
};
use forge::{gradcheck, Float, Tensor};

const OPS: [&str; 7] = [
    "conv3d",
    "max_pool3d",
    "avg_pool3d",
    "adaptive_max_pool2d",
    "adaptive_max_pool1d",
    "adaptive_avg_pool3d",
    "adaptive_max_pool3d",
];

fn files() -> Vec<Fixture> {
    let mut all = Vec::new();
    for (prefix, min) in [
        ("conv3d_", 7),
        ("max_pool3d_", 10),
        ("avg_pool3d_", 7),
        ("adaptive_pool_", 10),
    ] {
        let fs = common::fixtures_for_ops("nn", prefix, &OPS);
        assert!(fs.len() >= min, "{prefix}: {} files", fs.len());
        all.extend(fs.iter().map(|p| Fixture::load(p)));
    }
    all
}

fn triple(f: &Fixture, key: &str) -> [usize; 3] {
    f.usizes(key).try_into().unwrap()
}

fn divisor(f: &Fixture) -> Option<usize> {
    match f.meta("divisor_override") {
        "none" => None,
        _ => Some(f.parse("divisor_override")),
    }
}

/// The fixture's op on its inputs (in the order of `grads`), and the
/// indices when the fixture has them.
fn run<E: Float>(f: &Fixture, v: &[Tensor<E>]) -> (Tensor<E>, Option<Tensor<i64>>) {
    let x = &v[0];
    let idx = f.has("indices");
    match f.meta("op") {
        "conv3d" => {
            let bias = f.flag("bias").then(|| v[2].clone());
            let y = x.conv3d(
                &v[1],
                bias.as_ref(),
                triple(f, "stride"),
                triple(f, "padding"),
                triple(f, "dilation"),
                f.parse("groups"),
            );
            (y, None)
        }
        "max_pool3d" => {
            let (y, i) = x.max_pool3d_with_indices(
                triple(f, "kernel_size"),
                triple(f, "stride"),
                triple(f, "padding"),
                triple(f, "dilation"),
                f.flag("ceil_mode"),
            );
            (y, idx.then_some(i))
        }
        "avg_pool3d" => (
            x.avg_pool3d_with(
                triple(f, "kernel_size"),
                triple(f, "stride"),
                triple(f, "padding"),
                f.flag("ceil_mode"),
                f.flag("count_include_pad"),
                divisor(f),
            ),
            None,
        ),
        "adaptive_max_pool2d" => {
            let (y, i) = x.adaptive_max_pool2d_with_indices(f.meta_pair("output_size"));
            (y, idx.then_some(i))
        }
        "adaptive_max_pool1d" => {
            let (y, i) = x.adaptive_max_pool1d_with_indices(f.parse("output_size"));
            (y, idx.then_some(i))
        }
        "adaptive_avg_pool3d" => (x.adaptive_avg_pool3d(triple(f, "output_size")), None),
        "adaptive_max_pool3d" => (x.adaptive_max_pool3d(triple(f, "output_size")), None),
        other => panic!("{}: op {other}", f.name),
    }
}

/// The same op through its layer (f64), from the fixture's weights and
/// options.
fn run_layer(f: &Fixture, v: &[Tensor<f64>]) -> (Tensor<f64>, Option<Tensor<i64>>) {
    let x = v[0].clone();
    match f.meta("op") {
        "conv3d" => {
            let bias = f.flag("bias").then(|| v[2].clone());
            let mut l = Conv3d::from_weights(v[1].clone(), bias).unwrap();
            l.groups = f.parse("groups");
            let l = l
                .stride(triple(f, "stride"))
                .padding(triple(f, "padding"))
                .dilation(triple(f, "dilation"));
            (l.forward(x), None)
        }
        "max_pool3d" => {
            let l = MaxPool3d::new(triple(f, "kernel_size"))
                .stride(triple(f, "stride"))
                .padding(triple(f, "padding"))
                .dilation(triple(f, "dilation"))
                .ceil_mode(f.flag("ceil_mode"));
            let (y, i) = l.forward_with_indices(x.clone());
            assert_eq!(y.to_vec(), l.forward(x).to_vec(), "{}", f.name);
            (y, Some(i))
        }
        "avg_pool3d" => {
            let l = AvgPool3d::new(triple(f, "kernel_size"))
                .stride(triple(f, "stride"))
                .padding(triple(f, "padding"))
                .ceil_mode(f.flag("ceil_mode"))
                .count_include_pad(f.flag("count_include_pad"))
                .divisor_override(divisor(f));
            (l.forward(x), None)
        }
        "adaptive_max_pool2d" => {
            let l = AdaptiveMaxPool2d::new(f.meta_pair("output_size"));
            let (y, i) = l.forward_with_indices(x.clone());
            assert_eq!(y.to_vec(), l.forward(x).to_vec(), "{}", f.name);
            (y, Some(i))
        }
        "adaptive_max_pool1d" => {
            let l = AdaptiveMaxPool1d::new(f.parse("output_size"));
            let (y, i) = l.forward_with_indices(x.clone());
            assert_eq!(y.to_vec(), l.forward(x).to_vec(), "{}", f.name);
            (y, Some(i))
        }
        "adaptive_avg_pool3d" => (
            AdaptiveAvgPool3d::new(triple(f, "output_size")).forward(x),
            None,
        ),
        "adaptive_max_pool3d" => (
            AdaptiveMaxPool3d::new(triple(f, "output_size")).forward(x),
            None,
        ),
        other => panic!("{}: op {other}", f.name),
    }
}

fn check<E: Float>(f: &Fixture) {
    let names = f.meta_list("grads");
    let xs: Vec<Tensor<E>> = names
        .iter()
        .map(|n| f.input::<E>(n).requires_grad())
        .collect();
    let (y, idx) = run(f, &xs);
    f.check_as("out", &y);
    if let Some(i) = idx {
        assert_eq!(i.to_vec(), f.i("indices").to_vec(), "{}: indices", f.name);
        assert_eq!(i.shape(), f.i("indices").shape(), "{}: indices", f.name);
    }
    let g = y.backward_with(&f.input::<E>("gout"), false);
    for (n, x) in names.iter().zip(&xs) {
        f.check_as(&format!("grad_{n}"), g.get(x).unwrap());
    }
}

#[test]
fn conv3d_and_3d_pools_match_pytorch_in_f64_and_f32() {
    for f in files() {
        check::<f64>(&f);
        check::<f32>(&f);
        let xs: Vec<Tensor<f64>> = f.meta_list("grads").iter().map(|n| f.t(n)).collect();
        let (y, idx) = run_layer(&f, &xs);
        f.check("out", &y);
        if let (Some(i), true) = (idx, f.has("indices")) {
            assert_eq!(
                i.to_vec(),
                f.i("indices").to_vec(),
                "{}: layer indices",
                f.name
            );
        }
    }
}

#[test]
fn conv3d_and_3d_pools_pass_gradcheck_and_second_order_checks() {
    for f in files() {
        let xs: Vec<Tensor<f64>> = f.meta_list("grads").iter().map(|n| f.t(n)).collect();
        gradcheck(|v| run(&f, v).0, &xs, 1e-6, 1e-6, 1e-6)
            .unwrap_or_else(|e| panic!("{}: {e}", f.name));
        let gout = f.t("gout");
        for k in 0..xs.len() {
            let scalar = |x: &Tensor<f64>| {
                let mut v = xs.clone();
                v[k] = x.clone();
                let y = run(&f, &v).0;
                y.mul(&gout).sum().mul(&y.sum())
            };
            common::assert_hvp(
                scalar,
                &xs[k],
                41 + k as u64,
                &format!("{} (input {k})", f.name),
            );
        }
    }
}

/// Forward values and every gradient, as bits.
fn bits(f: &Fixture, xs: &[Tensor<f32>], gout: &Tensor<f32>) -> Vec<Vec<u32>> {
    let xs: Vec<Tensor<f32>> = xs.iter().map(|x| x.detach().requires_grad()).collect();
    let y = run(f, &xs).0;
    let g = y.backward_with(gout, false);
    let mut out = vec![y.to_vec().iter().map(|v| v.to_bits()).collect()];
    for x in &xs {
        out.push(
            g.get(x)
                .unwrap()
                .to_vec()
                .iter()
                .map(|v| v.to_bits())
                .collect(),
        );
    }
    out
}

#[test]
fn conv3d_and_3d_pools_are_bit_identical_at_1_and_2_threads() {
    let _lock = common::lock_thread_count();
    for f in files() {
        let xs: Vec<Tensor<f32>> = f.meta_list("grads").iter().map(|n| f.input(n)).collect();
        let gout = f.input::<f32>("gout");
        let (one, two, _) = common::at_1_and_2_threads(|| bits(&f, &xs, &gout));
        assert_eq!(one, two, "{}", f.name);
    }
    // Shapes large enough that the 2-thread run hands work to the pool.
    let mut rng = forge::Rng::new(7);
    let x = Tensor::<f32>::normal(&[6, 4, 8, 9, 10], 0.0, 1.0, &mut rng);
    let w = Tensor::<f32>::normal(&[6, 2, 3, 3, 3], 0.0, 1.0, &mut rng);
    let b = Tensor::<f32>::normal(&[6], 0.0, 1.0, &mut rng);
    let run_big = || {
        let (x, w, b) = (x.requires_grad(), w.requires_grad(), b.requires_grad());
        let y = x.conv3d(&w, Some(&b), [1, 2, 1], [1, 1, 1], [1, 1, 2], 2);
        let p = y.max_pool3d_with([2, 2, 2], [1, 2, 2], [1, 1, 0], [1, 1, 1], true);
        let q = y.avg_pool3d_with([3, 2, 2], [2, 1, 2], [1, 1, 1], true, false, None);
        let loss = p.square().sum().add(&q.sum());
        let g = loss.backward();
        [&x, &w, &b]
            .iter()
            .map(|t| {
                g.get(t)
                    .unwrap()
                    .to_vec()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect()
            })
            .chain([y.to_vec().iter().map(|v| v.to_bits()).collect()])
            .collect::<Vec<Vec<u32>>>()
    };
    let (one, two, dispatched) = common::at_1_and_2_threads(run_big);
    forge::runtime::set_num_threads(2);
    assert!(dispatched, "the large case ran on one thread");
    assert_eq!(one, two, "conv3d + pools, large case");
}

#[test]
#[should_panic(expected = "max_pool3d: input [1, 1, 4, 4] must be 5-d")]
fn max_pool3d_names_a_wrong_rank() {
    Tensor::<f32>::zeros(&[1, 1, 4, 4]).max_pool3d([2; 3], [2; 3], [0; 3]);
}

#[test]
#[should_panic(expected = "avg_pool3d: padding [2, 0, 0] must be at most half the kernel")]
fn avg_pool3d_names_a_wide_padding() {
    Tensor::<f32>::zeros(&[1, 1, 4, 4, 4]).avg_pool3d([2; 3], [2; 3], [2, 0, 0], true);
}

#[test]
#[should_panic(
    expected = "conv3d: input [1, 1, 4, 4, 4] has 1 channels, weight [2, 3, 1, 1, 1] expects 3"
)]
fn conv3d_names_mismatched_channels() {
    let w = Tensor::<f32>::zeros(&[2, 3, 1, 1, 1]);
    Tensor::<f32>::zeros(&[1, 1, 4, 4, 4]).conv3d(&w, None, [1; 3], [0; 3], [1; 3], 1);
}
