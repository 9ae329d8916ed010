//! Several products with one left operand as one product: `[c_0 | c_1 |
//! ...] = a [b_0 | b_1 | ...]`, where each right operand may be given as
//! blocks of rows one under the other (an LSTM's previous hidden states:
//! `h0`, then the outputs of every step but the last). A packed product
//! packs its left operand once per `k` block and chunk of rows, and
//! multiplies it by every panel of the right operand while it is in
//! cache; side by side, `a` is packed once for all the products instead
//! of once in each (an LSTM's gate gradients `da^T`, 4 MiB at
//! `T = 32, N = 64, H = 128`, for both weight gradients). Packing it once
//! beforehand for all of them ([`PackedA`](super::prepared::PackedA))
//! did not pay there: the packed operand, larger than L2, was then
//! written to memory and read back by each product.
//!
//! Bits: every column of a packed product is the same sum in the same
//! order whatever the other columns (`cpu::gemm` module docs), so each
//! `c_i` is [`gemm`]'s over `b_i` (stacked) where [`gemm`] would take the
//! packed path for every product; otherwise the products run one by one.

use super::packed_f32::{self, Out, NR};
use super::prepacked::{as_f32, as_f32_mut};
use super::{gemm, packed_f32_applies, Mat};
use crate::base::Float;
use crate::cpu::Storage;

/// One right operand: `cols` columns, its rows given as blocks
/// `(rows, matrix)` one under the other.
#[derive(Clone, Copy)]
pub(crate) struct Rhs<'a, E> {
    /// Columns.
    pub(crate) cols: usize,
    /// The row blocks, in order; their rows add up to `k`.
    pub(crate) parts: &'a [(usize, Mat<'a, E>)],
}

