//! Parity of batch, layer and group normalisation with PyTorch (fixtures
//! `nn/batch_norm*`, `nn/layer_norm*`, `nn/group_norm*`: outputs, input,
//! weight and bias gradients, updated running statistics), and gradient
//! checks in f64, first and second order.
//!
//! Every file is checked in f64 and in f32 (`f32_rtol`/`f32_atol`); shapes,
//! eps, momentum and the presence of affine parameters come from the
//! metadata.
//!
//! Tolerances: each fixture's own `rtol`/`atol` (1e-10 / 1e-12 in f64);
//! see tests/fixtures/README.md for how they were established.

use crate::common;
use crate::second_order;
use common::Fixture;
use forge::nn::functional::{batch_norm, group_norm, layer_norm};
use forge::{gradcheck, Float, Tensor};

fn files() -> Vec<String> {
    let mut v = common::fixtures_with_prefix("nn", "batch_norm");
    v.extend(common::fixtures_with_prefix("nn", "layer_norm"));
    v.extend(common::fixtures_with_prefix("nn", "group_norm"));
    assert!(v.len() >= 8, "{v:?}");
    v
}

/// The differentiable float inputs of `f` in call order: `x`, then
/// `weight` and `bias` when the file has them (no affine parameters
/// otherwise).
fn diff_inputs(f: &Fixture) -> Vec<String> {
    let inputs = f.meta_list("inputs");
    let v: Vec<String> = ["x", "weight", "bias"]
        .iter()
        .filter(|n| inputs.iter().any(|i| i == *n))
        .map(|n| n.to_string())
        .collect();
    assert_eq!(v, f.meta_list("grads"), "{}", f.name);
    v
}

/// `(running_mean_new, running_var_new)` of a training batch norm.
type Stats<E> = Option<(Tensor<E>, Tensor<E>)>;

/// The output of fixture `f` (and the updated running statistics of a
/// batch norm) on its differentiable inputs `v` (see [`diff_inputs`]).
fn apply<E: Float>(f: &Fixture, v: &[Tensor<E>]) -> (Tensor<E>, Stats<E>) {
    let names = diff_inputs(f);
    let get = |n: &str| names.iter().position(|x| x == n).map(|i| &v[i]);
    let eps = f.meta_f64("eps");
    let (x, w, b) = (&v[0], get("weight"), get("bias"));
    match f.meta("op") {
        "batch_norm" => {
            let (rm, rv) = (f.input::<E>("running_mean"), f.input::<E>("running_var"));
            // momentum None is nn.BatchNorm's cumulative average: the module
            // passes 1 / num_batches_tracked (after counting this batch).
            let momentum = match f.meta("momentum") {
                "none" => 1.0 / (f.i("num_batches_tracked").item() + 1) as f64,
                _ => f.meta_f64("momentum"),
            };
            let (y, m, s) = batch_norm(
                x,
                Some(&rm),
                Some(&rv),
                w,
                b,
                f.flag("training"),
                momentum,
                eps,
            );
            (y, Some((m.unwrap(), s.unwrap())))
        }
        "layer_norm" => (
            layer_norm(x, &f.usizes("normalized_shape"), w, b, eps),
            None,
        ),
        "group_norm" => (group_norm(x, f.parse("num_groups"), w, b, eps), None),
        op => panic!("{}: unknown op {op}", f.name),
    }
}

fn check_file<E: Float>(f: &Fixture) {
    let names = diff_inputs(f);
    let v: Vec<Tensor<E>> = names
        .iter()
        .map(|n| f.input::<E>(n).requires_grad())
        .collect();
    let (y, stats) = apply(f, &v);
    f.check_as("out", &y);
    if let Some((m, s)) = stats {
        assert!(
            !m.is_tracked() && !s.is_tracked(),
            "{}: running stats tracked",
            f.name
        );
        f.check_as("running_mean_new", &m);
        f.check_as("running_var_new", &s);
    }
    let g = y.backward_with(&f.input::<E>("gout"), false);
    for (i, n) in names.iter().enumerate() {
        f.check_as(&format!("grad_{n}"), g.get(&v[i]).unwrap());
    }
}

#[test]
fn norms_match_pytorch() {
    for file in files() {
        let f = Fixture::load(&file);
        check_file::<f64>(&f);
        check_file::<f32>(&f);
    }
}

#[test]
fn norms_pass_gradcheck() {
    for file in files() {
        let f = Fixture::load(&file);
        let v: Vec<Tensor<f64>> = diff_inputs(&f).iter().map(|n| f.t(n)).collect();
        gradcheck(|v| apply(&f, v).0, &v, 1e-6, 1e-6, 1e-6)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
    }
}

#[test]
fn norms_second_order() {
    for file in files() {
        let f = Fixture::load(&file);
        let v: Vec<Tensor<f64>> = diff_inputs(&f).iter().map(|n| f.t(n)).collect();
        second_order::check(
            &file,
            |x| {
                let mut w = v.clone();
                w[0] = x.clone();
                apply(&f, &w).0
            },
            &v[0],
            1e-6,
        );
    }
}

#[test]
fn batch_norm_without_running_stats_or_affine() {
    let x = Tensor::<f64>::from_vec((0..12).map(|i| (i * i) as f64 * 0.1).collect(), &[3, 2, 2]);
    let (y, m, v) = batch_norm(&x, None, None, None, None, true, 0.1, 1e-5);
    assert!(m.is_none() && v.is_none());
    // Every channel normalised: mean 0 over (N, L).
    for s in y.sum_dim(&[0, 2], false).to_vec() {
        assert!(s.abs() < 1e-12);
    }
}

#[test]
#[should_panic(
    expected = "batch_norm: weight of shape [4] does not match 3 channels (input shape [2, 3, 5])"
)]
fn batch_norm_rejects_wrong_channels() {
    let x = Tensor::<f32>::zeros(&[2, 3, 5]);
    let w = Tensor::<f32>::ones(&[4]);
    batch_norm(&x, None, None, Some(&w), None, true, 0.1, 1e-5);
}

#[test]
#[should_panic(
    expected = "layer_norm: input of shape [2, 3] does not end with normalized_shape [4]"
)]
fn layer_norm_rejects_wrong_shape() {
    layer_norm(&Tensor::<f32>::zeros(&[2, 3]), &[4], None, None, 1e-5);
}

#[test]
#[should_panic(expected = "group_norm: 4 groups do not divide 6 channels")]
fn group_norm_rejects_bad_groups() {
    group_norm(&Tensor::<f32>::zeros(&[2, 6, 3]), 4, None, None, 1e-5);
}
