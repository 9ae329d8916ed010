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
//! computed alone for every function and derivative). GELU's tanh form
//! and its derivative (`gelu_tanh.rs`, GPT's activation), `tanh` and
//! `sigmoid` (and so SiLU and the recurrent cells' gates) spell out fused
//! multiply-adds (`f32::mul_add`, one rounding each): `vfmadd` in the
//! AVX-512 and AVX2 loops (compiled with `fma`), the C library's `fmaf` in
//! the baseline loop, the same bits on every path.
//!
//! # Accuracy (`f32`)
//! Maximum error against the correctly rounded result, in ulp of that
//! result: [`F32_MAX_ULP`] holds the asserted bounds, checked on every
//! 4099th `f32` bit pattern by `cargo test`; the ignored test
//! `vmath_f32_exhaustive` checks every finite input and prints the measured
//! worst error of each function. GELU's tanh form and its derivative are
//! bounded by `gelu_tanh::tests::accuracy` (relative and in ulp, by range
//! of `x`).
//!
//! # `f64`
//! The `f64` versions call the standard library / `libm` per element (they
//! are the accurate reference that the PyTorch `float64` parity tests pin at
//! rtol 1e-10).

use crate::base::Float;
use crate::cpu::same_type::{cast, cast_mut, cast_uninit};
use std::mem::MaybeUninit;

mod f32_kernels;
mod f64_ref;
mod gelu_bf16;
mod gelu_tanh;
mod slices;

pub(crate) use gelu_bf16::GeluBf16;

pub(crate) use f32_kernels::exp_f32;
#[cfg(test)]
use f32_kernels::{erf_f32, gelu_f32, ln_f32, silu_f32, softplus_f32};
pub use f32_kernels::{sigmoid_f32, tanh_f32};
#[cfg(test)]
use gelu_tanh::gelu_tanh_f32;
#[cfg(test)]
use slices::{each, each2, each2_base, each_base};

/// `(function, maximum error in ulp)` asserted for each `f32` kernel (errors
/// of subnormal results are counted in units of the smallest subnormal).
#[cfg(test)]
const F32_MAX_ULP: &[(&str, f64)] = &[
    ("exp", 1.5),
    ("ln", 1.0),
    ("tanh", 2.5),
    ("sigmoid", 2.5),
    ("erf", 2.5),
    ("softplus", 3.0),
];

/// Slice-wide transcendental functions and activation derivatives for one
/// float type. Implemented for `f32` (vectorised kernels) and `f64`
/// (`std`/`libm` per element). Every function works in place but the
/// `_into` ones, which read one slice and write another.
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
    /// `g = g * gelu_tanh'(x)` (the op runs
    /// [`v_gelu_tanh_grad_into`](VecMath::v_gelu_tanh_grad_into); this
    /// in-place form is the tests' reference for it).
    #[cfg(test)]
    fn v_gelu_tanh_grad(x: &[Self], g: &mut [Self]);
    /// `g = g * silu'(x)`.
    fn v_silu_grad(x: &[Self], g: &mut [Self]);
    /// `g = g * softplus'(x)` (`sigmoid(beta x)`, 1 above the threshold).
    fn v_softplus_grad(x: &[Self], g: &mut [Self], beta: Self, threshold: Self);
    /// `g = g * mish'(x)`.
    fn v_mish_grad(x: &[Self], g: &mut [Self]);
    /// `g = g * erf'(x) = g * 2/sqrt(pi) e^(-x^2)`.
    fn v_erf_grad(x: &[Self], g: &mut [Self]);
    /// `out = gelu_tanh(x)`: [`v_gelu_tanh`](VecMath::v_gelu_tanh) from one
    /// slice into another (an output not yet written), the same bits.
    ///
    /// # Panics
    /// When the lengths differ.
    fn v_gelu_tanh_into(x: &[Self], out: &mut [MaybeUninit<Self>]);
    /// `out = g * gelu_tanh'(x)`:
    /// [`v_gelu_tanh_grad`](VecMath::v_gelu_tanh_grad) into another slice,
    /// the same bits.
    ///
    /// # Panics
    /// When the lengths differ.
    fn v_gelu_tanh_grad_into(x: &[Self], g: &[Self], out: &mut [MaybeUninit<Self>]);
    /// `g = g * (1 - y^2)` (tanh's derivative from its output).
    fn v_tanh_grad(y: &[Self], g: &mut [Self]);
    /// `g = g * y (1 - y)` (sigmoid's derivative from its output).
    fn v_sigmoid_grad(y: &[Self], g: &mut [Self]);
}

