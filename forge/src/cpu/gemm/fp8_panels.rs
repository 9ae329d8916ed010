//! A weight held as 8-bit floats, multiplied by the packed f32 kernel
//! with its f32 panels made from the bytes in the packing step: the full
//! f32 weight never exists in memory.
//!
//! The layer's weight `W` is `[n, k]` (`x W^T`); the kernel reads `W^T`
//! (`k x n`) as `kc x NR` panels. [`Fp8Panels`] keeps the bytes in that
//! order (per `KC` block of `k`, per panel of [`NR`] columns, `kc` rows of
//! `NR` bytes, zero bytes past `n`), so packing a panel is a straight pass
//! over `kc x NR` bytes: each byte decoded to its exact `f32` value and
//! multiplied by its column's scale (one rounding), with AVX-512 16 bytes
//! at a time where the CPU has it, byte by byte otherwise; both decode by
//! the same bit manipulation, exact, so they write the same bits (NaN
//! payloads aside: a NaN byte gives a NaN).
//!
//! Decoding, exact: for `E4M3`, the byte's 7 magnitude bits shifted left
//! by 20 are the bits of an `f32` (normal or subnormal) equal to the value
//! times 2^-120 (the exponent field lands in the `f32`'s, the 3 mantissa
//! bits on top of its mantissa); multiplying by 2^120 is exact. `E5M2` the
//! same with a shift of 21 and 2^112. The special patterns (`E4M3`'s NaN
//! `S.1111.111`, `E5M2`'s infinities and NaNs `S.11111.xx`) are set apart.
//!
//! [`gemm_fp8_t`] has the bits of [`gemm`](super::gemm) with the decoded
//! weight `Mat::transposed(w, k)` (what a `Linear` holding those f32
//! values computes): with at least 2 rows and more than 16 columns it is
//! the same packed kernel with the same `k` blocks fed the same panel
//! values; with one row (a matrix-vector product, whose columns are
//! independent) the weight is decoded a block of rows at a time into a
//! pooled buffer and each block goes through `gemm`; at most 16 columns
//! (or on a CPU without AVX2 + FMA, where `gemm` has no packed kernel)
//! the whole weight is decoded into a pooled buffer for the call.

use super::packed_f32::{self, ASrc, Out, KC, NR};
use super::{gemm, macs_per_ns, num_threads, Mat, LANES, PARALLEL_MIN_NS};
use crate::cpu::memory::Storage;

/// An 8-bit float encoding the panels decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fp8Bits {
    /// `float8_e4m3fn`: bias 7, 3 mantissa bits, NaN `S.1111.111`, no
    /// infinities.
    E4M3,
    /// `float8_e5m2`: bias 15, 2 mantissa bits, infinities `S.11111.00`,
    /// NaNs `S.11111.xx`.
    E5M2,
}

impl Fp8Bits {
    /// `(shift, power)`: the shift that puts the magnitude bits on the
    /// `f32`'s exponent and mantissa fields, and the power of two that
    /// rebiases the exponent (2^(127 - bias)).
    pub(crate) fn params(self) -> (u32, f32) {
        match self {
            // 2^120 and 2^112
            Fp8Bits::E4M3 => (20, f32::from_bits((127 + 120) << 23)),
            Fp8Bits::E5M2 => (21, f32::from_bits((127 + 112) << 23)),
        }
    }

    /// The value of `b`, exact (see the module docs).
    pub(crate) fn decode(self, b: u8) -> f32 {
        let (shift, pow) = self.params();
        let mag = u32::from(b & 0x7f);
        let v = match self {
            Fp8Bits::E4M3 if mag == 0x7f => f32::NAN,
            Fp8Bits::E5M2 if mag == 0x7c => f32::INFINITY,
            Fp8Bits::E5M2 if mag > 0x7c => f32::NAN,
            _ => f32::from_bits(mag << shift) * pow,
        };
        f32::from_bits(v.to_bits() | (u32::from(b & 0x80) << 24))
    }
}

/// A `[n, k]` weight of 8-bit floats with one scale per row, in the
/// kernel's panel order (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct Fp8Panels {
    k: usize,
    n: usize,
    bits: Fp8Bits,
    /// `k` rows of `n` rounded up to whole panels, block by block.
    bytes: Vec<u8>,
    /// One per column of `W^T` (row of `W`), zero past `n`.
    scales: Vec<f32>,
}

