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

use super::fp8_panels::Fp8Panels;
pub(crate) use super::packed_f32::PackedA;
use super::packed_f32::{self, ASrc, Out, PackB};
use super::{gemm, Mat, LANES};
use crate::base::Float;

pub(crate) use super::prepacked::as_f32;
pub(crate) use packed_f32::Out as GemmOut;

/// Columns of a packed panel of the right operand (the `kc x 32` panels a
/// [`gemm_into_panels`] packer writes).
pub(crate) const PANEL_COLS: usize = packed_f32::NR;

/// An `m x k` left operand for several products `a b` (see the module
/// docs).
pub(crate) struct PreparedA<'a, E> {
    m: usize,
    k: usize,
    /// The operand in place (`None` for one made from an fp8 weight,
    /// which is only ever read packed).
    a: Option<Mat<'a, E>>,
    packed: Option<Held<'a>>,
}

/// A packed operand made for the products or kept elsewhere (a weight's
/// cached packing).
enum Held<'a> {
    Own(PackedA),
    Kept(&'a PackedA),
}

impl<'a> Held<'a> {
    fn get(&self) -> &PackedA {
        match self {
            Held::Own(p) => p,
            Held::Kept(p) => p,
        }
    }
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
        PreparedA {
            m,
            k,
            a: Some(a),
            packed: packed.map(Held::Own),
        }
    }

    /// [`new`](Self::new) with `a` already packed by [`PackedA::new`] from
    /// the same values (a weight's packing kept on its storage), which it
    /// then reads instead of packing again: the same products, bit for bit.
    /// `packed` is used where `new` would pack (`E` is `f32`, `n_max >
    /// 16`); elsewhere `a` is read in place as `new` leaves it.
    ///
    /// # Panics
    /// When `packed` is not `m x k`.
    pub(crate) fn with_packed(
        m: usize,
        k: usize,
        a: Mat<'a, E>,
        n_max: usize,
        packed: &'a PackedA,
    ) -> Self {
        assert!(
            packed.rows() == m && packed.cols() == k,
            "PreparedA: a packed operand of another shape"
        );
        let use_it = as_f32(a.data).is_some() && m > 1 && k > 0 && n_max > LANES;
        PreparedA {
            m,
            k,
            a: Some(a),
            packed: use_it.then_some(Held::Kept(packed)),
        }
    }

    /// The fp8 weight `w` (`[m, k]`, the left operand) packed, each value
    /// decoded from its byte in the packing step ([`PackedA::from_panels`]
    /// over [`Fp8Panels::pack_panel`]): the tiles [`new`](Self::new)
    /// packs from the decoded f32 weight, without that weight. `None`
    /// where `new` would not pack (`E` is not `f32`, no packed kernel,
    /// `m < 2`, `k == 0`), or where a product could have too few columns
    /// for the packed path (`n_min`, the fewest columns of any product the
    /// caller will ask, at most 16: [`gemm`] would read the weight in
    /// place). `n_max` is the most.
    pub(crate) fn from_fp8(
        w: &Fp8Panels,
        n_min: usize,
        n_max: usize,
    ) -> Option<PreparedA<'static, E>> {
        Self::from_fp8_rows(w, 0, w.dims().0, n_min, n_max)
    }

    /// [`from_fp8`](Self::from_fp8) for rows `row0..row0 + m` of the
    /// weight (a group of a grouped convolution's output channels), its
    /// panels decoded from the bytes ([`Fp8Panels::pack_panel_rows`]):
    /// the operand [`new`](Self::new) packs from those rows decoded.
    ///
    /// # Panics
    /// When the rows pass the weight's.
    pub(crate) fn from_fp8_rows(
        w: &Fp8Panels,
        row0: usize,
        m: usize,
        n_min: usize,
        n_max: usize,
    ) -> Option<PreparedA<'static, E>> {
        let k = w.dims().1;
        assert!(
            row0 + m <= w.dims().0,
            "PreparedA: rows {row0}..{} of {}",
            row0 + m,
            w.dims().0
        );
        let ok = as_f32::<E>(&[]).is_some()
            && m > 1
            && k > 0
            && n_min > LANES
            && n_max >= n_min
            && packed_f32::available();
        ok.then(|| PreparedA {
            m,
            k,
            a: None,
            packed: Some(Held::Own(PackedA::from_panels(m, k, &|k0, kc, j0, dst| {
                w.pack_panel_rows(row0, k0, kc, j0, dst)
            }))),
        })
    }

    /// The packed operand, when `n`-column products take the packed path
    /// (as [`gemm`] decides: more than 16 columns).
    pub(crate) fn packed(&self, n: usize) -> Option<&PackedA> {
        self.packed.as_ref().map(Held::get).filter(|_| n > LANES)
    }

    /// `c = a b + beta c` (`b` is `k x n`, `c` row-major `m x n`), bit for
    /// bit [`gemm`]'s.
    ///
    /// # Panics
    /// When a buffer is too small for its sizes.
    pub(crate) fn gemm(&self, n: usize, b: Mat<E>, beta: E, c: &mut [E]) {
        let (m, k) = (self.m, self.k);
        let (Some(pa), Some(bf)) = (self.packed(n), as_f32(b.data)) else {
            let a = self
                .a
                .expect("PreparedA: an fp8 weight multiplies products of more than 16 columns");
            return gemm(m, k, n, a, b, beta, c);
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
    // SAFETY: the caller's contract.
    unsafe { gemm_into_panels(a, n, &pack, out) };
}

/// [`gemm_into`] with the right operand (`k x n`, `k` the columns of `a`)
/// given by its panels: `pack(k0, kc, j0, dst)` writes the `kc x 32`
/// panel at rows `k0..k0 + kc`, columns `j0..j0 + 32` (zero past `n`) into
/// `dst` (row `p` at `32 p`; every element), as [`pack_panel`] packs a
/// matrix, and may be called from several threads at once, each with its
/// own `dst`. The bits of [`gemm_into`] over the matrix those panels pack
/// (packing is a copy).
///
/// # Safety
/// As [`gemm_into`].
pub(crate) unsafe fn gemm_into_panels(a: &PackedA, n: usize, pack: PackB<'_>, out: GemmOut) {
    let threads = super::num_threads();
    // SAFETY: the caller's contract; `a` is `m x k`.
    unsafe {
        packed_f32::gemm_core(
            a.rows(),
            a.cols(),
            n,
            ASrc::Packed(a),
            pack,
            0.0,
            out,
            threads,
        )
    };
}

/// The `kc x 32` panel of `b` (`k x n`) at rows `k0..k0 + kc`, columns
/// `j0..j0 + 32`, zero past `n`, into `dst`: what [`gemm_into`] packs.
///
/// # Panics
/// When the CPU has no packed kernel, or `b` or `dst` is too short.
#[cfg(test)]
pub(crate) fn pack_panel(b: Mat<f32>, k0: usize, kc: usize, j0: usize, n: usize, dst: &mut [f32]) {
    packed_f32::pack_b_panel(b, k0, kc, j0, n, dst)
}

#[cfg(test)]
mod tests {
    use super::super::fp8_panels::Fp8Bits;
    use super::*;

    /// A prepared operand's products are [`gemm`]'s bit for bit, for a
    /// left operand read transposed (a convolution's `weight^T`, whose
    /// input gradient multiplies every chunk of images by it) and with
    /// contiguous rows, packed once and kept ([`PreparedA::with_packed`]),
    /// widths on both sides of the packed path's 16 columns, 1 and 2
    /// threads.
    #[test]
    fn prepared_products_equal_gemm() {
        let _threads = crate::cpu::threads::lock_thread_count();
        // (a packed operand needs the packed kernel's CPU class)
        if !packed_f32::available() {
            return;
        }
        let mut rng = crate::tensor::Rng::new(8);
        for (m, k) in [(576, 64), (27, 32), (300, 40), (2, 3)] {
            let w: Vec<f32> = (0..m * k).map(|_| rng.normal() as f32).collect();
            for (what, a) in [
                ("transposed", Mat::transposed(&w, m)),
                ("rows", Mat::row_major(&w, k)),
            ] {
                let kept = PackedA::new(m, k, Mat { data: &w[..], ..a });
                for threads in [1, 2] {
                    crate::cpu::set_num_threads(threads);
                    let p = PreparedA::new(m, k, a, 300);
                    let q = PreparedA::with_packed(m, k, a, 300, &kept);
                    for n in [5, 16, 17, 64, 300] {
                        let b: Vec<f32> = (0..k * n).map(|_| rng.normal() as f32).collect();
                        let mut want = vec![f32::NAN; m * n];
                        gemm(m, k, n, a, Mat::row_major(&b, n), 0.0, &mut want);
                        for (pn, prep) in [("new", &p), ("kept", &q)] {
                            let mut c = vec![f32::NAN; m * n];
                            prep.gemm(n, Mat::row_major(&b, n), 0.0, &mut c);
                            assert!(
                                c.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits()),
                                "{m}x{k} {what} {pn} n {n} threads {threads}"
                            );
                        }
                    }
                }
            }
        }
        crate::cpu::set_num_threads(1);
    }

    /// A left operand packed from an fp8 weight's bytes multiplies as the
    /// decoded f32 weight prepared by `new` does, bit for bit: both
    /// encodings, row counts that end in a partial tile and in a tile
    /// past the last 32-row panel (32 rows: three tiles of 12), `k` over
    /// two `KC` blocks and under one, 1 and 2 threads.
    #[test]
    fn fp8_operands_equal_the_decoded_weights() {
        // the thread count is set below: no other test may change it meanwhile
        let _threads = crate::cpu::threads::lock_thread_count();
        if !packed_f32::available() {
            return;
        }
        let mut rng = crate::tensor::Rng::new(6);
        for (m, k, bits) in [
            (37, 300, Fp8Bits::E4M3),
            (32, 171, Fp8Bits::E5M2),
            (2, 5, Fp8Bits::E4M3),
            (100, 513, Fp8Bits::E5M2),
        ] {
            let (w, dense) =
                crate::cpu::gemm::random_fp8_weight(&mut rng, (m, k), bits, (0.02, 0.001));
            for threads in [1, 2] {
                crate::cpu::set_num_threads(threads);
                let p = PreparedA::<f32>::from_fp8(&w, 17, 200).expect("packed");
                let q = PreparedA::new(m, k, Mat::row_major(&dense, k), 200);
                for n in [17, 50, 200] {
                    let b: Vec<f32> = (0..k * n).map(|_| rng.normal() as f32).collect();
                    let c0: Vec<f32> = (0..m * n).map(|_| rng.normal() as f32).collect();
                    let (mut c1, mut c2) = (c0.clone(), c0.clone());
                    q.gemm(n, Mat::row_major(&b, n), 1.0, &mut c1);
                    p.gemm(n, Mat::row_major(&b, n), 1.0, &mut c2);
                    assert!(c1 == c2, "m {m} k {k} {bits:?} n {n} threads {threads}");
                }
            }
        }
        let w = Fp8Panels::new(40, 4, &[0; 160], &[1.0; 40], Fp8Bits::E4M3);
        assert!(
            PreparedA::<f32>::from_fp8(&w, 16, 100).is_none(),
            "16 columns"
        );
        assert!(PreparedA::<f64>::from_fp8(&w, 17, 100).is_none());
        let w = Fp8Panels::new(1, 4, &[0; 4], &[1.0], Fp8Bits::E4M3);
        assert!(PreparedA::<f32>::from_fp8(&w, 17, 100).is_none(), "one row");
    }
}
