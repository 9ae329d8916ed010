//! The checkers themselves can fail: `gradcheck` and the second-order check
//! (`tests/second_order`) each reject an op whose backward rule is
//! deliberately wrong, and accept the same op with the right rule, so a
//! green parity suite means the rules were checked, not that the checks are
//! blind.

use crate::second_order;
use forge::{gradcheck, Tensor};

/// `3 x^2` as its own recorded op, whose backward rule is `6 x` when
/// `right`, else the wrong `3 x` (a dropped factor 2).
fn three_x_squared(x: &Tensor<f64>, right: bool) -> Tensor<f64> {
    let v: Vec<f64> = x.as_slice().iter().map(|a| 3.0 * a * a).collect();
    let k = if right { 6.0 } else { 3.0 };
    Tensor::from_vec(v, x.shape()).record("three_x_squared", vec![x.clone()], move |ctx| {
        vec![Some(ctx.grad.mul(&ctx.inputs[0].mul_scalar(k)))]
    })
}

/// `x^3` as a recorded op whose first-order rule is `grad * 3x^2` when
/// `first_right` (else the wrong `grad * 3x`); the `3x^2` factor is
/// [`three_x_squared`], so its own (second-order) rule is right or wrong
/// with `second_right`.
fn cube(x: &Tensor<f64>, first_right: bool, second_right: bool) -> Tensor<f64> {
    let v: Vec<f64> = x.as_slice().iter().map(|a| a * a * a).collect();
    Tensor::from_vec(v, x.shape()).record("cube", vec![x.clone()], move |ctx| {
        let x = &ctx.inputs[0];
        let d = if first_right {
            three_x_squared(x, second_right)
        } else {
            x.mul_scalar(3.0)
        };
        vec![Some(ctx.grad.mul(&d))]
    })
}

fn input() -> Tensor<f64> {
    Tensor::from_vec(vec![0.5, -1.25, 2.0, 0.75], &[2, 2])
}

#[test]
fn gradcheck_accepts_the_right_rule() {
    let report = gradcheck(|v| cube(&v[0], true, true), &[input()], 1e-6, 1e-6, 1e-6).unwrap();
    assert_eq!(report.checked, 4);
    assert!(report.max_abs_err < 1e-8, "{report:?}");
}

#[test]
fn gradcheck_rejects_a_wrong_first_order_rule() {
    let err = gradcheck(|v| cube(&v[0], false, true), &[input()], 1e-6, 1e-6, 1e-6).unwrap_err();
    // The message names the input and the element, with both values.
    assert!(err.contains("input 0"), "{err}");
    assert!(err.contains("element 0"), "{err}");
}

#[test]
fn gradcheck_does_not_see_a_wrong_second_order_rule() {
    // The first-order rule is right: gradcheck (first order) passes, which
    // is why the second-order check below exists.
    gradcheck(|v| cube(&v[0], true, false), &[input()], 1e-6, 1e-6, 1e-6).unwrap();
}

#[test]
fn second_order_check_accepts_the_right_rule() {
    second_order::check("cube", |x| cube(x, true, true), &input(), 1e-6);
}

#[test]
#[should_panic(expected = "cube (wrong second order): second order, element 0")]
fn second_order_check_rejects_a_wrong_second_order_rule() {
    second_order::check(
        "cube (wrong second order)",
        |x| cube(x, true, false),
        &input(),
        1e-6,
    );
}
