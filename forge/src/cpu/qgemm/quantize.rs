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
    let out_ptr = super::SharedOut(out.as_mut_ptr());
    threads_cost(rows.div_ceil(CHUNK_ROWS), rows * k / 4, |chunk| {
        let r0 = chunk * CHUNK_ROWS;
        for r in r0..(r0 + CHUNK_ROWS).min(rows) {
            // SAFETY: row `r` of `out` (`kp` bytes, inside the length
            // checked above) is written by this chunk alone.
            let row = unsafe { std::slice::from_raw_parts_mut(out_ptr.get().add(r * kp), kp) };
            quantize_row(isa, &x[r * k..][..k], inverse, zp, &mut row[..k]);
            row[k..].fill(0);
        }
    });
}

/// Values per parallel chunk of [`range`].
const RANGE_CHUNK: usize = 1 << 15;

/// The smallest and largest values of `x` (NaNs skipped, as `f32::min`
/// and `max` do; `(inf, -inf)` when there is no other value), with a zero
/// of either sign returned as `+0`, so the result does not depend on the
/// order the values are met in: the same on every path and for any thread
/// count. Uses the kernels' threads for large inputs.
pub(crate) fn range(x: &[f32]) -> (f32, f32) {
    let path = Path::detect();
    let chunks = x.len().div_ceil(RANGE_CHUNK);
    let mut parts = vec![(f32::INFINITY, f32::NEG_INFINITY); chunks];
    let parts_ptr = super::SharedOut(parts.as_mut_ptr());
    // about 16 values per nanosecond
    threads_cost(chunks, x.len() / 16, |chunk| {
        let xs = &x[chunk * RANGE_CHUNK..x.len().min((chunk + 1) * RANGE_CHUNK)];
        let part = range_on(path, xs);
        // SAFETY: element `chunk` of `parts` (`chunks` long) is written by
        // this chunk alone, and `parts` outlives the loop.
        unsafe { *parts_ptr.get().add(chunk) = part };
    });
    let (lo, hi) = parts
        .iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &(l, h)| {
            (lo.min(l), hi.max(h))
        });
    // -0 + 0 = +0: which zero a min or max keeps depends on the order
    (lo + 0.0, hi + 0.0)
}

/// [`range`] of one chunk on `path` (zeros of either sign).
fn range_on(path: Path, x: &[f32]) -> (f32, f32) {
    match path {
        #[cfg(target_arch = "x86_64")]
        Path::Avx512 => {
            // SAFETY: `Path::detect` saw AVX-512F; the kernel reads only
            // inside `x`.
            unsafe { range_avx512(x) }
        }
        _ => x
            .iter()
            .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &v| {
                (lo.min(v), hi.max(v))
            }),
    }
}

/// # Safety
/// The CPU has AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn range_avx512(x: &[f32]) -> (f32, f32) {
    use std::arch::x86_64::*;
    // four bounds of each kind, 64 values a step: one pair of bounds waits
    // on its `vminps` / `vmaxps` of the step before (4 cycles), which held
    // the loop to 16 values per 4 cycles; min and max are exact and every
    // value meets a bound, so the result is the same
    let mut lo = [_mm512_set1_ps(f32::INFINITY); 4];
    let mut hi = [_mm512_set1_ps(f32::NEG_INFINITY); 4];
    let step = x.len() / 64 * 64;
    let full = x.len() / 16 * 16;
    for i in (0..step).step_by(64) {
        for (j, (l, h)) in lo.iter_mut().zip(&mut hi).enumerate() {
            // SAFETY: `i + 16 j + 16 <= i + 64 <= x.len()`.
            let v = unsafe { _mm512_loadu_ps(x.as_ptr().add(i + 16 * j)) };
            // `vminps` / `vmaxps` return the second operand when either is
            // a NaN: a NaN `v` leaves the running bound (never a NaN) as it
            // is.
            *l = _mm512_min_ps(v, *l);
            *h = _mm512_max_ps(v, *h);
        }
    }
    for i in (step..full).step_by(16) {
        // SAFETY: `i + 16 <= x.len()`.
        let v = unsafe { _mm512_loadu_ps(x.as_ptr().add(i)) };
        lo[0] = _mm512_min_ps(v, lo[0]);
        hi[0] = _mm512_max_ps(v, hi[0]);
    }
    let lo = _mm512_min_ps(_mm512_min_ps(lo[0], lo[1]), _mm512_min_ps(lo[2], lo[3]));
    let hi = _mm512_max_ps(_mm512_max_ps(hi[0], hi[1]), _mm512_max_ps(hi[2], hi[3]));
    let (mut l, mut h) = (_mm512_reduce_min_ps(lo), _mm512_reduce_max_ps(hi));
    for &v in &x[full..] {
        l = l.min(v);
        h = h.max(v);
    }
    (l, h)
}

