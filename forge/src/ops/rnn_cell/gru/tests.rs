//! The wide builds of the GRU cell kernels against the generic loops, bit
//! for bit: the f32 step kernel (AVX-512 and AVX2 + FMA, whichever the CPU
//! runs) against [`gru_rows_generic`], and the backward kernel's AVX2
//! build against the loop at the baseline width.

use super::super::gru_f32::{gru_rows_f32_on, GruStep};
use super::super::lstm_f32::{supports, Isa};
use super::{back_rows, gru_back_rows, gru_rows_generic};
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

#[test]
fn step_kernel_builds_equal_the_generic_loops() {
    let builds: Vec<Isa> = [Isa::Avx512, Isa::Avx2]
        .into_iter()
        .filter(|&i| supports(i))
        .collect();
    if builds.is_empty() {
        eprintln!("no wide build of the GRU step kernel on this CPU: nothing compared");
    }
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
#[test]
fn step_kernel_declines_f64_and_generic() {
    let h = 2;
    let (x, hp) = (vec![0.5f64; 3 * h], vec![0.25f64; h]);
    let (mut s, mut y) = (vec![0.0f64; 4 * h], vec![0.0f64; h]);
    let mut st = GruStep {
        xp: &x,
        hw: &x,
        b: None,
        h_prev: &hp,
        s: &mut s,
        y: &mut y,
    };
    for isa in [Isa::Avx512, Isa::Avx2, Isa::Generic] {
        if supports(isa) {
            assert!(!gru_rows_f32_on(isa, h, &mut st), "{isa:?} took f64");
        }
    }
    let (xf, hpf) = (vec![0.5f32; 3 * h], vec![0.25f32; h]);
    let (mut s, mut y) = (vec![0.0f32; 4 * h], vec![0.0f32; h]);
    let mut st = GruStep {
        xp: &xf,
        hw: &xf,
        b: None,
        h_prev: &hpf,
        s: &mut s,
        y: &mut y,
    };
    assert!(!gru_rows_f32_on(Isa::Generic, h, &mut st));
}

/// The backward kernel as dispatched (its AVX2 build where the CPU has
/// AVX2 + FMA) against its loop at the baseline width.
fn back_kernel_equals_the_baseline<E: Float>(to_bits: impl Fn(E) -> u64) {
    let mut rng = Rng::new(53);
    let mut vals = |len: usize, act: bool| -> Vec<E> {
        values(&mut rng, len)
            .into_iter()
            .map(|v| E::from_f64(if act { (v as f64).tanh() } else { v as f64 }))
            .collect()
    };
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
                let b: Vec<u64> = carry
                    .iter()
                    .chain(&dx)
                    .chain(&dp)
                    .map(|&v| to_bits(v))
                    .collect();
                b
            };
            assert!(run(true) == run(false), "gru backward, h {h} rows {rows}");
        }
    }
}

#[test]
fn back_kernel_build_equals_the_baseline_loop() {
    back_kernel_equals_the_baseline::<f32>(|v: f32| v.to_bits().into());
    back_kernel_equals_the_baseline::<f64>(|v: f64| v.to_bits());
}
