//! GELU, tanh form, and its derivative in `f32` with fused multiply-adds:
//! GPT's feed-forward activation, which a training step runs forward and
//! backward on every hidden value (issue 41: 9% of a GPT training step
//! with the kernels of `f32_kernels.rs`, compute bound: as fast per value
//! on a slice in L1 as on a 2 MiB one).
//!
//! ```text
//! z = 2c (x + k x^3) = x (2c + 2ck x^2)      (one product, one FMA, one product)
//! e = e^-|z|,  r = 1 / (1 + e)
//! gelu(x)  = x / (1 + e)   for z >= 0,   (x e) / (1 + e)  otherwise
//! gelu'(x) = s + x s (1 - s) 2c (1 + 3k x^2),   s = sigmoid(z),  s (1 - s) = e r^2
//! ```
//!
//! `x sigmoid(z)` equals `x/2 (1 + tanh(z/2))` without its cancellation
//! for negative `x`, and `s (1 - s)` as `e r^2` has none either. The
//! exponential is `exp_f32`'s (the same reduction by `ln 2` and degree-7
//! Taylor polynomial) on `-|z| <= 0` only, its Horner steps as fused
//! multiply-adds. Against the kernels this replaced (`x * sigmoid_f32(..)`,
//! every step a separate product and sum): a fifth fewer instructions (the
//! AVX-512 loops: 38 a vector forward against 49, 45 backward against
//! 57), half the polynomial's chain of dependent operations, still one
//! division; 1.5x faster in GPT training; as accurate or more
//! (`tests::accuracy` states the bounds); different bits.
//!
//! # The bits
//! Every step is one IEEE operation per element, fused multiply-adds
//! included (`f32::mul_add`, rounded once): the AVX-512 and AVX2 loops
//! compile them to `vfmadd`, the baseline loop (CPU class `portable`) to the
//! C library's `fmaf` (slower, the same result). So a value is the same on
//! every path, in a vector lane or alone, at every thread count
//! (`tests::paths_give_the_same_bits`).

use super::f32_kernels::{exp_neg_abs, sel};
use std::mem::MaybeUninit;

/// `2 sqrt(2/pi)`, rounded to f32.
const TWO_C: f32 = 1.595_769_2;
/// `2 sqrt(2/pi) 0.044715`, rounded to f32.
const TWO_CK: f32 = 0.071_354_814;
/// `6 sqrt(2/pi) 0.044715` (`z`'s derivative's `x^2` term), rounded to f32.
const SIX_CK: f32 = 0.214_064_45;

/// `(z, e)`: `z = 2c (x + k x^3)` from `x` and `x2 = x^2`, `e = e^-|z|`.
#[inline(always)]
fn parts(x: f32, x2: f32) -> (f32, f32) {
    let z = x * x2.mul_add(TWO_CK, TWO_C);
    (z, exp_neg_abs(f32::from_bits(z.to_bits() & 0x7FFF_FFFF)))
}

/// GELU (tanh form) `x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))` for
/// `f32`, as `x sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3))` (see the module
/// docs). `+inf` gives `+inf`, `-inf` and NaN give NaN.
#[inline(always)]
pub fn gelu_tanh_f32(x: f32) -> f32 {
    let (z, e) = parts(x, x * x);
    sel(z >= 0.0, x, x * e) / (1.0 + e)
}

/// `g * gelu_tanh'(x)` (see the module docs; NaN for `|x|` above about
/// 1.8e19, where `x^2` overflows, as the kernel it replaced gave).
#[inline(always)]
pub(super) fn gelu_tanh_grad_f32(x: f32, g: f32) -> f32 {
    let x2 = x * x;
    let (z, e) = parts(x, x2);
    let r = 1.0 / (1.0 + e);
    let er = e * r;
    let s = sel(z >= 0.0, r, er);
    // z's derivative 2c (1 + 3k x^2), times s (1 - s) = e r^2 first: 0
    // where e is 0, before x's size can overflow the product
    let t = (er * r) * x2.mul_add(SIX_CK, TWO_C);
    g * x.mul_add(t, s)
}

/// `f(args..)` on the widest loop this CPU (and the CPU class in force)
/// allows: AVX-512F or AVX2, each with FMA, else the baseline (`fmaf` from
/// the C library): the same bits on every path. `$run` is an
/// `#[inline(always)]` loop, compiled into each.
macro_rules! widest_fma {
    ($run:ident($($arg:ident: $ty:ty),*)) => {{
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx512f,fma")]
            fn avx512($($arg: $ty),*) {
                $run($($arg),*)
            }
            #[target_feature(enable = "avx2,fma")]
            fn avx2($($arg: $ty),*) {
                $run($($arg),*)
            }
            if crate::cpu::class::cpu_has!("fma") {
                if crate::cpu::class::cpu_has!("avx512f") {
                    // SAFETY: the CPU has AVX-512F and FMA (checked above).
                    return unsafe { avx512($($arg),*) };
                }
                if crate::cpu::class::cpu_has!("avx2") {
                    // SAFETY: the CPU has AVX2 and FMA (checked above).
                    return unsafe { avx2($($arg),*) };
                }
            }
        }
        $run($($arg),*)
    }};
}

/// `x = gelu_tanh(x)` in place.
pub(super) fn in_place(x: &mut [f32]) {
    #[inline(always)]
    fn run(x: &mut [f32]) {
        for v in x.iter_mut() {
            *v = gelu_tanh_f32(*v);
        }
    }
    widest_fma!(run(x: &mut [f32]))
}

/// `out = gelu_tanh(x)`.
///
/// # Panics
/// When the lengths differ.
pub(super) fn into(x: &[f32], out: &mut [MaybeUninit<f32>]) {
    assert_eq!(x.len(), out.len(), "vmath: length mismatch");
    #[inline(always)]
    fn run(x: &[f32], out: &mut [MaybeUninit<f32>]) {
        for (o, &v) in out.iter_mut().zip(x) {
            o.write(gelu_tanh_f32(v));
        }
    }
    widest_fma!(run(x: &[f32], out: &mut [MaybeUninit<f32>]))
}

/// `g = g * gelu_tanh'(x)` in place.
///
/// # Panics
/// When the lengths differ.
#[cfg(test)]
pub(super) fn grad_in_place(x: &[f32], g: &mut [f32]) {
    assert_eq!(x.len(), g.len(), "vmath: length mismatch");
    #[inline(always)]
    fn run(x: &[f32], g: &mut [f32]) {
        for (gv, &xv) in g.iter_mut().zip(x) {
            *gv = gelu_tanh_grad_f32(xv, *gv);
        }
    }
    widest_fma!(run(x: &[f32], g: &mut [f32]))
}

/// `out = g * gelu_tanh'(x)`.
///
/// # Panics
/// When the lengths differ.
pub(super) fn grad_into(x: &[f32], g: &[f32], out: &mut [MaybeUninit<f32>]) {
    assert!(
        x.len() == g.len() && g.len() == out.len(),
        "vmath: length mismatch"
    );
    #[inline(always)]
    fn run(x: &[f32], g: &[f32], out: &mut [MaybeUninit<f32>]) {
        for ((o, &xv), &gv) in out.iter_mut().zip(x).zip(g) {
            o.write(gelu_tanh_grad_f32(xv, gv));
        }
    }
    widest_fma!(run(x: &[f32], g: &[f32], out: &mut [MaybeUninit<f32>]))
}

#[cfg(test)]
mod tests;
