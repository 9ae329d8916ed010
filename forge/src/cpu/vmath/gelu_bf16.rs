//! GELU (exact form) for results that are rounded to bf16 next: the bf16
//! chain of BERT's feed-forward block (`hub::bert_infer`), where the
//! widening product's output goes through GELU and is then rounded to
//! 8 significant bits.
//!
//! [`gelu_f32`](super::f32_kernels::gelu_f32) is accurate to a few f32
//! ulp, and pays for it: two polynomials (one per side of `|x| = sqrt 2`),
//! both evaluated on every lane, one of degree 11, an exponential and a
//! division, all without fused multiply-adds. Its output rounded to bf16
//! throws away 16 of the 24 bits it worked for. This kernel computes the
//! same function to a relative error below `1.5e-6` where its result is
//! above `3e-3` in magnitude (`x > -3.9`) and below `2e-5` everywhere
//! (`tests::relative_error_is_bounded`), against bf16's relative step of
//! `2^-8 = 3.9e-3`,
//! with one branch-free formula:
//!
//! ```text
//! z = |x| / sqrt 2,   t = 2 / (2 + z)
//! erfc(z) = t exp(P(t) - z^2)            (P: degree 8, fitted on z in [0, 10])
//! GELU(x) = x/2 (2 - erfc(z))  for x > 0,   x/2 erfc(z)  otherwise
//! ```
//!
//! `P(t) = ln(erfc(z) / t) + z^2` is smooth on `t` in `[1/6, 1]`; its
//! least-squares fit on 4,000 Chebyshev nodes (coefficients rounded to
//! f32) is within `3.7e-7` of it, evaluated in f32 with fused
//! multiply-adds, which is the relative error it contributes to `erfc`.
//! The rest is `exp`'s (degree-6 Taylor on `|r| <= ln2 / 2`, `1.2e-7`) and
//! the rounding of `z^2` (relative `6e-8` of `z^2`, so `5e-7` at `z = 3`,
//! the edge of where GELU's output is above `3e-3`; further out the
//! rounding of the exponent's argument, up to 68 at `z = 8`, dominates:
//! `1.5e-5` measured at `x = -11.5`). Past `z = 10`
//! `erfc(z)` is below `2e-45`, under the smallest subnormal: `t` is held
//! at its value there and the exponential underflows to 0.
//!
//! # The bits
//! Every step is one IEEE operation per element, fused multiply-adds
//! included (`f32::mul_add`, rounded once): the AVX-512 and AVX2 loops
//! compile them to `vfmadd`, the baseline loop to the C library's `fmaf`
//! (slower, the same result). So a value is the same on every path and at
//! every thread count; `tests::paths_give_the_same_bits` compares them.
//! They are not the bits of [`gelu_f32`](super::f32_kernels::gelu_f32).

use super::f32_kernels::{pow2i, reduce_ln2_fma, sel};

/// `P(t)`'s coefficients, constant term first.
const P: [f32; 9] = [
    -1.265_185_7,
    0.992_849_65,
    0.440_265_72,
    -0.240_359_34,
    0.862_882_7,
    -1.797_548_5,
    1.489_086_9,
    -0.562_048,
    0.080_056_444,
];

/// `e^y` for `y <= 0` (or NaN), relative error about `2e-7` down to the
/// subnormal range, 0 below `-104`.
#[inline(always)]
fn exp_neg(y: f32) -> f32 {
    let y = sel(y < -104.0, -104.0, y);
    let (ni, r) = reduce_ln2_fma(y);
    let p = (1.0f32 / 720.0).mul_add(r, 1.0 / 120.0);
    let p = p.mul_add(r, 1.0 / 24.0);
    let p = p.mul_add(r, 1.0 / 6.0);
    let p = p.mul_add(r, 0.5);
    let p = p.mul_add(r, 1.0);
    let p = p.mul_add(r, 1.0);
    // 2^n in two factors so that n down to -150 stays representable.
    let n1 = ni >> 1;
    p * pow2i(n1) * pow2i(ni.wrapping_sub(n1))
}

