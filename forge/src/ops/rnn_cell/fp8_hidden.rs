//! The hidden product `h W_hh^T` of a time loop whose `W_hh` is held as
//! 8-bit floats ([`Fp8Panels`]), with no f32 copy of the weight: the
//! time loops of the GRU, the Elman RNN and the LSTM outside its
//! projected path (`lstm_infer.rs`) multiply by it where the f32 layer
//! multiplies by the decoded weight.
//!
//! **Same bits.** A product of at least two rows takes forge's packed f32
//! kernel on panels decoded from the bytes once for the loop, in the
//! packing step ([`PackedRhs::from_fp8`]: the panels [`PackedRhs::new`]
//! packs from the decoded weight, the bits of
//! [`gemm`](crate::cpu::gemm::gemm) with it). Where the f32 loop has no
//! packing step [`Fp8Hidden::new`] declines and the layer decodes the
//! weight for the call: a batch of one sequence (a matrix-vector product
//! per step, which reads the weight in place; reading the fp8 bytes in
//! place instead, `cpu::qgemm::gemv_fp8`, decodes the whole weight on
//! every step and was measured 3 to 4 times slower for a GRU of hidden
//! size 128 over 32 steps), an element type other than `f32`, a CPU
//! without the packed kernel, `G H <= 16` columns (`gemm`'s thin path).

use crate::cpu::gemm::{Fp8Panels, Mat, PackedRhs};
use crate::cpu::Storage;
use crate::tensor::{Device, Float, Tensor};
use std::any::TypeId;

/// `W_hh` (`[G H, H]`) of 8-bit floats packed from the bytes for the
/// products of a time loop over a batch of at least two rows.
pub(crate) struct Fp8Hidden<'a, E> {
    w: &'a Fp8Panels,
    /// The decoded panels of `W_hh^T`.
    packed: PackedRhs<E>,
}

impl<'a, E: Float> Fp8Hidden<'a, E> {
    /// `w` packed for products of `rows` rows (blocks of at least two
    /// rows of them, as the time loops cut the batch), or `None`
    /// (nothing decoded) where the f32 loop would not multiply by packed
    /// panels: `rows < 2`, `E` is not `f32`, or no packed kernel for `w`
    /// ([`PackedRhs::from_fp8`]).
    pub(crate) fn new(w: &'a Fp8Panels, rows: usize) -> Option<Self> {
        if TypeId::of::<E>() != TypeId::of::<f32>() || rows < 2 {
            return None;
        }
        let packed = PackedRhs::from_fp8(w)?;
        Some(Fp8Hidden { w, packed })
    }

    /// `(G H, H)`: the rows and columns of `W_hh`.
    pub(crate) fn dims(&self) -> (usize, usize) {
        self.w.dims()
    }

    /// `c = a W_hh^T` (`a` is `m x H`, `c` row-major `m x G H`): the bits
    /// of `gemm` with the decoded weight as `Mat::transposed(w, H)`.
    ///
    /// # Panics
    /// When `m < 2` or a buffer is too small ([`PackedRhs::gemm`]).
    pub(crate) fn gemm(&self, m: usize, a: Mat<E>, c: &mut [E]) {
        self.packed.gemm(m, a, E::zero(), c)
    }

    /// `x W_hh^T` for `x` of `[rows, H]` (the Elman cell's step), the bits
    /// of `x.matmul_t(&w)` with the decoded weight `w`.
    ///
    /// # Panics
    /// As [`gemm`](Self::gemm), and when `x` is not `[rows, H]`.
    pub(crate) fn matmul_t<D: Device>(&self, x: &Tensor<E, D>) -> Tensor<E, D> {
        let (n, k) = self.w.dims();
        shape_assert!(
            x.rank() == 2 && x.dim(1) == k,
            "Fp8Hidden: x {:?} for [{n}, {k}]",
            x.shape()
        );
        let m = x.dim(0);
        let x = x.contiguous();
        // every element is written by the product (`beta = 0`)
        let mut out = Storage::<E>::stale(m * n);
        self.gemm(m, Mat::row_major(x.as_slice(), k), &mut out);
        Tensor::from_parts(out, [m, n][..].into(), None)
    }
}
