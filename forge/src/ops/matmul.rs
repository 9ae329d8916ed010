//! Matrix products: `matmul` with PyTorch's rules for 1-D, 2-D, batched and
//! broadcast-batched operands, and `matmul_t` (`a @ b^T`, no copy of `b`).

use crate::cpu::broadcast::broadcast_strides;
use crate::cpu::gemm::{gemm_batched, Mat};
use crate::cpu::memory::Storage;
use crate::tensor::{broadcast_shapes, numel, Device, Float, Tensor};

impl<E: Float, D: Device> Tensor<E, D> {
    /// Matrix product with `torch.matmul` semantics: vector-vector (dot
    /// product, 0-d result), matrix-vector, vector-matrix, matrix-matrix, and
    /// batched products whose batch dimensions broadcast.
    ///
    /// # Panics
    /// When an operand is 0-d, the inner dimensions differ, or the batch
    /// dimensions cannot be broadcast. The message names both shapes.
    ///
    /// ```
    /// use forge::Tensor;
    /// let a = Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]);
    /// let v = Tensor::<f32>::from_vec(vec![1.0, 1.0], &[2]);
    /// assert_eq!(a.matmul(&v).to_vec(), vec![3.0, 7.0]);
    /// assert_eq!(v.matmul(&v).item(), 2.0);
    /// ```
    #[track_caller]
    pub fn matmul(&self, other: &Self) -> Self {
        let (ra, rb) = (self.rank(), other.rank());
        shape_assert!(
            ra >= 1 && rb >= 1,
            "matmul: {:?} x {:?}: both operands need at least one dimension",
            self.shape(),
            other.shape()
        );
        let a = if ra == 1 {
            self.view(&[1, self.shape[0]])
        } else {
            self.clone()
        };
        let b = if rb == 1 {
            other.view(&[other.shape[0], 1])
        } else {
            other.clone()
        };
        let out = a.bmm_ex(&b, false, false, "matmul");
        let mut shape = out.shape().to_vec();
        if rb == 1 {
            shape.pop();
        }
        if ra == 1 {
            shape.remove(shape.len() - 1 - usize::from(rb != 1));
        }
        if shape == out.shape() {
            out
        } else {
            out.view(&shape)
        }
    }

    /// `self @ other^T` where `other`'s last two dimensions are transposed
    /// without copying it: the product a `Linear` layer computes with its
    /// `[out, in]` weight.
    ///
    /// # Panics
    /// When either operand has rank below 2, or the inner dimensions differ.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f32>::from_vec(vec![1.0, 2.0], &[1, 2]);
    /// let w = Tensor::<f32>::from_vec(vec![1.0, 0.0, 0.0, 1.0, 1.0, 1.0], &[3, 2]);
    /// assert_eq!(x.matmul_t(&w).to_vec(), vec![1.0, 2.0, 3.0]);
    /// ```
    #[track_caller]
    pub fn matmul_t(&self, other: &Self) -> Self {
        self.bmm_ex(other, false, true, "matmul_t")
    }