/// [`Fp8Panels`]' storage: element `(p, j)` of `W^T` (`p < k`, `j < n`)
/// is `bytes[k0 * width + (j / nr) * kc' * nr + (p - k0) * nr + j % nr]`
/// with `k0 = p / kc * kc`, `kc' = min(kc, k - k0)` and `width =
/// scales.len()` (`n` rounded up to whole panels of `nr`); its value is
/// `bits.decode(byte) * scales[j]`.
pub(crate) struct Fp8Raw<'a> {
    /// Rows of `W` (columns of `W^T`).
    pub(crate) n: usize,
    /// Columns of `W`.
    pub(crate) k: usize,
    /// The encoding.
    pub(crate) bits: Fp8Bits,
    /// The panels.
    pub(crate) bytes: &'a [u8],
    /// One scale per column of `W^T`, zero past `n`.
    pub(crate) scales: &'a [f32],
    /// The `k` block of the panels.
    pub(crate) kc: usize,
    /// The panel width.
    pub(crate) nr: usize,
}

impl Fp8Panels {
    /// The panels of a row-major `[n, k]` weight of bytes `w` with row
    /// scales `scales` (`n` of them).
    ///
    /// # Panics
    /// When `w` is not `n x k` bytes or `scales` not `n` long.
    pub(crate) fn new(n: usize, k: usize, w: &[u8], scales: &[f32], bits: Fp8Bits) -> Self {
        assert_eq!(
            w.len(),
            n * k,
            "Fp8Panels: {} bytes for [{n}, {k}]",
            w.len()
        );
        assert_eq!(
            scales.len(),
            n,
            "Fp8Panels: {} scales for {n} rows",
            scales.len()
        );
        let width = n.div_ceil(NR) * NR;
        let mut bytes = vec![0u8; k * width];
        for (j, row) in w.chunks_exact(k.max(1)).enumerate().take(n) {
            for (p, &b) in row.iter().enumerate() {
                bytes[Self::offset(k, width, p, j)] = b;
            }
        }
        let mut col = vec![0f32; width];
        col[..n].copy_from_slice(scales);
        Fp8Panels {
            k,
            n,
            bits,
            bytes,
            scales: col,
        }
    }

    /// Where element `(p, j)` of `W^T` lies in the panel order of a
    /// `k x width` matrix.
    fn offset(k: usize, width: usize, p: usize, j: usize) -> usize {
        let k0 = p / KC * KC;
        let kc = KC.min(k - k0);
        k0 * width + (j / NR) * kc * NR + (p - k0) * NR + j % NR
    }

