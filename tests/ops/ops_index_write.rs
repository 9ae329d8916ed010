//! The overwriting index writes (`scatter`, `scatter_value`, `index_copy`,
//! `index_fill`, `index_put` both ways), advanced and boolean-mask
//! indexing (`index`, `index_mask`, `nonzero`) and `unfold` / `fold`
//! against PyTorch fixtures (`ops/scatter_*`, `ops/index_copy_*`,
//! `ops/index_fill_*`, `ops/index_put_*`, `ops/index_mask_*`,
//! `ops/unfold_*`, `ops/fold_*`, written by tests/fixtures/gen/gen_ops3.py)
//! in f64 and f32, an f64 gradient check and a second-order check of each,
//! and 1- vs 2-thread bit identity of the parallel unfold / fold kernels.
//!
//! Every option is read from the fixture's metadata, never from its name;
//! the fixtures' overwriting writes hit distinct positions (PyTorch leaves
//! the winner of repeated ones unspecified). Tolerances: each fixture's own
//! `rtol`/`atol` (1e-10 / 1e-12 in f64) and `f32_rtol`/`f32_atol` in f32.
//! gradcheck: central differences with eps 1e-6 and atol = rtol = 1e-6
//! (the project's standard; these ops are linear in their float inputs, so
//! the differences are exact to rounding).

use crate::common;
use common::Fixture;
use forge::ops::{ScatterReduce, Unfold};
use forge::{gradcheck, Float, Rng, Tensor};

/// A fixture's op: its differentiable outputs (the fixture's `outputs`
/// without `no_grad_outputs`, in order) from a lookup of its float inputs.
type Op<E> = fn(&Fixture, &dyn Fn(&str) -> Tensor<E>) -> Vec<Tensor<E>>;

fn files(prefix: &str, min: usize) -> Vec<Fixture> {
    let files: Vec<Fixture> = common::fixtures_with_prefix("ops", prefix)
        .iter()
        .map(|p| Fixture::load(p))
        .collect();
    assert!(files.len() >= min, "{prefix}: {} files", files.len());
    files
}

fn pair(f: &Fixture, key: &str) -> [usize; 2] {
    f.meta_pair(key)
}

fn unfold_opts(f: &Fixture) -> Unfold {
    Unfold::new(pair(f, "kernel_size"))
        .dilation(pair(f, "dilation"))
        .padding(pair(f, "padding"))
        .stride(pair(f, "stride"))
}

fn index_tensors(f: &Fixture) -> Vec<Tensor<i64>> {
    (0..f.parse::<usize>("indices"))
        .map(|k| f.i(&format!("i{k}")))
        .collect()
}

fn op_for<E: Float>(f: &Fixture) -> Op<E> {
    match f.meta("op") {
        "scatter" => |f, get| {
            let dim: isize = f.parse("dim");
            let idx = f.i("index");
            vec![if f.has("src") {
                let reduce = match f.meta("reduce") {
                    "none" => ScatterReduce::None,
                    "add" => ScatterReduce::Add,
                    r => panic!("{}: reduce {r}", f.name),
                };
                get("x").scatter(dim, &idx, &get("src"), reduce)
            } else {
                get("x").scatter_value(dim, &idx, f.meta_f64("value"))
            }]
        },
        "index_copy" => {
            |f, get| vec![get("x").index_copy(f.parse("dim"), &f.i("index"), &get("source"))]
        }
        "index_fill" => {
            |f, get| vec![get("x").index_fill(f.parse("dim"), &f.i("index"), f.meta_f64("value"))]
        }
        "index_put" => |f, get| {
            let idx = index_tensors(f);
            let refs: Vec<&Tensor<i64>> = idx.iter().collect();
            let x = get("x");
            vec![
                x.index_put(&refs, &get("values"), f.flag("accumulate")),
                x.index(&refs),
            ]
        },
        "index_mask" => |f, get| {
            let mask = f.i("mask").to_vec().iter().map(|&m| m != 0).collect();
            let mask = Tensor::<bool>::from_vec(mask, f.i("mask").shape());
            vec![get("x").index_mask(&mask)]
        },
        "unfold" => |f, get| vec![get("x").unfold(&unfold_opts(f))],
        "fold" => |f, get| vec![get("x").fold(pair(f, "output_size"), &unfold_opts(f))],
        other => panic!("{}: op {other}", f.name),
    }
}

