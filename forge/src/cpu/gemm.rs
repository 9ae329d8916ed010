//! Matrix multiplication: `matrixmultiply` for the general case, split across
//! threads so that each operand is packed once per part, and forge's own
//! loops for thin shapes, where a packed general kernel wastes most of its
//! work.
//!
//! Paths, chosen from the shapes and layouts only (never the thread count):
//! - `m == 1` or `n == 1` (a row vector times a matrix, batch-1 inference, a
//!   matrix times a column): a matrix-vector loop, either `y += x[p] row_p`
//!   over contiguous rows or dot products over contiguous columns.
//! - `n <= 16` (an output layer with 10 classes): the `k x n` operand is
//!   packed once into one zero-padded 16-wide panel, and blocks of rows of
//!   `a` are broadcast against it.
//! - everything else: `matrixmultiply` (packing, cache blocking, AVX-512 /
//!   AVX2 micro-kernels). With several threads the product is cut into as
//!   many parts as threads, along whichever of `m` or `n` partitions the
//!   larger operand, so the large operand is packed exactly once in total.
//!
//! # Bit-identical for every thread count
//! In every path each output element is the sum of its `k` products in
//! increasing `k` order (`matrixmultiply` in fixed blocks of its own `kc`,
//! independent of `m` and `n`; the dot products in fixed 16-lane partial
//! sums), computed the same way whichever part, block or edge tile it falls
//! in. So where the work is cut (and so how many threads share it) does not
//! change a single bit; `tests::partition_does_not_change_bits` pins this.

use super::threads::{num_threads, parallel_for, PARALLEL_MIN_NS};
use crate::base::Float;

/// Multiply-adds per nanosecond one thread does on the packed path (about
/// 200 GFLOP/s, measured for 256-1024 on the benchmark machine), for the
/// cost estimate that decides whether a product is worth splitting (see
/// [`PARALLEL_MIN_NS`]).
const MACS_PER_NS: usize = 100;
/// The widest `n` the narrow path takes; also its panel width (lanes).
const LANES: usize = 16;
/// Rows per part of the thin paths when they run in parallel.
const THIN_ROWS_PER_PART: usize = 64;

/// A matrix operand: a pointer-free description of a row-major buffer that
/// may be read transposed.
#[derive(Clone, Copy, Debug)]
pub struct Mat<'a, E> {
    /// The elements.
    pub data: &'a [E],
    /// Row stride of the logical (possibly transposed) matrix.
    pub rs: usize,
    /// Column stride of the logical matrix.
    pub cs: usize,
}

impl<'a, E> Mat<'a, E> {
    /// A row-major `rows x cols` matrix.
    ///
    /// ```
    /// let m = forge::cpu::gemm::Mat::row_major(&[1.0f32, 2.0, 3.0, 4.0], 2);
    /// assert_eq!((m.rs, m.cs), (2, 1));
    /// ```
    pub fn row_major(data: &'a [E], cols: usize) -> Self {
        Mat {
            data,
            rs: cols,
            cs: 1,
        }
    }

    /// The transpose of a row-major `rows x cols` matrix (so it reads as
    /// `cols x rows`).
    ///
    /// ```
    /// let m = forge::cpu::gemm::Mat::transposed(&[1.0f32, 2.0, 3.0, 4.0], 2);
    /// assert_eq!((m.rs, m.cs), (1, 2));
    /// ```
    pub fn transposed(data: &'a [E], cols: usize) -> Self {
        Mat {
            data,
            rs: 1,
            cs: cols,
        }
    }

    /// The same matrix read transposed.
    fn t(self) -> Self {
        Mat {
            data: self.data,
            rs: self.cs,
            cs: self.rs,
        }
    }
}

