//! The `f32` kernels: branch-free scalar functions (polynomials, exponent
//! bit manipulation, selects) that the slice loops (`slices.rs`)
//! inline and the compiler vectorises.

/// `a` when `cond`, else `b`, as a select the vectoriser keeps branch-free.
#[inline(always)]
pub(super) fn sel(cond: bool, a: f32, b: f32) -> f32 {
    if cond {
        a
    } else {
        b
    }
}

const LOG2E: f32 = std::f32::consts::LOG2_E;
/// ln 2 split so that `n * LN2_HI` is exact for |n| < 2^15.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// 1.5 * 2^23: adding it rounds a float of magnitude < 2^22 to an integer.
const SHIFT: f32 = 12_582_912.0;

/// `(n, r)` with `x = n ln2 + r`, `|r| <= ln2/2 (1 + tiny)`, `n` an integer
/// (as a float and as an integer) for `x` already clamped to a small range.
#[inline(always)]
fn reduce_ln2(x: f32) -> (f32, i32, f32) {
    let t = x * LOG2E + SHIFT;
    let n = t - SHIFT;
    let ni = (t.to_bits() as i32).wrapping_sub(0x4B40_0000);
    let r = (x - n * LN2_HI) - n * LN2_LO;
    (n, ni, r)
}

/// [`reduce_ln2`] with fused steps (`mul_add`): `(n, r)`, `y = n ln2 + r`
/// with one rounding fewer per step, for the kernels that use fused
/// multiply-adds throughout ([`exp_neg_abs`] and so [`sigmoid_f32`],
/// [`expm1_pos`] and so [`tanh_f32`], `gelu_tanh.rs`, `gelu_bf16.rs`).
#[inline(always)]
pub(super) fn reduce_ln2_fma(y: f32) -> (i32, f32) {
    let t = y.mul_add(LOG2E, SHIFT);
    let n = t - SHIFT;
    let ni = (t.to_bits() as i32).wrapping_sub(0x4B40_0000);
    let r = (-n).mul_add(LN2_HI, y);
    (ni, (-n).mul_add(LN2_LO, r))
}

/// `2^n` for `-126 <= n <= 127`.
#[inline(always)]
pub(super) fn pow2i(n: i32) -> f32 {
    f32::from_bits((n.wrapping_add(127) << 23) as u32)
}

/// `e^x` for `f32`, at most 1.22 ulp from the correctly rounded result
/// (every finite input checked).
#[inline(always)]
pub fn exp_f32(x: f32) -> f32 {
    // NaN fails both comparisons and flows through as NaN.
    let x = sel(x > 89.0, 89.0, sel(x < -104.0, -104.0, x));
    let (_, n, r) = reduce_ln2(x);
    // e^r, Taylor to degree 7 (truncation < 6e-9 relative on |r| <= 0.35).
    let p = 1.0 / 5040.0;
    let p = p * r + 1.0 / 720.0;
    let p = p * r + 1.0 / 120.0;
    let p = p * r + 1.0 / 24.0;
    let p = p * r + 1.0 / 6.0;
    let p = p * r + 0.5;
    let p = p * r + 1.0;
    let p = p * r + 1.0;
    // 2^n as two factors so that n in [-150, 128] stays representable; the
    // second product rounds once into the subnormal or overflow range.
    // (`wrapping_sub`: it cannot overflow, and with overflow checks on, as
    // in the test profile, a checked subtraction kept the slice loops from
    // vectorising: every exp, sigmoid, erf and softplus ~8x slower there.)
    let n1 = n >> 1;
    p * pow2i(n1) * pow2i(n.wrapping_sub(n1))
}

/// `e^-a` for `a >= 0` (or NaN, which flows through): [`exp_f32`]'s
/// reduction and polynomial with fused steps (one rounding each), down into
/// the subnormal range (`a` held at 104, where the result rounds to 0).
/// The exponential of [`sigmoid_f32`] and of GELU's tanh form
/// (`gelu_tanh.rs`).
#[inline(always)]
pub(super) fn exp_neg_abs(a: f32) -> f32 {
    let y = -sel(a > 104.0, 104.0, a);
    let (ni, r) = reduce_ln2_fma(y);
    // e^r, Taylor to degree 7 (truncation < 6e-9 relative on |r| <= 0.35)
    let p = (1.0f32 / 5040.0).mul_add(r, 1.0 / 720.0);
    let p = p.mul_add(r, 1.0 / 120.0);
    let p = p.mul_add(r, 1.0 / 24.0);
    let p = p.mul_add(r, 1.0 / 6.0);
    let p = p.mul_add(r, 0.5);
    let p = p.mul_add(r, 1.0);
    let p = p.mul_add(r, 1.0);
    // 2^n as two factors so that n down to -150 stays representable; the
    // second product rounds once into the subnormal range.
    let n1 = ni >> 1;
    p * pow2i(n1) * pow2i(ni.wrapping_sub(n1))
}

