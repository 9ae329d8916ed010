//! Accuracy of the `f32` kernels against `f64` references (whose error is
//! far below half an `f32` ulp), in ulp of the correctly rounded result.

use super::*;

/// The spacing of `f32` values at `v` (the smallest subnormal below
/// `f32::MIN_POSITIVE`).
fn ulp_at(v: f64) -> f64 {
    // The binade of `v` rounded to f32 (its exponent field), from the bits.
    let e = ((v as f32).abs().to_bits() >> 23) as i32;
    2f64.powi(e.max(1) - 150)
}

/// Error of `got` in ulp of `want`; infinities and NaN must match exactly.
fn ulp_err(got: f32, want: f64) -> f64 {
    let w32 = want as f32;
    if w32.is_nan() || got.is_nan() {
        return if w32.is_nan() && got.is_nan() {
            0.0
        } else {
            f64::INFINITY
        };
    }
    if w32.is_infinite() || got.is_infinite() {
        return if got == w32 { 0.0 } else { f64::INFINITY };
    }
    (got as f64 - want).abs() / ulp_at(want)
}

type Case = (&'static str, fn(f32) -> f32, fn(f64) -> f64);

fn sigmoid64(x: f64) -> f64 {
    super::f64_ref::sigmoid(x)
}
fn softplus64(x: f64) -> f64 {
    super::f64_ref::softplus(x, 1.0, 20.0)
}

pub(super) const CASES: &[Case] = &[
    ("exp", exp_f32, f64::exp),
    ("ln", ln_f32, f64::ln),
    ("tanh", tanh_f32, f64::tanh),
    ("sigmoid", sigmoid_f32, sigmoid64),
    ("erf", erf_f32, libm::erf),
    ("softplus", |x| softplus_f32(x, 1.0, 20.0), softplus64),
];

/// The worst error of `f` over every `stride`-th bit pattern (all of them
/// for stride 1), split over two threads.
fn sweep(f: fn(f32) -> f32, r: fn(f64) -> f64, stride: usize) -> (f64, f32) {
    let half = 1u64 << 31;
    let part = |lo: u64| {
        let mut worst = (0.0f64, 0.0f32);
        for bits in (lo..lo + half).step_by(stride) {
            let x = f32::from_bits(bits as u32);
            if !x.is_finite() {
                continue;
            }
            let e = ulp_err(f(x), r(x as f64));
            if e > worst.0 {
                worst = (e, x);
            }
        }
        worst
    };
    let (a, b) = std::thread::scope(|s| {
        let h = s.spawn(|| part(half));
        (part(0), h.join().unwrap())
    });
    if a.0 >= b.0 {
        a
    } else {
        b
    }
}

fn check_all(stride: usize) {
    let mut failures = Vec::new();
    for &(name, f, r) in CASES {
        let (err, x) = sweep(f, r, stride);
        let bound = F32_MAX_ULP.iter().find(|c| c.0 == name).unwrap().1;
        println!("{name}: max {err:.3} ulp at x = {x:e} (documented bound {bound})");
        if err > bound {
            failures.push(format!("{name}: {err} ulp at {x:e} > {bound}"));
        }
    }
    assert!(failures.is_empty(), "{failures:?}");
}

#[test]
fn vmath_f32_strided_sweep() {
    check_all(4099);
}

#[test]
#[ignore = "every f32 input for each function: about a minute per function on 2 cores"]
fn vmath_f32_exhaustive() {
    check_all(1);
}

#[test]
fn special_values() {
    assert_eq!(exp_f32(f32::INFINITY), f32::INFINITY);
    assert!(exp_f32(f32::NAN).is_nan());
    assert_eq!(ln_f32(f32::INFINITY), f32::INFINITY);
    assert!(ln_f32(f32::NAN).is_nan());
    assert_eq!(tanh_f32(f32::INFINITY), 1.0);
    assert_eq!(tanh_f32(f32::NEG_INFINITY), -1.0);
    assert!(tanh_f32(f32::NAN).is_nan());
    assert_eq!(tanh_f32(-0.0).to_bits(), (-0.0f32).to_bits());
    assert_eq!(sigmoid_f32(f32::NEG_INFINITY), 0.0);
    assert_eq!(erf_f32(f32::INFINITY), 1.0);
    assert!(erf_f32(f32::NAN).is_nan());
    assert_eq!(gelu_f32(f32::INFINITY), f32::INFINITY);
    assert_eq!(gelu_tanh_f32(-1e30), 0.0);
    assert_eq!(softplus_f32(1000.0, 1.0, 1e30), 1000.0);
}

/// GELU, SiLU and the derivatives are products of the kernels above; check
/// them against their f64 formulas on a grid, relative to `max(|f|, 1)`.
#[test]
fn composites_match_f64() {
    let xs: Vec<f32> = (-4000..=4000).map(|i| i as f32 * 0.005).collect();
    let rel = |got: f32, want: f64| (got as f64 - want).abs() / want.abs().max(1.0);
    let mut worst = [0.0f64; 8];
    let mut g = vec![1.0f32; xs.len()];
    let mut g2 = g.clone();
    let mut g3 = g.clone();
    let mut g4 = g.clone();
    f32::v_gelu_grad(&xs, &mut g);
    f32::v_gelu_tanh_grad(&xs, &mut g2);
    f32::v_silu_grad(&xs, &mut g3);
    f32::v_mish_grad(&xs, &mut g4);
    for (i, &x) in xs.iter().enumerate() {
        let xd = x as f64;
        let mut d = [xd; 1];
        let mut gd = [1.0f64; 1];
        let checks = [
            (gelu_f32(x), {
                f64::v_gelu(&mut d);
                d[0]
            }),
            (gelu_tanh_f32(x), super::f64_ref::gelu_tanh(xd)),
            (silu_f32(x), xd * sigmoid64(xd)),
            (
                x * tanh_f32(softplus_f32(x, 1.0, 20.0)),
                xd * softplus64(xd).tanh(),
            ),
            (g[i], {
                f64::v_gelu_grad(&[xd], &mut gd);
                gd[0]
            }),
            (g2[i], {
                gd[0] = 1.0;
                f64::v_gelu_tanh_grad(&[xd], &mut gd);
                gd[0]
            }),
            (g3[i], {
                gd[0] = 1.0;
                f64::v_silu_grad(&[xd], &mut gd);
                gd[0]
            }),
            (g4[i], {
                gd[0] = 1.0;
                f64::v_mish_grad(&[xd], &mut gd);
                gd[0]
            }),
        ];
        for (k, (got, want)) in checks.into_iter().enumerate() {
            worst[k] = worst[k].max(rel(got, want));
        }
    }
    println!("composite relative errors: {worst:?}");
    for w in worst {
        assert!(w < 2e-6, "{worst:?}");
    }
}

/// A slice result equals the scalar kernel lane by lane, whatever the
/// slice's length and alignment (vector body and scalar tail agree).
#[test]
fn slices_match_scalar() {
    let xs: Vec<f32> = (0..1003).map(|i| (i as f32 - 500.0) * 0.037).collect();
    for off in 0..5 {
        let mut v = xs[off..].to_vec();
        f32::v_tanh(&mut v);
        for (a, &x) in v.iter().zip(&xs[off..]) {
            assert_eq!(a.to_bits(), tanh_f32(x).to_bits());
        }
        let mut v = xs[off..].to_vec();
        f32::v_gelu(&mut v);
        for (a, &x) in v.iter().zip(&xs[off..]) {
            assert_eq!(a.to_bits(), gelu_f32(x).to_bits());
        }
    }
}

/// Inputs for the lane tests: every 65,521st bit pattern (all signs and
/// binades, NaN and infinities included).
fn lane_inputs() -> Vec<f32> {
    (0..=u32::MAX as u64)
        .step_by(65_521)
        .map(|b| f32::from_bits(b as u32))
        .collect()
}

/// The slice loops run the widest vectors the CPU has (AVX-512 or AVX2 on
/// x86-64): each element of a long slice (vector lanes) must have the bits
/// of the same element computed alone (a one-element slice: the scalar
/// remainder of the loop), for every function and derivative.
#[test]
fn wide_paths_equal_the_baseline() {
    type Unary = fn(&mut [f32]);
    type Grad = fn(&[f32], &mut [f32]);
    let unary: &[(&str, Unary)] = &[
        ("exp", f32::v_exp),
        ("ln", f32::v_ln),
        ("tanh", f32::v_tanh),
        ("sigmoid", f32::v_sigmoid),
        ("erf", f32::v_erf),
        ("gelu", f32::v_gelu),
        ("gelu_tanh", f32::v_gelu_tanh),
        ("silu", f32::v_silu),
        ("softplus", |x| f32::v_softplus(x, 2.0, 15.0)),
        ("mish", f32::v_mish),
    ];
    let grads: &[(&str, Grad)] = &[
        ("gelu", f32::v_gelu_grad),
        ("gelu_tanh", f32::v_gelu_tanh_grad),
        ("silu", f32::v_silu_grad),
        ("softplus", |x, g| f32::v_softplus_grad(x, g, 2.0, 15.0)),
        ("mish", f32::v_mish_grad),
        ("erf", f32::v_erf_grad),
        ("tanh", f32::v_tanh_grad),
        ("sigmoid", f32::v_sigmoid_grad),
    ];
    let x = lane_inputs();
    let g: Vec<f32> = x.iter().rev().copied().collect();
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<u32>>();
    for &(name, f) in unary {
        let mut long = x.clone();
        f(&mut long);
        let mut alone = x.clone();
        for v in alone.chunks_mut(1) {
            f(v);
        }
        assert!(
            bits(&long) == bits(&alone),
            "{name}: lanes differ from scalar"
        );
    }
    for &(name, f) in grads {
        let mut long = g.clone();
        f(&x, &mut long);
        let mut alone = g.clone();
        for (gv, xv) in alone.chunks_mut(1).zip(x.chunks(1)) {
            f(xv, gv);
        }
        assert!(
            bits(&long) == bits(&alone),
            "{name}': lanes differ from scalar"
        );
    }
}

/// The dispatched loops (AVX-512 / AVX2 where the CPU has them) against the
/// baseline-width loops, on the scalar kernels themselves.
#[test]
fn dispatched_loops_equal_the_baseline_loops() {
    type Kernel = (&'static str, fn(f32) -> f32);
    let kernels: &[Kernel] = &[
        ("exp", exp_f32),
        ("ln", ln_f32),
        ("tanh", tanh_f32),
        ("sigmoid", sigmoid_f32),
        ("erf", erf_f32),
        ("gelu", gelu_f32),
        ("gelu_tanh", gelu_tanh_f32),
        ("silu", silu_f32),
        ("softplus", |v| softplus_f32(v, 1.0, 20.0)),
    ];
    let x = lane_inputs();
    // NaN payloads are not compared: which operand's payload a product of
    // two NaNs carries depends on the operand order the compiler picks for
    // the instruction, which may differ between the two compilations.
    let bits = |v: &[f32]| {
        v.iter()
            .map(|f| if f.is_nan() { u32::MAX } else { f.to_bits() })
            .collect::<Vec<u32>>()
    };
    for &(name, k) in kernels {
        let (mut wide, mut base) = (x.clone(), x.clone());
        each(&mut wide, k);
        each_base(&mut base, k);
        assert!(bits(&wide) == bits(&base), "{name}: dispatched != baseline");
        let (mut wide, mut base) = (x.clone(), x.clone());
        let grad = |x: f32, g: f32| g * k(x);
        each2(&x, &mut wide, grad);
        each2_base(&x, &mut base, grad);
        assert!(
            bits(&wide) == bits(&base),
            "{name} (each2): dispatched != baseline"
        );
    }
}
