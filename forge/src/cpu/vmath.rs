//! Vector math: `exp`, `ln`, `tanh`, `sigmoid`, `erf`, GELU (both forms),
//! SiLU, softplus and mish over whole slices, plus the fused
//! `grad * f'(x)` products their backward rules need.
//!
//! # One kernel, any vector width
//! The `f32` functions are branch-free scalar kernels (polynomials, bit
//! manipulation of the exponent, comparisons turned into selects) inlined
//! into plain slice loops, which the compiler vectorises. Every step is an
//! IEEE operation on one lane (Rust never contracts `a * b + c` into a
//! fused multiply-add on its own, and `fma` is never enabled), so a value
//! is bit-identical whether it is computed in a vector lane or alone, on any
//! x86-64 or ARM CPU, with any thread count. On x86-64 the slice loops are
//! also compiled for AVX2 and AVX-512F and the widest the CPU has runs
//! (`is_x86_feature_detected!`, cached): the same kernels with 8 or 16
//! lanes instead of the baseline's 4, and the same bits (for NaN results,
//! the payload may differ: which NaN operand a product propagates depends on
//! the operand order each compilation picks)
//! (`tests::dispatched_loops_equal_the_baseline_loops` compares the wide
//! loops with the baseline loops bit for bit on every kernel, and
//! `tests::wide_paths_equal_the_baseline` vector lanes with elements
//! computed alone for every function and derivative).
//!
//! # Accuracy (`f32`)
//! Maximum error against the correctly rounded result, in ulp of that
//! result: [`F32_MAX_ULP`] holds the asserted bounds, checked on every
//! 4099th `f32` bit pattern by `cargo test`; the ignored test
//! `vmath_f32_exhaustive` checks every finite input. Measured figures are
//! in the README's "Kernels" section.
//!
//! # `f64`
//! The `f64` versions call the standard library / `libm` per element (they
//! are the accurate reference that the PyTorch `float64` parity tests pin at
//! rtol 1e-10).

use crate::base::Float;
use std::any::TypeId;

/// `(function, maximum error in ulp)` asserted for each `f32` kernel (errors
/// of subnormal results are counted in units of the smallest subnormal).
///
/// ```
/// let (name, ulp) = forge::cpu::vmath::F32_MAX_ULP[0];
/// assert_eq!(name, "exp");
/// assert!(ulp <= 1.5);
/// ```
pub const F32_MAX_ULP: &[(&str, f64)] = &[
    ("exp", 1.5),
    ("ln", 1.0),
    ("tanh", 2.5),
    ("sigmoid", 2.5),
    ("erf", 2.5),
    ("softplus", 3.0),
];

/// Slice-wide transcendental functions and activation derivatives for one
/// float type. Implemented for `f32` (vectorised kernels) and `f64`
/// (`std`/`libm` per element). Every function works in place.
///
/// ```
/// use forge::cpu::vmath::VecMath;
/// let mut v = [0.0f32, 1.0];
/// f32::v_exp(&mut v);
/// assert_eq!(v[0], 1.0);
/// assert!((v[1] - std::f32::consts::E).abs() <= f32::EPSILON * 3.0);
/// ```
pub trait VecMath: Copy + Sized {
    /// `x = e^x`.
    fn v_exp(x: &mut [Self]);
    /// `x = ln x`.
    fn v_ln(x: &mut [Self]);
    /// `x = tanh x`.
    fn v_tanh(x: &mut [Self]);
    /// `x = 1 / (1 + e^-x)`.
    fn v_sigmoid(x: &mut [Self]);
    /// `x = erf x`.
    fn v_erf(x: &mut [Self]);
    /// `x = x Phi(x)` (GELU, exact form).
    fn v_gelu(x: &mut [Self]);
    /// `x = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))` (GELU, tanh form).
    fn v_gelu_tanh(x: &mut [Self]);
    /// `x = x sigmoid(x)` (SiLU).
    fn v_silu(x: &mut [Self]);
    /// `x = ln(1 + e^(beta x)) / beta`, or `x` where `beta x > threshold`.
    fn v_softplus(x: &mut [Self], beta: Self, threshold: Self);
    /// `x = x tanh(softplus(x))` (mish, softplus with beta 1, threshold 20).
    fn v_mish(x: &mut [Self]);
    /// `g = g * gelu'(x)` (exact form).
    fn v_gelu_grad(x: &[Self], g: &mut [Self]);
    /// `g = g * gelu_tanh'(x)`.
    fn v_gelu_tanh_grad(x: &[Self], g: &mut [Self]);
    /// `g = g * silu'(x)`.
    fn v_silu_grad(x: &[Self], g: &mut [Self]);
    /// `g = g * softplus'(x)` (`sigmoid(beta x)`, 1 above the threshold).
    fn v_softplus_grad(x: &[Self], g: &mut [Self], beta: Self, threshold: Self);
    /// `g = g * mish'(x)`.
    fn v_mish_grad(x: &[Self], g: &mut [Self]);
    /// `g = g * erf'(x) = g * 2/sqrt(pi) e^(-x^2)`.
    fn v_erf_grad(x: &[Self], g: &mut [Self]);
    /// `g = g * (1 - y^2)` (tanh's derivative from its output).
    fn v_tanh_grad(y: &[Self], g: &mut [Self]);
    /// `g = g * y (1 - y)` (sigmoid's derivative from its output).
    fn v_sigmoid_grad(y: &[Self], g: &mut [Self]);
}

