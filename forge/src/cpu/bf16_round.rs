//! f32 values rounded to bf16 in vector code, for the bf16 products and
//! convolutions: AVX-512 BF16's `vcvtne2ps2bf16` (32 values per
//! instruction) where the CPU has it, and elsewhere a branch-free portable
//! rounding that the compiler vectorizes. Both give the bits of
//! `cpu::bgemm::to_bf16` (nearest, ties to even; NaNs quieted; subnormal
//! inputs to a zero of their sign, as the instruction treats them), checked
//! in `autocast/convert.rs`'s tests (this file imports nothing of the
//! products, so that they and autocast can both use it).

/// A conversion path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    /// AVX-512F + AVX-512 BF16.
    Avx512Bf16,
    /// Plain code.
    Portable,
}

impl Isa {
    /// The widest path this CPU has and the CPU class in force allows.
    pub(crate) fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            use crate::cpu::class::cpu_has;
            if cpu_has!("avx512f") && cpu_has!("avx512bf16") {
                return Isa::Avx512Bf16;
            }
        }
        Isa::Portable
    }

    /// Every path this CPU can run.
    #[cfg(test)]
    pub(crate) fn all() -> Vec<Isa> {
        let mut all = vec![Isa::Portable];
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bf16")
        {
            all.push(Isa::Avx512Bf16);
        }
        all
    }
}

/// `x` rounded to bf16 without branches (the bits of `bgemm::to_bf16`),
/// for loops the compiler vectorizes.
#[inline(always)]
pub(crate) fn to_bf16(x: f32) -> u16 {
    let b = x.to_bits();
    let magnitude = b & 0x7fff_ffff;
    let rounded = (b + 0x7fff + ((b >> 16) & 1)) >> 16;
    let quiet_nan = (b >> 16) | 0x40;
    let signed_zero = (b >> 16) & 0x8000;
    let r = if magnitude > 0x7f80_0000 {
        quiet_nan
    } else if magnitude < 0x0080_0000 {
        signed_zero
    } else {
        rounded
    };
    r as u16
}

/// `src` converted into `dst` (the same length) on `isa`.
pub(crate) fn convert_with(isa: Isa, src: &[f32], dst: &mut [u16]) {
    assert_eq!(src.len(), dst.len(), "bf16 conversion: lengths differ");
    let done = match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `detect` / `all` chose this path only on a CPU with
        // AVX-512F and AVX-512 BF16; the lengths are equal (asserted).
        Isa::Avx512Bf16 => unsafe { avx512::convert(src, dst) },
        _ => 0,
    };
    for (d, &s) in dst[done..].iter_mut().zip(&src[done..]) {
        *d = to_bf16(s);
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    /// Converts whole blocks of 32 values; returns how many it converted.
    ///
    /// # Safety
    /// The CPU has AVX-512F and AVX-512 BF16; `src.len() == dst.len()`.
    #[target_feature(enable = "avx512f,avx512bf16")]
    pub(super) unsafe fn convert(src: &[f32], dst: &mut [u16]) -> usize {
        let blocks = src.len() / 32;
        for i in 0..blocks {
            // SAFETY: elements `32 i .. 32 i + 32` are inside both slices
            // (`i < len / 32`); unaligned loads and stores.
            unsafe {
                let lo = _mm512_loadu_ps(src.as_ptr().add(32 * i));
                let hi = _mm512_loadu_ps(src.as_ptr().add(32 * i + 16));
                // the second operand fills the low half
                let packed = _mm512_cvtne2ps_pbh(hi, lo);
                _mm512_storeu_si512(
                    dst.as_mut_ptr().add(32 * i).cast(),
                    std::mem::transmute::<__m512bh, __m512i>(packed),
                );
            }
        }
        blocks * 32
    }
}

/// This CPU's conversion path under the CPU class in force, found once for
/// many short conversions ([`to_bf16_slice`] looks it up at every call,
/// which costs as much as converting a row of 64).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bf16Rounder(Isa);

impl Bf16Rounder {
    /// The path of the calling thread's CPU class.
    pub(crate) fn new() -> Bf16Rounder {
        Bf16Rounder(Isa::detect())
    }

    /// [`to_bf16_slice`] on the path found by [`new`](Self::new): the
    /// same bits.
    ///
    /// # Panics
    /// When the lengths differ.
    pub(crate) fn round(self, src: &[f32], dst: &mut [u16]) {
        convert_with(self.0, src, dst);
    }
}

/// `src` rounded to bf16 into `dst` (the same length) on this CPU's
/// widest path: the bits of `cpu::bgemm::to_bf16`, in vector code.
///
/// # Panics
/// When the lengths differ.
pub(crate) fn to_bf16_slice(src: &[f32], dst: &mut [u16]) {
    convert_with(Isa::detect(), src, dst);
}