/// `c = a b + beta c`, `a` is `m x k`, `b` is `k x n`, `c` is row-major
/// `m x n`. Uses up to [`num_threads`](super::num_threads) threads; the
/// result is bit-identical for every thread count.
///
/// # Panics
/// When a buffer is too small for the given sizes and strides.
///
/// ```
/// use forge::cpu::gemm::{gemm, Mat};
/// let a = [1.0f64, 2.0, 3.0, 4.0];
/// let b = [1.0f64, 0.0, 0.0, 1.0];
/// let mut c = [0.0f64; 4];
/// gemm(2, 2, 2, Mat::row_major(&a, 2), Mat::row_major(&b, 2), 0.0, &mut c);
/// assert_eq!(c, a);
/// ```
pub fn gemm<E: Float>(m: usize, k: usize, n: usize, a: Mat<E>, b: Mat<E>, beta: E, c: &mut [E]) {
    gemm_threads(m, k, n, a, b, beta, c, num_threads());
}

/// `count` products `c_i = a_i b_i + beta c_i` of the same shapes (`a_i` is
/// `m x k`, `b_i` is `k x n`), `c_i` row-major at `c[i * m * n..]`. Small
/// products run whole on one thread each, in parallel across `i` (the
/// per-head attention products); large ones run one after the other, each
/// split across the threads. Bit-identical for every thread count.
///
/// # Panics
/// When `c` is shorter than `count * m * n` or an operand buffer is too
/// small for its sizes and strides.
///
/// ```
/// use forge::cpu::gemm::{gemm_batched, Mat};
/// let a = [1.0f32, 2.0, 3.0, 4.0]; // two 1x2 rows
/// let b = [1.0f32, 1.0]; // one 2x1 column, shared
/// let mut c = [0.0f32; 2];
/// gemm_batched(2, 1, 2, 1, |i| Mat::row_major(&a[2 * i..2 * i + 2], 2), |_| Mat::row_major(&b, 1), 0.0, &mut c);
/// assert_eq!(c, [3.0, 7.0]);
/// ```
#[allow(clippy::too_many_arguments)]
pub fn gemm_batched<'a, E: Float>(
    count: usize,
    m: usize,
    k: usize,
    n: usize,
    a_of: impl Fn(usize) -> Mat<'a, E> + Sync,
    b_of: impl Fn(usize) -> Mat<'a, E> + Sync,
    beta: E,
    c: &mut [E],
) {
    let mn = m * n;
    assert!(c.len() >= count * mn, "gemm: output buffer too small");
    let threads = num_threads();
    let one = m * n * k / MACS_PER_NS;
    if count <= 1 || threads <= 1 || one >= PARALLEL_MIN_NS || one * count < PARALLEL_MIN_NS {
        for (i, ci) in c.chunks_mut(mn.max(1)).take(count).enumerate() {
            gemm_threads(m, k, n, a_of(i), b_of(i), beta, ci, threads);
        }
        return;
    }
    let c_ptr = SendPtr(c.as_mut_ptr());
    parallel_for(count, |i| {
        let p = c_ptr;
        // SAFETY: product `i` writes only `c[i * mn..(i + 1) * mn]`, inside
        // `c` (asserted above), and no two products share a range.
        let ci = unsafe { std::slice::from_raw_parts_mut(p.0.add(i * mn), mn) };
        gemm_threads(m, k, n, a_of(i), b_of(i), beta, ci, 1);
    });
}

/// Elements a strided `r x cc` matrix reaches.
fn extent<E>(mat: &Mat<E>, r: usize, cc: usize) -> usize {
    if r == 0 || cc == 0 {
        0
    } else {
        (r - 1) * mat.rs + (cc - 1) * mat.cs + 1
    }
}

