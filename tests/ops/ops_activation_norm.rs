//! The activations of issue 34 (hardswish, hardsigmoid, relu6, hardtanh,
//! prelu, selu, celu, glu, logsigmoid, softsign), `rms_norm`,
//! `vector_norm`, `normalize`, `cosine_similarity`, `pairwise_distance`
//! and `pixel_shuffle` / `pixel_unshuffle` against PyTorch fixtures
//! (tests/fixtures/gen/gen_ops2.py) in f64 and f32, an f64 gradient check
//! and a double-backward check of each, their layers, and 1- vs 2-thread
//! bit identity.
//!
//! Every option is read from the fixture's metadata. Tolerances: each
//! fixture's own `rtol`/`atol` (1e-10 / 1e-12 in f64) and
//! `f32_rtol`/`f32_atol` in f32 (tests/fixtures/README.md); gradcheck and
//! the Hessian-vector check use eps 1e-6 and atol = rtol = 1e-6 (the
//! project's standard).

use crate::common;
use common::Fixture;
use forge::nn::functional::{cosine_similarity, normalize, pairwise_distance, rms_norm};
/// A boxed op of one f32 tensor.
type UnaryOp<'a> = Box<dyn Fn(&Tensor<f32>) -> Tensor<f32> + 'a>;

use forge::{gradcheck, Float, Forward, Rng, Tensor};

const PREFIXES: [&str; 8] = [
    "act_",
    "rms_norm_",
    "vector_norm_",
    "normalize_",
    "cosine_similarity_",
    "pairwise_distance_",
    "pixel_shuffle_",
    "pixel_unshuffle_",
];

fn files() -> Vec<Fixture> {
    let mut v = Vec::new();
    for p in PREFIXES {
        v.extend(common::fixtures_with_prefix("ops", p));
    }
    assert!(v.len() >= 32, "{v:?}");
    v.iter().map(|p| Fixture::load(p)).collect()
}

/// The fixture's op on its inputs (in the metadata's `inputs` order),
/// options from the metadata.
fn apply<E: Float>(f: &Fixture, t: &[Tensor<E>]) -> Tensor<E> {
    let opt = |k: &str| match f.meta(k) {
        "none" => None,
        v => Some(v.parse::<f64>().unwrap()),
    };
    let dims = |k: &str| -> Vec<isize> {
        if f.meta(k) == "none" {
            vec![]
        } else {
            f.meta_list(k).iter().map(|v| v.parse().unwrap()).collect()
        }
    };
    let x = &t[0];
    match f.meta("op") {
        "hardswish" => x.hardswish(),
        "hardsigmoid" => x.hardsigmoid(),
        "relu6" => x.relu6(),
        "hardtanh" => x.hardtanh(f.meta_f64("min_val"), f.meta_f64("max_val")),
        "selu" => x.selu(),
        "celu" => x.celu(f.meta_f64("alpha")),
        "logsigmoid" => x.log_sigmoid(),
        "softsign" => x.softsign(),
        "glu" => x.glu(f.parse("dim")),
        "prelu" => x.prelu(&t[1]),
        "rms_norm" => rms_norm(x, &f.usizes("normalized_shape"), t.get(1), opt("eps")),
        "vector_norm" => x.vector_norm(f.meta_f64("ord"), &dims("dim"), f.flag("keepdim")),
        "normalize" => normalize(x, f.meta_f64("p"), f.parse("dim"), f.meta_f64("eps")),
        "cosine_similarity" => cosine_similarity(x, &t[1], f.parse("dim"), f.meta_f64("eps")),
        "pairwise_distance" => pairwise_distance(
            x,
            &t[1],
            f.meta_f64("p"),
            f.meta_f64("eps"),
            f.flag("keepdim"),
        ),
        "pixel_shuffle" => x.pixel_shuffle(f.parse("upscale_factor")),
        "pixel_unshuffle" => x.pixel_unshuffle(f.parse("downscale_factor")),
        other => panic!("{}: op {other}", f.name),
    }
}

fn inputs<E: Float>(f: &Fixture) -> Vec<Tensor<E>> {
    f.meta_list("inputs")
        .iter()
        .map(|k| f.input::<E>(k))
        .collect()
}

/// Output and every listed gradient in element type `E`, within the
/// tolerances for `E`.
fn check<E: Float>(f: &Fixture) {
    let names = f.meta_list("inputs");
    let xs: Vec<Tensor<E>> = inputs::<E>(f).iter().map(|t| t.requires_grad()).collect();
    let y = apply(f, &xs);
    f.check_as("out", &y);
    let g = y.backward_with(&f.input::<E>("gout"), false);
    for (name, x) in names.iter().zip(&xs) {
        f.check_as(&format!("grad_{name}"), g.get(x).unwrap());
    }
}

#[test]
fn activations_and_norms_match_pytorch_in_f64_and_f32() {
    for f in files() {
        check::<f64>(&f);
        check::<f32>(&f);
    }
}

#[test]
fn activations_and_norms_pass_gradcheck() {
    for f in files() {
        gradcheck(|v| apply(&f, v), &inputs::<f64>(&f), 1e-6, 1e-6, 1e-6)
            .unwrap_or_else(|e| panic!("{}: {e}", f.name));
    }
}

