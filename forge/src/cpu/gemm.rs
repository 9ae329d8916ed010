//! Matrix multiplication: forge's own packed kernel for the general f32
//! case (on CPUs with AVX-512F or with AVX2 + FMA), `matrixmultiply` for the
//! rest, split across threads so that each operand is packed once, and
//! forge's own loops for thin shapes, where a packed general kernel wastes
//! most of its work.
//!
//! Paths, chosen from the shapes and layouts only (never the thread count):
//! - `m == 1` or `n == 1` (a row vector times a matrix, batch-1 inference, a
//!   matrix times a column): a matrix-vector loop, either `y += x[p] row_p`
//!   over contiguous rows or dot products over contiguous columns.
//! - `n <= 16` (an output layer with 10 classes): the `k x n` operand is
//!   packed once into one zero-padded 16-wide panel, and blocks of rows of
//!   `a` are broadcast against it.
//! - everything else in f32 on a CPU with AVX-512F, or with AVX2 and FMA:
//!   forge's packed kernel (`packed_f32`: a 12 x 32 register tile, `k` in
//!   blocks of 256, `b` packed once per block into pooled panels that the
//!   threads share, each thread packing its own rows of `a`). The AVX-512
//!   micro-kernel holds the tile in 24 registers of 16 lanes; the AVX2 one
//!   runs it as four passes of 6 x 16 (12 registers of 8 lanes) over the
//!   same packed panels, with the same bits. The set is detected once.
//! - everything else (f64, or a CPU with neither): `matrixmultiply`
//!   (packing, cache blocking, AVX-512 / AVX2 micro-kernels). With several
//!   threads the product is cut into as many parts as threads, along
//!   whichever of `m` or `n` partitions the larger operand, so the large
//!   operand is packed exactly once in total.
//!
//! # Bit-identical for every thread count
//! In every path each output element is the sum of its `k` products in
//! increasing `k` order (the packed kernel and `matrixmultiply` in fixed
//! blocks of their own `kc`, independent of `m` and `n`; the dot products
//! in fixed 16-lane partial sums), computed the same way whichever part,
//! block or edge tile it falls in. So where the work is cut (and so how
//! many threads share it) does not change a single bit;
//! `tests::partition_does_not_change_bits` pins this. Nor does the vector
//! width: the AVX2 versions of the packed kernel and of the f32 column dots
//! do each element's operations in the AVX-512 versions' order
//! (`packed_f32::tests::kernels_equal_the_scalar_order`,
//! `tests::dots_kernels_equal_the_portable_loop`). Which path a shape takes
//! does depend on the CPU (the packed kernel or `matrixmultiply`), and the
//! two sum in different blocks.

use super::threads::{num_threads, parallel_for, PARALLEL_MIN_NS};
use crate::base::Float;

/// Multiply-adds per nanosecond one thread sustains on `E`'s general path
/// here, for the cost estimate that decides whether a product is worth
/// splitting (see [`PARALLEL_MIN_NS`]): the packed f32 kernel's rate
/// ([`packed_f32::macs_per_ns`]: about 100 with AVX-512, 40 with AVX2),
/// half that for f64. An estimate above the real rate keeps products on
/// one thread that two would finish sooner (with AVX-512's 100 on an AVX2
/// core, a 64 x 128 x 384 product, 90 us of work, looked like 31 us).
fn macs_per_ns<E: Float>() -> usize {
    let rate = packed_f32::macs_per_ns();
    if std::mem::size_of::<E>() > 4 {
        rate / 2
    } else {
        rate
    }
}
/// The widest `n` the narrow path takes; also its panel width (lanes).
const LANES: usize = 16;

