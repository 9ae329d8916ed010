//! A right-hand operand packed once and multiplied many times: a recurrent
//! layer's hidden weights, one product per time step. Only where
//! [`gemm`](super::gemm) itself would take forge's packed f32 kernel, so that the products keep
//! `gemm`'s bits.

use super::fp8_panels::Fp8Panels;
use super::{extent, packed_f32, Mat, LANES};
use crate::base::Float;
use std::any::TypeId;
use std::marker::PhantomData;

/// `b` (`k x n`) packed for [`PackedRhs::gemm`].
pub(crate) struct PackedRhs<E> {
    packed: packed_f32::PackedB,
    _e: PhantomData<E>,
}

/// `x` as `f32` when `E` is `f32`.
pub(crate) fn as_f32<E: Float>(x: &[E]) -> Option<&[f32]> {
    // SAFETY: `E` is `f32` (checked), so this is the same slice under its
    // own type.
    (TypeId::of::<E>() == TypeId::of::<f32>())
        .then(|| unsafe { std::slice::from_raw_parts(x.as_ptr().cast::<f32>(), x.len()) })
}

/// `x` as mutable `f32` when `E` is `f32`.
pub(crate) fn as_f32_mut<E: Float>(x: &mut [E]) -> Option<&mut [f32]> {
    // SAFETY: `E` is `f32` (checked), so this is the same slice under its
    // own type; the borrow moves into the result.
    (TypeId::of::<E>() == TypeId::of::<f32>())
        .then(|| unsafe { std::slice::from_raw_parts_mut(x.as_mut_ptr().cast::<f32>(), x.len()) })
}

impl<E: Float> PackedRhs<E> {
    /// `b` (`k x n`) packed, where [`gemm`](super::gemm) multiplies it with forge's
    /// packed f32 kernel whenever the left operand has at least two rows:
    /// `E` is `f32`, the CPU has AVX-512F or AVX2 + FMA, `k >= 1` and
    /// `n > 16`.
    /// Otherwise `None` (multiply with `gemm`).
    ///
    /// # Panics
    /// When `b`'s buffer is too small for `k x n` and its strides.
    pub(crate) fn new(k: usize, n: usize, b: Mat<E>) -> Option<Self> {
        assert!(
            b.data.len() >= extent(&b, k, n),
            "gemm: rhs buffer too small"
        );
        let data = as_f32(b.data)?;
        (k >= 1 && n > LANES && packed_f32::available()).then(|| PackedRhs {
            packed: packed_f32::PackedB::new(
                k,
                n,
                Mat {
                    data,
                    rs: b.rs,
                    cs: b.cs,
                },
            ),
            _e: PhantomData,
        })
    }

    /// `W^T` (`k x n`) of the fp8 weight `w` (`[n, k]`) packed, each
    /// panel decoded from the bytes in the packing step
    /// ([`Fp8Panels::pack_panel`]): the panels [`new`](Self::new) packs
    /// from [`Fp8Panels::decode_rows`]' f32 weight, with no f32 copy of the
    /// weight besides them. `None` where `new` would decline (`E` is not
    /// `f32`, no packed kernel, `k == 0` or `n <= 16`).
    pub(crate) fn from_fp8(w: &Fp8Panels) -> Option<Self> {
        let (n, k) = w.dims();
        let ok = TypeId::of::<E>() == TypeId::of::<f32>()
            && k >= 1
            && n > LANES
            && packed_f32::available();
        ok.then(|| PackedRhs {
            packed: packed_f32::PackedB::from_panels(k, n, |k0, kc, j0, dst| {
                w.pack_panel(k0, kc, j0, dst)
            }),
            _e: PhantomData,
        })
    }

    /// `c = a b + beta c` on the calling thread (`a` is `m x k`, `c`
    /// row-major `m x n`): the same bits as [`gemm`](super::gemm) with the
    /// unpacked `b`.
    ///
    /// # Panics
    /// When `m < 2` (`gemm` takes its matrix-vector loop for one row, a
    /// different order of summation), or a buffer is too small.
    pub(crate) fn gemm(&self, m: usize, a: Mat<E>, beta: E, c: &mut [E]) {
        let (k, n) = self.packed.dims();
        assert!(m >= 2, "gemm: a pre-packed product needs at least two rows");
        assert!(
            a.data.len() >= extent(&a, m, k),
            "gemm: lhs buffer too small"
        );
        assert!(c.len() >= m * n, "gemm: output buffer too small");
        let only = "gemm: a PackedRhs is only built for f32";
        let ad = as_f32(a.data).expect(only);
        let betaf = as_f32(std::slice::from_ref(&beta)).expect(only)[0];
        // SAFETY: `E` is `f32` (checked just above), so `c` is the same
        // slice under its own type.
        let cf = unsafe { std::slice::from_raw_parts_mut(c.as_mut_ptr().cast::<f32>(), c.len()) };
        let a = Mat {
            data: ad,
            rs: a.rs,
            cs: a.cs,
        };
        packed_f32::gemm_prepacked(m, a, &self.packed, betaf, cf);
    }
}

