//! The LSTM without a tape: [`lstm_projected`] takes the layer's input
//! itself instead of its projection, in either layout (batch-first or
//! time-major), and multiplies each step's rows by `W_ih` inside the time
//! loop, next to the hidden product. Nothing the size of the sequence is
//! made but the output, which is written in the input's layout: no
//! `[T, N, 4H]` projection (4 MiB at `T = 32`, `N = 64`, `H = 128`, more
//! than L2) written and read back, no transposes of a batch-first input
//! and output.
//!
//! **Same bits.** Each projected row is the product's row, the same sum
//! whatever rows it is computed with (forge's packed gemm: `KC` blocks in
//! increasing `k`, fused multiply-adds in increasing `k`, any row tiling;
//! `W_ih` and `W_hh` pre-packed into the panels gemm packs, once per write
//! version of each weight: the packs are kept on the weights' storages
//! until an optimizer step or a load writes them; an 8-bit float weight's
//! panels are decoded from its bytes into a pooled pack for the call,
//! [`ProjWeight::Fp8`]). So the path
//! runs only where both the sequence-wide projection and the per-step
//! products take that kernel (f32 on AVX-512 or AVX2 + FMA, `4H > 16`,
//! blocks of at least two rows, see [`PackedRhs`]); elsewhere
//! [`lstm_projected`]
//! declines and the caller projects and runs
//! [`lstm_sequence`](super::lstm_sequence). The step kernel is the one
//! `lstm_sequence` runs under `no_grad`, which gives the recorded path's
//! bits.

use super::lstm::lstm_rows;
use super::lstm_f32::{Outs, StepIns};
use super::{for_batch_blocks, rows_of, Rows, Seq};
use crate::autograd::is_grad_enabled;
use crate::cpu::gemm::{Fp8Panels, Mat, PackedRhs};
use crate::cpu::Storage;
use crate::tensor::{Device, Float, Tensor};

/// `W^T` of a `[G H, k]` weight packed for [`PackedRhs::gemm`], with the
/// sizes it was packed for (a storage read as another shape packs anew).
struct CachedWeightT<E> {
    k: usize,
    n: usize,
    packed: PackedRhs<E>,
}

/// `W^T` of the weight `w` (`[n, k]`) packed for the per-step products.
/// A plain weight keeps it on its storage (`Storage::derived`, as
/// `cpu::gemm::weight_cache` does for `Linear`): packed once per write
/// version, so an optimizer step or a load (both write the values) makes
/// the next call pack the new values, and repeated inference calls do
/// not pack at all. A view packs into `own` for this call. The panels are
/// the same either way (packing is a copy), so the bits are too. `None`
/// where the packed kernel does not apply ([`PackedRhs::new`]).
fn packed_weight_t<'a, E: Float, D: Device>(
    w: &'a Tensor<E, D>,
    own: &'a mut Option<PackedRhs<E>>,
) -> Option<&'a PackedRhs<E>> {
    let (n, k) = (w.dim(0), w.dim(1));
    let pack = || PackedRhs::new(k, n, Mat::transposed(w.as_slice(), k));
    if w.layout.is_none() {
        let cached = w
            .storage
            .derived(|| pack().map(|packed| CachedWeightT { k, n, packed }));
        match cached {
            Some(c) if (c.k, c.n) == (k, n) => return Some(&c.packed),
            // the slot holds another shape's or another kind's entry:
            // pack for this call
            _ => {}
        }
    }
    *own = pack();
    own.as_ref()
}

