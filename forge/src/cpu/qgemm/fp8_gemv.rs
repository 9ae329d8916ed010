//! The one-row product with a weight of 8-bit floats (batch-1 decoding):
//! `y = x W^T + beta y` read straight from [`Fp8Panels`]' bytes, each
//! byte decoded and scaled in registers, with no f32 copy of the weight.
//!
//! Its bits are those of the f32 matrix-vector product of `x` with the
//! decoded weight (`cpu::gemm`'s column dots, what a `Linear` holding the
//! dequantized f32 weight computes for one row): each output `j` keeps 16
//! partial sums, lane `l` taking `w[j][p] x[p]` for `p = l mod 16` below
//! `kk = k - k mod 16` in increasing `p` with fused multiply-adds; the 16
//! are added pairwise (lane `l` with `l + 8`, then `+ 4`, `+ 2`, `+ 1`),
//! the products past `kk` added in order, fused, and the result stored as
//! `acc` (or `y beta + acc`). Here the 16 lanes of one output are spread
//! over 16 registers (one per lane) whose 16 elements are 16 outputs, so
//! every sum is the same sequence of the same operations. Each weight is
//! `decode(byte) * scale[j]` (one rounding), as the panels' own decoder
//! writes it. AVX-512F where the CPU has it, a portable loop otherwise;
//! both decode by the same exact bit manipulation.

use crate::cpu::gemm::{Fp8Bits, Fp8Panels};
use crate::cpu::threads::parallel_for_cost;

/// Outputs per block: one register of f32.
const COLS: usize = 16;

/// `y[j] = sum_p x[p] W[j][p] + beta y[j]` for the `n` outputs.
///
/// # Panics
/// When `x` is not `k` long or `y` not `n` long.
pub(crate) fn gemv_fp8(w: &Fp8Panels, x: &[f32], beta: f32, y: &mut [f32]) {
    gemv_fp8_with(w, x, beta, y, vector());
}