/// [`gemm`] with an explicit thread budget.
#[allow(clippy::too_many_arguments)]
fn gemm_threads<E: Float>(
    m: usize,
    k: usize,
    n: usize,
    a: Mat<E>,
    b: Mat<E>,
    beta: E,
    c: &mut [E],
    threads: usize,
) {
    assert!(
        a.data.len() >= extent(&a, m, k),
        "gemm: lhs buffer too small"
    );
    assert!(
        b.data.len() >= extent(&b, k, n),
        "gemm: rhs buffer too small"
    );
    assert!(c.len() >= m * n, "gemm: output buffer too small");
    if m == 0 || n == 0 {
        return;
    }
    let c = &mut c[..m * n];
    if k == 0 {
        for x in c.iter_mut() {
            *x = if beta == E::zero() {
                E::zero()
            } else {
                *x * beta
            };
        }
        return;
    }
    let parallel = threads > 1 && m * n * k / MACS_PER_NS >= PARALLEL_MIN_NS;
    if m == 1 || n == 1 {
        // c (1 x n) = a_row b, or c (m x 1) = a b_col read as b_col^T a^T:
        // either way a vector `x` of length k times a k x len matrix `w`.
        let (x, w, len) = if m == 1 { (a, b, n) } else { (b.t(), a.t(), m) };
        let parts = if parallel {
            threads.min(len / THIN_ROWS_PER_PART).max(1)
        } else {
            1
        };
        split(len, parts, 1, c, |j0, cols, out| {
            let w = Mat {
                data: &w.data[j0 * w.cs..],
                rs: w.rs,
                cs: w.cs,
            };
            gemv(k, cols, x, w, beta, out);
        });
    } else if n <= LANES {
        let mut panel = super::Storage::<E>::zeroed(k * LANES);
        for (p, row) in panel.chunks_exact_mut(LANES).enumerate() {
            for (j, v) in row[..n].iter_mut().enumerate() {
                *v = b.data[p * b.rs + j * b.cs];
            }
        }
        let parts = if parallel {
            threads.min(m / THIN_ROWS_PER_PART).max(1)
        } else {
            1
        };
        split(m, parts, n, c, |i0, rows, out| {
            let a = Mat {
                data: &a.data[i0 * a.rs..],
                rs: a.rs,
                cs: a.cs,
            };
            narrow(rows, k, n, a, &panel, beta, out);
        });
    } else {
        let parts = if parallel { threads } else { 1 };
        if n <= m {
            // cut the rows: each part packs its rows of `a` and all of `b`
            split(m, parts, n, c, |i0, rows, out| {
                let a = Mat {
                    data: &a.data[i0 * a.rs..],
                    rs: a.rs,
                    cs: a.cs,
                };
                // SAFETY: `a` covers `rows x k` from row `i0` (the extent
                // asserted above), `b` covers `k x n`, `out` is `rows x n`
                // with row stride `n`.
                unsafe { packed(rows, k, n, a, b, beta, out.as_mut_ptr(), n) };
            });
        } else {
            // cut the columns: each part packs all of `a` and its columns of `b`
            let c_ptr = SendPtr(c.as_mut_ptr());
            let chunk = part_len(n, parts);
            parallel_for(n.div_ceil(chunk), |part| {
                let j0 = part * chunk;
                let cols = chunk.min(n - j0);
                let b = Mat {
                    data: &b.data[j0 * b.cs..],
                    rs: b.rs,
                    cs: b.cs,
                };
                let p = c_ptr;
                // SAFETY: part `part` writes columns `j0..j0 + cols` of every
                // row of the `m x n` output (row stride `n`); the column
                // ranges of the parts are disjoint and inside `c`.
                unsafe { packed(m, k, cols, a, b, beta, p.0.add(j0), n) };
            });
        }
    }
}

/// Part length for cutting `len` into `parts`, rounded up to a multiple of
/// 16 (the micro-kernels' tile) so that parts add no edge tiles.
fn part_len(len: usize, parts: usize) -> usize {
    len.div_ceil(parts.max(1))
        .next_multiple_of(16)
        .min(len)
        .max(1)
}