    /// The panels as they are held, for a kernel that reads the bytes in
    /// place (the one-row product, `cpu::qgemm::fp8_gemv`).
    pub(crate) fn raw(&self) -> Fp8Raw<'_> {
        Fp8Raw {
            n: self.n,
            k: self.k,
            bits: self.bits,
            bytes: &self.bytes,
            scales: &self.scales,
            kc: KC,
            nr: NR,
        }
    }

    /// The `n` row scales.
    pub(crate) fn row_scales(&self) -> &[f32] {
        &self.scales[..self.n]
    }

    /// `(n, k)`.
    pub(crate) fn dims(&self) -> (usize, usize) {
        (self.n, self.k)
    }

    /// The bytes held: the panels (columns rounded up to whole panels) and
    /// the column scales.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes.len() + self.scales.len() * 4
    }

    /// The row-major `[n, k]` bytes.
    pub(crate) fn row_major(&self) -> Vec<u8> {
        let width = self.scales.len();
        let mut out = vec![0u8; self.n * self.k];
        for (j, row) in out.chunks_exact_mut(self.k.max(1)).enumerate().take(self.n) {
            for (p, v) in row.iter_mut().enumerate() {
                *v = self.bytes[Self::offset(self.k, width, p, j)];
            }
        }
        out
    }

    /// Writes the `kc x NR` panel of `W^T` at rows `k0..k0 + kc`, columns
    /// `j0..j0 + NR` into `dst`: each byte decoded times its column's
    /// scale (zero past `n`).
    ///
    /// # Panics
    /// When the block is not one of the kernel's (`k0` a multiple of `KC`,
    /// `kc = min(KC, k - k0)`, `j0` a multiple of `NR`) or `dst` is short.
    pub(crate) fn pack_panel(&self, k0: usize, kc: usize, j0: usize, dst: &mut [f32]) {
        assert!(
            k0.is_multiple_of(KC) && kc == KC.min(self.k - k0) && j0.is_multiple_of(NR),
            "Fp8Panels: panel ({k0}, {kc}, {j0}) is not the kernel's"
        );
        let width = self.scales.len();
        let at = k0 * width + (j0 / NR) * kc * NR;
        let src = &self.bytes[at..at + kc * NR];
        let scales: &[f32; NR] = self.scales[j0..j0 + NR].try_into().expect("NR scales");
        decode_panel(self.bits, src, scales, &mut dst[..kc * NR], avx512());
    }

    /// [`pack_panel`](Self::pack_panel) for the weight made of rows
    /// `row0..` of `W` (a group of a grouped convolution's output
    /// channels): the panel of its transpose at rows `k0..k0 + kc`,
    /// columns `j0..j0 + NR` of that weight, i.e. rows `row0 + j0..` of
    /// `W` (zero past `n`). The same values `pack_panel` writes for them:
    /// where `row0` is not a multiple of the panel width the panel
    /// straddles two held panels and is decoded byte by byte (the same
    /// exact decode, one rounding by the scale).
    ///
    /// # Panics
    /// As `pack_panel`.
    pub(crate) fn pack_panel_rows(
        &self,
        row0: usize,
        k0: usize,
        kc: usize,
        j0: usize,
        dst: &mut [f32],
    ) {
        if row0.is_multiple_of(NR) {
            return self.pack_panel(k0, kc, row0 + j0, dst);
        }
        assert!(
            k0.is_multiple_of(KC) && kc == KC.min(self.k - k0) && j0.is_multiple_of(NR),
            "Fp8Panels: panel ({k0}, {kc}, {j0}) is not the kernel's"
        );
        let width = self.scales.len();
        let dst = &mut dst[..kc * NR];
        for q in 0..NR {
            let j = row0 + j0 + q;
            for p in 0..kc {
                dst[p * NR + q] = if j < self.n {
                    let b = self.bytes[Self::offset(self.k, width, k0 + p, j)];
                    self.bits.decode(b) * self.scales[j]
                } else {
                    0.0
                };
            }
        }
    }

    /// The panel width: a panel holds this many rows of `W` (columns of
    /// `W^T`).
    pub(crate) const WIDTH: usize = NR;

    /// Every panel decoded in turn, `KC` blocks of `k` in increasing
    /// order and the panels of each block left to right: `f(k0, j0,
    /// panel)` with `panel` the `kc x WIDTH` values of [`pack_panel`](Self::pack_panel)
    /// (`panel[p * WIDTH + q]` = `W[j0 + q, k0 + p]`, decoded times its
    /// scale, zero past `n`), for a kernel with its own packed layout.
    pub(crate) fn for_each_panel(&self, mut f: impl FnMut(usize, usize, &[f32])) {
        let mut panel = [0f32; KC * NR];
        let mut k0 = 0;
        while k0 < self.k {
            let kc = KC.min(self.k - k0);
            for j0 in (0..self.n).step_by(NR) {
                self.pack_panel(k0, kc, j0, &mut panel);
                f(k0, j0, &panel[..kc * NR]);
            }
            k0 += kc;
        }
    }

    /// Rows `j0..j0 + rows` of `W` decoded and scaled, row-major
    /// (`rows x k` floats of `out`): the values [`pack_panel`](Self::pack_panel)
    /// writes, in the layout of the weight.
    ///
    /// # Panics
    /// When the rows pass `n` or `out` is short.
    pub(crate) fn decode_rows(&self, j0: usize, rows: usize, out: &mut [f32]) {
        assert!(j0 + rows <= self.n && out.len() >= rows * self.k);
        let mut panel = [0f32; KC * NR];
        let mut k0 = 0;
        while k0 < self.k {
            let kc = KC.min(self.k - k0);
            let mut p0 = j0 / NR * NR;
            while p0 < j0 + rows {
                self.pack_panel(k0, kc, p0, &mut panel);
                for jj in p0.max(j0)..(p0 + NR).min(j0 + rows) {
                    let row = &mut out[(jj - j0) * self.k + k0..][..kc];
                    for (p, v) in row.iter_mut().enumerate() {
                        *v = panel[p * NR + jj - p0];
                    }
                }
                p0 += NR;
            }
            k0 += kc;
        }
    }
}