    /// `op(self) @ op(other)` for operands of rank >= 2 whose batch
    /// dimensions broadcast; `op` transposes the last two dimensions when
    /// its flag is set.
    #[track_caller]
    pub(crate) fn bmm_ex(&self, other: &Self, ta: bool, tb: bool, op: &str) -> Self {
        let (a, b) = (self, other);
        shape_assert!(
            a.rank() >= 2 && b.rank() >= 2,
            "{op}: {:?} x {:?}: operands need rank 2 or more",
            a.shape(),
            b.shape()
        );
        let (ar, ac) = (a.shape[a.rank() - 2], a.shape[a.rank() - 1]);
        let (br, bc) = (b.shape[b.rank() - 2], b.shape[b.rank() - 1]);
        let (m, k) = if ta { (ac, ar) } else { (ar, ac) };
        let (k2, n) = if tb { (bc, br) } else { (br, bc) };
        shape_assert!(
            k == k2,
            "{op}: {:?} x {:?}: inner dimensions {k} and {k2} differ",
            a.shape(),
            b.shape()
        );
        if b.rank() == 2 && a.rank() > 2 && !ta {
            // A batch of row blocks times one matrix (a Linear layer on
            // `[B, T, C]`): one product of `B * T` rows, so the matrix is
            // packed once and the weight gradient is one product over every
            // row instead of one per batch entry plus a sum.
            let lead = &a.shape[..a.rank() - 1];
            let rows: usize = lead.iter().product();
            let out = a.view(&[rows, ac]).bmm_ex(b, false, tb, op);
            let mut shape = lead.to_vec();
            shape.push(n);
            return out.view(&shape);
        }
        let (ba, bb) = (&a.shape[..a.rank() - 2], &b.shape[..b.rank() - 2]);
        let batch = broadcast_shapes(ba, bb).unwrap_or_else(|| {
            shape_panic!(
                "{op}: {:?} x {:?}: batch dimensions cannot be broadcast",
                a.shape(),
                b.shape()
            )
        });
        let nb = numel(&batch);
        let sa = broadcast_strides(ba, &batch);
        let sb = broadcast_strides(bb, &batch);
        // a pooled buffer as it is: every element is overwritten (beta is 0)
        let mut out = Storage::<E>::stale(nb * m * n);
        let (a_mat, b_mat) = (ar * ac, br * bc);
        // batch offsets (in whole matrices) of product `i`'s operands
        let offset = |i: usize, strides: &[usize]| {
            let mut rem = i;
            let mut o = 0;
            for d in (0..batch.len()).rev() {
                o += (rem % batch[d]) * strides[d];
                rem /= batch[d];
            }
            o
        };
        // An operand that is a transposed view of row-major matrices (`t()`,
        // `transpose(-2, -1)`) is read in place with the other flag, on the
        // general path only (`m, n > 16`): there every element sums its `k`
        // products in the same order whatever the layout, so the bits are
        // those of the copy. The thin paths' order depends on the layout.
        let general = m > 16 && n > 16;
        let (a_all, a_sw) = a.matrix_operand(general);
        let (b_all, b_sw) = b.matrix_operand(general);
        // the stored row length of each operand's matrices
        let lda = if a_sw { ar } else { ac };
        let ldb = if b_sw { br } else { bc };
        let a_of = |i: usize| {
            let o = offset(i, &sa);
            let data = &a_all[o * a_mat..(o + 1) * a_mat];
            if ta != a_sw {
                Mat::transposed(data, lda)
            } else {
                Mat::row_major(data, lda)
            }
        };
        let b_of = |i: usize| {
            let o = offset(i, &sb);
            let data = &b_all[o * b_mat..(o + 1) * b_mat];
            if tb != b_sw {
                Mat::transposed(data, ldb)
            } else {
                Mat::row_major(data, ldb)
            }
        };
        gemm_batched(nb, m, k, n, a_of, b_of, E::zero(), &mut out);
        let mut shape = batch;
        shape.extend([m, n]);
        Tensor::from_parts(out, shape.into(), None).record(
            "matmul",
            vec![self.clone(), other.clone()],
            move |ctx| {
                let (a, b, g) = (&ctx.inputs[0], &ctx.inputs[1], ctx.grad);
                let ga = ctx.needs(0).then(|| {
                    let ga = if ta {
                        b.bmm_ex(g, tb, true, "matmul backward")
                    } else {
                        g.bmm_ex(b, false, !tb, "matmul backward")
                    };
                    ga.sum_to(a.shape())
                });
                let gb = ctx.needs(1).then(|| {
                    let gb = if tb {
                        g.bmm_ex(a, true, ta, "matmul backward")
                    } else {
                        a.bmm_ex(g, !ta, false, "matmul backward")
                    };
                    gb.sum_to(b.shape())
                });
                vec![ga, gb]
            },
        )
    }
}