#[cfg(test)]
mod tests;

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
    exp => v_exp;
    /// `x = ln x` in place.
    ln => v_ln;
    /// `x = tanh x` in place.
    tanh => v_tanh;
    /// `x = sigmoid(x)` in place.
    sigmoid => v_sigmoid;
    /// `x = erf x` in place.
    erf => v_erf;
    /// GELU (exact form) in place.
    gelu => v_gelu;
    /// GELU (tanh form) in place.
    gelu_tanh => v_gelu_tanh;
    /// SiLU in place.
    silu => v_silu;
    /// Mish in place.
    mish => v_mish;
    /// Softplus in place.
    softplus => v_softplus(beta, threshold);
}

generic_grad! {
    /// `g *= gelu'(x)`.
    gelu_grad => v_gelu_grad;
    /// `g *= silu'(x)`.
    silu_grad => v_silu_grad;
    /// `g *= mish'(x)`.
    mish_grad => v_mish_grad;
    /// `g *= erf'(x)`.
    erf_grad => v_erf_grad;
    /// `g *= 1 - y^2` (tanh's derivative from its output `y`).
    tanh_grad => v_tanh_grad;
    /// `g *= y (1 - y)` (sigmoid's derivative from its output `y`).
    sigmoid_grad => v_sigmoid_grad;
    /// `g *= softplus'(x)`.
    softplus_grad => v_softplus_grad(beta, threshold);
}

/// `g *= gelu_tanh'(x)` in place (the tests' reference for
/// [`gelu_tanh_grad_into`]).
///
/// # Panics
/// When the slices' lengths differ.
#[cfg(test)]
pub fn gelu_tanh_grad<E: Float>(x: &[E], g: &mut [E]) {
    if let (Some(x), Some(g)) = (cast::<E, f32>(x), cast_mut::<E, f32>(g)) {
        f32::v_gelu_tanh_grad(x, g)
    } else if let (Some(x), Some(g)) = (cast::<E, f64>(x), cast_mut::<E, f64>(g)) {
        f64::v_gelu_tanh_grad(x, g)
    } else {
        other_float()
    }
}

/// `x = e^(x - m)` in place: the subtraction and [`exp`] in one pass, the
/// same bits as the two (the difference is rounded to `E` either way).
pub fn exp_sub<E: Float>(x: &mut [E], m: E) {
    if let Some(v) = cast_mut::<E, f32>(x) {
        slices::exp_sub_f32(v, m.to_f64() as f32)
    } else if let Some(v) = cast_mut::<E, f64>(x) {
        let m = m.to_f64();
        for e in v.iter_mut() {
            *e = (*e - m).exp();
        }
    } else {
        other_float()
    }
}

/// `out = gelu_tanh(x)` ([`VecMath::v_gelu_tanh_into`]): the values of
/// [`gelu_tanh`] written into another slice, so that an op's result needs
/// no copy of its input first. Writes every element of `out`.
///
/// # Panics
/// When the slices' lengths differ.
pub fn gelu_tanh_into<E: Float>(x: &[E], out: &mut [MaybeUninit<E>]) {
    if let (Some(x), Some(o)) = (cast::<E, f32>(x), cast_uninit::<E, f32>(out)) {
        f32::v_gelu_tanh_into(x, o)
    } else if let (Some(x), Some(o)) = (cast::<E, f64>(x), cast_uninit::<E, f64>(out)) {
        f64::v_gelu_tanh_into(x, o)
    } else {
        other_float()
    }
}

/// `out = g * gelu_tanh'(x)` ([`VecMath::v_gelu_tanh_grad_into`]): the
/// values of [`gelu_tanh_grad`] written into another slice. Writes every
/// element of `out`.
///
/// # Panics
/// When the slices' lengths differ.
pub fn gelu_tanh_grad_into<E: Float>(x: &[E], g: &[E], out: &mut [MaybeUninit<E>]) {
    if let (Some(x), Some(g), Some(o)) = (
        cast::<E, f32>(x),
        cast::<E, f32>(g),
        cast_uninit::<E, f32>(out),
    ) {
        f32::v_gelu_tanh_grad_into(x, g, o)
    } else if let (Some(x), Some(g), Some(o)) = (
        cast::<E, f64>(x),
        cast::<E, f64>(g),
        cast_uninit::<E, f64>(out),
    ) {
        f64::v_gelu_tanh_grad_into(x, g, o)
    } else {
        other_float()
    }
}

