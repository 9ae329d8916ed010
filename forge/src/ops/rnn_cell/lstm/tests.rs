//! The wide builds of the LSTM cell kernels against the generic loops, bit
//! for bit: the fused f32 step kernel (AVX-512 and AVX2 + FMA, whichever
//! the CPU runs) against [`lstm_rows_generic`], and the backward kernel's
//! AVX2 build against the loop at the baseline width.

use super::super::isa::Isa;
use super::super::lstm_f32::{lstm_rows_f32_on, Outs, StepIns};
use super::super::test_util::{bits, builds_to_decline, floats, values, wide_builds, Bits, HS};
use super::{back_rows, lstm_back_rows, lstm_rows_generic};
use crate::tensor::Float;
use crate::Rng;

/// One step's outputs `(c, y, gates, tc)`; `y` rows `y_stride` apart, the
/// gaps holding a marker value that must survive.
type StepOut = (Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>);

/// Runs one step on `rows` rows with the generic loops (`isa` `None`) or
/// the `isa` build.
#[allow(clippy::too_many_arguments)]
fn step(
    isa: Option<Isa>,
    h: usize,
    rows: usize,
    x: &[f32],
    b: Option<&[f32]>,
    hw: &[f32],
    cp: &[f32],
    save: bool,
    y_stride: usize,
) -> StepOut {
    let mut c = vec![f32::NAN; rows * h];
    let mut y = vec![-7.5; (rows - 1) * y_stride + h];
    let mut gates = vec![f32::NAN; rows * 4 * h];
    let mut tc = vec![f32::NAN; if save { rows * h } else { 0 }];
    let ins = StepIns {
        xp: x,
        bias: b,
        hw,
        c_prev: cp,
    };
    let mut out = Outs {
        c: &mut c,
        y: &mut y,
        y_stride,
        gates: &mut gates,
        tc: save.then_some(&mut tc[..]),
    };
    match isa {
        None => lstm_rows_generic(h, &ins, &mut out),
        Some(i) => assert!(lstm_rows_f32_on(i, h, &ins, &mut out), "{i:?} declined"),
    }
    if !save {
        // scratch for the generic loops, not written by the fused kernel
        gates.clear();
    }
    (c, y, gates, tc)
}

#[test]
fn step_kernel_builds_equal_the_generic_loops() {
    let builds = wide_builds("LSTM");
    let mut rng = Rng::new(41);
    for h in HS {
        for rows in [1, 2, 5] {
            let x = values(&mut rng, rows * 4 * h);
            let hw = values(&mut rng, rows * 4 * h);
            let bias = values(&mut rng, 4 * h);
            let cp = values(&mut rng, rows * h);
            for (with_bias, save, gap) in [
                (true, true, 0),
                (true, false, 3),
                (false, true, 5),
                (false, false, 0),
            ] {
                let b = with_bias.then_some(&bias[..]);
                let want = step(None, h, rows, &x, b, &hw, &cp, save, h + gap);
                for &isa in &builds {
                    let got = step(Some(isa), h, rows, &x, b, &hw, &cp, save, h + gap);
                    let what = format!("{isa:?} h {h} rows {rows} bias {with_bias} save {save}");
                    assert_eq!(bits(&got.0), bits(&want.0), "c, {what}");
                    assert_eq!(bits(&got.1), bits(&want.1), "y, {what}");
                    assert_eq!(bits(&got.2), bits(&want.2), "gates, {what}");
                    assert_eq!(bits(&got.3), bits(&want.3), "tanh(c), {what}");
                }
            }
        }
    }
}

/// The step kernel declines what it does not handle: `f64`, and the
/// generic "build".
fn step_kernel_declines<E: Float>() {
    let h = 3;
    let (x, cp) = (vec![E::from_f64(0.5); 4 * h], vec![E::from_f64(0.25); h]);
    let (mut c, mut y, mut g) = (
        vec![E::zero(); h],
        vec![E::zero(); h],
        vec![E::zero(); 4 * h],
    );
    let ins = StepIns {
        xp: &x,
        bias: None,
        hw: &x,
        c_prev: &cp,
    };
    let mut out = Outs {
        c: &mut c,
        y: &mut y,
        y_stride: h,
        gates: &mut g,
        tc: None,
    };
    for isa in builds_to_decline::<E>() {
        assert!(!lstm_rows_f32_on(isa, h, &ins, &mut out), "{isa:?} took it");
    }
}

#[test]
fn step_kernel_declines_f64_and_generic() {
    step_kernel_declines::<f64>();
    step_kernel_declines::<f32>();
}

/// The backward kernel as dispatched (its AVX2 build where the CPU has
/// AVX2 + FMA) against its loop at the baseline width, with and without
/// `dy`.
fn back_kernel_equals_the_baseline<E: Bits>() {
    let mut rng = Rng::new(43);
    let mut vals = |len: usize, act: bool| floats::<E>(&mut rng, len, act);
    for h in HS {
        for rows in [1, 4] {
            let gates = vals(rows * 4 * h, true);
            let tcs = vals(rows * h, true);
            let cp = vals(rows * h, false);
            let dy = vals(rows * h, false);
            let carry = vals(rows * h, false);
            let dc0 = vals(rows * h, false);
            for with_dy in [true, false] {
                let d = with_dy.then_some(&dy[..]);
                let run = |dispatched: bool| {
                    let (mut dc, mut da) = (dc0.clone(), vec![E::zero(); rows * 4 * h]);
                    if dispatched {
                        lstm_back_rows(h, &gates, &tcs, &cp, d, &carry, &mut dc, &mut da);
                    } else {
                        back_rows(h, &gates, &tcs, &cp, d, &carry, &mut dc, &mut da);
                    }
                    [bits(&dc), bits(&da)]
                };
                assert!(
                    run(true) == run(false),
                    "lstm backward, h {h} rows {rows} dy {with_dy}"
                );
            }
        }
    }
}

#[test]
fn back_kernel_build_equals_the_baseline_loop() {
    back_kernel_equals_the_baseline::<f32>();
    back_kernel_equals_the_baseline::<f64>();
}