/// The differentiable outputs' names and their upstream gradients' names.
fn outputs(f: &Fixture) -> Vec<(String, String)> {
    let skip = if f.meta.contains_key("no_grad_outputs") {
        f.meta_list("no_grad_outputs")
    } else {
        vec![]
    };
    let outs: Vec<String> = f
        .meta_list("outputs")
        .into_iter()
        .filter(|o| !skip.contains(o))
        .collect();
    outs.into_iter().zip(f.meta_list("gouts")).collect()
}

/// Forward and the input gradients in element type `E` against the fixture.
fn check<E: Float>(f: &Fixture) {
    let grads = f.meta_list("grads");
    let tracked: Vec<(String, Tensor<E>)> = grads
        .iter()
        .map(|n| (n.clone(), f.input::<E>(n).requires_grad()))
        .collect();
    let get = |n: &str| match tracked.iter().find(|(m, _)| m == n) {
        Some((_, t)) => t.clone(),
        None => f.input::<E>(n),
    };
    let ys = op_for::<E>(f)(f, &get);
    let mut loss: Option<Tensor<E>> = None;
    for ((name, gname), y) in outputs(f).iter().zip(&ys) {
        f.check_as(name, y);
        let term = y.mul(&f.input::<E>(gname)).sum();
        loss = Some(match loss {
            Some(l) => l.add(&term),
            None => term,
        });
    }
    let g = loss.unwrap().backward();
    for (n, t) in &tracked {
        f.check_as(&format!("grad_{n}"), g.get(t).unwrap());
    }
}

/// gradcheck of every differentiable output in f64, and the second order
/// of `sum(y * gout) * sum(y)` (quadratic in the inputs) through
/// `common::assert_hvp`.
fn check_grads(f: &Fixture) {
    let grads = f.meta_list("grads");
    let xs: Vec<Tensor<f64>> = grads.iter().map(|n| f.t(n)).collect();
    let op = op_for::<f64>(f);
    let run = |v: &[Tensor<f64>]| {
        let get = |n: &str| match grads.iter().position(|m| m == n) {
            Some(k) => v[k].clone(),
            None => f.t(n),
        };
        op(f, &get)
    };
    for (k, _) in outputs(f).iter().enumerate() {
        gradcheck(|v| run(v)[k].clone(), &xs, 1e-6, 1e-6, 1e-6)
            .unwrap_or_else(|e| panic!("{} (output {k}): {e}", f.name));
    }
    let gout = f.t("gout");
    for k in 0..xs.len() {
        let scalar = |x: &Tensor<f64>| {
            let mut v = xs.clone();
            v[k] = x.clone();
            let y = run(&v)[0].clone();
            y.mul(&gout).sum().mul(&y.sum())
        };
        common::assert_hvp(
            scalar,
            &xs[k],
            11 + k as u64,
            &format!("{} (input {k})", f.name),
        );
    }
}

const KINDS: [(&str, usize); 7] = [
    ("scatter_", 5),
    ("index_copy_", 3),
    ("index_fill_", 2),
    ("index_put_", 5),
    ("index_mask_", 3),
    ("unfold_", 5),
    ("fold_", 4),
];

