//! The `f32` slice loops: one loop per kernel, compiled at the baseline
//! vector width and (x86-64) for AVX2 and AVX-512F, the widest the CPU has
//! chosen at run time; and [`VecMath`] for `f32` built on them.

use super::f32_kernels::*;
use super::VecMath;
use std::mem::MaybeUninit;

#[inline(always)]
pub(super) fn each(x: &mut [f32], f: impl Fn(f32) -> f32) {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::cpu::class::cpu_has!("avx512f") {
            // SAFETY: the CPU has AVX-512F (checked just above).
            unsafe { wide::each_avx512(x, &f) };
            return;
        }
        if crate::cpu::class::cpu_has!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            unsafe { wide::each_avx2(x, &f) };
            return;
        }
    }
    each_base(x, f)
}

/// [`each`] at the build's baseline vector width.
#[inline(always)]
pub(super) fn each_base(x: &mut [f32], f: impl Fn(f32) -> f32) {
    for v in x.iter_mut() {
        *v = f(*v);
    }
}

#[inline(always)]
pub(super) fn each2(x: &[f32], g: &mut [f32], f: impl Fn(f32, f32) -> f32) {
    assert_eq!(x.len(), g.len(), "vmath: length mismatch");
    #[cfg(target_arch = "x86_64")]
    {
        if crate::cpu::class::cpu_has!("avx512f") {
            // SAFETY: the CPU has AVX-512F (checked just above).
            unsafe { wide::each2_avx512(x, g, &f) };
            return;
        }
        if crate::cpu::class::cpu_has!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            unsafe { wide::each2_avx2(x, g, &f) };
            return;
        }
    }
    each2_base(x, g, f)
}

/// [`each2`] at the build's baseline vector width.
#[inline(always)]
pub(super) fn each2_base<E: Copy>(x: &[E], g: &mut [E], f: impl Fn(E, E) -> E) {
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

/// `x[i] = kernel(x[i])` with the kernel called directly in each loop
/// compiled for a wider vector unit, so its `#[inline(always)]` holds (a
/// kernel passed to [`each`] as a value goes through its `Fn::call` shim,
/// which the compiler may keep as an out-of-line scalar call per element:
/// GELU was one, 8% of BERT-base's forward). Same bits as [`each_base`]:
/// the same scalar IEEE operations per lane.
macro_rules! each_direct {
    ($x:expr, $kernel:path) => {{
        let x: &mut [f32] = $x;
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx512f")]
            fn avx512(x: &mut [f32]) {
                for v in x.iter_mut() {
                    *v = $kernel(*v);
                }
            }
            #[target_feature(enable = "avx2")]
            fn avx2(x: &mut [f32]) {
                for v in x.iter_mut() {
                    *v = $kernel(*v);
                }
            }
            if crate::cpu::class::cpu_has!("avx512f") {
                // SAFETY: the CPU has AVX-512F (checked just above).
                unsafe { avx512(x) };
                return;
            }
            if crate::cpu::class::cpu_has!("avx2") {
                // SAFETY: the CPU has AVX2 (checked just above).
                unsafe { avx2(x) };
                return;
            }
        }
        for v in x.iter_mut() {
            *v = $kernel(*v);
        }
    }};
}

/// As [`each_direct!`] for a kernel over pieces of 16 values (one AVX-512
/// vector; a fixed size, so that the kernel compiles to whole vectors)
/// instead of single values: `$piece(&mut [f32; 16])` on each whole piece
/// in order, then `$kernel` on each value of the last, shorter one.
macro_rules! each_piece {
    ($x:expr, $piece:path, $kernel:path) => {{
        let x: &mut [f32] = $x;
        #[inline(always)]
        fn run(x: &mut [f32]) {
            let mut pieces = x.chunks_exact_mut(16);
            for piece in &mut pieces {
                $piece(piece.try_into().expect("16 values"));
            }
            for v in pieces.into_remainder() {
                *v = $kernel(*v);
            }
        }
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx512f")]
            fn avx512(x: &mut [f32]) {
                run(x)
            }
            #[target_feature(enable = "avx2")]
            fn avx2(x: &mut [f32]) {
                run(x)
            }
            if crate::cpu::class::cpu_has!("avx512f") {
                // SAFETY: the CPU has AVX-512F (checked just above).
                unsafe { avx512(x) };
                return;
            }
            if crate::cpu::class::cpu_has!("avx2") {
                // SAFETY: the CPU has AVX2 (checked just above).
                unsafe { avx2(x) };
                return;
            }
        }
        run(x)
    }};
}

/// `x = exp_f32(x - m)`: `v_exp` after the subtraction, in the same pass,
/// compiled for the widest vectors the CPU class allows
/// ([`widest`](crate::cpu::elementwise::widest)).
pub(super) fn exp_sub_f32(x: &mut [f32], m: f32) {
    crate::cpu::elementwise::widest(
        #[inline(always)]
        || {
            for v in x.iter_mut() {
                *v = exp_f32(*v - m);
            }
        },
    )
}

impl VecMath for f32 {
    fn v_exp(x: &mut [f32]) {
        each_direct!(x, exp_f32)
    }
    fn v_ln(x: &mut [f32]) {
        each_direct!(x, ln_f32)
    }
    fn v_tanh(x: &mut [f32]) {
        each_direct!(x, tanh_f32)
    }
    fn v_sigmoid(x: &mut [f32]) {
        each_direct!(x, sigmoid_f32)
    }
    fn v_erf(x: &mut [f32]) {
        each_direct!(x, erf_f32)
    }
    fn v_gelu(x: &mut [f32]) {
        each_piece!(x, gelu_piece, gelu_f32)
    }
    fn v_gelu_tanh(x: &mut [f32]) {
        super::gelu_tanh::in_place(x)
    }
    fn v_silu(x: &mut [f32]) {
        each_direct!(x, silu_f32)
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
    #[cfg(test)]
    fn v_gelu_tanh_grad(x: &[f32], g: &mut [f32]) {
        super::gelu_tanh::grad_in_place(x, g)
    }
    fn v_gelu_tanh_into(x: &[f32], out: &mut [MaybeUninit<f32>]) {
        super::gelu_tanh::into(x, out)
    }
    fn v_gelu_tanh_grad_into(x: &[f32], g: &[f32], out: &mut [MaybeUninit<f32>]) {
        super::gelu_tanh::grad_into(x, g, out)
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