/// `e^z - 1` for `0 <= z <= 20` (or NaN), relative error about 1 ulp, with
/// fused steps (one rounding each): the reduction by `ln 2`, the Horner
/// steps and the final scaling.
#[inline(always)]
fn expm1_pos(z: f32) -> f32 {
    let z = sel(z > 20.0, 20.0, z);
    let (n, r) = reduce_ln2_fma(z);
    // e^r - 1 = r + r^2 (1/2 + r/6 + ... + r^6/8!)
    let q = (1.0f32 / 40320.0).mul_add(r, 1.0 / 5040.0);
    let q = q.mul_add(r, 1.0 / 720.0);
    let q = q.mul_add(r, 1.0 / 120.0);
    let q = q.mul_add(r, 1.0 / 24.0);
    let q = q.mul_add(r, 1.0 / 6.0);
    let q = q.mul_add(r, 0.5);
    let q = (r * r).mul_add(q, r);
    let s = pow2i(n);
    // n = 0 gives q exactly; otherwise 2^n q + (2^n - 1), rounded once.
    s.mul_add(q, s - 1.0)
}

/// `ln x` for `f32`, at most 1 ulp from the correctly rounded result.
#[inline(always)]
pub fn ln_f32(x: f32) -> f32 {
    let sub = x < f32::MIN_POSITIVE;
    let xs = sel(sub, x * 8_388_608.0, x);
    let adj = if sub { -23 } else { 0 };
    // Split xs = m 2^e with m in [sqrt(1/2), sqrt(2)).
    let b = (xs.to_bits() as i32).wrapping_sub(0x3F35_04F3);
    let e = (b >> 23) + adj;
    let m = f32::from_bits(((b & 0x007F_FFFF) + 0x3F35_04F3) as u32);
    let f = m - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    // ln(1+f) = 2s + 2s^3/3 + 2s^5/5 + ..., arranged as
    // f - (f^2/2 - s (f^2/2 + R)) with R = z (2/3 + 2z/5 + 2z^2/7 + 2z^3/9).
    let r = 2.0 / 9.0;
    let r = r * z + 2.0 / 7.0;
    let r = r * z + 2.0 / 5.0;
    let r = r * z + 2.0 / 3.0;
    let r = r * z;
    let hfsq = 0.5 * f * f;
    let ef = e as f32;
    let l = ef * LN2_HI + ((f - (hfsq - s * (hfsq + r))) + ef * LN2_LO);
    // Special values: 0 -> -inf, negative -> NaN, +inf and NaN -> themselves.
    let l = sel(x == 0.0, f32::NEG_INFINITY, l);
    let l = sel(x < 0.0, f32::NAN, l);
    sel(x == f32::INFINITY || x.is_nan(), x, l)
}

/// `tanh x` for `f32`, within 2.5 ulp of the correctly rounded result:
/// `e / (e + 2)` with `e = e^(2|x|) - 1` from [`expm1_pos`], whose steps are
/// fused multiply-adds (one rounding each: `vfmadd` in the AVX2 and
/// AVX-512 loops, the C library's `fmaf` in the baseline one, the same
/// bits), the sign put back.
#[inline(always)]
pub fn tanh_f32(x: f32) -> f32 {
    let a = f32::from_bits(x.to_bits() & 0x7FFF_FFFF);
    let e = expm1_pos(a + a);
    let t = e / (e + 2.0);
    // tanh(|x|) for |x| > 9.01 rounds to 1; e is capped, so fix it up.
    let t = sel(a > 9.5, 1.0, t);
    f32::from_bits(t.to_bits() | (x.to_bits() & 0x8000_0000))
}

