//! Which build of the cell kernels runs: the CPU's widest ([`isa`]), the
//! `f32` views the fused kernels take, and the two ways the LSTM and GRU
//! kernels are compiled per build: [`run_wide`] runs a fused step kernel's
//! rows on the AVX-512 or AVX2 + FMA build, and [`avx2_or_baseline!`]
//! defines a backward kernel that runs its loop compiled for AVX2 + FMA
//! where the CPU has them. Either way the loop is one `#[inline(always)]`
//! body inlined into each `#[target_feature]` function, so it is compiled
//! with that build's features (a closure or a non-inlined helper would
//! not be), and each element is the same operations in the same order, so
//! every build gives the same bits.

#[cfg(target_arch = "x86_64")]
use crate::cpu::same_type::{cast, cast_mut};
#[cfg(target_arch = "x86_64")]
use crate::tensor::Float;
use std::sync::OnceLock;

/// The widest build of the fused cell kernels this CPU runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Isa {
    /// AVX-512F: 16 lanes.
    Avx512,
    /// AVX2 with FMA: 8 lanes.
    Avx2,
    /// Neither (or not x86-64): the generic loops run.
    Generic,
}

/// The CPU's [`Isa`], detected once.
pub(super) fn isa() -> Isa {
    // One answer per CPU class (`cpu::class`), each detected once.
    static ISA: [OnceLock<Isa>; crate::cpu::class::CLASSES] =
        [const { OnceLock::new() }; crate::cpu::class::CLASSES];
    *ISA[crate::cpu::class::current() as usize].get_or_init(|| {
        if supports(Isa::Avx512) {
            Isa::Avx512
        } else if supports(Isa::Avx2) {
            Isa::Avx2
        } else {
            Isa::Generic
        }
    })
}

/// Whether the CPU can run the `isa` build.
pub(super) fn supports(isa: Isa) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        match isa {
            Isa::Avx512 => crate::cpu::class::cpu_has!("avx512f"),
            Isa::Avx2 => crate::cpu::class::cpu_has!("avx2") && crate::cpu::class::cpu_has!("fma"),
            Isa::Generic => true,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        isa == Isa::Generic
    }
}

/// `x` as `f32` when `E` is `f32`.
#[cfg(target_arch = "x86_64")]
pub(super) fn f32s<E: Float>(x: &[E]) -> Option<&[f32]> {
    cast(x)
}

/// `x` as `f32` when `E` is `f32`.
#[cfg(target_arch = "x86_64")]
pub(super) fn f32s_mut<E: Float>(x: &mut [E]) -> Option<&mut [f32]> {
    cast_mut(x)
}

/// An optional bias as `f32`: `Some((true, b))`, `Some((false, &[]))`
/// without one (never read then), `None` when `E` is not `f32`.
#[cfg(target_arch = "x86_64")]
pub(super) fn f32_bias<E: Float>(b: Option<&[E]>) -> Option<(bool, &[f32])> {
    match b {
        Some(b) => f32s(b).map(|b| (true, b)),
        None => Some((false, &[])),
    }
}

/// A fused step kernel's loops over a block of rows, as [`run_wide`] runs
/// them.
#[cfg(target_arch = "x86_64")]
pub(super) trait WideRows {
    /// The loops on the AVX-512 build (`AVX512`) or the AVX2 + FMA one,
    /// with or without the bias; `#[inline(always)]` in every
    /// implementation, so that they are compiled into [`run_wide`]'s
    /// builds.
    ///
    /// # Safety
    /// The CPU must have the build's features.
    unsafe fn rows<const AVX512: bool, const BIAS: bool>(self);
}

/// Runs `block`'s loops on the `isa` build (AVX-512F or AVX2 + FMA), with
/// or without the bias.
///
/// # Safety
/// The CPU must support `isa` ([`supports`]).
///
/// # Panics
/// For [`Isa::Generic`], which has no wide build.
#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn run_wide<K: WideRows>(isa: Isa, block: K, bias: bool) {
    #[target_feature(enable = "avx512f")]
    unsafe fn avx512<K: WideRows>(k: K, bias: bool) {
        // SAFETY: the CPU has AVX-512F (this function's contract).
        unsafe {
            if bias {
                k.rows::<true, true>()
            } else {
                k.rows::<true, false>()
            }
        }
    }
    #[target_feature(enable = "avx2,fma")]
    unsafe fn avx2<K: WideRows>(k: K, bias: bool) {
        // SAFETY: the CPU has AVX2 and FMA (this function's contract).
        unsafe {
            if bias {
                k.rows::<false, true>()
            } else {
                k.rows::<false, false>()
            }
        }
    }
    match isa {
        // SAFETY: the CPU has AVX-512F (the caller's promise).
        Isa::Avx512 => unsafe { avx512(block, bias) },
        // SAFETY: the CPU has AVX2 and FMA (the caller's promise).
        Isa::Avx2 => unsafe { avx2(block, bias) },
        Isa::Generic => unreachable!("cell kernels: no wide build for Generic"),
    }
}

/// `avx2_or_baseline! { /// docs  fn name => body(args) }` defines
/// `fn name<E: Float>(args)`, which runs the `#[inline(always)]` loop
/// `body` (the same arguments) compiled for AVX2 + FMA where the CPU has
/// them ([`isa`] at least [`Isa::Avx2`]: 8 lanes instead of the
/// baseline's 4), at the baseline width otherwise. The same operations
/// per element, none fused, so the same bits.
macro_rules! avx2_or_baseline {
    ($(#[$attr:meta])* fn $name:ident => $body:ident($($arg:ident: $ty:ty),* $(,)?)) => {
        $(#[$attr])*
        #[allow(clippy::too_many_arguments)]
        fn $name<E: Float>($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            if super::isa::isa() != super::isa::Isa::Generic {
                #[allow(clippy::too_many_arguments)]
                #[target_feature(enable = "avx2,fma")]
                fn avx2<E: Float>($($arg: $ty),*) {
                    $body($($arg),*)
                }
                // SAFETY: the CPU has AVX2 and FMA (`isa` is at least `Avx2`).
                return unsafe { avx2($($arg),*) };
            }
            $body($($arg),*)
        }
    };
}
pub(super) use avx2_or_baseline;