#[inline(always)]
fn each(x: &mut [f32], f: impl Fn(f32) -> f32) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F (checked just above).
            unsafe { wide::each_avx512(x, &f) };
            return;
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            unsafe { wide::each_avx2(x, &f) };
            return;
        }
    }
    each_base(x, f)
}

/// [`each`] at the build's baseline vector width.
#[inline(always)]
fn each_base(x: &mut [f32], f: impl Fn(f32) -> f32) {
    for v in x.iter_mut() {
        *v = f(*v);
    }
}

#[inline(always)]
fn each2(x: &[f32], g: &mut [f32], f: impl Fn(f32, f32) -> f32) {
    assert_eq!(x.len(), g.len(), "vmath: length mismatch");
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F (checked just above).
            unsafe { wide::each2_avx512(x, g, &f) };
            return;
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            unsafe { wide::each2_avx2(x, g, &f) };
            return;
        }
    }
    each2_base(x, g, f)
}

/// [`each2`] at the build's baseline vector width.
#[inline(always)]
fn each2_base<E: Copy>(x: &[E], g: &mut [E], f: impl Fn(E, E) -> E) {
    assert_eq!(x.len(), g.len(), "vmath: length mismatch");
    for (gv, &xv) in g.iter_mut().zip(x) {
        *gv = f(xv, *gv);
    }
}

/// The slice loops compiled for wider vectors (x86-64). The kernels are the
/// same scalar IEEE operations per element (no fused multiply-add: Rust
/// never contracts, and `fma` is not enabled), so each lane computes the
/// bits the baseline loop computes; only the number of lanes per
/// instruction changes. `tests::dispatched_loops_equal_the_baseline_loops`
/// compares them bit for bit.
#[cfg(target_arch = "x86_64")]
mod wide {
    #[target_feature(enable = "avx2")]
    pub(super) fn each_avx2<F: Fn(f32) -> f32>(x: &mut [f32], f: &F) {
        super::each_base(x, f)
    }

    #[target_feature(enable = "avx512f")]
    pub(super) fn each_avx512<F: Fn(f32) -> f32>(x: &mut [f32], f: &F) {
        super::each_base(x, f)
    }

    #[target_feature(enable = "avx2")]
    pub(super) fn each2_avx2<F: Fn(f32, f32) -> f32>(x: &[f32], g: &mut [f32], f: &F) {
        super::each2_base(x, g, f)
    }

    #[target_feature(enable = "avx512f")]
    pub(super) fn each2_avx512<F: Fn(f32, f32) -> f32>(x: &[f32], g: &mut [f32], f: &F) {
        super::each2_base(x, g, f)
    }
}

/// `a` when `cond`, else `b`, as a select the vectoriser keeps branch-free.
#[inline(always)]
fn sel(cond: bool, a: f32, b: f32) -> f32 {
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

/// `2^n` for `-126 <= n <= 127`.
#[inline(always)]
fn pow2i(n: i32) -> f32 {
    f32::from_bits((n.wrapping_add(127) << 23) as u32)
}

/// `e^x` for `f32`, at most 1.22 ulp from the correctly rounded result
/// (every finite input checked).
///
/// ```
/// assert_eq!(forge::cpu::vmath::exp_f32(0.0), 1.0);
/// assert_eq!(forge::cpu::vmath::exp_f32(f32::NEG_INFINITY), 0.0);
/// assert_eq!(forge::cpu::vmath::exp_f32(100.0), f32::INFINITY);
/// ```
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
    let n1 = n >> 1;
    p * pow2i(n1) * pow2i(n - n1)
}