/// GELU (exact form) to a relative error below `2e-5`, for a result that
/// is rounded to bf16 next (see the module docs).
#[inline(always)]
pub(super) fn gelu_bf16_f32(x: f32) -> f32 {
    let z = f32::from_bits(x.to_bits() & 0x7FFF_FFFF) * std::f32::consts::FRAC_1_SQRT_2;
    let t = 2.0 / (2.0 + sel(z > 10.0, 10.0, z));
    let mut p = P[8];
    for &c in P[..8].iter().rev() {
        p = p.mul_add(t, c);
    }
    let c = t * exp_neg(p - z * z);
    0.5 * x * sel(x > 0.0, 2.0 - c, c)
}

/// [`gelu_bf16_f32`] over slices, in place, on the widest vector unit the
/// CPU has (the same bits on every path: see the module docs), the loop
/// found once (a CPU-class look-up per call costs as much as a short
/// slice).
#[derive(Clone, Copy)]
pub(crate) struct GeluBf16 {
    /// 16 lanes with FMA, 8 lanes with FMA, or the baseline loop.
    lanes: u8,
}

impl GeluBf16 {
    /// The widest loop this CPU (and the CPU class in force) allows.
    pub(crate) fn new() -> GeluBf16 {
        #[cfg(target_arch = "x86_64")]
        {
            let fma = crate::cpu::class::cpu_has!("fma");
            if fma && crate::cpu::class::cpu_has!("avx512f") {
                return GeluBf16 { lanes: 16 };
            }
            if fma && crate::cpu::class::cpu_has!("avx2") {
                return GeluBf16 { lanes: 8 };
            }
        }
        GeluBf16 { lanes: 1 }
    }

    /// [`gelu_bf16_f32`] over `x`, in place.
    pub(crate) fn apply(self, x: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        match self.lanes {
            // SAFETY: `new` found AVX-512F and FMA on this CPU.
            16 => return unsafe { wide::avx512(x) },
            // SAFETY: `new` found AVX2 and FMA on this CPU.
            8 => return unsafe { wide::avx2(x) },
            _ => {}
        }
        base(x)
    }
}

/// [`GeluBf16::apply`] at the build's baseline vector width (`mul_add`
/// through the C library's `fmaf` where the baseline has no FMA).
fn base(x: &mut [f32]) {
    for v in x.iter_mut() {
        *v = gelu_bf16_f32(*v);
    }
}

/// The loop compiled for wider vectors with FMA (x86-64).
#[cfg(target_arch = "x86_64")]
mod wide {
    use super::gelu_bf16_f32;