/// Whether this CPU runs the AVX-512 kernel.
fn vector() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *HAS.get_or_init(|| crate::cpu::class::cpu_has!("avx512f"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// A pointer to the output shared by the threads, each writing its own
/// blocks of outputs.
#[derive(Clone, Copy)]
struct OutPtr(*mut f32);
// SAFETY: the threads write disjoint blocks of the output (see `gemv_fp8_with`).
unsafe impl Send for OutPtr {}
// SAFETY: as above.
unsafe impl Sync for OutPtr {}

impl OutPtr {
    /// The pointer (a method, so that a closure captures the whole
    /// `Sync` wrapper rather than its raw field).
    fn get(self) -> *mut f32 {
        self.0
    }
}

/// [`gemv_fp8`] on the AVX-512 kernel when `vector` (the caller checked
/// the CPU has it), the portable one otherwise.
pub(crate) fn gemv_fp8_with(w: &Fp8Panels, x: &[f32], beta: f32, y: &mut [f32], vector: bool) {
    let raw = w.raw();
    let (n, k) = (raw.n, raw.k);
    assert_eq!(x.len(), k, "gemv_fp8: {} inputs for k = {k}", x.len());
    assert_eq!(y.len(), n, "gemv_fp8: {} outputs for n = {n}", y.len());
    assert!(
        raw.nr.is_multiple_of(COLS) && raw.kc.is_multiple_of(16),
        "gemv_fp8: panels of {} x {}",
        raw.kc,
        raw.nr
    );
    let blocks = n.div_ceil(COLS);
    let out = OutPtr(y.as_mut_ptr());
    // about 16 multiply-adds per nanosecond (decoding included)
    parallel_for_cost(blocks, n * k / 16, |b| {
        let j0 = b * COLS;
        let cols = COLS.min(n - j0);
        let mut acc = [0f32; COLS];
        #[cfg(target_arch = "x86_64")]
        if vector {
            // SAFETY: `vector` only where the CPU has AVX-512F; the
            // block's bytes lie inside the panels (`dots_avx512` reads
            // rows `p < k` of the panel holding `j0..j0 + 16`, which
            // exist since the panels are whole).
            unsafe { dots_avx512(&raw, x, j0, &mut acc) };
        } else {
            dots(&raw, x, j0, &mut acc);
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = vector;
            dots(&raw, x, j0, &mut acc);
        }
        for (c, &a) in acc.iter().enumerate().take(cols) {
            // SAFETY: `j0 + c < n = y.len()`, and block `b` alone writes
            // outputs `j0..j0 + cols`.
            unsafe {
                let o = out.get().add(j0 + c);
                *o = if beta == 0.0 { a } else { *o * beta + a };
            }
        }
    });
}

/// Where row `p` of the 16 columns from `j0` (a multiple of 16) starts in
/// the panels.
#[inline(always)]
fn at(raw: &crate::cpu::gemm::Fp8Raw<'_>, p: usize, j0: usize) -> usize {
    let width = raw.scales.len();
    let k0 = p / raw.kc * raw.kc;
    let kc = raw.kc.min(raw.k - k0);
    k0 * width + (j0 / raw.nr) * kc * raw.nr + (p - k0) * raw.nr + j0 % raw.nr
}

/// The 16 outputs from `j0` into `acc`, portable (see the module docs for
/// the order of the sums).
fn dots(raw: &crate::cpu::gemm::Fp8Raw<'_>, x: &[f32], j0: usize, acc: &mut [f32; COLS]) {
    let k = raw.k;
    let kk = k / 16 * 16;
    let scales = &raw.scales[j0..j0 + COLS];
    let weight = |p: usize, c: usize| raw.bits.decode(raw.bytes[at(raw, p, j0) + c]) * scales[c];
    // lanes[l][c]: output c's partial sum of lane l
    let mut lanes = [[0f32; COLS]; 16];
    for p in 0..kk {
        let lane = &mut lanes[p % 16];
        for (c, s) in lane.iter_mut().enumerate() {
            *s = x[p].mul_add(weight(p, c), *s);
        }
    }
    let mut width = 8;
    while width > 0 {
        for l in 0..width {
            let upper = lanes[l + width];
            for (s, u) in lanes[l].iter_mut().zip(upper) {
                *s += u;
            }
        }
        width /= 2;
    }
    *acc = lanes[0];
    for (p, &xp) in x.iter().enumerate().take(k).skip(kk) {
        for (c, s) in acc.iter_mut().enumerate() {
            *s = xp.mul_add(weight(p, c), *s);
        }
    }
}

/// [`dots`] with AVX-512F: the same sums, 16 outputs to a register.
///
/// # Safety
/// The CPU has AVX-512F; `j0` is a multiple of 16 below `raw.n`; `x` is
/// `raw.k` long.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn dots_avx512(
    raw: &crate::cpu::gemm::Fp8Raw<'_>,
    x: &[f32],
    j0: usize,
    acc: &mut [f32; COLS],
) {
    use std::arch::x86_64::*;
    let k = raw.k;
    let kk = k / 16 * 16;
    let (shift, pow) = raw.bits.params();
    let pow = _mm512_set1_ps(pow);
    let shift = _mm512_set1_epi32(shift as i32);
    let low7 = _mm512_set1_epi32(0x7f);
    let sign_bit = _mm512_set1_epi32(0x80);
    let nan = _mm512_set1_ps(f32::NAN);
    let inf = _mm512_set1_ps(f32::INFINITY);
    let e4m3 = raw.bits == Fp8Bits::E4M3;
    let special = _mm512_set1_epi32(if e4m3 { 0x7f } else { 0x7c });
    assert!(j0 + COLS <= raw.scales.len() && x.len() == k);
    // SAFETY: 16 scales from `j0` (asserted).
    let scale = unsafe { _mm512_loadu_ps(raw.scales.as_ptr().add(j0)) };
    let bytes = raw.bytes;
    // the 16 weights of row `p`, decoded and scaled
    let row = |p: usize| {
        let i = at(raw, p, j0);
        assert!(i + COLS <= bytes.len());
        // SAFETY: 16 bytes from `i` (asserted); AVX-512F is enabled for
        // the enclosing function.
        unsafe {
            let v = _mm512_cvtepu8_epi32(_mm_loadu_si128(bytes.as_ptr().add(i).cast()));
            let mag = _mm512_and_si512(v, low7);
            let mut f = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_sllv_epi32(mag, shift)), pow);
            if e4m3 {
                f = _mm512_mask_mov_ps(f, _mm512_cmpeq_epi32_mask(mag, special), nan);
            } else {
                f = _mm512_mask_mov_ps(f, _mm512_cmpeq_epi32_mask(mag, special), inf);
                f = _mm512_mask_mov_ps(f, _mm512_cmpgt_epi32_mask(mag, special), nan);
            }
            let sign = _mm512_slli_epi32::<24>(_mm512_and_si512(v, sign_bit));
            f = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(f), sign));
            _mm512_mul_ps(f, scale)
        }
    };
    let mut lanes = [_mm512_setzero_ps(); 16];
    let mut p = 0;
    while p < kk {
        for (l, lane) in lanes.iter_mut().enumerate() {
            *lane = _mm512_fmadd_ps(_mm512_set1_ps(x[p + l]), row(p + l), *lane);
        }
        p += 16;
    }
    let mut width = 8;
    while width > 0 {
        for l in 0..width {
            lanes[l] = _mm512_add_ps(lanes[l], lanes[l + width]);
        }
        width /= 2;
    }
    let mut s = lanes[0];
    for (p, &xp) in x.iter().enumerate().skip(kk) {
        s = _mm512_fmadd_ps(_mm512_set1_ps(xp), row(p), s);
    }
    // SAFETY: `acc` holds 16 floats.
    unsafe { _mm512_storeu_ps(acc.as_mut_ptr(), s) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::gemm::{gemm_fp8_t, Fp8Bits};

    /// Bytes covering every pattern (NaNs and infinities excluded: a
    /// NaN's payload may differ between paths), odd sizes.
    fn weight(n: usize, k: usize, bits: Fp8Bits, seed: u32) -> Fp8Panels {
        let finite = |b: u8| match bits {
            Fp8Bits::E4M3 => b & 0x7f != 0x7f,
            Fp8Bits::E5M2 => b & 0x7c != 0x7c,
        };
        let mut s = seed;
        let bytes: Vec<u8> = (0..n * k)
            .map(|_| loop {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                let b = (s >> 24) as u8;
                if finite(b) {
                    break b;
                }
            })
            .collect();
        let scales: Vec<f32> = (0..n).map(|j| 0.01 + j as f32 * 0.37e-3).collect();
        Fp8Panels::new(n, k, &bytes, &scales, bits)
    }

    #[test]
    fn one_row_equals_the_decoded_gemm_bit_for_bit_on_every_path() {
        let paths: Vec<bool> = if vector() {
            vec![false, true]
        } else {
            vec![false]
        };
        // k past one panel block (256) with a tail, n not a multiple of 16
        for (n, k) in [(1, 1), (17, 15), (50, 16), (33, 300), (70, 530), (16, 512)] {
            for bits in [Fp8Bits::E4M3, Fp8Bits::E5M2] {
                let w = weight(n, k, bits, (n * 31 + k) as u32);
                let x: Vec<f32> = (0..k)
                    .map(|p| ((p * 7919) % 113) as f32 / 17.0 - 3.0)
                    .collect();
                for beta in [0.0, 1.0] {
                    let start: Vec<f32> = (0..n).map(|j| j as f32 * 0.5 - 2.0).collect();
                    let mut want = start.clone();
                    gemm_fp8_t(1, &x, &w, beta, &mut want);
                    for &v in &paths {
                        let mut got = start.clone();
                        gemv_fp8_with(&w, &x, beta, &mut got, v);
                        let b = |s: &[f32]| s.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                        assert_eq!(
                            b(&got),
                            b(&want),
                            "{n} x {k} {bits:?} beta {beta} vector {v}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn special_bytes_decode_as_the_format_says() {
        // every byte once (NaNs and infinities included): NaN where the
        // decoded weight is NaN, the same bits elsewhere
        for bits in [Fp8Bits::E4M3, Fp8Bits::E5M2] {
            let bytes: Vec<u8> = (0..=255).collect();
            let w = Fp8Panels::new(256, 1, &bytes, &[1.0; 256], bits);
            let paths: Vec<bool> = if vector() {
                vec![false, true]
            } else {
                vec![false]
            };
            for v in paths {
                let mut y = vec![0f32; 256];
                gemv_fp8_with(&w, &[1.0], 0.0, &mut y, v);
                for (b, &got) in y.iter().enumerate() {
                    // `0 + 1 x w`: a negative zero sums to +0
                    let want = bits.decode(b as u8) + 0.0;
                    if want.is_nan() {
                        assert!(got.is_nan(), "{bits:?} {b:#x}");
                    } else {
                        assert_eq!(got.to_bits(), want.to_bits(), "{bits:?} {b:#x} vector {v}");
                    }
                }
            }
        }
    }
}