#[test]
fn index_writes_and_unfold_match_pytorch_in_f64_and_f32() {
    for (prefix, min) in KINDS {
        for f in files(prefix, min) {
            check::<f64>(&f);
            check::<f32>(&f);
            if f.meta("op") == "index_mask" {
                let mask = f.i("mask").to_vec().iter().map(|&m| m != 0).collect();
                let mask = Tensor::<bool>::from_vec(mask, f.i("mask").shape());
                assert_eq!(
                    mask.nonzero().to_vec(),
                    f.i("nonzero").to_vec(),
                    "{}",
                    f.name
                );
                assert_eq!(mask.nonzero().shape(), f.i("nonzero").shape(), "{}", f.name);
            }
        }
    }
}

#[test]
fn index_writes_and_unfold_pass_gradcheck_and_second_order_checks() {
    for (prefix, min) in KINDS {
        for f in files(prefix, min) {
            check_grads(&f);
        }
    }
}

#[test]
fn scatter_into_a_larger_source_gives_zero_gradient_to_the_rest() {
    // PyTorch differentiates scatter's src only when it has the index's
    // shape; forge gathers the gradient back and leaves the rest zero, as
    // scatter_add does.
    let x = Tensor::<f64>::zeros(&[2, 3]);
    let src = Tensor::<f64>::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]).requires_grad();
    let idx = Tensor::<i64>::from_vec(vec![2, 0], &[2, 1]);
    let y = x.scatter(1, &idx, &src, ScatterReduce::None);
    assert_eq!(y.to_vec(), vec![0.0, 0.0, 1.0, 3.0, 0.0, 0.0]);
    let g = y
        .mul(&Tensor::from_vec(
            vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            &[2, 3],
        ))
        .sum()
        .backward();
    assert_eq!(g.get(&src).unwrap().to_vec(), vec![3.0, 0.0, 4.0, 0.0]);
}

#[test]
fn index_errors_name_the_op_and_shapes() {
    let err = |f: Box<dyn FnOnce() + std::panic::UnwindSafe>| {
        std::panic::catch_unwind(f)
            .unwrap_err()
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default()
    };
    let m = err(Box::new(|| {
        let i = Tensor::<i64>::from_vec(vec![3], &[1]);
        Tensor::<f32>::zeros(&[3, 2]).index(&[&i]);
    }));
    assert!(
        m.contains("index: index 3 is out of range for dimension 0 of size 3"),
        "{m}"
    );
    let m = err(Box::new(|| {
        let i = Tensor::<i64>::from_vec(vec![0, 1], &[2]);
        let v = Tensor::<f32>::zeros(&[3]);
        Tensor::<f32>::zeros(&[3, 2]).index_put(&[&i], &v, false);
    }));
    assert!(m.contains("index_put: values of shape [3]"), "{m}");
    let m = err(Box::new(|| {
        Tensor::<f32>::zeros(&[1, 1, 2, 2]).unfold(&Unfold::new([3, 3]));
    }));
    assert!(m.contains("unfold: image 2x2"), "{m}");
    let m = err(Box::new(|| {
        Tensor::<f32>::zeros(&[1, 4, 3]).fold([3, 3], &Unfold::new([2, 2]));
    }));
    assert!(m.contains("fold: 3 columns"), "{m}");
}

#[test]
fn unfold_and_fold_are_bit_identical_for_1_and_2_threads() {
    let _threads = common::lock_thread_count();
    let opts = Unfold::new([3, 3]).padding([1, 1]).stride([2, 1]);
    let run = || {
        let x = Tensor::<f32>::normal(&[4, 16, 40, 40], 0.0, 1.0, &mut Rng::new(1)).requires_grad();
        let cols = x.unfold(&opts);
        let y = cols.mul(&cols).fold([40, 40], &opts);
        let gout = Tensor::<f32>::normal(y.shape(), 0.0, 1.0, &mut Rng::new(2));
        let g = y.backward_with(&gout, false);
        (y.to_vec(), g.get(&x).unwrap().to_vec())
    };
    let (one, two, parallel) = common::at_1_and_2_threads(run);
    assert!(parallel, "no parallel dispatch");
    assert!(one == two, "1 and 2 threads differ");
}