/// Whether this CPU decodes with AVX-512F.
fn avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *HAS.get_or_init(|| crate::cpu::class::cpu_has!("avx512f"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// `dst[r * NR + j] = decode(src[r * NR + j]) * scales[j]` for every row
/// `r` of the panel, with AVX-512 when `vector` (the CPU has it), else
/// byte by byte: the same bits.
fn decode_panel(bits: Fp8Bits, src: &[u8], scales: &[f32; NR], dst: &mut [f32], vector: bool) {
    assert_eq!(src.len(), dst.len(), "decode_panel: lengths");
    assert!(src.len().is_multiple_of(NR), "decode_panel: whole rows");
    #[cfg(target_arch = "x86_64")]
    if vector {
        // SAFETY: `vector` is true only where the CPU has AVX-512F
        // (`avx512()`, or a test that checked it); the lengths are
        // asserted above.
        unsafe { avx512_decode(bits, src, scales, dst) };
        return;
    }
    let _ = vector;
    for (s, d) in src.chunks_exact(NR).zip(dst.chunks_exact_mut(NR)) {
        for ((&b, v), &sc) in s.iter().zip(d.iter_mut()).zip(scales) {
            *v = bits.decode(b) * sc;
        }
    }
}

/// [`decode_panel`] with AVX-512F, 16 bytes at a time.
///
/// # Safety
/// The CPU has AVX-512F; `src` and `dst` are of the same length, a
/// multiple of [`NR`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn avx512_decode(bits: Fp8Bits, src: &[u8], scales: &[f32; NR], dst: &mut [f32]) {
    use std::arch::x86_64::*;
    let (shift, pow) = bits.params();
    let pow = _mm512_set1_ps(pow);
    let low7 = _mm512_set1_epi32(0x7f);
    let sign_bit = _mm512_set1_epi32(0x80);
    let nan = _mm512_set1_ps(f32::NAN);
    let inf = _mm512_set1_ps(f32::INFINITY);
    let special = _mm512_set1_epi32(match bits {
        Fp8Bits::E4M3 => 0x7f,
        Fp8Bits::E5M2 => 0x7c,
    });
    // SAFETY: `scales` holds NR = 32 floats: two loads of 16.
    let sc = unsafe {
        [
            _mm512_loadu_ps(scales.as_ptr()),
            _mm512_loadu_ps(scales.as_ptr().add(16)),
        ]
    };
    for i in 0..src.len() / 16 {
        // SAFETY: 16 bytes at `16 i` lie inside `src`, and 16 floats at
        // `16 i` inside `dst` (same length, a multiple of 16).
        unsafe {
            let b = _mm_loadu_si128(src.as_ptr().add(16 * i).cast());
            let v = _mm512_cvtepu8_epi32(b);
            let mag = _mm512_and_si512(v, low7);
            let mut f = _mm512_mul_ps(
                _mm512_castsi512_ps(_mm512_sllv_epi32(mag, _mm512_set1_epi32(shift as i32))),
                pow,
            );
            match bits {
                Fp8Bits::E4M3 => {
                    let is_nan = _mm512_cmpeq_epi32_mask(mag, special);
                    f = _mm512_mask_mov_ps(f, is_nan, nan);
                }
                Fp8Bits::E5M2 => {
                    let is_inf = _mm512_cmpeq_epi32_mask(mag, special);
                    let is_nan = _mm512_cmpgt_epi32_mask(mag, special);
                    f = _mm512_mask_mov_ps(f, is_inf, inf);
                    f = _mm512_mask_mov_ps(f, is_nan, nan);
                }
            }
            let sign = _mm512_slli_epi32::<24>(_mm512_and_si512(v, sign_bit));
            f = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(f), sign));
            let w = _mm512_mul_ps(f, sc[i % 2]);
            _mm512_storeu_ps(dst.as_mut_ptr().add(16 * i), w);
        }
    }
}

/// Rows of `W` decoded per block by the one-row path: about 128 KiB of
/// floats.
const BLOCK_FLOATS: usize = 32 * 1024;

