//! Parity of the binary ops with PyTorch (every fixture `ops/binary_*`):
//! broadcasting, 0-d tensor operands on either side, and Python-scalar
//! operands (`x * s`, `s - x`, `s / x`, `s ** x`), outputs and every input
//! gradient, in f64 and f32; plus a finite-difference gradient check of
//! each in f64.
//!
//! Tolerances: each fixture's own `rtol`/`atol` (1e-10 / 1e-12 in f64);
//! see tests/fixtures/README.md for how they were established. The
//! maximum/minimum operands differ by at least 0.01, so the finite
//! differences (eps 1e-6) never cross a tie.

use crate::common;
use common::Fixture;
use forge::{gradcheck, Float, Tensor};

fn tensor_op<E: Float>(op: &str, l: &Tensor<E>, r: &Tensor<E>) -> Tensor<E> {
    match op {
        "add" => l.add(r),
        "sub" => l.sub(r),
        "mul" => l.mul(r),
        "div" => l.div(r),
        "pow" => l.pow(r),
        "maximum" => l.maximum(r),
        "minimum" => l.minimum(r),
        other => panic!("unknown binary op {other}"),
    }
}

/// The fixture's expression, on inputs given in the file's `inputs` order.
fn apply<E: Float>(f: &Fixture, v: &[Tensor<E>]) -> Tensor<E> {
    let op = f.meta("op");
    if f.meta("inputs") == "x" {
        // A Python scalar constant; `expr` says which side it is on.
        let s = E::from_f64(f.meta_f64("scalar"));
        let x = &v[0];
        return match (op, f.meta("expr")) {
            ("mul", "x * scalar") => x.mul_scalar(s),
            ("rsub", "scalar - x") => x.rsub_scalar(s),
            ("rdiv", "scalar / x") => x.rdiv_scalar(s),
            ("rpow", "scalar ** x") => x.rpow_scalar(s),
            (op, expr) => panic!("{}: unknown scalar form {op}: {expr}", f.name),
        };
    }
    assert_eq!(f.meta("inputs"), "a,b", "{}", f.name);
    match f.meta.get("order").map(String::as_str) {
        Some("b op a") => tensor_op(op, &v[1], &v[0]),
        None => tensor_op(op, &v[0], &v[1]),
        Some(o) => panic!("{}: unknown order {o}", f.name),
    }
}

fn inputs(f: &Fixture) -> Vec<String> {
    f.meta_list("inputs")
}

fn check_file<E: Float>(f: &Fixture) {
    let names = inputs(f);
    let xs: Vec<Tensor<E>> = names
        .iter()
        .map(|n| f.input::<E>(n).requires_grad())
        .collect();
    let y = apply(f, &xs);
    f.check_as("out", &y);
    let g = y.backward_with(&f.input::<E>("gout"), false);
    for n in f.meta_list("grads") {
        let i = names.iter().position(|m| *m == n).unwrap();
        let gi = g
            .get(&xs[i])
            .unwrap_or_else(|| panic!("{}: no gradient for {n}", f.name));
        f.check_as(&format!("grad_{n}"), gi);
    }
}

#[test]
fn binary_ops_match_pytorch() {
    let files = common::fixtures_with_prefix("ops", "binary_");
    assert!(files.len() >= 20, "expected the 20 binary fixtures");
    for file in files {
        let f = Fixture::load(&file);
        check_file::<f64>(&f);
        check_file::<f32>(&f);
    }
}

#[test]
fn binary_ops_pass_gradcheck() {
    for file in common::fixtures_with_prefix("ops", "binary_") {
        let f = Fixture::load(&file);
        let xs: Vec<Tensor<f64>> = inputs(&f).iter().map(|n| f.t(n)).collect();
        gradcheck(|v| apply(&f, v), &xs, 1e-6, 1e-6, 1e-6)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
    }
}

/// The operator overloads agree with the named methods for every mix of
/// owned, borrowed and scalar operands.
#[test]
fn operator_forms_agree() {
    let a = Tensor::<f64>::from_vec(vec![1.5, -2.0, 3.0], &[3]);
    let b = Tensor::<f64>::from_vec(vec![0.5, 4.0, -1.0], &[3]);
    assert_eq!((&a + &b).to_vec(), a.add(&b).to_vec());
    assert_eq!((a.clone() - &b).to_vec(), a.sub(&b).to_vec());
    assert_eq!((&a * b.clone()).to_vec(), a.mul(&b).to_vec());
    assert_eq!((a.clone() / b.clone()).to_vec(), a.div(&b).to_vec());
    assert_eq!((&a + 2.0).to_vec(), a.add_scalar(2.0).to_vec());
    assert_eq!((2.0 - &a).to_vec(), a.rsub_scalar(2.0).to_vec());
    assert_eq!((2.0 / a.clone()).to_vec(), a.rdiv_scalar(2.0).to_vec());
    assert_eq!((3.0 * &a).to_vec(), a.mul_scalar(3.0).to_vec());
    assert_eq!((-&a).to_vec(), a.neg().to_vec());
}
