//! Accuracy of the `f32` kernels against `f64` references (whose error is
//! far below half an `f32` ulp), in ulp of the correctly rounded result.

use super::*;

use std::sync::atomic::{AtomicUsize, Ordering};

/// The reciprocal of the spacing of `f32` values at `v` (the spacing is
/// the smallest subnormal below `f32::MIN_POSITIVE`): `2^(150 - e)` for
/// the biased exponent `e` of `v` rounded to `f32` (at least 1), built
/// from its bits (exact; a power of two, so multiplying by it rounds
/// exactly as dividing by the spacing would). Wrapping arithmetic: `e` is
/// at most 255, nothing wraps, and the loop keeps no overflow checks.
#[inline(always)]
fn inv_ulp_at(v: f64) -> f64 {
    let e = ((v as f32).abs().to_bits() >> 23).max(1) as u64;
    f64::from_bits((1023u64 + 150).wrapping_sub(e) << 52)
}

/// Error of `got` in ulp of `want`; infinities and NaN must match exactly.
/// Written as selects (no early returns) so that the sweep's error loop
/// stays branch-free and vectorises.
#[inline(always)]
fn ulp_err(got: f32, want: f64) -> f64 {
    let w32 = want as f32;
    let off = (got as f64 - want).abs() * inv_ulp_at(want);
    let exact = if got == w32 || (got.is_nan() && w32.is_nan()) {
        0.0
    } else {
        f64::INFINITY
    };
    if got.is_finite() && w32.is_finite() {
        off
    } else {
        exact
    }
}

/// `errs[i]`: the error of `ys[i]` in ulp of `want[i]`, 0 for a non-finite
/// input `xs[i]`; compiled for AVX2 where the CPU has it, as the kernels
/// under test are (the sweep's own arithmetic was a third of its time).
fn chunk_errors(xs: &[f32], ys: &[f32], want: &[f64], errs: &mut [f64]) {
    #[inline(always)]
    fn each(xs: &[f32], ys: &[f32], want: &[f64], errs: &mut [f64]) {
        for (((e, &x), &y), &v) in errs.iter_mut().zip(xs).zip(ys).zip(want) {
            *e = if x.is_finite() { ulp_err(y, v) } else { 0.0 };
        }
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        #[target_feature(enable = "avx2")]
        fn avx2(xs: &[f32], ys: &[f32], want: &[f64], errs: &mut [f64]) {
            each(xs, ys, want, errs);
        }
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { avx2(xs, ys, want, errs) };
    }
    each(xs, ys, want, errs);
}

/// `(name, the f32 slice function, the f64 reference)`.
type Case = (&'static str, fn(&mut [f32]), fn(f64) -> f64);

// The references. Where the value is known without the libm call, it is
// returned directly: the same value the call returns there (checked by
// `reference_shortcuts_are_exact`), only without its slow special-case
// paths (overflow, underflow, NaN), which nearly half of all f32 bit
// patterns take.

/// `e^x`: above `f64::MAX` for `x >= 710` (+inf), below half the smallest
/// subnormal for `x <= -746` (+0).
fn exp64(x: f64) -> f64 {
    if x >= 710.0 {
        f64::INFINITY
    } else if x <= -746.0 {
        0.0
    } else {
        x.exp()
    }
}
/// `ln x`: NaN for every negative `x` (`ulp_err` tests only that it is NaN).
fn ln64(x: f64) -> f64 {
    if x < 0.0 {
        f64::NAN
    } else {
        x.ln()
    }
}
/// `1 / (1 + e^-x)`: `e^-|x|` is +0 for `|x| >= 746`, so 1 or 0.
fn sigmoid64(x: f64) -> f64 {
    if x >= 746.0 {
        1.0
    } else if x <= -746.0 {
        0.0
    } else {
        super::f64_ref::sigmoid(x)
    }
}
/// `ln(1 + e^x)` (beta 1, threshold 20): +0 where `e^x` is +0.
fn softplus64(x: f64) -> f64 {
    if x <= -746.0 {
        0.0
    } else {
        super::f64_ref::softplus(x, 1.0, 20.0)
    }
}

/// Softplus with beta 1 and threshold 20.
#[inline(always)]
fn softplus_1_20(x: f32) -> f32 {
    softplus_f32(x, 1.0, 20.0)
}

/// `wide!(name, kernel)`: `fn name(&mut [f32])`, the kernel over a slice
/// in place, compiled for AVX2 and FMA where the CPU has them (8 lanes;
/// AVX-512's 16 would need no other code) as the library's slice loops
/// are, with the kernel called directly: through `each`'s generic closure
/// the test profile leaves the call to `erf_f32` out of line (the baseline
/// width, one call per element). Without `fma` the kernels' fused steps
/// (`tanh`, `sigmoid`) would each be a call to the C library's `fmaf`:
/// the same bits, and the exhaustive sweep twice as long. The lanes carry
/// the scalar kernel's bits (`wide_paths_equal_the_baseline`,
/// `dispatched_loops_equal_the_baseline_loops`; NaN payloads aside, which
/// `ulp_err` does not look at).
macro_rules! wide {
    ($name:ident, $kernel:ident) => {
        fn $name(x: &mut [f32]) {
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                #[target_feature(enable = "avx2,fma")]
                fn avx2(x: &mut [f32]) {
                    for v in x.iter_mut() {
                        *v = $kernel(*v);
                    }
                }
                // SAFETY: the CPU has AVX2 and FMA (checked just above).
                return unsafe { avx2(x) };
            }
            for v in x.iter_mut() {
                *v = $kernel(*v);
            }
        }
    };
}
wide!(exp_wide, exp_f32);
wide!(ln_wide, ln_f32);
wide!(tanh_wide, tanh_f32);
wide!(sigmoid_wide, sigmoid_f32);
wide!(erf_wide, erf_f32);
wide!(softplus_wide, softplus_1_20);