/// Cuts `rows` rows of the row-major output `c` (each `width` wide) into
/// `parts` ranges and runs `f(first_row, rows, rows_of_c)` on each, in
/// parallel when `parts > 1`.
fn split<E: Float>(
    rows: usize,
    parts: usize,
    width: usize,
    c: &mut [E],
    f: impl Fn(usize, usize, &mut [E]) + Sync,
) {
    if parts <= 1 {
        f(0, rows, c);
        return;
    }
    let chunk = part_len(rows, parts);
    let c_ptr = SendPtr(c.as_mut_ptr());
    parallel_for(rows.div_ceil(chunk), |part| {
        let r0 = part * chunk;
        let r = chunk.min(rows - r0);
        let p = c_ptr;
        // SAFETY: part `part` owns rows `r0..r0 + r` of `c`, which holds
        // `rows * width` elements; the ranges of the parts are disjoint.
        let out = unsafe { std::slice::from_raw_parts_mut(p.0.add(r0 * width), r * width) };
        f(r0, r, out);
    });
}

#[derive(Clone, Copy)]
struct SendPtr<E>(*mut E);
// SAFETY: used only to hand disjoint parts of one output buffer to the
// parallel_for workers, which finish before the buffer's borrow ends.
unsafe impl<E> Send for SendPtr<E> {}
// SAFETY: as above; the pointer is only copied, never dereferenced jointly.
unsafe impl<E> Sync for SendPtr<E> {}

/// `matrixmultiply` on one part.
///
/// # Safety
/// `a`, `b` must cover `m x k` and `k x n` with their strides and `c` must
/// point to an `m x n` matrix with row stride `ldc` that nothing else
/// accesses during the call.
#[allow(clippy::too_many_arguments)]
unsafe fn packed<E: Float>(
    m: usize,
    k: usize,
    n: usize,
    a: Mat<E>,
    b: Mat<E>,
    beta: E,
    c: *mut E,
    ldc: usize,
) {
    // SAFETY: guaranteed by the caller.
    unsafe {
        E::gemm_raw(
            m,
            k,
            n,
            E::one(),
            a.data.as_ptr(),
            a.rs as isize,
            a.cs as isize,
            b.data.as_ptr(),
            b.rs as isize,
            b.cs as isize,
            beta,
            c,
            ldc as isize,
            1,
        )
    }
}

/// `out = acc + beta out`, reading `out` only when `beta` is not zero (as
/// `matrixmultiply`, so an uninitialised-looking NaN is overwritten).
#[inline(always)]
fn store<E: Float>(out: &mut E, acc: E, beta: E) {
    *out = if beta == E::zero() {
        acc
    } else {
        *out * beta + acc
    };
}

// ---- Thin kernels -----------------------------------------------------------
// Each is a plain generic loop over fixed 16-lane arrays, instantiated inside
// functions compiled for AVX-512 or AVX2+FMA (chosen at run time) so that the
// arrays become vector registers and `mul_add` a fused multiply-add. The
// arithmetic is the same in every instantiation (`mul_add` is always fused),
// so the path taken never changes a result.

/// Defines `$name`, which runs `$generic` compiled for the widest
/// instruction set the CPU has (AVX-512, else AVX2 + FMA, else the target's
/// baseline), with `R` rows (or columns) per register block.
macro_rules! simd_dispatch {
    ($name:ident => $generic:ident ($($arg:ident : $ty:ty),*)) => {
        #[allow(clippy::too_many_arguments)]
        fn $name<E: Float>($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                fn wide<E: Float>($($arg: $ty),*) {
                    $generic::<E, 8>($($arg),*)
                }
                #[target_feature(enable = "avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                fn avx2<E: Float>($($arg: $ty),*) {
                    $generic::<E, 4>($($arg),*)
                }
                if std::arch::is_x86_feature_detected!("avx512f") {
                    // SAFETY: the CPU has every feature `wide` is compiled for.
                    return unsafe { wide::<E>($($arg),*) };
                }
                if std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                {
                    // SAFETY: the CPU has every feature `avx2` is compiled for.
                    return unsafe { avx2::<E>($($arg),*) };
                }
            }
            $generic::<E, 4>($($arg),*)
        }
    };
}