/// `e^z - 1` for `0 <= z <= 20` (or NaN), relative error about 1 ulp.
#[inline(always)]
fn expm1_pos(z: f32) -> f32 {
    let z = sel(z > 20.0, 20.0, z);
    let (_, n, r) = reduce_ln2(z);
    // e^r - 1 = r + r^2 (1/2 + r/6 + ... + r^6/8!)
    let q = 1.0 / 40320.0;
    let q = q * r + 1.0 / 5040.0;
    let q = q * r + 1.0 / 720.0;
    let q = q * r + 1.0 / 120.0;
    let q = q * r + 1.0 / 24.0;
    let q = q * r + 1.0 / 6.0;
    let q = q * r + 0.5;
    let q = r + r * r * q;
    let s = pow2i(n);
    // n = 0 gives q exactly; otherwise 2^n q is exact and one rounding follows.
    s * q + (s - 1.0)
}

/// `ln x` for `f32`, at most 1 ulp from the correctly rounded result.
///
/// ```
/// assert_eq!(forge::cpu::vmath::ln_f32(1.0), 0.0);
/// assert_eq!(forge::cpu::vmath::ln_f32(0.0), f32::NEG_INFINITY);
/// assert!(forge::cpu::vmath::ln_f32(-1.0).is_nan());
/// ```
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

/// `tanh x` for `f32`, within 2.5 ulp of the correctly rounded result.
///
/// ```
/// assert_eq!(forge::cpu::vmath::tanh_f32(0.0), 0.0);
/// assert_eq!(forge::cpu::vmath::tanh_f32(-30.0), -1.0);
/// ```
#[inline(always)]
pub fn tanh_f32(x: f32) -> f32 {
    let a = f32::from_bits(x.to_bits() & 0x7FFF_FFFF);
    let e = expm1_pos(a + a);
    let t = e / (e + 2.0);
    // tanh(|x|) for |x| > 9.01 rounds to 1; e is capped, so fix it up.
    let t = sel(a > 9.5, 1.0, t);
    f32::from_bits(t.to_bits() | (x.to_bits() & 0x8000_0000))
}