/// Whether [`gemm`] multiplies an `m x k` by `k x n` product of `E` with
/// the packed f32 kernel: `E` is `f32` on a CPU with AVX-512F or AVX2 +
/// FMA, `m >= 2`, `n > 16`, `k >= 1` (the other shapes take the thin and
/// narrow kernels). The weight cache and the serial strided product take
/// their paths on the same condition.
pub(crate) fn packed_f32_applies<E: Float>(m: usize, k: usize, n: usize) -> bool {
    std::any::TypeId::of::<E>() == std::any::TypeId::of::<f32>()
        && m >= 2
        && n > LANES
        && k >= 1
        && packed_f32::available()
}
/// The packed f32 kernel's register tile, `(rows, columns)` (12 x 32): a
/// product's rows are computed in whole tiles of 12 and its columns in
/// whole panels of 32, the padding of a last partial one included.
pub(crate) const PACKED_F32_TILE: (usize, usize) = (packed_f32::MR, packed_f32::NR);
/// Rows per part of the thin paths when they run in parallel.
const THIN_ROWS_PER_PART: usize = 64;
/// Multiply-adds per nanosecond one thread sustains in a matrix-vector
/// product, for its cost estimate: it does one multiply-add per matrix
/// element it reads, so it runs at the rate the cache or memory delivers
/// the matrix, not at the packed kernel's (whose estimate put GPT-2
/// small's 768 x 2304 batch-1 projection at 18 us, below
/// [`PARALLEL_MIN_NS`], and the batch-1 MLP's 784 x 512 layer at 4 us).
/// The batch-1 MLP (784 x 512, 512 x 256 and 256 x 10) ran at about 12
/// per ns on one thread of the Intel Xeon of model 207; at 10 its
/// 784 x 512 product (40 us) is split and its 512 x 256 one (13 us) is
/// not. Split by columns, each core keeps its part of the weight in its
/// own L2 and the bits stay (each output is one part's dot product):
/// `mlp infer 1` at 2 threads went from 0.043 to 0.022 ms a step (issue
/// 41, the fastest tenth of the steps, beside another job).
const THIN_MACS_PER_NS: usize = 10;

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
    pub fn row_major(data: &'a [E], cols: usize) -> Self {
        Mat {
            data,
            rs: cols,
            cs: 1,
        }
    }

    /// The transpose of a row-major `rows x cols` matrix (so it reads as
    /// `cols x rows`).
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
/// `m x n`. Uses up to [`num_threads`] threads; the
/// result is bit-identical for every thread count.
///
/// # Panics
/// When a buffer is too small for the given sizes and strides.
pub fn gemm<E: Float>(m: usize, k: usize, n: usize, a: Mat<E>, b: Mat<E>, beta: E, c: &mut [E]) {
    gemm_threads(m, k, n, a, b, beta, c, num_threads());
}