/// The logistic function `1 / (1 + e^-x)` for `f32`, within 2.5 ulp of the
/// correctly rounded result (also for large negative `x`, where it is
/// `e^x / (1 + e^x)`), with `e^-|x|` from [`exp_neg_abs`] (fused
/// multiply-adds, as [`tanh_f32`]).
#[inline(always)]
pub fn sigmoid_f32(x: f32) -> f32 {
    let a = f32::from_bits(x.to_bits() & 0x7FFF_FFFF);
    let e = exp_neg_abs(a);
    sel(x >= 0.0, 1.0, e) / (1.0 + e)
}

/// `erf(x) / x` on `|x| <= 1` as a polynomial in `x^2` (least-squares fit on
/// Chebyshev nodes, coefficients rounded to f32 one at a time; relative error
/// 5e-8 before the final rounding).
#[inline(always)]
fn erf_small(x2: f32) -> f32 {
    let p = 1.001_658_3e-4;
    let p = p * x2 - 8.711_769_5e-4;
    let p = p * x2 + 5.275_711_4e-3;
    let p = p * x2 - 2.690_588_7e-2;
    let p = p * x2 + 1.128_508_4e-1;
    let p = p * x2 - 3.761_280_8e-1;
    p * x2 + std::f32::consts::FRAC_2_SQRT_PI
}

/// `erfc(a)` for `a >= 1`: `e^(-a^2) / a * S(t)`, `t = 1/a`, `S` a degree-11
/// polynomial in `(t - 0.55) / 0.45` fitted on `1 <= a <= 10` (relative
/// error 1.3e-8 before rounding). Beyond `a = 10` the result is below the
/// smallest subnormal but for rounding, and `S` is held at its end value.
#[inline(always)]
fn erfc_large(a: f32) -> f32 {
    let t = 1.0 / a;
    let v = (sel(t < 0.1, 0.1, t) - 0.55) * (1.0 / 0.45);
    let s = 1.776_009_2e-5;
    let s = s * v - 1.663_118_2e-5;
    let s = s * v - 7.127_094_4e-5;
    let s = s * v + 1.783_600_6e-4;
    let s = s * v - 2.270_401_6e-4;
    let s = s * v + 7.952_964e-5;
    let s = s * v + 9.203_783e-4;
    let s = s * v - 3.973_855e-3;
    let s = s * v + 8.962_797e-3;
    let s = s * v - 4.124_076_6e-3;
    let s = s * v - 7.651_58e-2;
    let s = s * v + 5.023_534e-1;
    exp_f32(-(a * a)) * t * s
}

/// The Gauss error function for `f32`, within 2.5 ulp of the correctly
/// rounded result.
#[inline(always)]
pub fn erf_f32(x: f32) -> f32 {
    let a = f32::from_bits(x.to_bits() & 0x7FFF_FFFF);
    let small = a * erf_small(a * a);
    let large = 1.0 - erfc_large(sel(a < 1.0, 1.0, a));
    let r = sel(a < 1.0, small, large);
    // erf(inf) = 1: erfc_large(inf) is 0 * 0.1 * S = 0, so this holds.
    f32::from_bits(r.to_bits() | (x.to_bits() & 0x8000_0000))
}

/// `2 Phi(x) = 1 + erf(x / sqrt 2)` without cancellation for negative `x`
/// (there it is `erfc(|x| / sqrt 2)` computed directly).
#[inline(always)]
pub(super) fn two_phi(x: f32) -> f32 {
    let u = x * std::f32::consts::FRAC_1_SQRT_2;
    let a = f32::from_bits(u.to_bits() & 0x7FFF_FFFF);
    let small = 1.0 + u * erf_small(u * u);
    let c = erfc_large(sel(a < 1.0, 1.0, a));
    let large = sel(x > 0.0, 2.0 - c, c);
    sel(a < 1.0, small, large)
}

/// GELU (exact form) `x Phi(x)` for `f32`.
#[inline(always)]
pub fn gelu_f32(x: f32) -> f32 {
    0.5 * x * two_phi(x)
}

/// [`gelu_f32`] where `|x / sqrt 2| < 1`: [`two_phi`]'s polynomial branch
/// alone (the same operations, so the same bits there).
#[inline(always)]
fn gelu_small_f32(x: f32) -> f32 {
    let u = x * std::f32::consts::FRAC_1_SQRT_2;
    0.5 * x * (1.0 + u * erf_small(u * u))
}

