//! The wide builds of the LSTM cell kernels against the generic loops, bit
//! for bit: the fused f32 step kernel (AVX-512 and AVX2 + FMA, whichever
//! the CPU runs) against [`lstm_rows_generic`], and the backward kernel's
//! AVX2 build against the loop at the baseline width.

use super::super::lstm_f32::{lstm_rows_f32_on, supports, Isa, Outs, StepIns};
use super::{back_rows, lstm_back_rows, lstm_rows_generic};
use crate::tensor::Float;
use crate::Rng;

/// Hidden sizes: below, at and off multiples of 8 and 16 lanes.
const HS: [usize; 9] = [1, 3, 7, 8, 13, 16, 24, 37, 128];

/// `len` values around 0, every 7th large enough to saturate the gates,
/// with exact zeros of both signs among them.
fn values(rng: &mut Rng, len: usize) -> Vec<f32> {
    (0..len)
        .map(|k| match k % 23 {
            5 => 0.0,
            11 => -0.0,
            _ => {
                let v = 3.0 * rng.normal() as f32;
                if k % 7 == 3 {
                    12.0 * v
                } else {
                    v
                }
            }
        })
        .collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The wide builds of the step kernel this CPU runs.
fn wide_builds() -> Vec<Isa> {
    let b: Vec<Isa> = [Isa::Avx512, Isa::Avx2]
        .into_iter()
        .filter(|&i| supports(i))
        .collect();
    if b.is_empty() {
        eprintln!("no wide build of the LSTM step kernel on this CPU: nothing compared");
    }
    b
}

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
    let builds = wide_builds();
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
#[test]
fn step_kernel_declines_f64_and_generic() {
    let h = 3;
    let (x, cp) = (vec![0.5f64; 4 * h], vec![0.25f64; h]);
    let (mut c, mut y, mut g) = (vec![0.0f64; h], vec![0.0f64; h], vec![0.0f64; 4 * h]);
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
    for isa in [Isa::Avx512, Isa::Avx2, Isa::Generic] {
        if supports(isa) {
            assert!(
                !lstm_rows_f32_on(isa, h, &ins, &mut out),
                "{isa:?} took f64"
            );
        }
    }
    let xf = vec![0.5f32; 4 * h];
    let cpf = vec![0.25f32; h];
    let (mut c, mut y, mut g) = (vec![0.0f32; h], vec![0.0f32; h], vec![0.0f32; 4 * h]);
    let ins = StepIns {
        xp: &xf,
        bias: None,
        hw: &xf,
        c_prev: &cpf,
    };
    let mut out = Outs {
        c: &mut c,
        y: &mut y,
        y_stride: h,
        gates: &mut g,
        tc: None,
    };
    assert!(!lstm_rows_f32_on(Isa::Generic, h, &ins, &mut out));
}

/// The backward kernel as dispatched (its AVX2 build where the CPU has
/// AVX2 + FMA) against its loop at the baseline width, `f32` and `f64`,
/// with and without `dy`.
fn back_kernel_equals_the_baseline<E: Float>(to_bits: impl Fn(E) -> u64) {
    let mut rng = Rng::new(43);
    let mut vals = |len: usize, act: bool| -> Vec<E> {
        values(&mut rng, len)
            .into_iter()
            .map(|v| {
                // activated gates and tanh(c) lie in (-1, 1)
                let v = if act { (v as f64).tanh() } else { v as f64 };
                E::from_f64(v)
            })
            .collect()
    };
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
                    let b: Vec<u64> = dc.iter().chain(&da).map(|&v| to_bits(v)).collect();
                    b
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
    back_kernel_equals_the_baseline::<f32>(|v: f32| v.to_bits().into());
    back_kernel_equals_the_baseline::<f64>(|v: f64| v.to_bits());
}