/// `c = a b + bias` (`bias` one value per column, `c` row-major `m x n`)
/// where [`gemm`] runs the packed f32 kernel (`E` is `f32` on a CPU with
/// AVX-512F or AVX2 + FMA, `m >= 2`, `n > 16`, `k >= 1`), the kernel
/// adding the bias (held in registers) to each tile's first block of
/// products as it stores them: exactly the bits of [`gemm`] with `beta = 1` over `c`
/// holding `bias` in every row, without that pass over `c`. `false`, with
/// nothing written, elsewhere (then fill `c` and call [`gemm`]).
///
/// # Panics
/// When a buffer is too small for the given sizes and strides, or `bias`
/// is shorter than `n`.
pub(crate) fn gemm_bias<E: Float>(
    m: usize,
    k: usize,
    n: usize,
    a: Mat<E>,
    b: Mat<E>,
    bias: &[E],
    c: &mut [E],
) -> bool {
    use prepacked::as_f32;
    if m < 2 || n <= LANES || k == 0 || !packed_f32::available() {
        return false;
    }
    check_buffers(m, k, n, &a, &b, c);
    assert!(
        bias.len() >= n,
        "gemm: bias shorter than the output's columns"
    );
    let (Some(af), Some(bf), Some(biasf)) = (as_f32(a.data), as_f32(b.data), as_f32(bias)) else {
        return false;
    };
    let Some(cf) = prepacked::as_f32_mut(c) else {
        return false;
    };
    // the split `gemm_threads` makes for the same shape
    let threads = num_threads();
    let parallel = threads > 1 && m * n * k / macs_per_ns::<E>() >= PARALLEL_MIN_NS;
    let (am, bm) = (
        Mat {
            data: af,
            rs: a.rs,
            cs: a.cs,
        },
        Mat {
            data: bf,
            rs: b.rs,
            cs: b.cs,
        },
    );
    let parts = if parallel { threads } else { 1 };
    packed_f32::gemm_bias(m, k, n, am, bm, 0.0, Some(biasf), cf, parts);
    true
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
    let one = m * n * k / macs_per_ns::<E>();
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

/// Panics unless `a` (`m x k`), `b` (`k x n`) and `c` (`m x n`) hold the
/// elements the product reads and writes.
fn check_buffers<E: Float>(m: usize, k: usize, n: usize, a: &Mat<E>, b: &Mat<E>, c: &[E]) {
    assert!(
        a.data.len() >= extent(a, m, k),
        "gemm: lhs buffer too small"
    );
    assert!(
        b.data.len() >= extent(b, k, n),
        "gemm: rhs buffer too small"
    );
    assert!(c.len() >= m * n, "gemm: output buffer too small");
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
    check_buffers(m, k, n, &a, &b, c);
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
    let thin = m == 1 || n == 1;
    let parallel = threads > 1
        && (m * n * k / macs_per_ns::<E>() >= PARALLEL_MIN_NS
            // (an f64 matrix is twice the bytes per multiply-add)
            || thin && m * n * k * std::mem::size_of::<E>() / 4 / THIN_MACS_PER_NS >= PARALLEL_MIN_NS);
    if thin {
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
        if std::any::TypeId::of::<E>() == std::any::TypeId::of::<f32>() && packed_f32::available() {
            // SAFETY: `E` is `f32` (checked above), so these are the same
            // slices and value under their own type.
            let (af, bf, cf, betaf) = unsafe {
                let cast = |x: &[E]| std::slice::from_raw_parts(x.as_ptr() as *const f32, x.len());
                (
                    Mat {
                        data: cast(a.data),
                        rs: a.rs,
                        cs: a.cs,
                    },
                    Mat {
                        data: cast(b.data),
                        rs: b.rs,
                        cs: b.cs,
                    },
                    std::slice::from_raw_parts_mut(c.as_mut_ptr() as *mut f32, c.len()),
                    *(&beta as *const E as *const f32),
                )
            };
            packed_f32::gemm(m, k, n, af, bf, betaf, cf, parts);
            return;
        }
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

mod thin;
#[cfg(all(test, target_arch = "x86_64"))]
use thin::{dots_f32_avx2, dots_f32_avx512, DotsF32};
use thin::{gemv, narrow};
#[cfg(test)]
use thin::{gemv_dots, gemv_dots_simd, gemv_rows, gemv_rows_simd, narrow_rows};

mod fp8_panels;
#[cfg(test)]
pub(crate) use fp8_panels::random_weight as random_fp8_weight;
pub(crate) use fp8_panels::{gemm_fp8_t, Fp8Bits, Fp8Panels, Fp8Raw};
mod packed_f32;
mod prepacked;
pub(crate) use prepacked::PackedRhs;
mod serial_into;
pub(crate) use serial_into::{gemm_serial_into, serial_into_applies, serial_scratch, K_BLOCK};
pub(crate) mod prepared;
pub(crate) mod side_by_side;
mod weight_cache;
pub(crate) use weight_cache::gemm_weight_t;
#[cfg(test)]
pub(crate) use weight_cache::{holds_packed_weight, packed_f32_available};
#[cfg(test)]
mod tests;

/// The examples that documented these kernels while they were public.
#[cfg(test)]
mod examples {
    #[test]
    fn row_major() {
        let m = crate::cpu::gemm::Mat::row_major(&[1.0f32, 2.0, 3.0, 4.0], 2);
        assert_eq!((m.rs, m.cs), (2, 1));
    }

    #[test]
    fn transposed() {
        let m = crate::cpu::gemm::Mat::transposed(&[1.0f32, 2.0, 3.0, 4.0], 2);
        assert_eq!((m.rs, m.cs), (1, 2));
    }

    #[test]
    fn gemm() {
        use crate::cpu::gemm::{gemm, Mat};
        let a = [1.0f64, 2.0, 3.0, 4.0];
        let b = [1.0f64, 0.0, 0.0, 1.0];
        let mut c = [0.0f64; 4];
        gemm(
            2,
            2,
            2,
            Mat::row_major(&a, 2),
            Mat::row_major(&b, 2),
            0.0,
            &mut c,
        );
        assert_eq!(c, a);
    }

    #[test]
    fn gemm_batched() {
        use crate::cpu::gemm::{gemm_batched, Mat};
        let a = [1.0f32, 2.0, 3.0, 4.0]; // two 1x2 rows
        let b = [1.0f32, 1.0]; // one 2x1 column, shared
        let mut c = [0.0f32; 2];
        gemm_batched(
            2,
            1,
            2,
            1,
            |i| Mat::row_major(&a[2 * i..2 * i + 2], 2),
            |_| Mat::row_major(&b, 1),
            0.0,
            &mut c,
        );
        assert_eq!(c, [3.0, 7.0]);
    }
}