/// The 16 values of a piece of a slice (from
/// [`VecMath::v_gelu`](super::VecMath::v_gelu)) in place, each exactly
/// [`gelu_f32`]. [`gelu_f32`] computes both of [`two_phi`]'s branches and
/// selects one per lane; where every value of the piece lies in the
/// polynomial's range (`|x| < sqrt 2`, most of a transformer's
/// pre-activations at initialisation) the tail branch's division,
/// exponential and degree-11 polynomial are skipped. NaN takes the full
/// path (it fails the comparison).
#[inline(always)]
pub(super) fn gelu_piece(x: &mut [f32; 16]) {
    // a fold, not `all`: no early exit, so the test vectorises
    let small = x.iter().fold(true, |all, &v| {
        let u = v * std::f32::consts::FRAC_1_SQRT_2;
        all & (f32::from_bits(u.to_bits() & 0x7FFF_FFFF) < 1.0)
    });
    if small {
        for v in x.iter_mut() {
            *v = gelu_small_f32(*v);
        }
    } else {
        for v in x.iter_mut() {
            *v = gelu_f32(*v);
        }
    }
}

/// `ln(1 + y)` for `y >= 0` (Kahan's correction of `ln(1 + y)`).
#[inline(always)]
fn ln1p_pos(y: f32) -> f32 {
    let u = 1.0 + y;
    let l = ln_f32(u) * (y / (u - 1.0));
    sel(u == 1.0, y, l)
}

/// Softplus `ln(1 + e^(beta x)) / beta` for `f32`, `x` where `beta x >
/// threshold`.
#[inline(always)]
pub fn softplus_f32(x: f32, beta: f32, threshold: f32) -> f32 {
    let bx = beta * x;
    // ln(1 + e^b) = max(b, 0) + ln(1 + e^-|b|): no overflow for any b.
    let a = f32::from_bits(bx.to_bits() & 0x7FFF_FFFF);
    let l = sel(bx > 0.0, bx, 0.0) + ln1p_pos(exp_f32(-a));
    sel(bx > threshold, x, l / beta)
}

/// SiLU `x sigmoid(x)` for `f32`.
#[inline(always)]
pub fn silu_f32(x: f32) -> f32 {
    x * sigmoid_f32(x)
}

/// The examples that documented these kernels while they were public.
#[cfg(test)]
mod examples {
    #[test]
    fn exp_f32() {
        assert_eq!(crate::cpu::vmath::exp_f32(0.0), 1.0);
        assert_eq!(crate::cpu::vmath::exp_f32(f32::NEG_INFINITY), 0.0);
        assert_eq!(crate::cpu::vmath::exp_f32(100.0), f32::INFINITY);
    }

    #[test]
    fn ln_f32() {
        assert_eq!(crate::cpu::vmath::ln_f32(1.0), 0.0);
        assert_eq!(crate::cpu::vmath::ln_f32(0.0), f32::NEG_INFINITY);
        assert!(crate::cpu::vmath::ln_f32(-1.0).is_nan());
    }

    #[test]
    fn tanh_f32() {
        assert_eq!(crate::cpu::vmath::tanh_f32(0.0), 0.0);
        assert_eq!(crate::cpu::vmath::tanh_f32(-30.0), -1.0);
    }

    #[test]
    fn sigmoid_f32() {
        assert_eq!(crate::cpu::vmath::sigmoid_f32(0.0), 0.5);
        assert_eq!(crate::cpu::vmath::sigmoid_f32(100.0), 1.0);
    }

    #[test]
    fn erf_f32() {
        assert_eq!(crate::cpu::vmath::erf_f32(0.0), 0.0);
        assert_eq!(crate::cpu::vmath::erf_f32(5.0), 1.0);
        assert_eq!(crate::cpu::vmath::erf_f32(-5.0), -1.0);
    }

    #[test]
    fn gelu_f32() {
        assert_eq!(crate::cpu::vmath::gelu_f32(0.0), 0.0);
        assert_eq!(crate::cpu::vmath::gelu_f32(20.0), 20.0);
    }

    #[test]
    fn softplus_f32() {
        let y = crate::cpu::vmath::softplus_f32(0.0, 1.0, 20.0);
        assert!((y - std::f32::consts::LN_2).abs() <= f32::EPSILON);
    }

    #[test]
    fn silu_f32() {
        assert_eq!(crate::cpu::vmath::silu_f32(0.0), 0.0);
    }
}