/// Double backward of the first input: the gradient taken with
/// `create_graph` against differences of the plain gradient, for every op
/// with curvature (the piecewise-linear ones and the layouts have a zero
/// second derivative and a gradient that does not depend on the input).
#[test]
fn activations_and_norms_have_second_derivatives() {
    for f in files() {
        let curved = match f.meta("op") {
            "vector_norm" => f.meta_f64("ord").is_finite() && f.meta_f64("ord") != 1.0,
            op => !matches!(
                op,
                "hardsigmoid"
                    | "relu6"
                    | "hardtanh"
                    | "prelu"
                    | "pixel_shuffle"
                    | "pixel_unshuffle"
            ),
        };
        if !curved {
            continue;
        }
        let rest: Vec<Tensor<f64>> = inputs::<f64>(&f)[1..].to_vec();
        let gout = f.t("gout");
        let ff = |x: &Tensor<f64>| {
            let mut all = vec![x.clone()];
            all.extend(rest.iter().cloned());
            apply(&f, &all).mul(&gout).sum()
        };
        let first = &f.meta_list("inputs")[0];
        common::assert_hvp(ff, &f.t(first), 9, &f.name);
    }
}

#[test]
fn the_two_norm_has_a_zero_gradient_at_zero() {
    let x = Tensor::<f64>::zeros(&[2, 3]).requires_grad();
    let g = x.vector_norm(2.0, &[1], false).sum().backward();
    assert_eq!(g.get(&x).unwrap().to_vec(), vec![0.0; 6]);
    let x = Tensor::<f64>::from_vec(vec![0.0, 2.0, 0.0, 0.0], &[4]);
    assert_eq!(x.vector_norm(0.0, &[], false).item(), 1.0);
    assert_eq!(x.norm().item(), 2.0);
}

#[test]
fn layers_are_their_functions() {
    use forge::nn::{
        Celu, Glu, Hardsigmoid, Hardswish, Hardtanh, Identity, LogSigmoid, PRelu, PixelShuffle,
        PixelUnshuffle, Relu6, RmsNorm, Selu, Softsign, Unflatten,
    };
    use forge::Layer;
    let x = Tensor::<f64>::normal(&[2, 4, 3, 2], 0.0, 2.0, &mut Rng::new(5));
    let same = |a: Tensor<f64>, b: Tensor<f64>| assert_eq!(a.to_vec(), b.to_vec());
    same(Hardswish.forward(x.clone()), x.hardswish());
    same(Hardsigmoid.forward(x.clone()), x.hardsigmoid());
    same(Relu6.forward(x.clone()), x.relu6());
    same(
        Hardtanh::default().forward(x.clone()),
        x.hardtanh(-1.0, 1.0),
    );
    same(Selu.forward(x.clone()), x.selu());
    same(Celu { alpha: 0.5 }.forward(x.clone()), x.celu(0.5));
    same(Glu { dim: 1 }.forward(x.clone()), x.glu(1));
    same(LogSigmoid.forward(x.clone()), x.log_sigmoid());
    same(Softsign.forward(x.clone()), x.softsign());
    same(Identity.forward(x.clone()), x.clone());
    let u = Unflatten {
        dim: 1,
        sizes: vec![2, -1],
    };
    assert_eq!(u.forward(x.clone()).shape(), &[2, 2, 2, 3, 2]);
    same(
        PixelUnshuffle(2).forward(PixelShuffle(2).forward(x.clone())),
        x.clone(),
    );
    // PRelu: learnable, one slope per channel.
    let p = PRelu::<f64>::new(4, 0.25);
    assert_eq!(p.parameters().len(), 1);
    let y = p.forward(x.clone());
    same(y.clone(), x.prelu(&Tensor::full(&[4], 0.25)));
    let g = y.sum().backward();
    assert_eq!(g.get(&p.weight).unwrap().shape(), &[4]);
    // RmsNorm: weight of ones by default, machine epsilon.
    let n = RmsNorm::<f64>::new(&[3, 2]);
    same(n.forward(x.clone()), rms_norm(&x, &[3, 2], None, None));
    assert_eq!(
        RmsNorm::<f64>::new(&[2])
            .without_affine()
            .parameters()
            .len(),
        0
    );
}

#[test]
fn hot_activations_and_norms_are_bit_identical_for_1_and_2_threads() {
    let _threads = common::lock_thread_count();
    let x = Tensor::<f32>::normal(&[64, 48, 40], 0.0, 3.0, &mut Rng::new(21));
    let gout = Tensor::<f32>::normal(&[64, 48, 40], 0.0, 1.0, &mut Rng::new(22));
    let w = Tensor::<f32>::normal(&[40], 1.0, 0.2, &mut Rng::new(23));
    let ops: Vec<UnaryOp> = vec![
        Box::new(|x| x.hardswish().add(&x.hardsigmoid()).add(&x.relu6())),
        Box::new(|x| x.selu().add(&x.softsign()).add(&x.celu(0.5))),
        Box::new(|x| rms_norm(x, &[40], Some(&w), None)),
        Box::new(|x| normalize(x, 2.0, -1, 1e-12)),
    ];
    for (k, op) in ops.iter().enumerate() {
        let run = || {
            let xt = x.detach().requires_grad();
            let y = op(&xt);
            let g = y.backward_with(&gout, false);
            (y.to_vec(), g.get(&xt).unwrap().to_vec())
        };
        forge::runtime::set_num_threads(1);
        let one = run();
        forge::runtime::set_num_threads(2);
        let before = forge::runtime::pool_dispatches();
        let two = run();
        assert!(
            forge::runtime::pool_dispatches() > before,
            "op {k}: no parallel dispatch"
        );
        assert!(one == two, "op {k}: 1 and 2 threads differ");
    }
}