/// The logistic function `1 / (1 + e^-x)` for `f32`, at most 2 ulp from the
/// correctly rounded result (also for large negative `x`, where it is
/// `e^x / (1 + e^x)`).
///
/// ```
/// assert_eq!(forge::cpu::vmath::sigmoid_f32(0.0), 0.5);
/// assert_eq!(forge::cpu::vmath::sigmoid_f32(100.0), 1.0);
/// ```
#[inline(always)]
pub fn sigmoid_f32(x: f32) -> f32 {
    let a = f32::from_bits(x.to_bits() & 0x7FFF_FFFF);
    let e = exp_f32(-a);
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
///
/// ```
/// assert_eq!(forge::cpu::vmath::erf_f32(0.0), 0.0);
/// assert_eq!(forge::cpu::vmath::erf_f32(5.0), 1.0);
/// assert_eq!(forge::cpu::vmath::erf_f32(-5.0), -1.0);
/// ```
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
fn two_phi(x: f32) -> f32 {
    let u = x * std::f32::consts::FRAC_1_SQRT_2;
    let a = f32::from_bits(u.to_bits() & 0x7FFF_FFFF);
    let small = 1.0 + u * erf_small(u * u);
    let c = erfc_large(sel(a < 1.0, 1.0, a));
    let large = sel(x > 0.0, 2.0 - c, c);
    sel(a < 1.0, small, large)
}

/// GELU (exact form) `x Phi(x)` for `f32`.
///
/// ```
/// assert_eq!(forge::cpu::vmath::gelu_f32(0.0), 0.0);
/// assert_eq!(forge::cpu::vmath::gelu_f32(20.0), 20.0);
/// ```
#[inline(always)]
pub fn gelu_f32(x: f32) -> f32 {
    0.5 * x * two_phi(x)
}

const GELU_C: f32 = 0.797_884_6; // sqrt(2/pi)
const GELU_K: f32 = 0.044_715;

/// GELU (tanh form) for `f32`, as `x sigmoid(2 sqrt(2/pi) (x + 0.044715
/// x^3))`, which equals `x/2 (1 + tanh(...))` without its cancellation for
/// negative `x`.
///
/// ```
/// assert_eq!(forge::cpu::vmath::gelu_tanh_f32(0.0), 0.0);
/// assert_eq!(forge::cpu::vmath::gelu_tanh_f32(20.0), 20.0);
/// ```
#[inline(always)]
pub fn gelu_tanh_f32(x: f32) -> f32 {
    x * sigmoid_f32(2.0 * GELU_C * (x + GELU_K * x * x * x))
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
///
/// ```
/// let y = forge::cpu::vmath::softplus_f32(0.0, 1.0, 20.0);
/// assert!((y - std::f32::consts::LN_2).abs() <= f32::EPSILON);
/// ```
#[inline(always)]
pub fn softplus_f32(x: f32, beta: f32, threshold: f32) -> f32 {
    let bx = beta * x;
    // ln(1 + e^b) = max(b, 0) + ln(1 + e^-|b|): no overflow for any b.
    let a = f32::from_bits(bx.to_bits() & 0x7FFF_FFFF);
    let l = sel(bx > 0.0, bx, 0.0) + ln1p_pos(exp_f32(-a));
    sel(bx > threshold, x, l / beta)
}

/// SiLU `x sigmoid(x)` for `f32`.
///
/// ```
/// assert_eq!(forge::cpu::vmath::silu_f32(0.0), 0.0);
/// ```
#[inline(always)]
pub fn silu_f32(x: f32) -> f32 {
    x * sigmoid_f32(x)
}

impl VecMath for f32 {
    fn v_exp(x: &mut [f32]) {
        each(x, exp_f32)
    }
    fn v_ln(x: &mut [f32]) {
        each(x, ln_f32)
    }
    fn v_tanh(x: &mut [f32]) {
        each(x, tanh_f32)
    }
    fn v_sigmoid(x: &mut [f32]) {
        each(x, sigmoid_f32)
    }
    fn v_erf(x: &mut [f32]) {
        each(x, erf_f32)
    }
    fn v_gelu(x: &mut [f32]) {
        each(x, gelu_f32)
    }
    fn v_gelu_tanh(x: &mut [f32]) {
        each(x, gelu_tanh_f32)
    }
    fn v_silu(x: &mut [f32]) {
        each(x, silu_f32)
    }
    fn v_softplus(x: &mut [f32], beta: f32, threshold: f32) {
        each(x, |v| softplus_f32(v, beta, threshold))
    }
    fn v_mish(x: &mut [f32]) {
        each(x, |v| v * tanh_f32(softplus_f32(v, 1.0, 20.0)))
    }
    fn v_gelu_grad(x: &[f32], g: &mut [f32]) {
        // Phi(x) + x phi(x), phi(x) = e^(-x^2/2) / sqrt(2 pi)
        let inv_sqrt_2pi = 0.398_942_3_f32;
        each2(x, g, |x, g| {
            let pdf = exp_f32(-0.5 * x * x) * inv_sqrt_2pi;
            g * (0.5 * two_phi(x) + x * pdf)
        })
    }
    fn v_gelu_tanh_grad(x: &[f32], g: &mut [f32]) {
        // gelu_tanh = x s, s = sigmoid(2u), u = c (x + k x^3):
        // d = s + x s (1 - s) 2c (1 + 3k x^2)
        each2(x, g, |x, g| {
            let x2 = x * x;
            let s = sigmoid_f32(2.0 * GELU_C * (x + GELU_K * x2 * x));
            let du = 2.0 * GELU_C * (1.0 + 3.0 * GELU_K * x2);
            g * (s + x * s * (1.0 - s) * du)
        })
    }
    fn v_silu_grad(x: &[f32], g: &mut [f32]) {
        each2(x, g, |x, g| {
            let s = sigmoid_f32(x);
            g * (s * (1.0 + x * (1.0 - s)))
        })
    }
    fn v_softplus_grad(x: &[f32], g: &mut [f32], beta: f32, threshold: f32) {
        each2(x, g, |x, g| {
            let bx = beta * x;
            g * sel(bx > threshold, 1.0, sigmoid_f32(bx))
        })
    }
    fn v_mish_grad(x: &[f32], g: &mut [f32]) {
        each2(x, g, |x, g| {
            let t = tanh_f32(softplus_f32(x, 1.0, 20.0));
            g * (t + x * (1.0 - t * t) * sigmoid_f32(x))
        })
    }
    fn v_erf_grad(x: &[f32], g: &mut [f32]) {
        let c = std::f32::consts::FRAC_2_SQRT_PI;
        each2(x, g, |x, g| g * (exp_f32(-(x * x)) * c))
    }
    fn v_tanh_grad(y: &[f32], g: &mut [f32]) {
        each2(y, g, |y, g| g * (1.0 - y * y))
    }
    fn v_sigmoid_grad(y: &[f32], g: &mut [f32]) {
        each2(y, g, |y, g| g * (y * (1.0 - y)))
    }
}

fn each64(x: &mut [f64], f: impl Fn(f64) -> f64) {
    for v in x.iter_mut() {
        *v = f(*v);
    }
}

/// The `f64` reference formulas (libm-accurate, matching PyTorch's double
/// kernels to ~1e-16).
mod f64_ref {
    pub fn sigmoid(x: f64) -> f64 {
        if x >= 0.0 {
            1.0 / (1.0 + (-x).exp())
        } else {
            let e = x.exp();
            e / (1.0 + e)
        }
    }
    pub fn softplus(x: f64, beta: f64, threshold: f64) -> f64 {
        let bx = beta * x;
        if bx > threshold {
            x
        } else {
            bx.exp().ln_1p() / beta
        }
    }
    pub fn gelu(x: f64) -> f64 {
        0.5 * x * (1.0 + libm::erf(x * std::f64::consts::FRAC_1_SQRT_2))
    }
    pub const C: f64 = 0.797_884_560_802_865_4; // sqrt(2/pi)
    pub const K: f64 = 0.044715;
    pub fn gelu_tanh(x: f64) -> f64 {
        0.5 * x * (1.0 + (C * (x + K * x * x * x)).tanh())
    }
}

impl VecMath for f64 {
    fn v_exp(x: &mut [f64]) {
        each64(x, f64::exp)
    }
    fn v_ln(x: &mut [f64]) {
        each64(x, f64::ln)
    }
    fn v_tanh(x: &mut [f64]) {
        each64(x, f64::tanh)
    }
    fn v_sigmoid(x: &mut [f64]) {
        each64(x, f64_ref::sigmoid)
    }
    fn v_erf(x: &mut [f64]) {
        each64(x, libm::erf)
    }
    fn v_gelu(x: &mut [f64]) {
        each64(x, f64_ref::gelu)
    }
    fn v_gelu_tanh(x: &mut [f64]) {
        each64(x, f64_ref::gelu_tanh)
    }
    fn v_silu(x: &mut [f64]) {
        each64(x, |v| v * f64_ref::sigmoid(v))
    }
    fn v_softplus(x: &mut [f64], beta: f64, threshold: f64) {
        each64(x, |v| f64_ref::softplus(v, beta, threshold))
    }
    fn v_mish(x: &mut [f64]) {
        each64(x, |v| v * f64_ref::softplus(v, 1.0, 20.0).tanh())
    }
    fn v_gelu_grad(x: &[f64], g: &mut [f64]) {
        let inv_sqrt_2pi = 0.5 * std::f64::consts::FRAC_2_SQRT_PI * std::f64::consts::FRAC_1_SQRT_2;
        each2_base(x, g, |x, g| {
            let cdf = 0.5 * (1.0 + libm::erf(x * std::f64::consts::FRAC_1_SQRT_2));
            g * (cdf + x * ((-0.5 * x * x).exp() * inv_sqrt_2pi))
        })
    }
    fn v_gelu_tanh_grad(x: &[f64], g: &mut [f64]) {
        use f64_ref::{C, K};
        each2_base(x, g, |x, g| {
            let x2 = x * x;
            let t = (C * (x + K * x2 * x)).tanh();
            let du = C * (1.0 + 3.0 * K * x2);
            g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du)
        })
    }
    fn v_silu_grad(x: &[f64], g: &mut [f64]) {
        each2_base(x, g, |x, g| {
            let s = f64_ref::sigmoid(x);
            g * (s * (1.0 + x * (1.0 - s)))
        })
    }
    fn v_softplus_grad(x: &[f64], g: &mut [f64], beta: f64, threshold: f64) {
        each2_base(x, g, |x, g| {
            let bx = beta * x;
            g * if bx > threshold {
                1.0
            } else {
                f64_ref::sigmoid(bx)
            }
        })
    }
    fn v_mish_grad(x: &[f64], g: &mut [f64]) {
        each2_base(x, g, |x, g| {
            let t = f64_ref::softplus(x, 1.0, 20.0).tanh();
            g * (t + x * (1.0 - t * t) * f64_ref::sigmoid(x))
        })
    }
    fn v_erf_grad(x: &[f64], g: &mut [f64]) {
        let c = std::f64::consts::FRAC_2_SQRT_PI;
        each2_base(x, g, |x, g| g * ((-(x * x)).exp() * c))
    }
    fn v_tanh_grad(y: &[f64], g: &mut [f64]) {
        each2_base(y, g, |y, g| g * (1.0 - y * y))
    }
    fn v_sigmoid_grad(y: &[f64], g: &mut [f64]) {
        each2_base(y, g, |y, g| g * (y * (1.0 - y)))
    }
}

#[cfg(test)]
mod tests;

/// Views `x` as `&mut [T]` when `E` is `T`.
fn cast_mut<E: 'static, T: 'static>(x: &mut [E]) -> Option<&mut [T]> {
    (TypeId::of::<E>() == TypeId::of::<T>()).then(|| {
        // SAFETY: `E` and `T` are the same type, so this reinterprets the
        // slice as itself (same length, layout and lifetime).
        unsafe { &mut *(x as *mut [E] as *mut [T]) }
    })
}

/// Views `x` as `&[T]` when `E` is `T`.
fn cast<E: 'static, T: 'static>(x: &[E]) -> Option<&[T]> {
    (TypeId::of::<E>() == TypeId::of::<T>()).then(|| {
        // SAFETY: as in `cast_mut`: `E` is `T`.
        unsafe { &*(x as *const [E] as *const [T]) }
    })
}

fn other_float() -> ! {
    unreachable!("vmath: forge's float types are f32 and f64")
}

/// Generic entry points over [`Float`] element types: each forwards to the
/// [`VecMath`] implementation of `f32` or `f64` (a type test that the
/// compiler resolves statically).
macro_rules! generic_in_place {
    ($($(#[$doc:meta])* $name:ident => $method:ident $(($($arg:ident),*))?;)*) => {$(
        $(#[$doc])*
        pub fn $name<E: Float>(x: &mut [E] $($(, $arg: E)*)?) {
            if let Some(v) = cast_mut::<E, f32>(x) {
                f32::$method(v $($(, $arg.to_f64() as f32)*)?)
            } else if let Some(v) = cast_mut::<E, f64>(x) {
                f64::$method(v $($(, $arg.to_f64())*)?)
            } else {
                other_float()
            }
        }
    )*};
}

macro_rules! generic_grad {
    ($($(#[$doc:meta])* $name:ident => $method:ident $(($($arg:ident),*))?;)*) => {$(
        $(#[$doc])*
        ///
        /// # Panics
        /// When the slices' lengths differ.
        pub fn $name<E: Float>(x: &[E], g: &mut [E] $($(, $arg: E)*)?) {
            if let (Some(x), Some(g)) = (cast::<E, f32>(x), cast_mut::<E, f32>(g)) {
                f32::$method(x, g $($(, $arg.to_f64() as f32)*)?)
            } else if let (Some(x), Some(g)) = (cast::<E, f64>(x), cast_mut::<E, f64>(g)) {
                f64::$method(x, g $($(, $arg.to_f64())*)?)
            } else {
                other_float()
            }
        }
    )*};
}

generic_in_place! {
    /// `x = e^x` in place ([`VecMath::v_exp`]).
    ///
    /// ```
    /// let mut v = [0.0f64];
    /// forge::cpu::vmath::exp(&mut v);
    /// assert_eq!(v, [1.0]);
    /// ```
    exp => v_exp;
    /// `x = ln x` in place.
    ///
    /// ```
    /// let mut v = [1.0f32];
    /// forge::cpu::vmath::ln(&mut v);
    /// assert_eq!(v, [0.0]);
    /// ```
    ln => v_ln;
    /// `x = tanh x` in place.
    ///
    /// ```
    /// let mut v = [0.0f32];
    /// forge::cpu::vmath::tanh(&mut v);
    /// assert_eq!(v, [0.0]);
    /// ```
    tanh => v_tanh;
    /// `x = sigmoid(x)` in place.
    ///
    /// ```
    /// let mut v = [0.0f32];
    /// forge::cpu::vmath::sigmoid(&mut v);
    /// assert_eq!(v, [0.5]);
    /// ```
    sigmoid => v_sigmoid;
    /// `x = erf x` in place.
    ///
    /// ```
    /// let mut v = [0.0f32];
    /// forge::cpu::vmath::erf(&mut v);
    /// assert_eq!(v, [0.0]);
    /// ```
    erf => v_erf;
    /// GELU (exact form) in place.
    ///
    /// ```
    /// let mut v = [0.0f32];
    /// forge::cpu::vmath::gelu(&mut v);
    /// assert_eq!(v, [0.0]);
    /// ```
    gelu => v_gelu;
    /// GELU (tanh form) in place.
    ///
    /// ```
    /// let mut v = [0.0f32];
    /// forge::cpu::vmath::gelu_tanh(&mut v);
    /// assert_eq!(v, [0.0]);
    /// ```
    gelu_tanh => v_gelu_tanh;
    /// SiLU in place.
    ///
    /// ```
    /// let mut v = [0.0f32];
    /// forge::cpu::vmath::silu(&mut v);
    /// assert_eq!(v, [0.0]);
    /// ```
    silu => v_silu;
    /// Mish in place.
    ///
    /// ```
    /// let mut v = [0.0f32];
    /// forge::cpu::vmath::mish(&mut v);
    /// assert_eq!(v, [0.0]);
    /// ```
    mish => v_mish;
    /// Softplus in place.
    ///
    /// ```
    /// let mut v = [100.0f32];
    /// forge::cpu::vmath::softplus(&mut v, 1.0, 20.0);
    /// assert_eq!(v, [100.0]);
    /// ```
    softplus => v_softplus(beta, threshold);
}

generic_grad! {
    /// `g *= gelu'(x)`.
    ///
    /// ```
    /// let mut g = [1.0f64];
    /// forge::cpu::vmath::gelu_grad(&[0.0], &mut g);
    /// assert_eq!(g, [0.5]);
    /// ```
    gelu_grad => v_gelu_grad;
    /// `g *= gelu_tanh'(x)`.
    ///
    /// ```
    /// let mut g = [1.0f32];
    /// forge::cpu::vmath::gelu_tanh_grad(&[0.0], &mut g);
    /// assert_eq!(g, [0.5]);
    /// ```
    gelu_tanh_grad => v_gelu_tanh_grad;
    /// `g *= silu'(x)`.
    ///
    /// ```
    /// let mut g = [1.0f32];
    /// forge::cpu::vmath::silu_grad(&[0.0], &mut g);
    /// assert_eq!(g, [0.5]);
    /// ```
    silu_grad => v_silu_grad;
    /// `g *= mish'(x)`.
    ///
    /// ```
    /// let mut g = [1.0f64];
    /// forge::cpu::vmath::mish_grad(&[0.0], &mut g);
    /// assert!((g[0] - 0.6).abs() < 0.01);
    /// ```
    mish_grad => v_mish_grad;
    /// `g *= erf'(x)`.
    ///
    /// ```
    /// let mut g = [1.0f64];
    /// forge::cpu::vmath::erf_grad(&[0.0], &mut g);
    /// assert_eq!(g, [std::f64::consts::FRAC_2_SQRT_PI]);
    /// ```
    erf_grad => v_erf_grad;
    /// `g *= 1 - y^2` (tanh's derivative from its output `y`).
    ///
    /// ```
    /// let mut g = [1.0f32];
    /// forge::cpu::vmath::tanh_grad(&[0.5], &mut g);
    /// assert_eq!(g, [0.75]);
    /// ```
    tanh_grad => v_tanh_grad;
    /// `g *= y (1 - y)` (sigmoid's derivative from its output `y`).
    ///
    /// ```
    /// let mut g = [1.0f32];
    /// forge::cpu::vmath::sigmoid_grad(&[0.5], &mut g);
    /// assert_eq!(g, [0.25]);
    /// ```
    sigmoid_grad => v_sigmoid_grad;
    /// `g *= softplus'(x)`.
    ///
    /// ```
    /// let mut g = [1.0f32];
    /// forge::cpu::vmath::softplus_grad(&[0.0], &mut g, 1.0, 20.0);
    /// assert_eq!(g, [0.5]);
    /// ```
    softplus_grad => v_softplus_grad(beta, threshold);
}
