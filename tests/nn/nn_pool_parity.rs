//! Parity of max / average / adaptive pooling with PyTorch (every fixture
//! `nn/max_pool*`, `nn/avg_pool*`, `nn/adaptive_*`, in f64 and f32, every
//! option — dilation, ceil_mode, count_include_pad, divisor_override — read
//! from the metadata), gradient checks in f64
//! of every pooling op (2-d and 1-d), second-order gradients and shape errors.
//!
//! Tolerances: each fixture's own `rtol`/`atol` (1e-10 / 1e-12 in f64).

use crate::common;
use common::Fixture;
use forge::{gradcheck, Float, Rng, Tensor};

fn apply<E: Float>(f: &Fixture, x: &Tensor<E>) -> Tensor<E> {
    match f.meta("op") {
        "max_pool2d" => x.max_pool2d_with(
            f.meta_pair("kernel_size"),
            f.meta_pair("stride"),
            f.meta_pair("padding"),
            f.meta_pair("dilation"),
            f.flag("ceil_mode"),
        ),
        "avg_pool2d" => {
            let divisor = match f.meta.get("divisor_override").map(String::as_str) {
                None | Some("none") => None,
                Some(_) => Some(f.parse::<usize>("divisor_override")),
            };
            x.avg_pool2d_with(
                f.meta_pair("kernel_size"),
                f.meta_pair("stride"),
                f.meta_pair("padding"),
                f.flag("ceil_mode"),
                f.flag("count_include_pad"),
                divisor,
            )
        }
        "adaptive_avg_pool2d" => x.adaptive_avg_pool2d(f.meta_pair("output_size")),
        "adaptive_max_pool2d" => x.adaptive_max_pool2d(f.meta_pair("output_size")),
        other => panic!("{}: unknown op {other}", f.name),
    }
}

fn files() -> Vec<String> {
    let mut files = Vec::new();
    for prefix in ["max_pool", "avg_pool", "adaptive_"] {
        // The 2-d ops this file knows (the 3-d ones: ops_conv3d_pool3d.rs).
        files.extend(common::fixtures_for_ops(
            "nn",
            prefix,
            &[
                "max_pool2d",
                "avg_pool2d",
                "adaptive_avg_pool2d",
                "adaptive_max_pool2d",
            ],
        ));
    }
    assert!(files.len() >= 12, "pool fixtures: {files:?}");
    files
}

#[test]
fn every_pool_fixture_matches_pytorch() {
    for file in files() {
        let f = Fixture::load(&file);
        f.check_single_input(apply::<f64>);
        f.check_single_input(apply::<f32>);
    }
}

#[test]
fn every_pool_fixture_passes_gradcheck() {
    for file in files() {
        let f = Fixture::load(&file);
        gradcheck(|v| apply(&f, &v[0]), &[f.t("x")], 1e-6, 1e-6, 1e-6)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
    }
}

/// Distinct values far apart (a shuffled ramp), so every maximum is unique
/// and finite differences never cross a tie.
fn distinct(shape: &[usize], seed: u64) -> Tensor<f64> {
    let n: usize = shape.iter().product();
    let mut v: Vec<f64> = (0..n).map(|i| i as f64 * 0.1).collect();
    Rng::new(seed).shuffle(&mut v);
    Tensor::from_vec(v, shape)
}

fn check(name: &str, f: impl Fn(&Tensor<f64>) -> Tensor<f64>) {
    let shape: &[usize] = if name.ends_with("1d") {
        &[2, 3, 9]
    } else {
        &[2, 2, 7, 6]
    };
    gradcheck(|v| f(&v[0]), &[distinct(shape, 3)], 1e-6, 1e-6, 1e-6)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
}

