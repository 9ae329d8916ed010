//! Activations to unsigned bytes for the int8 products:
//! `q = clamp(round_half_even(zero_point + x * (1 / scale)), 0, 255)`,
//! computed in `f32` as written (a multiply, then an add: never fused),
//! row by row into rows of [`padded_k`](super::padded_k) bytes.
//!
//! The AVX-512 path does the same two roundings (`vmulps`, `vaddps`),
//! rounds half to even (`vrndscaleps`), clamps with `max` then `min` in
//! that order (so a NaN becomes 0 and an infinity an end, as the scalar
//! `clamp` then `as u8` do) and converts exactly: the same bytes for
//! every input (`tests::quantize_paths_agree`).

use super::threads_cost;

/// Rows per parallel chunk.
const CHUNK_ROWS: usize = 16;

/// One value, the definition.
fn quantize_one(v: f32, inverse: f32, zp: f32) -> u8 {
    (zp + v * inverse).round_ties_even().clamp(0.0, 255.0) as u8
}

/// `x` (`rows` rows of `k`) quantized into `out` (`rows` rows of `kp`
/// bytes; the padding set to zero), with `scale` and `zero_point`; uses
/// the kernels' threads for large inputs.
///
/// # Panics
/// When `x` is not `rows x k`, `kp < k` or `out` is shorter than
/// `rows x kp`.
pub(crate) fn quantize_rows(
    x: &[f32],
    k: usize,
    kp: usize,
    scale: f32,
    zero_point: i32,
    out: &mut [u8],
) {
    assert!(
        k > 0 && kp >= k && x.len().is_multiple_of(k),
        "qgemm: quantize {} values in rows of {k} into rows of {kp}",
        x.len()
    );
    let rows = x.len() / k;
    assert!(
        out.len() >= rows * kp,
        "qgemm: {} bytes for {rows} x {kp}",
        out.len()
    );
    let inverse = 1.0 / scale;
    let zp = zero_point as f32;
    let isa = Path::detect();
    let out_ptr = super::SharedOut(out.as_mut_ptr().cast());
    threads_cost(rows.div_ceil(CHUNK_ROWS), rows * k / 4, |chunk| {
        let r0 = chunk * CHUNK_ROWS;
        for r in r0..(r0 + CHUNK_ROWS).min(rows) {
            // SAFETY: row `r` of `out` (`kp` bytes, inside the length
            // checked above) is written by this chunk alone.
            let row = unsafe {
                std::slice::from_raw_parts_mut(out_ptr.get().cast::<u8>().add(r * kp), kp)
            };
            quantize_row(isa, &x[r * k..][..k], inverse, zp, &mut row[..k]);
            row[k..].fill(0);
        }
    });
}

/// A path of this file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    /// AVX-512F.
    Avx512,
    /// Plain loops.
    Portable,
}

impl Path {
    fn detect() -> Path {
        #[cfg(target_arch = "x86_64")]
        if crate::cpu::class::cpu_has!("avx512f") {
            return Path::Avx512;
        }
        Path::Portable
    }
}

/// One row on `path`.
fn quantize_row(path: Path, x: &[f32], inverse: f32, zp: f32, out: &mut [u8]) {
    match path {
        #[cfg(target_arch = "x86_64")]
        Path::Avx512 => {
            // SAFETY: `Path::detect` saw AVX-512F; the kernel reads
            // `x.len()` floats and writes as many bytes (`out` is as long).
            unsafe { avx512(x, inverse, zp, out) }
        }
        _ => {
            for (q, &v) in out.iter_mut().zip(x) {
                *q = quantize_one(v, inverse, zp);
            }
        }
    }
}

/// # Safety
/// The CPU has AVX-512F; `out.len() == x.len()`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn avx512(x: &[f32], inverse: f32, zp: f32, out: &mut [u8]) {
    use std::arch::x86_64::*;
    assert_eq!(x.len(), out.len());
    let (inv, z) = (_mm512_set1_ps(inverse), _mm512_set1_ps(zp));
    let (lo, hi) = (_mm512_setzero_ps(), _mm512_set1_ps(255.0));
    let full = x.len() / 16 * 16;
    for i in (0..full).step_by(16) {
        // SAFETY: `i + 16 <= x.len() == out.len()`.
        unsafe {
            let v = _mm512_loadu_ps(x.as_ptr().add(i));
            let t = _mm512_add_ps(z, _mm512_mul_ps(v, inv));
            let r = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(t);
            // max(r, 0) takes 0 for a NaN `r` (the second operand), then
            // min(., 255): NaN -> 0, -inf -> 0, +inf -> 255, as `clamp`
            // then `as u8`.
            let c = _mm512_min_ps(_mm512_max_ps(r, lo), hi);
            let b = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(c));
            _mm_storeu_si128(out.as_mut_ptr().add(i).cast(), b);
        }
    }
    for i in full..x.len() {
        out[i] = quantize_one(x[i], inverse, zp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantize_paths_agree() {
        let mut x: Vec<f32> = (0..1000)
            .map(|i| ((i * 7919) % 2001) as f32 * 0.013 - 13.0)
            .collect();
        // halves (ties), the ends, and what only a careful clamp gets right
        x.extend([0.5, 1.5, 2.5, -0.5, 127.5, 128.5, 254.5, 255.5, 1e30, -1e30]);
        x.extend([
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            f32::MIN_POSITIVE,
        ]);
        x.resize(1040, 3.25);
        for (scale, zp) in [(0.1f32, 128), (1.0, 0), (0.0372, 37), (1.0, 255)] {
            let (k, kp) = (52, 56);
            let inverse = 1.0 / scale;
            let mut want = vec![0u8; x.len() / k * kp];
            for (r, xs) in x.chunks_exact(k).enumerate() {
                for (p, &v) in xs.iter().enumerate() {
                    want[r * kp + p] = quantize_one(v, inverse, zp as f32);
                }
            }
            for path in [Path::Portable, Path::detect()] {
                let mut got = vec![7u8; want.len()];
                let rows = x.len() / k;
                for r in 0..rows {
                    quantize_row(
                        path,
                        &x[r * k..][..k],
                        inverse,
                        zp as f32,
                        &mut got[r * kp..][..k],
                    );
                    got[r * kp + k..(r + 1) * kp].fill(0);
                }
                assert_eq!(got, want, "{path:?}, scale {scale}, zero point {zp}");
            }
            let mut got = vec![7u8; want.len()];
            quantize_rows(&x, k, kp, scale, zp, &mut got);
            assert_eq!(got, want);
        }
    }
}