/// The kernels over whole chunks, 8 inputs per instruction instead of one
/// call each.
pub(super) const CASES: &[Case] = &[
    ("exp", exp_wide, exp64),
    ("ln", ln_wide, ln64),
    ("tanh", tanh_wide, f64::tanh),
    ("sigmoid", sigmoid_wide, sigmoid64),
    ("erf", erf_wide, libm::erf),
    ("softplus", softplus_wide, softplus64),
];

/// Inputs per work item of [`sweep`].
const CHUNK: u64 = 1 << 14;

/// The worst error of each case over every `stride`-th `f32` bit pattern
/// (`i * stride` for every `i`; all 2^32 for stride 1), non-finite inputs
/// left out: `(error, x)`, `x` the first input in bit-pattern order with
/// the largest error. The patterns are cut into fixed chunks of [`CHUNK`];
/// the threads (one per core) take the (case, chunk) items in turn, and
/// the chunks' worsts are combined by error, then by chunk order, so the
/// result is the same for any number of threads and any timing.
fn sweep(stride: u64) -> Vec<(f64, f32)> {
    let n = (1u64 << 32).div_ceil(stride);
    let chunks = n.div_ceil(CHUNK) as usize;
    let items = CASES.len() * chunks;
    let next = AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(2, |t| t.get());
    // (error, chunk, x) per case: `better` picks the larger error, then the
    // earlier chunk
    type Worst = (f64, usize, f32);
    let better = |a: Worst, b: Worst| {
        if b.0 > a.0 || (b.0 == a.0 && b.1 < a.1) {
            b
        } else {
            a
        }
    };
    let none: Worst = (0.0, usize::MAX, 0.0);
    let per_thread: Vec<Vec<Worst>> = std::thread::scope(|s| {
        let work = || {
            let mut worst = vec![none; CASES.len()];
            let (mut xs, mut ys, mut want, mut errs) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            loop {
                let item = next.fetch_add(1, Ordering::Relaxed);
                if item >= items {
                    return worst;
                }
                let (case, chunk) = (item / chunks, item % chunks);
                let (_, f, r) = CASES[case];
                let lo = chunk as u64 * CHUNK;
                xs.clear();
                // `i * stride` stays below 2^32 + stride: wrapping only
                // keeps the loop free of overflow checks
                xs.extend(
                    (lo..(lo + CHUNK).min(n))
                        .map(|i| f32::from_bits(i.wrapping_mul(stride) as u32)),
                );
                ys.clear();
                ys.extend_from_slice(&xs);
                f(&mut ys);
                want.clear();
                want.extend(xs.iter().map(|&x| r(x as f64)));
                errs.clear();
                errs.resize(xs.len(), 0.0);
                chunk_errors(&xs, &ys, &want, &mut errs);
                // the first largest error of the chunk: its value, then
                // where it first occurs (errors are never NaN)
                let max = errs.iter().fold(0.0f64, |m, &e| m.max(e));
                let w = match errs.iter().position(|&e| e == max) {
                    Some(i) if max > 0.0 => (max, chunk, xs[i]),
                    _ => none,
                };
                worst[case] = better(worst[case], w);
            }
        };
        let workers: Vec<_> = (0..threads).map(|_| s.spawn(work)).collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    (0..CASES.len())
        .map(|case| {
            let w = per_thread.iter().fold(none, |a, t| better(a, t[case]));
            (w.0, w.2)
        })
        .collect()
}

fn check_all(stride: u64) {
    let mut failures = Vec::new();
    for (&(name, ..), (err, x)) in CASES.iter().zip(sweep(stride)) {
        let bound = F32_MAX_ULP.iter().find(|c| c.0 == name).unwrap().1;
        println!("{name}: max {err:.6} ulp at x = {x:e} (documented bound {bound})");
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
#[ignore = "every finite f32 input of six functions: ~230 s of CPU, ~2 min on 2 idle cores"]
fn vmath_f32_exhaustive() {
    check_all(1);
}

/// The references' shortcuts give the bits of the full libm calls: on
/// every `f32` from the thresholds (710, 746) to 1100 in magnitude, past
/// 1024 where `exp`'s own special cases begin, and on every 4099th bit
/// pattern.
#[test]
fn reference_shortcuts_are_exact() {
    type Ref = fn(f64) -> f64;
    let full: [(&str, Ref, Ref); 4] = [
        ("exp", exp64, f64::exp),
        ("ln", ln64, f64::ln),
        ("sigmoid", sigmoid64, super::f64_ref::sigmoid),
        ("softplus", softplus64, |x| {
            super::f64_ref::softplus(x, 1.0, 20.0)
        }),
    ];
    let band = |lo: f32, hi: f32| (lo.to_bits()..=hi.to_bits()).map(f32::from_bits);
    let xs = band(709.0, 1100.0)
        .chain(band(745.0, 1100.0).map(|x| -x))
        .chain((0..=u32::MAX).step_by(4099).map(f32::from_bits));
    let mut n = 0;
    for x in xs {
        n += 1;
        for (name, short, libm) in full {
            let (a, b) = (short(x as f64), libm(x as f64));
            assert!(
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                "{name}({x:e}): {a:e} != {b:e}"
            );
        }
    }
    assert!(n > 10_000_000, "{n} inputs");
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
    // NaN results are compared as NaN: their sign and payload depend on
    // the operand order the compiler picks, which differs between the
    // vector body and the scalar remainder (`erf'` of a NaN `x` with a
    // negative `g` gives NaNs of both signs once the loop is vectorised).
    let bits = |v: &[f32]| {
        v.iter()
            .map(|f| if f.is_nan() { u32::MAX } else { f.to_bits() })
            .collect::<Vec<u32>>()
    };
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
    // The slice methods, whose loops call the kernel directly
    // (`each_direct!`), against the baseline loop.
    type Slice = (&'static str, fn(&mut [f32]), fn(f32) -> f32);
    let slices: &[Slice] = &[
        ("exp", <f32 as VecMath>::v_exp, exp_f32),
        ("ln", <f32 as VecMath>::v_ln, ln_f32),
        ("tanh", <f32 as VecMath>::v_tanh, tanh_f32),
        ("sigmoid", <f32 as VecMath>::v_sigmoid, sigmoid_f32),
        ("erf", <f32 as VecMath>::v_erf, erf_f32),
        ("gelu", <f32 as VecMath>::v_gelu, gelu_f32),
        ("gelu_tanh", <f32 as VecMath>::v_gelu_tanh, gelu_tanh_f32),
        ("silu", <f32 as VecMath>::v_silu, silu_f32),
    ];
    for &(name, v, k) in slices {
        let (mut wide, mut base) = (x.clone(), x.clone());
        v(&mut wide);
        each_base(&mut base, k);
        assert!(
            bits(&wide) == bits(&base),
            "v_{name}: dispatched != baseline"
        );
    }
}

/// `v_gelu`'s pieces whose values all lie in the polynomial's range take a
/// shorter path: every piece still equals [`gelu_f32`] bit for bit, for
/// pieces wholly inside the range, wholly outside, mixed, at its edge
/// (`|x / sqrt 2|` just below and at 1), and with a NaN, a zero of either
/// sign or an infinity among small values.
#[test]
fn gelu_pieces_match_scalar() {
    let edge = std::f32::consts::SQRT_2;
    let below = f32::from_bits(edge.to_bits() - 1);
    let mut xs: Vec<f32> = Vec::new();
    // whole pieces of small values, of values at the edge, of large ones
    xs.extend((0..16).map(|i| (i as f32 - 8.0) * 0.17));
    xs.extend((0..16).map(|i| if i % 2 == 0 { below } else { -below }));
    xs.extend((0..16).map(|i| if i % 3 == 0 { edge } else { 0.5 }));
    xs.extend((0..16).map(|i| (i as f32 - 8.0) * 1.3));
    for special in [
        f32::NAN,
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1.0e-40,
    ] {
        xs.extend((0..16).map(|i| if i == 7 { special } else { 0.01 * i as f32 }));
    }
    // values spread as a transformer's pre-activations (most below sqrt 2)
    let mut rng = crate::Rng::new(7);
    xs.extend((0..4000).map(|_| 0.55 * rng.normal() as f32));
    for off in 0..3 {
        let mut v = xs[off..].to_vec();
        f32::v_gelu(&mut v);
        for (a, &x) in v.iter().zip(&xs[off..]) {
            let want = gelu_f32(x);
            if want.is_nan() {
                // NaN's sign and payload are not part of the bits promised
                // (a vector path and the scalar one may produce different
                // NaNs, as they did before pieces)
                assert!(a.is_nan(), "gelu({x:e}) = {a:e}, not NaN");
            } else {
                assert_eq!(a.to_bits(), want.to_bits(), "gelu({x:e})");
            }
        }
    }
}

/// `out` of the out-of-place kernel `f(out)` run over a buffer first
/// filled with the bits `fill` (two fills tell an element the kernel
/// skipped).
fn written(n: usize, fill: u32, f: impl FnOnce(&mut [std::mem::MaybeUninit<f32>])) -> Vec<f32> {
    let mut v: Vec<f32> = Vec::with_capacity(n);
    let out = &mut v.spare_capacity_mut()[..n];
    for o in out.iter_mut() {
        o.write(f32::from_bits(fill));
    }
    f(out);
    // SAFETY: every element was written by the fill just above.
    unsafe { v.set_len(n) };
    v
}

/// The out-of-place GELU-tanh kernels (`v_gelu_tanh_into`,
/// `v_gelu_tanh_grad_into`, the op's forward and backward) give the bits
/// of the in-place ones on every element, in every CPU class, for slices
/// of every length around the 4-, 8- and 16-lane widths at every start
/// (tails, unaligned bodies), over inputs of every sign and binade with
/// NaN, infinities, signed zeros and subnormals; NaN results compare as
/// NaN (see `wide_paths_equal_the_baseline`). And every element written:
/// two runs over buffers first filled with different bits agree.
#[test]
fn out_of_place_gelu_tanh_equals_in_place_in_every_class() {
    use crate::cpu::class::{detected, pin_thread, Class};
    let bits = |v: &[f32]| {
        v.iter()
            .map(|f| if f.is_nan() { u32::MAX } else { f.to_bits() })
            .collect::<Vec<u32>>()
    };
    let mut x = lane_inputs();
    x.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1e-40,
        -1e-40,
        9.0,
        -9.0,
    ]);
    let g: Vec<f32> = x.iter().rev().copied().collect();
    for class in [Class::Portable, Class::Avx2, Class::Avx512] {
        if class > detected() {
            continue;
        }
        let prev = pin_thread(Some(class));
        let mut spans: Vec<(usize, usize)> = vec![(0, x.len())];
        for start in 0..17 {
            for len in [0usize, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100] {
                spans.push((start * 3 + 1, len));
            }
        }
        for (lo, n) in spans {
            let (xs, gs) = (&x[lo..lo + n], &g[lo..lo + n]);
            let mut want_y = xs.to_vec();
            f32::v_gelu_tanh(&mut want_y);
            let mut want_g = gs.to_vec();
            f32::v_gelu_tanh_grad(xs, &mut want_g);
            for fill in [0u32, u32::MAX] {
                let y = written(n, fill, |o| f32::v_gelu_tanh_into(xs, o));
                let gx = written(n, fill, |o| f32::v_gelu_tanh_grad_into(xs, gs, o));
                assert!(
                    bits(&y) == bits(&want_y),
                    "{class:?}: gelu_tanh_into [{lo}, +{n}) differs"
                );
                assert!(
                    bits(&gx) == bits(&want_g),
                    "{class:?}: gelu_tanh_grad_into [{lo}, +{n}) differs"
                );
            }
        }
        pin_thread(prev);
    }
    // f64: the reference formulas, element by element
    let x64: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let g64: Vec<f64> = g.iter().map(|&v| v as f64).collect();
    let mut want_y = x64.clone();
    f64::v_gelu_tanh(&mut want_y);
    let mut want_g = g64.clone();
    f64::v_gelu_tanh_grad(&x64, &mut want_g);
    let n = x64.len();
    let mut y: Vec<f64> = Vec::with_capacity(n);
    f64::v_gelu_tanh_into(&x64, &mut y.spare_capacity_mut()[..n]);
    // SAFETY: `v_gelu_tanh_into` writes every element of its output.
    unsafe { y.set_len(n) };
    let mut gx: Vec<f64> = Vec::with_capacity(n);
    f64::v_gelu_tanh_grad_into(&x64, &g64, &mut gx.spare_capacity_mut()[..n]);
    // SAFETY: as above.
    unsafe { gx.set_len(n) };
    let bits64 = |v: &[f64]| {
        v.iter()
            .map(|f| if f.is_nan() { u64::MAX } else { f.to_bits() })
            .collect::<Vec<u64>>()
    };
    assert!(bits64(&y) == bits64(&want_y), "f64 gelu_tanh_into differs");
    assert!(
        bits64(&gx) == bits64(&want_g),
        "f64 gelu_tanh_grad_into differs"
    );
}

/// `exp_sub(x, m)` (the softmax rows' `e^(x - m)` in one pass) gives the
/// bits of subtracting and then `exp`, in every CPU class, for slices of
/// every length around the lane widths, over inputs of every sign and
/// binade and shifts including zeros, infinities and NaN.
#[test]
fn exp_sub_equals_subtract_then_exp_in_every_class() {
    use crate::cpu::class::{detected, pin_thread, Class};
    let bits = |v: &[f32]| {
        v.iter()
            .map(|f| if f.is_nan() { u32::MAX } else { f.to_bits() })
            .collect::<Vec<u32>>()
    };
    let x = lane_inputs();
    let shifts = [
        0.0f32,
        -0.0,
        1.5,
        -87.3,
        3e38,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ];
    for class in [Class::Portable, Class::Avx2, Class::Avx512] {
        if class > detected() {
            continue;
        }
        let prev = pin_thread(Some(class));
        for &m in &shifts {
            for (lo, n) in [
                (0, x.len()),
                (3, 0),
                (5, 1),
                (7, 15),
                (9, 17),
                (11, 33),
                (13, 64),
            ] {
                let mut want: Vec<f32> = x[lo..lo + n].iter().map(|&v| v - m).collect();
                crate::cpu::vmath::exp(&mut want);
                let mut got = x[lo..lo + n].to_vec();
                crate::cpu::vmath::exp_sub(&mut got, m);
                assert!(
                    bits(&got) == bits(&want),
                    "{class:?}: exp_sub(m = {m}) [{lo}, +{n}) differs"
                );
            }
        }
        pin_thread(prev);
    }
    let x64: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let mut want: Vec<f64> = x64.iter().map(|&v| v - 1.25).collect();
    crate::cpu::vmath::exp(&mut want);
    let mut got = x64.clone();
    crate::cpu::vmath::exp_sub(&mut got, 1.25);
    let same = got
        .iter()
        .zip(&want)
        .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
    assert!(same, "f64 exp_sub differs");
}