#[test]
fn pools_pass_gradcheck() {
    check("max_pool2d", |x| x.max_pool2d([3, 2], [2, 1], [1, 1]));
    check("avg_pool2d", |x| x.avg_pool2d([3, 3], [2, 1], [1, 1], true));
    check("avg_pool2d exclude", |x| {
        x.avg_pool2d([3, 2], [1, 2], [1, 1], false)
    });
    check("adaptive_avg_pool2d", |x| x.adaptive_avg_pool2d([4, 4]));
    check("adaptive_max_pool2d", |x| x.adaptive_max_pool2d([3, 4]));
    check("max_pool1d", |x| x.max_pool1d(3, 2, 1));
    check("avg_pool1d", |x| x.avg_pool1d(3, 2, 1, false));
    check("adaptive_avg_pool1d", |x| x.adaptive_avg_pool1d(4));
    check("adaptive_max_pool1d", |x| x.adaptive_max_pool1d(5));
}

/// The gradient of a pooling is linear in the upstream gradient `u`; its
/// gradient with respect to `u` goes back through the forward
/// gather / average. Checked by finite differences in `u` (the first-order
/// gradient is taken with the graph kept, outside `no_grad`).
#[test]
fn pool_backward_is_differentiable() {
    type Pool = fn(&Tensor<f64>) -> Tensor<f64>;
    let pools: [(&str, Pool); 3] = [
        ("max_pool2d", |x| x.max_pool2d([2, 2], [1, 2], [1, 0])),
        ("avg_pool2d", |x| {
            x.avg_pool2d([3, 2], [2, 1], [1, 1], false)
        }),
        ("adaptive_max_pool2d", |x| x.adaptive_max_pool2d([4, 3])),
    ];
    let x = distinct(&[1, 2, 6, 5], 4).requires_grad();
    for (name, pool) in pools {
        let shape = pool(&x).shape().to_vec();
        let u0 = Tensor::<f64>::normal(&shape, 0.0, 1.0, &mut Rng::new(5));
        let s = |u: &Tensor<f64>| -> Tensor<f64> {
            let g = pool(&x).backward_with(u, true);
            g.get(&x).unwrap().square().sum()
        };
        let u = u0.requires_grad();
        let analytic = s(&u).backward().get(&u).unwrap().to_vec();
        let eps = 1e-6;
        for j in 0..u0.numel() {
            let at = |d: f64| {
                let mut v = u0.to_vec();
                v[j] += d;
                s(&Tensor::from_vec(v, &shape)).item()
            };
            let numeric = (at(eps) - at(-eps)) / (2.0 * eps);
            assert!(
                (analytic[j] - numeric).abs() <= 1e-6 + 1e-6 * numeric.abs(),
                "{name} double backward, element {j}: {} vs {numeric}",
                analytic[j]
            );
        }
    }
}

#[test]
fn overlapping_max_windows_accumulate_gradients() {
    // One large value shared by every window: all gradients land on it.
    let mut v = vec![0.0; 16];
    v[5] = 9.0;
    let x = Tensor::<f64>::from_vec(v, &[1, 1, 4, 4]).requires_grad();
    let y = x.max_pool2d([3, 3], [1, 1], [0, 0]);
    assert_eq!(y.to_vec(), vec![9.0; 4]);
    let g = y.sum().backward();
    let gx = g.get(&x).unwrap().to_vec();
    assert_eq!(gx[5], 4.0);
    assert_eq!(gx.iter().sum::<f64>(), 4.0);
}

#[test]
#[should_panic(expected = "max_pool2d: input [3, 8, 8] must be 4-d [N, C, H, W]")]
fn max_pool2d_rank_error_names_shape() {
    Tensor::<f32>::zeros(&[3, 8, 8]).max_pool2d([2, 2], [2, 2], [0, 0]);
}

#[test]
#[should_panic(expected = "avg_pool2d: padding [2, 2] must be at most half the kernel [3, 3]")]
fn avg_pool2d_padding_error() {
    Tensor::<f32>::zeros(&[1, 1, 8, 8]).avg_pool2d([3, 3], [1, 1], [2, 2], true);
}

#[test]
#[should_panic(expected = "adaptive_max_pool1d: input [1, 4, 2, 2] must be 3-d [N, C, L]")]
fn adaptive_max_pool1d_rank_error() {
    Tensor::<f32>::zeros(&[1, 4, 2, 2]).adaptive_max_pool1d(2);
}
