//! Half-precision (IEEE f16) to f32 conversion of whole slices, through the
//! CPU's conversion instructions where it has them (`vcvtph2ps`: 16 values
//! per instruction with AVX-512F, 8 with F16C) and `half`'s portable
//! conversion elsewhere. Every f16 is exactly an f32, so every path gives
//! the same bits (`tests::every_path_converts_every_value_alike` checks all
//! 65,536 patterns, NaNs included).

/// A conversion path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    /// AVX-512F `vcvtph2ps` on 512-bit registers.
    Avx512,
    /// F16C `vcvtph2ps` on 256-bit registers.
    F16c,
    /// `half::f16::to_f32`.
    Portable,
}

impl Isa {
    /// Every path this CPU can run (always ends with `Portable`).
    pub(crate) fn all() -> Vec<Isa> {
        let mut all = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if has!("avx512f") {
                all.push(Isa::Avx512);
            }
            if has!("f16c") && has!("avx") {
                all.push(Isa::F16c);
            }
        }
        all.push(Isa::Portable);
        all
    }

    /// The widest path this CPU has and the CPU class in force allows.
    pub(crate) fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            use crate::cpu::class::cpu_has;
            if cpu_has!("avx512f") {
                return Isa::Avx512;
            }
            if cpu_has!("f16c") && cpu_has!("avx") {
                return Isa::F16c;
            }
        }
        Isa::Portable
    }
}

/// `src` (f16 values) converted into `dst`, on the CPU's widest path.
///
/// # Panics
/// When the lengths differ.
pub(crate) fn f16_to_f32(src: &[half::f16], dst: &mut [f32]) {
    f16_to_f32_with(Isa::detect(), src, dst)
}

/// [`f16_to_f32`] on a given path (which the CPU must have).
pub(crate) fn f16_to_f32_with(isa: Isa, src: &[half::f16], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len(), "f16_to_f32: lengths differ");
    assert!(
        Isa::all().contains(&isa),
        "f16_to_f32: this CPU cannot run {isa:?}"
    );
    let done = match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has AVX-512F (checked above); the kernel reads
        // and writes whole blocks of 16 inside both slices.
        Isa::Avx512 => unsafe { x86::avx512(src, dst) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has F16C and AVX (checked above); blocks of 8.
        Isa::F16c => unsafe { x86::f16c(src, dst) },
        _ => 0,
    };
    for (d, s) in dst[done..].iter_mut().zip(&src[done..]) {
        *d = s.to_f32();
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Converts the whole blocks of 16; returns how many values it did.
    ///
    /// # Safety
    /// The CPU has AVX-512F; `dst` is as long as `src`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn avx512(src: &[half::f16], dst: &mut [f32]) -> usize {
        let n = src.len() / 16 * 16;
        for i in (0..n).step_by(16) {
            // SAFETY: `i + 16 <= n <= len` for both slices (caller).
            unsafe {
                let h = _mm256_loadu_si256(src.as_ptr().add(i).cast());
                _mm512_storeu_ps(dst.as_mut_ptr().add(i), _mm512_cvtph_ps(h));
            }
        }
        n
    }

    /// Converts the whole blocks of 8; returns how many values it did.
    ///
    /// # Safety
    /// The CPU has F16C and AVX; `dst` is as long as `src`.
    #[target_feature(enable = "f16c,avx")]
    pub(super) unsafe fn f16c(src: &[half::f16], dst: &mut [f32]) -> usize {
        let n = src.len() / 8 * 8;
        for i in (0..n).step_by(8) {
            // SAFETY: `i + 8 <= n <= len` for both slices (caller).
            unsafe {
                let h = _mm_loadu_si128(src.as_ptr().add(i).cast());
                _mm256_storeu_ps(dst.as_mut_ptr().add(i), _mm256_cvtph_ps(h));
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_converts_every_value_alike() {
        // every pattern, plus a tail that is not a whole block
        let src: Vec<half::f16> = (0..=u16::MAX)
            .chain(0..13)
            .map(half::f16::from_bits)
            .collect();
        let mut want = vec![0f32; src.len()];
        f16_to_f32_with(Isa::Portable, &src, &mut want);
        for (s, w) in src.iter().zip(&want).take(65_536) {
            let exact = f64::from(s.to_f32());
            assert!(w.is_nan() == s.is_nan() && (w.is_nan() || f64::from(*w) == exact));
        }
        for isa in Isa::all() {
            let mut got = vec![0f32; src.len()];
            f16_to_f32_with(isa, &src, &mut got);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(
                    g.to_bits(),
                    w.to_bits(),
                    "{isa:?}: pattern {:#06x}",
                    src[i].to_bits()
                );
            }
        }
    }
}