simd_dispatch!(gemv_rows_simd => gemv_rows(k: usize, len: usize, x: Mat<E>, w: Mat<E>, beta: E, out: &mut [E]));
simd_dispatch!(gemv_dots_simd => gemv_dots(k: usize, len: usize, x: Mat<E>, w: Mat<E>, beta: E, out: &mut [E]));
simd_dispatch!(narrow => narrow_rows(rows: usize, k: usize, n: usize, a: Mat<E>, panel: &[E], beta: E, out: &mut [E]));

/// `out[j] = sum_p x[p] w[p, j] + beta out[j]` for `j < len`.
fn gemv<E: Float>(k: usize, len: usize, x: Mat<E>, w: Mat<E>, beta: E, out: &mut [E]) {
    if w.cs == 1 {
        gemv_rows_simd(k, len, x, w, beta, out)
    } else if w.rs == 1 {
        #[cfg(target_arch = "x86_64")]
        if std::any::TypeId::of::<E>() == std::any::TypeId::of::<f32>()
            && x.cs == 1
            && std::arch::is_x86_feature_detected!("avx512f")
        {
            assert!(x.data.len() >= k && out.len() >= len);
            assert!(len == 0 || w.data.len() >= (len - 1) * w.cs + k);
            // SAFETY: `E` is `f32` (checked above), so these are the same
            // slices and value under their own type.
            let (xf, wf, of, bf) = unsafe {
                (
                    std::slice::from_raw_parts(x.data.as_ptr() as *const f32, k),
                    std::slice::from_raw_parts(w.data.as_ptr() as *const f32, w.data.len()),
                    std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut f32, len),
                    *(&beta as *const E as *const f32),
                )
            };
            // SAFETY: the CPU has AVX-512F; the extents are asserted above.
            unsafe { dots_f32_avx512(k, len, xf, wf, w.cs, bf, of) };
            return;
        }
        gemv_dots_simd(k, len, x, w, beta, out)
    } else {
        // neither rows nor columns contiguous: a plain loop in the same
        // order as `gemv_rows`
        for (j, o) in out[..len].iter_mut().enumerate() {
            let mut s = E::zero();
            for p in 0..k {
                s = x.data[p * x.cs].mul_add(w.data[p * w.rs + j * w.cs], s);
            }
            store(o, s, beta);
        }
    }
}

/// `gemv` when the rows of `w` are contiguous: `acc += x[p] * w[p, ..]`,
/// 4 x 16 columns at a time, each column summed in increasing `p`.
#[inline(always)]
fn gemv_rows<E: Float, const R: usize>(
    k: usize,
    len: usize,
    x: Mat<E>,
    w: Mat<E>,
    beta: E,
    out: &mut [E],
) {
    const S: usize = 4 * LANES;
    let mut j = 0;
    while j + S <= len {
        let mut acc = [E::zero(); S];
        for p in 0..k {
            let xv = x.data[p * x.cs];
            let row: &[E; S] = w.data[p * w.rs + j..p * w.rs + j + S]
                .try_into()
                .expect("S elements");
            for l in 0..S {
                acc[l] = xv.mul_add(row[l], acc[l]);
            }
        }
        for (o, &v) in out[j..j + S].iter_mut().zip(&acc) {
            store(o, v, beta);
        }
        j += S;
    }
    for (jj, o) in out[j..len].iter_mut().enumerate() {
        let mut s = E::zero();
        for p in 0..k {
            s = x.data[p * x.cs].mul_add(w.data[p * w.rs + j + jj], s);
        }
        store(o, s, beta);
    }
}

