//! Parity of batch, layer and group normalisation with PyTorch (fixtures
//! `nn/batch_norm*`, `nn/layer_norm*`, `nn/group_norm*`: outputs, input,
//! weight and bias gradients, updated running statistics), and gradient
//! checks in f64, first and second order.
//!
//! Tolerances: each fixture's own `rtol`/`atol` (1e-10 / 1e-12 in f64);
//! see tests/fixtures/README.md for how they were established.

mod common;
mod second_order;
use common::Fixture;
use forge::nn::functional::{batch_norm, group_norm, layer_norm};
use forge::{gradcheck, Tensor};

fn files() -> Vec<String> {
    let mut v = common::fixtures_with_prefix("nn", "batch_norm");
    v.extend(common::fixtures_with_prefix("nn", "layer_norm"));
    v.extend(common::fixtures_with_prefix("nn", "group_norm"));
    v
}

/// `(out, running_mean_new, running_var_new)` of fixture `f` on
/// `[x, weight, bias]`.
type Stats = Option<(Tensor<f64>, Tensor<f64>)>;

fn apply(f: &Fixture, v: &[Tensor<f64>]) -> (Tensor<f64>, Stats) {
    let eps = f.meta_f64("eps");
    let (x, w, b) = (&v[0], Some(&v[1]), Some(&v[2]));
    match f.meta("op") {
        "batch_norm" => {
            let (rm, rv) = (f.t("running_mean"), f.t("running_var"));
            let training = f.meta("training") == "true";
            let (y, m, s) = batch_norm(
                x,
                Some(&rm),
                Some(&rv),
                w,
                b,
                training,
                f.meta_f64("momentum"),
                eps,
            );
            (y, Some((m.unwrap(), s.unwrap())))
        }
        "layer_norm" => {
            let ns: Vec<usize> = f
                .meta_list("normalized_shape")
                .iter()
                .map(|d| d.parse().unwrap())
                .collect();
            (layer_norm(x, &ns, w, b, eps), None)
        }
        "group_norm" => {
            let g = f.meta("num_groups").parse().unwrap();
            (group_norm(x, g, w, b, eps), None)
        }
        op => panic!("{}: unknown op {op}", f.name),
    }
}

#[test]
fn norms_match_pytorch() {
    let files = files();
    assert_eq!(files.len(), 6);
    for file in files {
        let f = Fixture::load(&file);
        let v: Vec<Tensor<f64>> = ["x", "weight", "bias"]
            .iter()
            .map(|n| f.t(n).requires_grad())
            .collect();
        let (y, stats) = apply(&f, &v);
        f.check("out", &y);
        if let Some((m, s)) = stats {
            assert!(
                !m.is_tracked() && !s.is_tracked(),
                "{file}: running stats tracked"
            );
            f.check("running_mean_new", &m);
            f.check("running_var_new", &s);
        }
        let g = y.backward_with(&f.t("gout"), false);
        for (i, n) in ["x", "weight", "bias"].iter().enumerate() {
            f.check(&format!("grad_{n}"), g.get(&v[i]).unwrap());
        }
    }
}

#[test]
fn norms_pass_gradcheck() {
    for file in files() {
        let f = Fixture::load(&file);
        let v: Vec<Tensor<f64>> = ["x", "weight", "bias"].iter().map(|n| f.t(n)).collect();
        gradcheck(|v| apply(&f, v).0, &v, 1e-6, 1e-6, 1e-6)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
    }
}

#[test]
fn norms_second_order() {
    for file in files() {
        let f = Fixture::load(&file);
        let v: Vec<Tensor<f64>> = ["x", "weight", "bias"].iter().map(|n| f.t(n)).collect();
        second_order::check(
            &file,
            |x| apply(&f, &[x.clone(), v[1].clone(), v[2].clone()]).0,
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
