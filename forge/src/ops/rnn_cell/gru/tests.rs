//! The wide builds of the GRU cell kernels against the generic loops, bit
//! for bit: the f32 step kernel (AVX-512 and AVX2 + FMA, whichever the CPU
//! runs) against [`gru_rows_generic`], and the backward kernel's AVX2
//! build against the loop at the baseline width.

use super::super::gru_f32::{gru_rows_f32_on, GruStep};
use super::super::isa::Isa;
use super::super::test_util::{bits, builds_to_decline, floats, values, wide_builds, Bits, HS};
use super::{back_rows, gru_back_rows, gru_rows_generic};
use crate::tensor::Float;
use crate::Rng;

#[test]
fn step_kernel_builds_equal_the_generic_loops() {
    let builds = wide_builds("GRU");
    let mut rng = Rng::new(47);
    for h in HS {
        for rows in [1, 2, 5] {
            let x = values(&mut rng, rows * 3 * h);
            let hw = values(&mut rng, rows * 3 * h);
            let bias = values(&mut rng, 3 * h);
            let hp = values(&mut rng, rows * h);
            for with_bias in [true, false] {
                let b = with_bias.then_some(&bias[..]);
                let run = |isa: Option<Isa>| {
                    let (mut s, mut y) = (vec![f32::NAN; rows * 4 * h], vec![f32::NAN; rows * h]);
                    match isa {
                        None => gru_rows_generic(h, &x, &hw, b, &hp, &mut s, &mut y),
                        Some(i) => {
                            let mut st = GruStep {
                                xp: &x,
                                hw: &hw,
                                b,
                                h_prev: &hp,
                                s: &mut s,
                                y: &mut y,
                            };
                            assert!(gru_rows_f32_on(i, h, &mut st), "{i:?} declined");
                        }
                    }
                    (bits(&s), bits(&y))
                };
                let want = run(None);
                for &isa in &builds {
                    let got = run(Some(isa));
                    let what = format!("{isa:?} h {h} rows {rows} bias {with_bias}");
                    assert_eq!(got.0, want.0, "saved gates, {what}");
                    assert_eq!(got.1, want.1, "y, {what}");
                }
            }
        }
    }
}

/// The step kernel declines `f64` and the generic "build".
fn step_kernel_declines<E: Float>() {
    let h = 2;
    let (x, hp) = (vec![E::from_f64(0.5); 3 * h], vec![E::from_f64(0.25); h]);
    let (mut s, mut y) = (vec![E::zero(); 4 * h], vec![E::zero(); h]);
    let mut st = GruStep {
        xp: &x,
        hw: &x,
        b: None,
        h_prev: &hp,
        s: &mut s,
        y: &mut y,
    };
    for isa in builds_to_decline::<E>() {
        assert!(!gru_rows_f32_on(isa, h, &mut st), "{isa:?} took it");
    }
}

#[test]
fn step_kernel_declines_f64_and_generic() {
    step_kernel_declines::<f64>();
    step_kernel_declines::<f32>();
}

/// The backward kernel as dispatched (its AVX2 build where the CPU has
/// AVX2 + FMA) against its loop at the baseline width.
fn back_kernel_equals_the_baseline<E: Bits>() {
    let mut rng = Rng::new(53);
    let mut vals = |len: usize, act: bool| floats::<E>(&mut rng, len, act);
    for h in HS {
        for rows in [1, 4] {
            let s = vals(rows * 4 * h, true);
            let hp = vals(rows * h, false);
            let dy = vals(rows * h, false);
            let carry0 = vals(rows * h, false);
            let run = |dispatched: bool| {
                let mut carry = carry0.clone();
                let (mut dx, mut dp) =
                    (vec![E::zero(); rows * 3 * h], vec![E::zero(); rows * 3 * h]);
                if dispatched {
                    gru_back_rows(h, &s, &hp, &dy, &mut carry, &mut dx, &mut dp);
                } else {
                    back_rows(h, &s, &hp, &dy, &mut carry, &mut dx, &mut dp);
                }
                [bits(&carry), bits(&dx), bits(&dp)]
            };
            assert!(run(true) == run(false), "gru backward, h {h} rows {rows}");
        }
    }
}

#[test]
fn back_kernel_build_equals_the_baseline_loop() {
    back_kernel_equals_the_baseline::<f32>();
    back_kernel_equals_the_baseline::<f64>();
}