    #[target_feature(enable = "avx512f,fma")]
    pub(super) fn avx512(x: &mut [f32]) {
        for v in x.iter_mut() {
            *v = gelu_bf16_f32(*v);
        }
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn avx2(x: &mut [f32]) {
        for v in x.iter_mut() {
            *v = gelu_bf16_f32(*v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GELU in f64 (`x Phi(x)`, `Phi` through `erfc` so that the negative
    /// side has no cancellation).
    fn gelu64(x: f64) -> f64 {
        0.5 * x * libm::erfc(-x / std::f64::consts::SQRT_2)
    }

    /// Every 1021st bit pattern of the finite floats of magnitude below 16
    /// (past it the function is `x` or 0 in f32), and the specials.
    fn inputs() -> Vec<f32> {
        let top = 16.0f32.to_bits();
        let mut xs: Vec<f32> = (0..top)
            .step_by(1021)
            .flat_map(|b| [f32::from_bits(b), -f32::from_bits(b)])
            .collect();
        xs.extend([
            0.0,
            -0.0,
            1.0,
            -1.0,
            16.0,
            -16.0,
            1e30,
            -1e30,
            f32::INFINITY,
            f32::MAX,
            f32::MIN,
        ]);
        xs
    }

    #[test]
    fn relative_error_is_bounded() {
        let mut worst = (0.0f64, 0.0f32);
        for x in inputs() {
            let got = gelu_bf16_f32(x) as f64;
            let want = gelu64(x as f64);
            if !want.is_finite() {
                assert_eq!(got, want, "x = {x}");
                continue;
            }
            // Results below 1e-30 in magnitude are held to an absolute
            // bound: there f32 itself is subnormal or nearly so.
            let err = (got - want).abs() / want.abs().max(1e-30);
            if err > worst.0 {
                worst = (err, x);
            }
        }
        // Far out on the negative side the exponent's argument P - z^2 is
        // large (-68 at x = -11.5, where the worst, 1.5e-5, was measured):
        // its rounding, and that of z^2, is a relative error of the
        // exponential of up to half an ulp of 64 each (3.8e-6).
        assert!(
            worst.0 < 2e-5,
            "worst relative error {} at x = {}",
            worst.0,
            worst.1
        );
        // For x > -3.9 (where GELU's magnitude is above 3e-3 but near 0)
        // the parts add to about 1e-6; results below 1e-30 (x itself
        // tiny) are held to the absolute bound as above.
        let mid = inputs()
            .into_iter()
            .filter(|&x| x > -3.9 && x.is_finite() && x.abs() < 16.0)
            .map(|x| {
                let want = gelu64(x as f64);
                (gelu_bf16_f32(x) as f64 - want).abs() / want.abs().max(1e-30)
            })
            .fold(0.0f64, f64::max);
        assert!(mid < 1.5e-6, "relative error {mid} where |GELU| > 3e-3");
    }

    #[test]
    fn special_values() {
        assert_eq!(gelu_bf16_f32(0.0), 0.0);
        assert_eq!(gelu_bf16_f32(f32::INFINITY), f32::INFINITY);
        assert_eq!(gelu_bf16_f32(50.0), 50.0);
        assert_eq!(gelu_bf16_f32(-50.0), 0.0);
        assert!(gelu_bf16_f32(f32::NAN).is_nan());
        // -inf: x/2 erfc(inf) = -inf * 0, NaN, as PyTorch's CPU GELU gives
        assert!(gelu_bf16_f32(f32::NEG_INFINITY).is_nan());
    }

    #[test]
    fn paths_give_the_same_bits() {
        let xs: Vec<f32> = inputs()
            .into_iter()
            .chain((0..37).map(|i| i as f32 * 0.3 - 5.0))
            .collect();
        let mut want = xs.clone();
        base(&mut want);
        let check = |name: &str, got: &[f32]| {
            let same = got
                .iter()
                .zip(&want)
                .all(|(g, w)| g.to_bits() == w.to_bits());
            let len = got.len();
            assert!(
                same,
                "{name} loop differs from the baseline loop (len {len})"
            );
        };
        // odd lengths: every tail of the 16- and 8-lane loops
        for len in [xs.len(), xs.len() - 1, 37, 15, 7, 1] {
            let mut got = xs[..len].to_vec();
            GeluBf16::new().apply(&mut got);
            check("dispatched", &got);
            #[cfg(target_arch = "x86_64")]
            for (name, has) in [
                ("avx512", crate::cpu::class::cpu_has!("avx512f")),
                ("avx2", crate::cpu::class::cpu_has!("avx2")),
            ] {
                if !(has && crate::cpu::class::cpu_has!("fma")) {
                    continue;
                }
                let mut got = xs[..len].to_vec();
                // SAFETY: the CPU has the loop's features (checked above).
                unsafe {
                    if name == "avx512" {
                        wide::avx512(&mut got)
                    } else {
                        wide::avx2(&mut got)
                    }
                }
                check(name, &got);
            }
        }
    }
}
