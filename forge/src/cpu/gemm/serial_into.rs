//! One product on the calling thread, written straight into a strided
//! output, with the packed kernel's buffers carved from scratch the caller
//! already holds: for the many small products of one parallel loop (the
//! attention heads, four to six products each), which otherwise took two
//! buffers from the memory pool per product and made the two threads
//! queue on the pool's lock, and wrote each head into scratch before
//! copying it into its columns of the output.
//!
//! The same packing, kernel calls and order as [`gemm`](super::gemm) with
//! one thread and `beta = 0`, so the same bits (the partition of a product
//! never changes them; see `packed_f32`).

use super::packed_f32::{self, gemm_core_serial_in, pack_b_panel, Out};
use super::prepacked::as_f32;
use super::{extent, packed_f32_applies, Mat};
use crate::base::Float;

/// Elements of scratch [`gemm_serial_into`] packs an `m x k` by `k x n`
/// product of `E` into, or 0 where it does not apply (then multiply with
/// [`gemm`](super::gemm)): for `64 x 32` by `32 x 64`, two `32 x 32`
/// panels of `b` and six `12 x 32` row tiles of `a`.
pub(crate) fn serial_scratch<E: Float>(m: usize, k: usize, n: usize) -> usize {
    if packed_f32_applies::<E>(m, k, n) {
        packed_f32::serial_scratch_len(m, k, n)
    } else {
        0
    }
}

/// `c = a b` (`a` is `m x k`, `b` is `k x n`, `c` the `m x n` elements
/// with rows `ldc` apart from `c`) on the calling thread, `a` and `b`
/// packed into `scratch` (at least [`serial_scratch`] elements) rather
/// than into buffers from the pool: the bits of [`gemm`](super::gemm) with
/// `beta = 0` into a row-major `m x n` buffer. `false`, with nothing
/// written, where [`serial_scratch`] is 0.
///
/// # Safety
/// The `m x n` elements at `c + i * ldc + j` (`i < m`, `j < n`, `n <=
/// ldc`) are valid for writes and nothing else accesses them during the
/// call; the elements between them are neither read nor written.
///
/// # Panics
/// When `a` or `b` is too small for its sizes and strides, `ldc < n`, or
/// `scratch` is shorter than [`serial_scratch`].
/// Whether [`gemm_serial_into`] takes an `m x k` by `k x n` product (and
/// so runs it on the packed kernel, each output the sum over `k` in order,
/// one block of [`K_BLOCK`] after another): for a caller that splits a
/// product into parts and must know that every part runs the kernel the
/// whole would.
pub(crate) fn serial_into_applies<E: Float>(m: usize, k: usize, n: usize) -> bool {
    packed_f32_applies::<E>(m, k, n)
}

/// The packed kernel's block of `k`: each output is `beta c + (sum over
/// block 0) + (sum over block 1) + ...`, so a product whose `k` fits in one
/// block sums its terms in one chain from zero.
pub(crate) const K_BLOCK: usize = super::packed_f32::KC;

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm_serial_into<E: Float>(
    m: usize,
    k: usize,
    n: usize,
    a: Mat<E>,
    b: Mat<E>,
    c: *mut E,
    ldc: usize,
    scratch: &mut [E],
) -> bool {
    if !packed_f32_applies::<E>(m, k, n) {
        return false;
    }
    assert!(
        a.data.len() >= extent(&a, m, k),
        "gemm: lhs buffer too small"
    );
    assert!(
        b.data.len() >= extent(&b, k, n),
        "gemm: rhs buffer too small"
    );
    assert!(ldc >= n, "gemm: output rows overlap");
    let (Some(af), Some(bf)) = (as_f32(a.data), as_f32(b.data)) else {
        return false;
    };
    // SAFETY: `E` is `f32` (`packed_f32_applies`), so this is the same slice under
    // its own type.
    let sf = unsafe {
        std::slice::from_raw_parts_mut(scratch.as_mut_ptr().cast::<f32>(), scratch.len())
    };
    let am = Mat {
        data: af,
        rs: a.rs,
        cs: a.cs,
    };
    let bm = Mat {
        data: bf,
        rs: b.rs,
        cs: b.cs,
    };
    let pack =
        |k0: usize, kc: usize, j0: usize, dst: &mut [f32]| pack_b_panel(bm, k0, kc, j0, n, dst);
    // SAFETY: the output is the caller's contract (the kernel writes only
    // the `rows x cols` of each tile, rows `ldc` apart), the operands'
    // extents are asserted above, and `gemm_core_serial_in` checks the
    // scratch's length.
    unsafe {
        gemm_core_serial_in(
            m,
            k,
            n,
            am,
            &pack,
            0.0,
            Out::row_major(c.cast::<f32>(), ldc),
            sf,
        )
    };
    true
}