/// The `f32` epilogue of an int8 product over row segments, on the path
/// chosen once when it is made (it runs once per segment of a micro-tile's
/// row): `y[j] = (acc[j] - offsets[j]) as f32 * scales[j] + bias[j]` for
/// the product's columns `j` (the `i32` difference wrapping, a multiply
/// then an add, never fused; `+ 0.0` without a bias), the same
/// element-wise arithmetic on every path.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dequantize<'a> {
    path: Path,
    offsets: &'a [i32],
    scales: &'a [f32],
    bias: Option<&'a [f32]>,
}

impl<'a> Dequantize<'a> {
    /// The epilogue of a product with `offsets.len()` columns, on this
    /// thread's CPU class's widest path.
    ///
    /// # Panics
    /// When the per-column terms' lengths differ.
    pub(crate) fn new(offsets: &'a [i32], scales: &'a [f32], bias: Option<&'a [f32]>) -> Self {
        Self::on(Path::detect(), offsets, scales, bias)
    }

    fn on(path: Path, offsets: &'a [i32], scales: &'a [f32], bias: Option<&'a [f32]>) -> Self {
        let n = offsets.len();
        assert!(
            scales.len() == n && bias.is_none_or(|b| b.len() == n),
            "qgemm: epilogue terms of {n}, {} and {:?} columns",
            scales.len(),
            bias.map(<[f32]>::len)
        );
        Dequantize {
            path,
            offsets,
            scales,
            bias,
        }
    }

    /// One segment: the sums `acc` of columns `j0..j0 + acc.len()` of one
    /// row into `y`.
    ///
    /// # Panics
    /// When `y` is not as long as `acc` or the columns are out of range.
    #[inline]
    pub(crate) fn run(&self, j0: usize, acc: &[i32], y: &mut [f32]) {
        let len = y.len();
        assert!(
            acc.len() == len && j0 <= self.offsets.len() && len <= self.offsets.len() - j0,
            "qgemm: epilogue of columns {j0}..+{len} ({} sums) of {}",
            acc.len(),
            self.offsets.len()
        );
        match self.path {
            #[cfg(target_arch = "x86_64")]
            Path::Avx512 => {
                // SAFETY: the path came from `Path::detect`, which saw
                // AVX-512F; columns `j0..j0 + len` of every term exist and
                // `acc` and `y` are `len` long (asserted above).
                unsafe {
                    dequantize_avx512(
                        acc,
                        self.offsets.as_ptr().add(j0),
                        self.scales.as_ptr().add(j0),
                        self.bias.map(|b| b.as_ptr().add(j0)),
                        y,
                    )
                }
            }
            _ => {
                let cols = j0..j0 + len;
                dequantize_loop(
                    acc,
                    &self.offsets[cols.clone()],
                    &self.scales[cols.clone()],
                    self.bias.map(|b| &b[cols]),
                    y,
                )
            }
        }
    }
}

/// The epilogue's definition, element by element.
fn dequantize_loop(
    acc: &[i32],
    offsets: &[i32],
    scales: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
) {
    let terms = y.iter_mut().zip(acc).zip(offsets).zip(scales);
    match bias {
        Some(b) => {
            for ((((yv, &a), &off), &s), &bv) in terms.zip(b) {
                *yv = a.wrapping_sub(off) as f32 * s + bv;
            }
        }
        None => {
            for (((yv, &a), &off), &s) in terms {
                *yv = a.wrapping_sub(off) as f32 * s + 0.0;
            }
        }
    }
}

/// [`dequantize_loop`] on 16 lanes at a time, the tail under a mask (the
/// same operations per element: `vpsubd`, `vcvtdq2ps`, `vmulps`,
/// `vaddps`, in that order).
///
/// # Safety
/// The CPU has AVX-512F; `offsets`, `scales` and `bias` (when given)
/// point at `y.len()` values each, and `acc.len() == y.len()`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn dequantize_avx512(
    acc: &[i32],
    offsets: *const i32,
    scales: *const f32,
    bias: Option<*const f32>,
    y: &mut [f32],
) {
    let len = y.len();
    let (src, dst) = (acc.as_ptr(), y.as_mut_ptr());
    let full = len / 16 * 16;
    for i in (0..full).step_by(16) {
        // SAFETY: lanes `i..i + 16` are inside every operand (caller).
        unsafe { dequantize_block::<true>(src, offsets, scales, bias, dst, i, 0xffff) }
    }
    if full < len {
        let mask = (1u16 << (len - full)) - 1;
        // SAFETY: the lanes under `mask` are `full..len`, inside every
        // operand (caller).
        unsafe { dequantize_block::<false>(src, offsets, scales, bias, dst, full, mask) }
    }
}

