//! Matrix multiplication through `matrixmultiply`, split across threads in
//! fixed row blocks.

use super::threads::{num_threads, parallel_for};
use crate::base::Float;

/// Rows per parallel block. Fixed so that every output row is computed by the
/// same single-threaded call whatever the thread count.
const ROW_BLOCK: usize = 64;
/// Below this many multiply-adds a gemm runs on one thread.
const PARALLEL_MIN_WORK: usize = 1 << 18;

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
}

/// `c = a b + beta c`, `a` is `m x k`, `b` is `k x n`, `c` is row-major
/// `m x n`.
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
    let need = |mat: &Mat<E>, r: usize, cc: usize| {
        if r == 0 || cc == 0 {
            0
        } else {
            (r - 1) * mat.rs + (cc - 1) * mat.cs + 1
        }
    };
    assert!(a.data.len() >= need(&a, m, k), "gemm: lhs buffer too small");
    assert!(b.data.len() >= need(&b, k, n), "gemm: rhs buffer too small");
    assert!(c.len() >= m * n, "gemm: output buffer too small");
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        for x in c[..m * n].iter_mut() {
            *x *= beta;
        }
        return;
    }
    // Always the same row blocks, computed by the same single-threaded calls,
    // so a row's result never depends on the thread count.
    let blocks = m.div_ceil(ROW_BLOCK);
    let c_ptr = SendPtr(c.as_mut_ptr());
    let run = |blk: usize| {
        let r0 = blk * ROW_BLOCK;
        let rows = ROW_BLOCK.min(m - r0);
        let a_blk = Mat {
            data: &a.data[r0 * a.rs..],
            rs: a.rs,
            cs: a.cs,
        };
        let p = c_ptr;
        // SAFETY: row blocks are disjoint, so each call writes its own rows
        // of `c`; the asserts above check every index the strides reach.
        unsafe { gemm_block(rows, k, n, a_blk, b, beta, p.0.add(r0 * n)) };
    };
    if m * n * k < PARALLEL_MIN_WORK || num_threads() == 1 {
        (0..blocks).for_each(run);
    } else {
        parallel_for(blocks, run);
    }
}

#[derive(Clone, Copy)]
struct SendPtr<E>(*mut E);
// SAFETY: used only to hand disjoint row blocks of one buffer to scoped
// threads that finish before the buffer's borrow ends.
unsafe impl<E> Send for SendPtr<E> {}
// SAFETY: as above; the pointer is only copied, never dereferenced jointly.
unsafe impl<E> Sync for SendPtr<E> {}

/// # Safety
/// `a`, `b` must cover the given sizes with their strides and `c` must point
/// to `m * n` writable elements.
unsafe fn gemm_block<E: Float>(
    m: usize,
    k: usize,
    n: usize,
    a: Mat<E>,
    b: Mat<E>,
    beta: E,
    c: *mut E,
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
            n as isize,
            1,
        )
    }
}