/// `c_i = a rhs_i` (beta 0; `a` is `m x k`, `c_i` row-major
/// `m x rhs_i.cols`) for every `i`, as the module docs say.
///
/// # Panics
/// When a right operand's rows do not add up to `k`, the counts of
/// operands and outputs differ, or a buffer is too small.
pub(crate) fn gemm_side_by_side<E: Float>(
    m: usize,
    k: usize,
    a: Mat<E>,
    rhs: &[Rhs<'_, E>],
    c: &mut [&mut [E]],
) {
    assert_eq!(rhs.len(), c.len(), "gemm: one output per right operand");
    for (b, ci) in rhs.iter().zip(c.iter()) {
        let rows: usize = b.parts.iter().map(|p| p.0).sum();
        assert_eq!(
            rows, k,
            "gemm: a right operand's blocks hold {rows} rows, not k = {k}"
        );
        assert!(ci.len() >= m * b.cols, "gemm: output buffer too small");
        for &(r, p) in b.parts {
            assert!(
                r == 0 || b.cols == 0 || p.data.len() > (r - 1) * p.rs + (b.cols - 1) * p.cs,
                "gemm: rhs buffer too small"
            );
        }
    }
    let together = rhs.len() > 1 && rhs.iter().all(|b| packed_f32_applies::<E>(m, k, b.cols));
    let (Some(af), true) = (as_f32(a.data), together) else {
        for (b, ci) in rhs.iter().zip(c.iter_mut()) {
            one(m, k, a, b, ci);
        }
        return;
    };
    let af = Mat {
        data: af,
        rs: a.rs,
        cs: a.cs,
    };
    // each operand's columns padded to whole panels, so that no panel
    // holds two operands' columns
    let starts: Vec<usize> = rhs
        .iter()
        .scan(0, |at, b| {
            let s = *at;
            *at += b.cols.div_ceil(NR) * NR;
            Some(s)
        })
        .collect();
    let width = starts.last().copied().unwrap_or(0) + rhs.last().map_or(0, |b| b.cols);
    let fparts: Vec<Vec<(usize, Mat<f32>)>> = rhs
        .iter()
        .map(|b| {
            b.parts
                .iter()
                .map(|&(r, p)| {
                    let data = as_f32(p.data).expect("f32 with a");
                    (
                        r,
                        Mat {
                            data,
                            rs: p.rs,
                            cs: p.cs,
                        },
                    )
                })
                .collect()
        })
        .collect();
    let pack = |k0: usize, kc: usize, j0: usize, dst: &mut [f32]| {
        let i = starts
            .iter()
            .rposition(|&s| s <= j0)
            .expect("a panel's operand");
        let (n, j) = (rhs[i].cols, j0 - starts[i]);
        // rows k0..k0 + kc of operand `i`, block by block (a panel's rows
        // are NR apart whatever block they come from)
        let mut start = 0;
        for &(rows, b) in &fparts[i] {
            let (lo, hi) = (k0.max(start), (k0 + kc).min(start + rows));
            if lo < hi {
                let panel = &mut dst[(lo - k0) * NR..(hi - k0) * NR];
                packed_f32::pack_b_panel(b, lo - start, hi - lo, j, n, panel);
            }
            start += rows;
        }
    };
    // every element is written (beta 0)
    let mut all = Storage::<f32>::stale(m * width);
    let out = Out::row_major(all.as_mut_ptr(), width);
    let threads = super::num_threads();
    // SAFETY: `all` holds the `m x width` row-major output, borrowed
    // mutably for the call; `a` is `m x k` (the caller's extents, as
    // `gemm`'s), and each operand's blocks hold `k` rows (asserted).
    unsafe {
        packed_f32::gemm_core(
            m,
            k,
            width,
            packed_f32::ASrc::Mat(af),
            &pack,
            0.0,
            out,
            threads,
        )
    };
    for ((b, ci), &s) in rhs.iter().zip(c.iter_mut()).zip(&starts) {
        let ci = as_f32_mut(ci).expect("f32 outputs");
        for (row, dst) in all.chunks_exact(width).zip(ci.chunks_exact_mut(b.cols)) {
            dst.copy_from_slice(&row[s..s + b.cols]);
        }
    }
}

/// One product `c = a b`, `b` stacked from its blocks first when it has
/// more than one.
fn one<E: Float>(m: usize, k: usize, a: Mat<E>, b: &Rhs<'_, E>, c: &mut [E]) {
    let n = b.cols;
    if let [(_, only)] = b.parts {
        return gemm(m, k, n, a, *only, E::zero(), c);
    }
    let mut stacked = Storage::<E>::stale(k * n);
    let mut at = 0;
    for &(rows, p) in b.parts {
        for r in 0..rows {
            for (j, v) in stacked[(at + r) * n..(at + r + 1) * n]
                .iter_mut()
                .enumerate()
            {
                *v = p.data[r * p.rs + j * p.cs];
            }
        }
        at += rows;
    }
    gemm(m, k, n, a, Mat::row_major(&stacked, n), E::zero(), c)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Side by side, each output is [`gemm`]'s over its operand stacked,
    /// bit for bit: blocks that split `KC` blocks and panels (an empty one
    /// among them), a block read transposed, widths off the 32-column
    /// panels, one operand too narrow for the packed path (then one by
    /// one), 1 and 2 threads; `f64` too.
    #[test]
    fn side_by_side_products_equal_gemm() {
        let _threads = crate::cpu::threads::lock_thread_count();
        let mut rng = crate::tensor::Rng::new(9);
        let (m, k) = (70, 300);
        let a: Vec<f32> = (0..m * k).map(|_| rng.normal() as f32).collect();
        let am = Mat::transposed(&a, m);
        let x: Vec<f32> = (0..k * 40).map(|_| rng.normal() as f32).collect();
        for n in [7, 17, 40, 64] {
            // rows 0..64, none, 64..250 (stored transposed), 250..300
            let rows = [64, 0, 186, 50];
            let parts: Vec<Vec<f32>> = rows
                .iter()
                .map(|r| (0..r * n).map(|_| rng.normal() as f32).collect())
                .collect();
            let mats = [
                Mat::row_major(&parts[0], n),
                Mat::row_major(&parts[1], n),
                Mat::transposed(&parts[2], rows[2]),
                Mat::row_major(&parts[3], n),
            ];
            let stacked: Vec<f32> = (0..4)
                .flat_map(|p| {
                    let b = mats[p];
                    (0..rows[p] * n).map(move |e| b.data[e / n * b.rs + e % n * b.cs])
                })
                .collect();
            let stack: Vec<(usize, Mat<f32>)> = rows.iter().copied().zip(mats).collect();
            let xs = [(k, Mat::row_major(&x, 40))];
            let rhs = [
                Rhs {
                    cols: 40,
                    parts: &xs,
                },
                Rhs {
                    cols: n,
                    parts: &stack,
                },
            ];
            for threads in [1, 2] {
                crate::cpu::set_num_threads(threads);
                let mut want0 = vec![f32::NAN; m * 40];
                gemm(m, k, 40, am, Mat::row_major(&x, 40), 0.0, &mut want0);
                let mut want1 = vec![f32::NAN; m * n];
                gemm(m, k, n, am, Mat::row_major(&stacked, n), 0.0, &mut want1);
                let (mut c0, mut c1) = (vec![f32::NAN; m * 40], vec![f32::NAN; m * n]);
                gemm_side_by_side(m, k, am, &rhs, &mut [&mut c0, &mut c1]);
                let same =
                    |c: &[f32], w: &[f32]| c.iter().zip(w).all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(same(&c0, &want0), "first, n {n} threads {threads}");
                assert!(same(&c1, &want1), "second, n {n} threads {threads}");
            }
        }
        crate::cpu::set_num_threads(1);
        let a64: Vec<f64> = a.iter().map(|&v| f64::from(v)).collect();
        let b64: Vec<f64> = (0..k * 20).map(|_| rng.normal()).collect();
        let am = Mat::transposed(&a64, m);
        let mut want = vec![f64::NAN; m * 20];
        gemm(m, k, 20, am, Mat::row_major(&b64, 20), 0.0, &mut want);
        let stack = [
            (100, Mat::row_major(&b64[..2000], 20)),
            (200, Mat::row_major(&b64[2000..], 20)),
        ];
        let rhs = [
            Rhs {
                cols: 20,
                parts: &stack,
            },
            Rhs {
                cols: 20,
                parts: &stack,
            },
        ];
        let (mut c0, mut c1) = (vec![f64::NAN; m * 20], vec![f64::NAN; m * 20]);
        gemm_side_by_side(m, k, am, &rhs, &mut [&mut c0, &mut c1]);
        assert!(c0
            .iter()
            .chain(&c1)
            .zip(want.iter().chain(&want))
            .all(|(x, y)| x.to_bits() == y.to_bits()));
    }
}