/// A dot product's end: the 16 partial sums added pairwise (lane `l` with
/// `l + 8`, then `+ 4`, `+ 2`, `+ 1`), then the products past `kk` in order.
#[inline(always)]
fn finish_dot<E: Float>(acc: &[E; LANES], x: &[E], col: &[E], kk: usize) -> E {
    let mut h = *acc;
    let mut width = LANES / 2;
    while width > 0 {
        for l in 0..width {
            h[l] += h[l + width];
        }
        width /= 2;
    }
    let mut s = h[0];
    for p in kk..x.len() {
        s = x[p].mul_add(col[p], s);
    }
    s
}

/// `gemv_dots` for f32 with AVX-512 intrinsics (the generic loop does not
/// vectorise well): the same partial sums, reduction and tail, so the same
/// bits.
///
/// # Safety
/// The CPU must support AVX-512F; `x` has `k` elements, column `j < len` of
/// `w` is `w[j * ldw..j * ldw + k]`, `out` has `len` elements.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn dots_f32_avx512(
    k: usize,
    len: usize,
    x: &[f32],
    w: &[f32],
    ldw: usize,
    beta: f32,
    out: &mut [f32],
) {
    use std::arch::x86_64::{
        _mm512_fmadd_ps, _mm512_loadu_ps, _mm512_setzero_ps, _mm512_storeu_ps,
    };
    let kk = k / LANES * LANES;
    let (xp, wp) = (x.as_ptr(), w.as_ptr());
    let mut j = 0;
    while j < len {
        let nb = 4.min(len - j);
        let mut acc = [_mm512_setzero_ps(); 4];
        let mut p = 0;
        while p < kk {
            // SAFETY: `p + 16 <= kk <= k`: inside `x` and every column.
            unsafe {
                let xv = _mm512_loadu_ps(xp.add(p));
                for (b, a) in acc.iter_mut().enumerate().take(nb) {
                    *a = _mm512_fmadd_ps(xv, _mm512_loadu_ps(wp.add((j + b) * ldw + p)), *a);
                }
            }
            p += LANES;
        }
        for (b, a) in acc.iter().enumerate().take(nb) {
            let mut lanes = [0f32; LANES];
            // SAFETY: `lanes` holds 16 floats.
            unsafe { _mm512_storeu_ps(lanes.as_mut_ptr(), *a) };
            let col = &w[(j + b) * ldw..(j + b) * ldw + k];
            store(&mut out[j + b], finish_dot(&lanes, x, col, kk), beta);
        }
        j += nb;
    }
}

/// `acc[l] += x[l] y[l]`, fused, lane by lane.
#[inline(always)]
fn fma_lanes<E: Float>(acc: &mut [E; LANES], x: &[E; LANES], y: &[E; LANES]) {
    for l in 0..LANES {
        acc[l] = x[l].mul_add(y[l], acc[l]);
    }
}