/// The examples that documented these kernels while they were public.
#[cfg(test)]
mod examples {
    #[test]
    fn f32_max_ulp() {
        let (name, ulp) = crate::cpu::vmath::F32_MAX_ULP[0];
        assert_eq!(name, "exp");
        assert!(ulp <= 1.5);
    }

    #[test]
    fn vec_math() {
        use crate::cpu::vmath::VecMath;
        let mut v = [0.0f32, 1.0];
        f32::v_exp(&mut v);
        assert_eq!(v[0], 1.0);
        assert!((v[1] - std::f32::consts::E).abs() <= f32::EPSILON * 3.0);
    }

    #[test]
    fn item() {
        let mut v = [0.0f64];
        crate::cpu::vmath::exp(&mut v);
        assert_eq!(v, [1.0]);
    }

    #[test]
    fn item_2() {
        let mut v = [1.0f32];
        crate::cpu::vmath::ln(&mut v);
        assert_eq!(v, [0.0]);
    }

    #[test]
    fn item_3() {
        let mut v = [0.0f32];
        crate::cpu::vmath::tanh(&mut v);
        assert_eq!(v, [0.0]);
    }

    #[test]
    fn item_4() {
        let mut v = [0.0f32];
        crate::cpu::vmath::sigmoid(&mut v);
        assert_eq!(v, [0.5]);
    }

    #[test]
    fn item_5() {
        let mut v = [0.0f32];
        crate::cpu::vmath::erf(&mut v);
        assert_eq!(v, [0.0]);
    }

    #[test]
    fn item_6() {
        let mut v = [0.0f32];
        crate::cpu::vmath::gelu(&mut v);
        assert_eq!(v, [0.0]);
    }

    #[test]
    fn item_7() {
        let mut v = [0.0f32];
        crate::cpu::vmath::gelu_tanh(&mut v);
        assert_eq!(v, [0.0]);
    }

    #[test]
    fn item_8() {
        let mut v = [0.0f32];
        crate::cpu::vmath::silu(&mut v);
        assert_eq!(v, [0.0]);
    }

    #[test]
    fn item_9() {
        let mut v = [0.0f32];
        crate::cpu::vmath::mish(&mut v);
        assert_eq!(v, [0.0]);
    }

    #[test]
    fn item_10() {
        let mut v = [100.0f32];
        crate::cpu::vmath::softplus(&mut v, 1.0, 20.0);
        assert_eq!(v, [100.0]);
    }

    #[test]
    fn item_11() {
        let mut g = [1.0f64];
        crate::cpu::vmath::gelu_grad(&[0.0], &mut g);
        assert_eq!(g, [0.5]);
    }

    #[test]
    fn item_12() {
        let mut g = [1.0f32];
        crate::cpu::vmath::gelu_tanh_grad(&[0.0], &mut g);
        assert_eq!(g, [0.5]);
    }

    #[test]
    fn item_13() {
        let mut g = [1.0f32];
        crate::cpu::vmath::silu_grad(&[0.0], &mut g);
        assert_eq!(g, [0.5]);
    }

    #[test]
    fn item_14() {
        let mut g = [1.0f64];
        crate::cpu::vmath::mish_grad(&[0.0], &mut g);
        assert!((g[0] - 0.6).abs() < 0.01);
    }

    #[test]
    fn item_15() {
        let mut g = [1.0f64];
        crate::cpu::vmath::erf_grad(&[0.0], &mut g);
        assert_eq!(g, [std::f64::consts::FRAC_2_SQRT_PI]);
    }

    #[test]
    fn item_16() {
        let mut g = [1.0f32];
        crate::cpu::vmath::tanh_grad(&[0.5], &mut g);
        assert_eq!(g, [0.75]);
    }

    #[test]
    fn item_17() {
        let mut g = [1.0f32];
        crate::cpu::vmath::sigmoid_grad(&[0.5], &mut g);
        assert_eq!(g, [0.25]);
    }

    #[test]
    fn item_18() {
        let mut g = [1.0f32];
        crate::cpu::vmath::softplus_grad(&[0.0], &mut g, 1.0, 20.0);
        assert_eq!(g, [0.5]);
    }
}
