//! f32 activations to bf16 rows for the bf16 products, in vector code and
//! into pooled buffers: AVX-512 BF16's `vcvtne2ps2bf16` (32 values per
//! instruction) where the CPU has it, and elsewhere a branch-free portable
//! rounding that the compiler vectorizes. Both give the bits of
//! `cpu::bgemm::to_bf16` (nearest, ties to even; NaNs quieted; subnormal
//! inputs to a zero of their sign, as the instruction treats them), checked
//! in `tests`.

use crate::cpu::bgemm::padded_k;
use crate::cpu::memory::Storage;

/// A conversion path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Isa {
    /// AVX-512F + AVX-512 BF16.
    Avx512Bf16,
    /// Plain code.
    Portable,
}

impl Isa {
    /// The widest path this CPU has and the CPU class in force allows.
    fn detect() -> Isa {
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
    fn all() -> Vec<Isa> {
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
fn convert_with(isa: Isa, src: &[f32], dst: &mut [u16]) {
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

/// `rows` rows of `k` f32 (row-major) as bf16 rows of [`padded_k`]`(k)`
/// elements in a pooled buffer, the padding zero.
pub(crate) fn rows_to_bf16(src: &[f32], rows: usize, k: usize) -> Storage<u16> {
    let kp = padded_k(k);
    let isa = Isa::detect();
    if kp == k {
        let mut out = Storage::<u16>::zeroed(rows * k);
        convert_with(isa, &src[..rows * k], &mut out);
        return out;
    }
    let mut out = Storage::<u16>::zeroed(rows * kp);
    for (dst, row) in out.chunks_exact_mut(kp).zip(src.chunks_exact(k.max(1))) {
        convert_with(isa, row, &mut dst[..k]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::bgemm;

    #[test]
    fn every_path_rounds_as_the_scalar_reference() {
        let mut values = vec![
            0.0f32,
            -0.0,
            1.0,
            f32::NAN,
            -f32::NAN,
            f32::from_bits(0x7f80_0001), // signalling NaN
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MAX,
            f32::MIN_POSITIVE,
            f32::from_bits(1),           // subnormal
            f32::from_bits(0x807f_ffff), // negative subnormal
            f32::from_bits(0x3f80_8000), // a tie, even below
            f32::from_bits(0x3f81_8000), // a tie, odd below
            f32::from_bits(0x7f7f_8000), // rounds past the largest bf16
        ];
        // pseudo-random bit patterns, every exponent
        let mut s = 0x9e37_79b9u32;
        for _ in 0..5000 {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            values.push(f32::from_bits(s));
        }
        let want: Vec<u16> = values.iter().map(|&v| bgemm::to_bf16(v)).collect();
        for isa in Isa::all() {
            // every length around the 32-value blocks
            for len in [0, 1, 31, 32, 33, 64, 100, values.len()] {
                let mut got = vec![0u16; len];
                convert_with(isa, &values[..len], &mut got);
                assert_eq!(got, want[..len], "{isa:?} {len}");
            }
        }
    }

    #[test]
    fn odd_rows_are_padded_with_zeros() {
        let src = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let out = rows_to_bf16(&src, 2, 3);
        assert_eq!(&out[..], &bgemm::rows_to_bf16(&src, 2, 3)[..]);
        assert_eq!(out[3], 0);
    }
}