/// The 16 lanes at `i` of [`dequantize_avx512`], all of them (`FULL`:
/// plain loads and stores; masked stores are slow on some cores, Zen 4)
/// or those under `mask` (masked-off lanes neither read nor written).
///
/// # Safety
/// The CPU has AVX-512F; the lanes `i..i + 16` (those under `mask` when
/// not `FULL`) are inside every operand.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn dequantize_block<const FULL: bool>(
    acc: *const i32,
    offsets: *const i32,
    scales: *const f32,
    bias: Option<*const f32>,
    y: *mut f32,
    i: usize,
    mask: std::arch::x86_64::__mmask16,
) {
    use std::arch::x86_64::*;
    // SAFETY: the caller's contract.
    unsafe {
        let (a, o, s, b);
        if FULL {
            a = _mm512_loadu_si512(acc.add(i).cast());
            o = _mm512_loadu_si512(offsets.add(i).cast());
            s = _mm512_loadu_ps(scales.add(i));
            b = match bias {
                Some(b) => _mm512_loadu_ps(b.add(i)),
                None => _mm512_setzero_ps(),
            };
        } else {
            a = _mm512_maskz_loadu_epi32(mask, acc.add(i));
            o = _mm512_maskz_loadu_epi32(mask, offsets.add(i));
            s = _mm512_maskz_loadu_ps(mask, scales.add(i));
            b = match bias {
                Some(b) => _mm512_maskz_loadu_ps(mask, b.add(i)),
                None => _mm512_setzero_ps(),
            };
        }
        let v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(a, o)), s);
        let v = _mm512_add_ps(v, b);
        if FULL {
            _mm512_storeu_ps(y.add(i), v);
        } else {
            _mm512_mask_storeu_ps(y.add(i), mask, v);
        }
    }
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
    fn dequantize_paths_agree() {
        let n = 1000 + 13;
        let acc: Vec<i32> = (0..n as i32)
            .map(|i| i.wrapping_mul(2_654_435_761u32 as i32))
            .collect();
        let offsets: Vec<i32> = (0..n as i32).map(|i| i * 977 - 400_000).collect();
        let scales: Vec<f32> = (0..n).map(|i| 1e-4 * (1.0 + (i % 37) as f32)).collect();
        let bias: Vec<f32> = (0..n).map(|i| (i % 11) as f32 * 0.3 - 1.5).collect();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for b in [Some(&bias[..]), None] {
            let mut want = vec![0.0f32; n];
            for j in 0..n {
                want[j] =
                    acc[j].wrapping_sub(offsets[j]) as f32 * scales[j] + b.map_or(0.0, |b| b[j]);
            }
            for path in [Path::Portable, Path::detect()] {
                let epi = Dequantize::on(path, &offsets, &scales, b);
                // whole rows, and segments of every length up to 70 at
                // every offset mod 16 (the masked tails)
                let mut got = vec![f32::NAN; n];
                epi.run(0, &acc, &mut got);
                assert_eq!(bits(&got), bits(&want), "{path:?}, bias: {}", b.is_some());
                let mut got = vec![f32::NAN; n];
                let mut j0 = 0;
                for len in (0..71).cycle() {
                    let len = len.min(n - j0);
                    epi.run(j0, &acc[j0..j0 + len], &mut got[j0..j0 + len]);
                    j0 += len;
                    if j0 == n {
                        break;
                    }
                }
                assert_eq!(bits(&got), bits(&want), "{path:?} in segments");
            }
        }
    }

    #[test]
    fn range_skips_nans_and_agrees_on_every_path_and_thread_count() {
        // the thread count is set below: no other test may change it meanwhile
        let _threads = crate::cpu::threads::lock_thread_count();
        let mut x: Vec<f32> = (0..100_003)
            .map(|i| ((i * 7919) % 20011) as f32 * 0.013 - 130.0)
            .collect();
        x[5] = f32::NAN;
        x[70_000] = f32::NAN;
        x[99_999] = -1e30; // in the scalar tail of its chunk
        x[33] = 2e30;
        let want = x
            .iter()
            .fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), &v| {
                (l.min(v), h.max(v))
            });
        assert_eq!(want, (-1e30, 2e30));
        // the extremes in every lane of every bound of the vector loop,
        // and in its tails
        for at in 0..101 {
            let mut y = x[..203].to_vec();
            y[at] = 3e30;
            y[202 - at] = -3e30;
            let w = (-3e30, 3e30);
            for path in [Path::Portable, Path::detect()] {
                assert_eq!(range_on(path, &y), w, "{path:?}, extremes at {at}");
            }
        }
        for path in [Path::Portable, Path::detect()] {
            for xs in [&x[..], &x[..17], &x[3..40_000]] {
                let (l, h) = range_on(path, xs);
                let w = xs
                    .iter()
                    .fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), &v| {
                        (l.min(v), h.max(v))
                    });
                assert_eq!((l, h), w, "{path:?}, {} values", xs.len());
            }
        }
        // long enough to be split across threads
        let long: Vec<f32> = x.iter().cycle().take(12 * x.len()).copied().collect();
        for threads in [1, 2] {
            crate::cpu::set_num_threads(threads);
            assert_eq!(range(&x), want, "{threads} threads");
            assert_eq!(range(&long), want, "{threads} threads");
        }
        // all NaN: no bounds; zeros of either sign come back as +0
        let (l, h) = range(&[f32::NAN; 40]);
        assert_eq!((l, h), (f32::INFINITY, f32::NEG_INFINITY));
        let (l, h) = range(&[-0.0, 0.0, -0.0]);
        assert!(l == 0.0 && l.is_sign_positive() && h.is_sign_positive());
    }

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