#[cfg(test)]
mod tests {
    use super::super::gemm;
    use super::*;

    /// Pre-packed products equal `gemm`'s bit for bit, for row counts that
    /// take every cut of `row_split` (short tiles, a padded full tile),
    /// `k` over two `KC` blocks, a partial last panel, `beta` 0 and not 0,
    /// and `b` read transposed.
    #[test]
    fn prepacked_products_equal_gemm() {
        if !packed_f32::available() {
            return;
        }
        let mut rng = crate::tensor::Rng::new(3);
        let (k, n) = (300, 40);
        let b: Vec<f32> = (0..k * n).map(|_| rng.normal() as f32).collect();
        for bt in [false, true] {
            let bm = if bt {
                Mat::transposed(&b, k)
            } else {
                Mat::row_major(&b, n)
            };
            let p = PackedRhs::new(k, n, bm).expect("f32 where the packed kernel runs");
            for m in [2, 9, 12, 16, 23, 32, 64, 200] {
                let a: Vec<f32> = (0..m * k).map(|_| rng.normal() as f32).collect();
                let c0: Vec<f32> = (0..m * n).map(|_| rng.normal() as f32).collect();
                for beta in [0.0, 0.5] {
                    let (mut c1, mut c2) = (c0.clone(), c0.clone());
                    gemm(m, k, n, Mat::row_major(&a, k), bm, beta, &mut c1);
                    p.gemm(m, Mat::row_major(&a, k), beta, &mut c2);
                    assert!(c1 == c2, "m {m}, beta {beta}, b transposed {bt}");
                }
            }
        }
        assert!(PackedRhs::<f64>::new(2, 40, Mat::row_major(&[0.0; 80], 40)).is_none());
    }

    /// `W^T` packed from an fp8 weight's bytes multiplies as the decoded
    /// f32 weight packed by `new` does, bit for bit: both encodings, odd
    /// widths (a partial last panel), `k` over two `KC` blocks and
    /// under one, every row split.
    #[test]
    fn fp8_packs_equal_the_decoded_weights() {
        use super::super::fp8_panels::Fp8Bits;
        if !packed_f32::available() {
            return;
        }
        let mut rng = crate::tensor::Rng::new(4);
        for (n, k, bits) in [
            (148, 300, Fp8Bits::E4M3),
            (37, 5, Fp8Bits::E5M2),
            (64, 513, Fp8Bits::E5M2),
            (17, 256, Fp8Bits::E4M3),
        ] {
            // finite bytes (NaN payloads are not pinned)
            let (w, dense) =
                crate::cpu::gemm::random_fp8_weight(&mut rng, (n, k), bits, (0.01, 0.003));
            let p = PackedRhs::<f32>::from_fp8(&w).expect("f32 where the packed kernel runs");
            let q = PackedRhs::new(k, n, Mat::transposed(&dense, k)).unwrap();
            for m in [2, 9, 23, 64] {
                let a: Vec<f32> = (0..m * k).map(|_| rng.normal() as f32).collect();
                let (mut c1, mut c2) = (vec![0f32; m * n], vec![0f32; m * n]);
                q.gemm(m, Mat::row_major(&a, k), 0.0, &mut c1);
                p.gemm(m, Mat::row_major(&a, k), 0.0, &mut c2);
                assert!(c1 == c2, "n {n} k {k} {bits:?} m {m}");
            }
        }
        let w = Fp8Panels::new(16, 4, &[0; 64], &[1.0; 16], Fp8Bits::E4M3);
        assert!(
            PackedRhs::<f32>::from_fp8(&w).is_none(),
            "16 columns: gemm's thin path"
        );
        let w = Fp8Panels::new(40, 4, &[0; 160], &[1.0; 40], Fp8Bits::E4M3);
        assert!(PackedRhs::<f64>::from_fp8(&w).is_none());
        assert!(PackedRhs::<f32>::new(2, 16, Mat::row_major(&[0.0; 32], 16)).is_none());
    }
}
