//! A left operand prepared once for several products with it: a
//! convolution multiplies its weight by every chunk of images (and, over
//! tiny planes, each tap's weight by every class of positions), and each of
//! those products used to pack the weight again. For `f32` where the packed
//! kernel runs (AVX-512F, or AVX2 + FMA) the operand is packed once
//! ([`PackedA`]) and every product takes the packed path with it, which has
//! the same bits as [`gemm`] on the same operands (the packing is a copy;
//! each tile's arithmetic is unchanged). Elsewhere (`f64`, other CPUs, and
//! the thin shapes [`gemm`] does not pack) the products are plain [`gemm`]
//! calls.

use super::packed_f32::{self, ASrc, Out, PackedA};
use super::{gemm, Mat, LANES};
use crate::base::Float;

pub(crate) use super::prepacked::as_f32;
pub(crate) use packed_f32::Out as GemmOut;

/// An `m x k` left operand for several products `a b` (see the module
/// docs).
pub(crate) struct PreparedA<'a, E> {
    m: usize,
    k: usize,
    a: Mat<'a, E>,
    packed: Option<PackedA>,
}

impl<'a, E: Float> PreparedA<'a, E> {
    /// Prepares `a` (`m x k`) for products of at most `n_max` columns;
    /// packs it when they can take the packed `f32` path (`E` is `f32` on a
    /// CPU with AVX-512F or AVX2 + FMA, `m > 1`, `k > 0`, `n_max > 16`): a
    /// weight only ever
    /// multiplied by thin operands (batch-1 inference) is read in place.
    pub(crate) fn new(m: usize, k: usize, a: Mat<'a, E>, n_max: usize) -> Self {
        let packed = match as_f32(a.data) {
            Some(data) if m > 1 && k > 0 && n_max > LANES && packed_f32::available() => {
                let af = Mat {
                    data,
                    rs: a.rs,
                    cs: a.cs,
                };
                Some(PackedA::new(m, k, af))
            }
            _ => None,
        };
        PreparedA { m, k, a, packed }
    }

    /// The packed operand, when `n`-column products take the packed path
    /// (as [`gemm`] decides: more than 16 columns).
    pub(crate) fn packed(&self, n: usize) -> Option<&PackedA> {
        self.packed.as_ref().filter(|_| n > LANES)
    }

    /// `c = a b + beta c` (`b` is `k x n`, `c` row-major `m x n`), bit for
    /// bit [`gemm`]'s.
    ///
    /// # Panics
    /// When a buffer is too small for its sizes.
    pub(crate) fn gemm(&self, n: usize, b: Mat<E>, beta: E, c: &mut [E]) {
        let (m, k) = (self.m, self.k);
        let (Some(pa), Some(bf)) = (self.packed(n), as_f32(b.data)) else {
            return gemm(m, k, n, self.a, b, beta, c);
        };
        assert!(c.len() >= m * n, "gemm: output buffer too small");
        assert!(
            bf.len() > (k - 1) * b.rs + (n - 1) * b.cs,
            "gemm: rhs buffer too small"
        );
        let b = Mat {
            data: bf,
            rs: b.rs,
            cs: b.cs,
        };
        let betaf = as_f32(std::slice::from_ref(&beta)).map_or(0.0, |v| v[0]);
        let out = Out::row_major(c.as_mut_ptr().cast::<f32>(), n);
        let pack = |k0: usize, kc: usize, j0: usize, dst: &mut [f32]| {
            packed_f32::pack_b_panel(b, k0, kc, j0, n, dst)
        };
        let threads = super::num_threads();
        // SAFETY: `c` (of `f32`, as `b` is) holds the `m x n` row-major
        // output (asserted) and is borrowed mutably for the call; `pa` is
        // `m x k`.
        unsafe { packed_f32::gemm_core(m, k, n, ASrc::Packed(pa), &pack, betaf, out, threads) };
    }
}

/// `out = a b` (beta 0) for a packed `a` (`m x k`) and `b` (`k x n`), the
/// output laid out by `out`; the same bits as [`gemm`] on the same
/// operands.
///
/// # Safety
/// As [`packed_f32::gemm_core`]: `out` addresses `m x n` distinct elements
/// of a live buffer nothing else accesses during the call.
///
/// # Panics
/// When `b`'s buffer is too small for `k x n`.
pub(crate) unsafe fn gemm_into(a: &PackedA, n: usize, b: Mat<f32>, out: GemmOut) {
    let k = a.cols();
    assert!(
        b.data.len() > (k - 1) * b.rs + (n - 1) * b.cs,
        "gemm: rhs buffer too small"
    );
    let pack = |k0: usize, kc: usize, j0: usize, dst: &mut [f32]| {
        packed_f32::pack_b_panel(b, k0, kc, j0, n, dst)
    };
    let threads = super::num_threads();
    // SAFETY: the caller's contract; `a` is `m x k`.
    unsafe { packed_f32::gemm_core(a.rows(), k, n, ASrc::Packed(a), &pack, 0.0, out, threads) };
}