/// `c = x W^T + beta c` (`x` row-major `m x k`, `c` row-major `m x n`)
/// with `W` the decoded, scaled weight of `w`: the bits of
/// [`gemm`](super::gemm) with that weight as `Mat::transposed(w, k)` (see
/// the module docs for how each shape runs).
///
/// # Panics
/// When `x` is shorter than `m x k` or `c` than `m x n`.
pub(crate) fn gemm_fp8_t(m: usize, x: &[f32], w: &Fp8Panels, beta: f32, c: &mut [f32]) {
    let (n, k) = w.dims();
    assert!(x.len() >= m * k, "gemm_fp8_t: lhs buffer too small");
    assert!(c.len() >= m * n, "gemm_fp8_t: output buffer too small");
    if m == 0 || n == 0 {
        return;
    }
    if k > 0 && m >= 2 && n > LANES && packed_f32::available() {
        let threads = num_threads();
        let parts = if threads > 1 && m * n * k / macs_per_ns::<f32>() >= PARALLEL_MIN_NS {
            threads
        } else {
            1
        };
        let pack = |k0: usize, kc: usize, j0: usize, dst: &mut [f32]| w.pack_panel(k0, kc, j0, dst);
        let out = Out::row_major(c.as_mut_ptr(), n);
        // SAFETY: `c` holds the `m x n` row-major output (asserted) and is
        // borrowed mutably for the call; `x` covers `m x k` (asserted).
        unsafe {
            packed_f32::gemm_core(
                m,
                k,
                n,
                ASrc::Mat(Mat::row_major(x, k)),
                &pack,
                beta,
                out,
                parts,
            )
        };
        return;
    }
    let a = Mat::row_major(x, k);
    if m == 1 {
        // a matrix-vector product: its columns are independent, so a block
        // of them at a time has the whole product's bits
        let rows = (BLOCK_FLOATS / k.max(1)).clamp(1, n);
        let mut buf = Storage::<f32>::stale(rows * k);
        let mut j0 = 0;
        while j0 < n {
            let r = rows.min(n - j0);
            w.decode_rows(j0, r, &mut buf);
            gemm(
                1,
                k,
                r,
                a,
                Mat::transposed(&buf[..r * k], k),
                beta,
                &mut c[j0..j0 + r],
            );
            j0 += r;
        }
        return;
    }
    let mut buf = Storage::<f32>::stale(n * k);
    w.decode_rows(0, n, &mut buf);
    gemm(m, k, n, a, Mat::transposed(&buf, k), beta, &mut c[..m * n]);
}