/// A weight of [`lstm_projected`] (`[G H, k]`): a tensor, packed as
/// [`packed_weight_t`] packs it, or an 8-bit float weight whose `W^T`
/// panels are decoded from its bytes in the packing step
/// ([`PackedRhs::from_fp8`]) into a pooled buffer for the call: the panels
/// the tensor holding the decoded values packs into, with no f32 copy of
/// the weight besides them (the bytes stay the only resident copy).
#[derive(Clone, Copy)]
pub(crate) enum ProjWeight<'a, E: Float, D: Device> {
    /// A plain weight tensor.
    Dense(&'a Tensor<E, D>),
    /// The bytes and scales of an fp8 weight.
    Fp8(&'a Fp8Panels),
}

impl<'a, E: Float, D: Device> ProjWeight<'a, E, D> {
    /// The weight's shape.
    fn shape(&self) -> Vec<usize> {
        match self {
            ProjWeight::Dense(w) => w.shape().to_vec(),
            ProjWeight::Fp8(p) => {
                let (n, k) = p.dims();
                vec![n, k]
            }
        }
    }

    /// The weight's tensor, when it is one.
    fn dense(&self) -> Option<&'a Tensor<E, D>> {
        match *self {
            ProjWeight::Dense(w) => Some(w),
            ProjWeight::Fp8(_) => None,
        }
    }

    /// Whether a gradient would flow to the weight.
    fn is_tracked(&self) -> bool {
        matches!(self, ProjWeight::Dense(w) if w.is_tracked())
    }

    /// `W^T` packed for the per-step products (see the variants), or
    /// `None` where the packed kernel does not apply.
    fn packed(self, own: &'a mut Option<PackedRhs<E>>) -> Option<&'a PackedRhs<E>> {
        match self {
            ProjWeight::Dense(w) => packed_weight_t(w, own),
            ProjWeight::Fp8(p) => {
                *own = PackedRhs::from_fp8(p);
                own.as_ref()
            }
        }
    }
}

/// Whether `w`'s storage holds a packed `W^T` for its current values
/// (for the tests of the cache).
#[cfg(test)]
pub(crate) fn holds_packed<E: Float, D: Device>(w: &Tensor<E, D>) -> bool {
    w.storage.derived(|| None::<CachedWeightT<E>>).is_some()
}

/// Where the rows of a `T x N` sequence of rows `width` wide lie in its
/// buffer: row `(t, n)` at `t * t_stride + n * n_stride`.
#[derive(Clone, Copy)]
struct Layout {
    t_stride: usize,
    n_stride: usize,
}

impl Layout {
    /// `[N, T, width]` when `batch_first`, `[T, N, width]` otherwise.
    fn new(batch_first: bool, t_len: usize, n: usize, width: usize) -> Self {
        if batch_first {
            Layout {
                t_stride: width,
                n_stride: t_len * width,
            }
        } else {
            Layout {
                t_stride: n * width,
                n_stride: width,
            }
        }
    }

    /// The offset of row `(t, r)`.
    fn at(&self, t: usize, r: usize) -> usize {
        t * self.t_stride + r * self.n_stride
    }

    /// The extent of rows `r0..r1` at time `t` in a buffer of rows
    /// `width` wide: `(offset, len)`.
    fn span(&self, t: usize, r0: usize, r1: usize, width: usize) -> (usize, usize) {
        (self.at(t, r0), (r1 - r0 - 1) * self.n_stride + width)
    }
}

/// One LSTM layer and direction over the input sequence `x` without
/// recording: `x` is `[N, T, I]` when `batch_first`, `[T, N, I]`
/// otherwise; `w_ih` `[4H, I]`, `w_hh` `[4H, H]`, `bias` `[4H]`
/// (`bias_ih + bias_hh`), `h0`, `c0` `[N, H]`. Returns `(out, h_n, c_n)`
/// with `out` in `x`'s layout (`[N, T, H]` or `[T, N, H]`), bit for bit
/// what `lstm_sequence(x W_ih^T, h0, c0, w_hh, bias, reverse)` gives on
/// the time-major input (see the module docs).
///
/// `None`, having computed nothing, when the path does not apply: a
/// gradient would be recorded (grad mode on and an operand tracked),
/// fewer than two rows, or the products would not take forge's packed f32
/// kernel. Either weight may be held as 8-bit floats ([`ProjWeight::Fp8`]):
/// the bits are then those of the tensor holding its decoded values.
///
/// # Panics
/// When the shapes do not fit together; the message names them.
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub(crate) fn lstm_projected<E: Float, D: Device>(
    x: &Tensor<E, D>,
    batch_first: bool,
    w_ih: ProjWeight<'_, E, D>,
    w_hh: ProjWeight<'_, E, D>,
    bias: Option<&Tensor<E, D>>,
    h0: &Tensor<E, D>,
    c0: &Tensor<E, D>,
    reverse: bool,
) -> Option<(Tensor<E, D>, Tensor<E, D>, Tensor<E, D>)> {
    let tracked = [x, h0, c0].iter().any(|t| t.is_tracked())
        || w_ih.is_tracked()
        || w_hh.is_tracked()
        || bias.is_some_and(|b| b.is_tracked());
    if is_grad_enabled() && tracked {
        return None;
    }
    shape_assert!(
        x.rank() == 3 && h0.rank() == 2,
        "lstm_projected: x {:?}, h0 {:?}: expected rank 3 and 2",
        x.shape(),
        h0.shape()
    );
    let (t_len, n) = if batch_first {
        (x.dim(1), x.dim(0))
    } else {
        (x.dim(0), x.dim(1))
    };
    let (i, h) = (x.dim(2), h0.dim(1));
    let g4 = 4 * h;
    let ok = t_len > 0
        && w_ih.shape() == [g4, i]
        && w_hh.shape() == [g4, h]
        && h0.shape() == [n, h]
        && c0.shape() == [n, h]
        && bias.is_none_or(|b| b.shape() == [g4]);
    shape_assert!(
        ok,
        "lstm_projected: x {:?} (batch first {batch_first}), w_ih {:?}, w_hh {:?}, h0 {:?}, c0 {:?}, bias {:?}: \
         expected T >= 1, [4H, I], [4H, H], [N, H], [N, H], [4H]",
        x.shape(),
        w_ih.shape(),
        w_hh.shape(),
        h0.shape(),
        c0.shape(),
        bias.map(|b| b.shape())
    );
    if n < 2 {
        return None;
    }
    let (mut own_ih, mut own_hh) = (None, None);
    let p_ih = w_ih.packed(&mut own_ih)?;
    let p_hh = w_hh.packed(&mut own_hh)?;
    let seq = Seq {
        t_len,
        n,
        h,
        reverse,
    };
    let (x_at, y_at) = (
        Layout::new(batch_first, t_len, n, i),
        Layout::new(batch_first, t_len, n, h),
    );
    let (xs, h0s, c0s) = (x.as_slice(), h0.as_slice(), c0.as_slice());
    let bs = bias.map(|b| b.as_slice());
    // No zero fills (`Storage::stale`): every element of these buffers is
    // written before it is read. Each step's cell writes all of its `ys`
    // rows, gates and cell slot (read back only at the next step), and
    // both products run with `beta = 0`, which never reads the output.
    // The zeroing of `ys` alone was a 1 MiB pass per call at T = 32,
    // N = 64, H = 128.
    let mut ys = Storage::<E>::stale(t_len * n * h);
    // per-step buffers, every block its own rows, taken before the blocks
    // run (the pool traffic does not depend on their schedule); the cell
    // in two slots, step s in slot s % 2
    let mut xp_all = Storage::<E>::stale(n * g4);
    let mut hw_all = Storage::<E>::stale(n * g4);
    let mut gates_all = Storage::<E>::stale(n * g4);
    let mut cs = Storage::<E>::stale(2 * n * h);
    let (ys_r, xp_r, hw_r, g_r, cs_r) = (
        Rows::new(&mut ys),
        Rows::new(&mut xp_all),
        Rows::new(&mut hw_all),
        Rows::new(&mut gates_all),
        Rows::new(&mut cs),
    );
    for_batch_blocks(n, |r0, r1| {
        let rows = r1 - r0;
        // SAFETY: (every `at` and `span`) this block touches only rows
        // r0..r1 of each buffer. In `ys` those rows lie in a region no
        // other block reaches (all of a time index's rows r0..r1
        // time-major, all of rows r0..r1 batch-first); the slice read by
        // the hidden product is dropped before the step's rows are
        // written, and the two cell slots are distinct.
        let (xp, hw, gates) = unsafe {
            (
                xp_r.at(0, n, r0, r1, g4),
                hw_r.at(0, n, r0, r1, g4),
                g_r.at(0, n, r0, r1, g4),
            )
        };
        for s in 0..t_len {
            let (t, prev) = (seq.time(s), seq.prev(s));
            let (x0, xlen) = x_at.span(t, r0, r1, i);
            let xa = Mat {
                data: &xs[x0..x0 + xlen],
                rs: x_at.n_stride,
                cs: 1,
            };
            // blocks have at least 2 rows (`for_batch_blocks`, n >= 2)
            p_ih.gemm(rows, xa, E::zero(), xp);
            match prev {
                Some(p) => {
                    let (h_off, hlen) = y_at.span(p, r0, r1, h);
                    // SAFETY: rows r0..r1 of step `prev` (see above),
                    // `Rows::span` asserts them in bounds.
                    let hp: &[E] = unsafe { ys_r.span(h_off, hlen) };
                    let ha = Mat {
                        data: hp,
                        rs: y_at.n_stride,
                        cs: 1,
                    };
                    p_hh.gemm(rows, ha, E::zero(), hw);
                }
                None => p_hh.gemm(
                    rows,
                    Mat::row_major(rows_of(h0s, r0, r1, h), h),
                    E::zero(),
                    hw,
                ),
            }
            let c_prev: &[E] = match prev {
                // SAFETY: rows r0..r1 of the other cell slot than `c`'s
                // (`(s + 1) % 2 != s % 2`); `at` asserts the bounds.
                Some(_) => unsafe { cs_r.at((s + 1) % 2, n, r0, r1, h) },
                None => rows_of(c0s, r0, r1, h),
            };
            // SAFETY: rows r0..r1 of cell slot `s % 2`, this block's own.
            let c = unsafe { cs_r.at(s % 2, n, r0, r1, h) };
            let (y_off, ylen) = y_at.span(t, r0, r1, h);
            // SAFETY: rows r0..r1 of step `t`, this block's own; `hp` (step
            // `prev`) was dropped after the hidden product above.
            let y = unsafe { ys_r.span(y_off, ylen) };
            let ins = StepIns {
                xp: &*xp,
                bias: bs,
                hw: &*hw,
                c_prev,
            };
            let mut outs = Outs {
                c,
                y,
                y_stride: y_at.n_stride,
                gates,
                tc: None,
            };
            lstm_rows(h, &ins, &mut outs);
        }
    });
    let last = (t_len - 1) % 2;
    let c_n = Storage::from_slice(&cs[last * n * h..(last + 1) * n * h]);
    let c_n = Tensor::<E, D>::from_parts(c_n, [n, h][..].into(), None);
    let (shape, t_axis) = if batch_first {
        ([n, t_len, h], 1)
    } else {
        ([t_len, n, h], 0)
    };
    // nothing recorded: shown to the tools as the sequence op it is (the
    // input projection inside it), with its tensor inputs
    let weights = [w_ih.dense(), w_hh.dense()];
    let inputs = [Some(x), Some(h0), Some(c0), bias]
        .into_iter()
        .chain(weights);
    let out = Tensor::<E, D>::from_parts(ys, shape[..].into(), None)
        .seen("lstm_sequence", inputs.flatten());
    let h_n = out.narrow(t_axis, seq.last(), 1).view(&[n, h]);
    Some((out, h_n, c_n))
}