/// `gemv` when the columns of `w` are contiguous: dot products of `x` with
/// columns of `w`, four at a time, in 16 partial sums (lane `l` takes
/// `p = l mod 16`) added pairwise at the end, then the tail of `k`.
#[inline(always)]
fn gemv_dots<E: Float, const R: usize>(
    k: usize,
    len: usize,
    x: Mat<E>,
    w: Mat<E>,
    beta: E,
    out: &mut [E],
) {
    let xs: Vec<E>;
    let x: &[E] = if x.cs == 1 {
        &x.data[..k]
    } else {
        xs = (0..k).map(|p| x.data[p * x.cs]).collect();
        &xs
    };
    assert!(len == 0 || w.data.len() >= (len - 1) * w.cs + k && out.len() >= len);
    let kk = k / LANES * LANES;
    let (xp, wp) = (x.as_ptr(), w.data.as_ptr());
    // SAFETY (every block below): column `j < len` of `w` is
    // `wp[j * w.cs..j * w.cs + k]` and `x` has `k` elements, both checked
    // above; loads are at `p + l < kk <= k`.
    let finish = |acc: &[E; LANES], j: usize| -> E {
        finish_dot(acc, x, &w.data[j * w.cs..j * w.cs + k], kk)
    };
    const B: usize = 4;
    let mut j = 0;
    while j + B <= len {
        let mut acc = [[E::zero(); LANES]; B];
        let mut p = 0;
        while p < kk {
            // SAFETY: see above.
            let (xv, c0, c1, c2, c3) = unsafe {
                let col = |b: usize| &*(wp.add((j + b) * w.cs + p) as *const [E; LANES]);
                (
                    &*(xp.add(p) as *const [E; LANES]),
                    col(0),
                    col(1),
                    col(2),
                    col(3),
                )
            };
            let [a0, a1, a2, a3] = &mut acc;
            fma_lanes(a0, xv, c0);
            fma_lanes(a1, xv, c1);
            fma_lanes(a2, xv, c2);
            fma_lanes(a3, xv, c3);
            p += LANES;
        }
        for (b, ab) in acc.iter().enumerate() {
            store(&mut out[j + b], finish(ab, j + b), beta);
        }
        j += B;
    }
    while j < len {
        let mut acc = [E::zero(); LANES];
        let mut p = 0;
        while p < kk {
            // SAFETY: see above.
            let (xv, cv) = unsafe {
                (
                    &*(xp.add(p) as *const [E; LANES]),
                    &*(wp.add(j * w.cs + p) as *const [E; LANES]),
                )
            };
            fma_lanes(&mut acc, xv, cv);
            p += LANES;
        }
        store(&mut out[j], finish(&acc, j), beta);
        j += 1;
    }
}

/// `out (rows x n) = a panel + beta out` where `panel` is `b` packed as
/// `k` rows of 16 (zero-padded past `n`), in blocks of `R` rows: each step
/// broadcasts `a[i, p]` against panel row `p`, so every output sums its
/// products in increasing `p`.
#[inline(always)]
fn narrow_rows<E: Float, const R: usize>(
    rows: usize,
    k: usize,
    n: usize,
    a: Mat<E>,
    panel: &[E],
    beta: E,
    out: &mut [E],
) {
    assert!(rows == 0 || k == 0 || a.data.len() > (rows - 1) * a.rs + (k - 1) * a.cs);
    assert!(panel.len() >= k * LANES && out.len() >= rows * n && n <= LANES);
    let (ap, pp) = (a.data.as_ptr(), panel.as_ptr());
    let block = |i: usize, acc: &mut [[E; LANES]; R], nr: usize| {
        for p in 0..k {
            // SAFETY: panel row `p < k` is `pp[p * 16..p * 16 + 16]` and
            // `a[i + r, p]` for `r < nr`, `i + nr <= rows` is inside the
            // extent checked above.
            let prow = unsafe { &*(pp.add(p * LANES) as *const [E; LANES]) };
            for (r, ar) in acc.iter_mut().enumerate().take(nr) {
                // SAFETY: as above.
                let av = unsafe { *ap.add((i + r) * a.rs + p * a.cs) };
                for l in 0..LANES {
                    ar[l] = av.mul_add(prow[l], ar[l]);
                }
            }
        }
    };
    let mut i = 0;
    while i < rows {
        let nr = R.min(rows - i);
        let mut acc = [[E::zero(); LANES]; R];
        if nr == R {
            block(i, &mut acc, R);
        } else {
            // the last rows one at a time: the same sums in the same order
            for (r, ar) in acc.iter_mut().enumerate().take(nr) {
                let mut one = [[E::zero(); LANES]; R];
                block(i + r, &mut one, 1);
                *ar = one[0];
            }
        }
        for (r, ar) in acc.iter().enumerate().take(nr) {
            for (o, &v) in out[(i + r) * n..(i + r + 1) * n].iter_mut().zip(ar) {
                store(o, v, beta);
            }
        }
        i += nr;
    }
}

#[cfg(test)]
mod tests;