/// Test input: a random `[n, k]` fp8 weight with finite bytes (the NaN
/// and infinity patterns mapped to finite ones: NaN payloads are not
/// pinned) and the scales `s0 + ds j` per row, and its decoded values
/// ([`Fp8Panels::decode_rows`]), for the tests of the kernels that pack
/// from the bytes.
#[cfg(test)]
pub(crate) fn random_weight(
    rng: &mut crate::tensor::Rng,
    (n, k): (usize, usize),
    bits: Fp8Bits,
    (s0, ds): (f32, f32),
) -> (Fp8Panels, Vec<f32>) {
    let bytes: Vec<u8> = (0..n * k)
        .map(|_| match (rng.next_u64() >> 56) as u8 {
            b if b & 0x7f >= 0x7c => b & 0x83,
            b => b,
        })
        .collect();
    let scales: Vec<f32> = (0..n).map(|j| s0 + ds * j as f32).collect();
    let w = Fp8Panels::new(n, k, &bytes, &scales, bits);
    let mut dense = vec![0f32; n * k];
    w.decode_rows(0, n, &mut dense);
    (w, dense)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
        let mut rng = crate::tensor::Rng::new(seed);
        (0..len).map(|_| (rng.next_u64() >> 56) as u8).collect()
    }

    /// Both decoders write the same bits for every byte and format (a NaN
    /// as a NaN), a scale multiplied once.
    #[test]
    fn vector_and_scalar_decode_agree() {
        let src: Vec<u8> = (0..=255u8).collect();
        let scales: [f32; NR] = std::array::from_fn(|j| 0.37 * (j as f32 + 1.0) - 3.0);
        for bits in [Fp8Bits::E4M3, Fp8Bits::E5M2] {
            let mut scalar = vec![0f32; 256];
            decode_panel(bits, &src, &scales, &mut scalar, false);
            for (i, &v) in scalar.iter().enumerate() {
                let want = bits.decode(i as u8) * scales[i % NR];
                assert!(v.to_bits() == want.to_bits() || v.is_nan() && want.is_nan());
            }
            if !avx512() {
                continue;
            }
            let mut vector = vec![0f32; 256];
            decode_panel(bits, &src, &scales, &mut vector, true);
            for (i, (a, b)) in scalar.iter().zip(&vector).enumerate() {
                assert!(
                    a.to_bits() == b.to_bits() || a.is_nan() && b.is_nan(),
                    "{bits:?} byte {i:#x}: {a} vs {b}"
                );
            }
        }
    }

    /// The panel order round-trips, and `decode_rows` is the weight.
    /// The panels of a block of rows (a convolution group's) hold those
    /// rows' decoded values, zero past `n`: aligned blocks and blocks
    /// straddling two held panels, both `KC` blocks of `k`.
    #[test]
    fn row_block_panels_hold_the_rows() {
        let mut rng = crate::tensor::Rng::new(9);
        let (n, k) = (70, 300);
        let (w, dense) = random_weight(&mut rng, (n, k), Fp8Bits::E5M2, (0.02, 0.001));
        let mut panel = vec![f32::NAN; KC * NR];
        for row0 in [0, 3, 32, 35] {
            let rows = n - row0;
            let mut k0 = 0;
            while k0 < k {
                let kc = KC.min(k - k0);
                for j0 in (0..rows).step_by(NR) {
                    w.pack_panel_rows(row0, k0, kc, j0, &mut panel);
                    for p in 0..kc {
                        for q in 0..NR {
                            let j = row0 + j0 + q;
                            let want = if j < n { dense[j * k + k0 + p] } else { 0.0 };
                            let got = panel[p * NR + q];
                            assert!(got.to_bits() == want.to_bits(), "row0 {row0} k0 {k0} j {j}");
                        }
                    }
                }
                k0 += kc;
            }
        }
    }

    #[test]
    fn panels_hold_the_weight() {
        let (n, k) = (37, 300);
        let w = random_bytes(n * k, 1);
        let scales: Vec<f32> = (0..n).map(|j| 0.01 * (j as f32 + 1.0)).collect();
        let p = Fp8Panels::new(n, k, &w, &scales, Fp8Bits::E4M3);
        assert_eq!(p.row_major(), w);
        let mut rows = vec![0f32; 5 * k];
        p.decode_rows(30, 5, &mut rows);
        for j in 0..5 {
            for q in 0..k {
                let want = Fp8Bits::E4M3.decode(w[(30 + j) * k + q]) * scales[30 + j];
                let got = rows[j * k + q];
                assert!(got.to_bits() == want.to_bits() || got.is_nan() && want.is_nan());
            }
        }
    }

    /// `gemm_fp8_t` equals `gemm` with the decoded weight bit for bit, at 1
    /// and 2 threads, for every path (one row, few columns, the packed
    /// kernel) and odd sizes.
    #[test]
    fn products_equal_gemm_with_the_decoded_weight() {
        // the thread count is set below: no other test may change it meanwhile
        let _threads = crate::cpu::threads::lock_thread_count();
        let mut rng = crate::tensor::Rng::new(3);
        for (n, k) in [(72, 300), (13, 5), (33, 1), (100, 513)] {
            // finite bytes only (a NaN weight makes NaN outputs whose
            // payloads are not pinned)
            let w: Vec<u8> = random_bytes(n * k, 7)
                .into_iter()
                .map(|b| if b & 0x7f == 0x7f { 0x11 } else { b })
                .collect();
            let scales: Vec<f32> = (0..n).map(|_| rng.normal().abs() as f32 + 0.01).collect();
            let p = Fp8Panels::new(n, k, &w, &scales, Fp8Bits::E4M3);
            let mut dense = vec![0f32; n * k];
            p.decode_rows(0, n, &mut dense);
            for threads in [1, 2] {
                crate::cpu::set_num_threads(threads);
                for m in [1, 2, 13, 64] {
                    let x: Vec<f32> = (0..m * k).map(|_| rng.normal() as f32).collect();
                    let c0: Vec<f32> = (0..m * n).map(|_| rng.normal() as f32).collect();
                    for beta in [0.0, 1.0] {
                        let (mut c1, mut c2) = (c0.clone(), c0.clone());
                        gemm(
                            m,
                            k,
                            n,
                            Mat::row_major(&x, k),
                            Mat::transposed(&dense, k),
                            beta,
                            &mut c1,
                        );
                        gemm_fp8_t(m, &x, &p, beta, &mut c2);
                        assert!(c1 == c2, "n {n} k {k} m {m} threads {threads} beta {beta}");
                    }
                }
            }
        }
    }
}
