//! Fused recurrent cells: [`lstm_sequence`] and [`gru_sequence`] run one
//! layer and direction of an LSTM or GRU over a whole sequence as one tape
//! node. Each time step is one product `h_{t-1} W_hh^T` (forge's gemm) and
//! one kernel for the gate nonlinearities and the state update; the
//! backward pass runs the steps in reverse with one kernel and one product
//! per step, then one product over the whole sequence for `dW_hh`.
//!
//! ```text
//! LSTM  a = xp_t + h_{t-1} W_hh^T;  i, f, o = sigmoid(a_i, a_f, a_o);  g = tanh(a_g)
//!       c_t = f c_{t-1} + i g;      h_t = o tanh(c_t)
//! GRU   hp = h_{t-1} W_hh^T + b_hh;  r, z = sigmoid(xp_rz + hp_rz)
//!       n = tanh(xp_n + r hp_n);      h_t = n + z (h_{t-1} - n)
//! ```
//!
//! The forward kernels do the composed ops' arithmetic in the same order
//! (the same vector `sigmoid`/`tanh` from [`vmath`](crate::cpu::vmath), `xp + hw` after the
//! product), so outputs equal those of the per-step tensor ops exactly.
//!
//! **Threads.** The rows of the batch are independent through the whole
//! recurrence, so with several threads the batch is cut into one block of
//! rows per thread (at least 8 rows each) and every block runs the whole
//! time loop, forward or backward, on its own: no synchronisation per
//! step. This is bit-identical for any number of blocks: the cell kernels
//! compute each element from its own row only, and each row of a product
//! is the same sum in the same order however many rows the product has
//! (forge's gemm contract; blocks have at least 2 rows, so the product
//! never switches to the one-row path). `dW_hh` and `db_hh` are then one
//! product / one sum over the whole sequence, after the loop.
//!
//! Under `backward_with_graph` the rules recompute the steps with tensor
//! ops from the inputs and write the reverse pass in tensor ops, so the
//! gradients are differentiable again. Under `no_grad` nothing is saved:
//! the kernels reuse one step's gate buffer.

use crate::autograd::is_grad_enabled;
use crate::cpu::gemm::{gemm, Mat, PackedRhs};
use crate::cpu::threads::parallel_for_cost;
use crate::cpu::{num_threads, parallel_for, Storage};
use crate::tensor::{Device, Float, Tensor};
use std::sync::Arc;

mod fp8_hidden;
mod gru;
mod gru_f32;
mod isa;
mod lstm;
mod lstm_f32;
mod lstm_infer;
#[cfg(test)]
mod lstm_layer_tests;
mod lstm_projection;
#[cfg(test)]
mod sequence_tests;
#[cfg(test)]
mod test_util;

pub(crate) use fp8_hidden::Fp8Hidden;
pub use gru::gru_sequence;
pub(crate) use gru::gru_sequence_with;
pub(crate) use lstm::lstm_layer;
pub use lstm::lstm_sequence;
pub(crate) use lstm::lstm_sequence_with;
#[cfg(test)]
pub(crate) use lstm_infer::holds_packed;
pub(crate) use lstm_infer::{lstm_projected, ProjWeight};

/// `W_hh` (`[G H, H]`) of a fused sequence op: a tensor, or 8-bit float
/// bytes prepared for the loop's products ([`Fp8Hidden`]; inference only:
/// nothing is recorded).
#[derive(Clone, Copy)]
pub(crate) enum HiddenWeight<'a, E: Float, D: Device> {
    /// A weight tensor.
    Dense(&'a Tensor<E, D>),
    /// An fp8 weight, decoded in the packing step or read in place.
    Fp8(&'a Fp8Hidden<'a, E>),
}

impl<E: Float, D: Device> HiddenWeight<'_, E, D> {
    /// The weight's shape.
    fn shape(&self) -> Vec<usize> {
        match self {
            HiddenWeight::Dense(w) => w.shape().to_vec(),
            HiddenWeight::Fp8(w) => {
                let (n, k) = w.dims();
                vec![n, k]
            }
        }
    }
}

/// Fewest batch rows per block of the time loop.
const MIN_BLOCK_ROWS: usize = 8;

/// Products with more columns than this (and more than one row) take
/// gemm's packed path whatever the operands' layout (`cpu::gemm` module
/// docs: `n <= 16` is its narrow path).
const PACKED_MIN_COLS: usize = 16;

/// A buffer shared by the blocks of the time loop, each block reading and
/// writing only its own rows.
#[derive(Clone, Copy)]
struct Rows<E> {
    ptr: *mut E,
    len: usize,
}

// SAFETY: `Rows` is only used inside `for_batch_blocks`, whose blocks take
// disjoint row ranges of the buffer, and by `column_sum`'s disjoint column
// ranges; the buffer outlives the call.
unsafe impl<E: Send> Send for Rows<E> {}
// SAFETY: as above.
unsafe impl<E: Send> Sync for Rows<E> {}

impl<E> Rows<E> {
    fn new(s: &mut [E]) -> Self {
        Rows {
            ptr: s.as_mut_ptr(),
            len: s.len(),
        }
    }

    /// Rows `r0..r1` of time index `t` of a `[T, n, width]` buffer.
    ///
    /// # Safety
    /// No two live slices from the same `Rows` may overlap.
    #[allow(clippy::mut_from_ref, clippy::too_many_arguments)]
    unsafe fn at(&self, t: usize, n: usize, r0: usize, r1: usize, width: usize) -> &mut [E] {
        let (a, b) = ((t * n + r0) * width, (t * n + r1) * width);
        assert!(a <= b && b <= self.len, "rnn cell: rows out of range");
        // SAFETY: in bounds (asserted); disjointness is the caller's promise.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(a), b - a) }
    }

    /// The `len` elements from `at`.
    ///
    /// # Safety
    /// No two live slices from the same `Rows` may overlap.
    #[allow(clippy::mut_from_ref)]
    unsafe fn span(&self, at: usize, len: usize) -> &mut [E] {
        assert!(at + len <= self.len, "rnn cell: span out of range");
        // SAFETY: in bounds (asserted); disjointness is the caller's promise.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(at), len) }
    }
}

/// Runs `f(r0, r1)` for blocks of the batch's `n` rows: one block per
/// thread, each of at least [`MIN_BLOCK_ROWS`] rows (one block for a small
/// batch or one thread), in parallel.
fn for_batch_blocks(n: usize, f: impl Fn(usize, usize) + Sync) {
    let blocks = num_threads().min(n / MIN_BLOCK_ROWS).max(1);
    parallel_for(blocks, |b| f(b * n / blocks, (b + 1) * n / blocks));
}

/// The sizes and direction of one layer's sequence: `t_len` steps of `n`
/// rows of `h` hidden units, run from `T - 1` down to 0 when `reverse`.
#[derive(Clone, Copy)]
struct Seq {
    t_len: usize,
    n: usize,
    h: usize,
    reverse: bool,
}

impl Seq {
    /// The time index of step `s`.
    fn time(&self, s: usize) -> usize {
        if self.reverse {
            self.t_len - 1 - s
        } else {
            s
        }
    }

    /// The time index of the step before step `s` (none for the first).
    fn prev(&self, s: usize) -> Option<usize> {
        (s > 0).then(|| self.time(s - 1))
    }

    /// The time index of the last step.
    fn last(&self) -> usize {
        self.time(self.t_len - 1)
    }
}

/// One block's view of one step: time index `t`, the previous step's time
/// index `prev`, batch rows `r0..r1`.
#[derive(Clone, Copy)]
struct Step {
    t: usize,
    prev: Option<usize>,
    r0: usize,
    r1: usize,
}

/// `w` (`rows x cols`, row-major) transposed into a pooled row-major
/// `cols x rows` buffer, in square tiles so that the reads and the writes
/// of a tile each stay within a few cache lines.
fn transpose<E: Float>(w: &[E], rows: usize, cols: usize) -> Storage<E> {
    const TILE: usize = 16;
    assert_eq!(w.len(), rows * cols, "rnn cell: transpose shape");
    // every element is written below: no zero fill
    let mut t = Storage::<E>::stale(rows * cols);
    for r0 in (0..rows).step_by(TILE) {
        for c0 in (0..cols).step_by(TILE) {
            for c in c0..(c0 + TILE).min(cols) {
                let dst = &mut t[c * rows..(c + 1) * rows];
                for r in r0..(r0 + TILE).min(rows) {
                    dst[r] = w[r * cols + c];
                }
            }
        }
    }
    t
}

/// `x[r0..r1]` of a buffer of rows `width` wide.
fn rows_of<E>(x: &[E], r0: usize, r1: usize, width: usize) -> &[E] {
    &x[r0 * width..r1 * width]
}

/// Rows `r0..r1` of time index `t` of a `[T, n, width]` buffer.
fn step_rows<E>(x: &[E], t: usize, n: usize, r0: usize, r1: usize, width: usize) -> &[E] {
    rows_of(&x[t * n * width..(t + 1) * n * width], r0, r1, width)
}

/// The forward time loop shared by the cells: for every block of batch
/// rows and every step, `hw = h_prev W_hh^T` (`h_prev` the previous step's
/// rows of `ys`, or of `h0` at the first step; `w` is `[g, h]`), then
/// `cell(step, hw, h_prev, y)` writes the step's rows `y` of `ys`
/// (`[T, N, H]`).
fn forward_steps<E: Float, D: Device>(
    seq: Seq,
    g: usize,
    w: HiddenWeight<'_, E, D>,
    h0: &[E],
    ys: &mut [E],
    cell: impl Fn(Step, &[E], &[E], &mut [E]) + Sync,
) {
    let (n, h) = (seq.n, seq.h);
    // Every step multiplies by W_hh^T. In f32 with the packed gemm
    // (AVX-512, AVX2 + FMA) it is packed once here into the panels gemm
    // packs on every call (`PackedRhs`: the same bits). Otherwise, stored
    // transposed (`[g, h]`), it would be packed
    // element by element at each step; a row-major `[h, g]` copy, made once
    // here, packs with contiguous row copies into the same panels (so the
    // same bits). Either only where the product takes the packed path for
    // both layouts: a one-row product (N = 1) is a matrix-vector loop whose
    // order of summation follows the layout.
    //
    // An fp8 weight comes prepared for these products ([`Fp8Hidden`]:
    // panels decoded from the bytes, or the bytes read in place for one
    // row), with the bits of the decoded weight's.
    let (w, fp8) = match w {
        HiddenWeight::Dense(w) => (w.as_slice(), None),
        HiddenWeight::Fp8(p) => (&[][..], Some(p)),
    };
    let packed = (n >= 2 && fp8.is_none())
        .then(|| PackedRhs::new(h, g, Mat::transposed(w, h)))
        .flatten();
    let dense = packed.is_none() && fp8.is_none();
    let wt = (dense && n >= 2 && g > PACKED_MIN_COLS).then(|| transpose(w, g, h));
    let w_t = match &wt {
        Some(wt) => Mat::row_major(wt, g),
        None => Mat::transposed(w, h),
    };
    // one product buffer for every block (rows r0..r1 each), taken before
    // the blocks run: the pool traffic does not depend on their schedule
    // (no zero fill: each step's product, `beta = 0`, writes the rows
    // whole before the cell reads them)
    let mut hw_all = Storage::<E>::stale(n * g);
    let (ys_r, hw_r) = (Rows::new(ys), Rows::new(&mut hw_all));
    for_batch_blocks(n, |r0, r1| {
        // SAFETY: this block's own rows of the product buffer.
        let hw = unsafe { hw_r.at(0, n, r0, r1, g) };
        for s in 0..seq.t_len {
            let (t, prev) = (seq.time(s), seq.prev(s));
            // Both `at`: this block reads and writes only rows r0..r1 of
            // `ys`, and reads time index `prev` while it writes time index
            // `t != prev`; `at` asserts each range inside `ys`.
            let h_prev: &[E] = match prev {
                // SAFETY: rows r0..r1 of step `prev`, read only (see above).
                Some(p) => unsafe { ys_r.at(p, n, r0, r1, h) },
                None => rows_of(h0, r0, r1, h),
            };
            let hp = Mat::row_major(h_prev, h);
            match (&packed, fp8) {
                // blocks have at least 2 rows when n >= 2 (`for_batch_blocks`)
                (Some(p), _) => p.gemm(r1 - r0, hp, E::zero(), hw),
                (None, Some(p)) => p.gemm(r1 - r0, hp, hw),
                (None, None) => gemm(r1 - r0, h, g, hp, w_t, E::zero(), hw),
            }
            // SAFETY: rows r0..r1 of step `t != prev`: overlaps no live
            // slice (`h_prev` is another step's rows, `hw` another buffer).
            let y = unsafe { ys_r.at(t, n, r0, r1, h) };
            cell(Step { t, prev, r0, r1 }, hw, h_prev, y);
        }
    });
}

/// The reverse time loop shared by the cells: for every block of batch
/// rows and every step from the last, `cell(step, carry, d)` turns the
/// block's rows of `carry` (`[N, H]`, `dh` from the later step) into this
/// step's rows `d` of `ds` (`[T, N, g]`, the gradient of the hidden
/// product), then `carry = beta carry + d W_hh` (`w` is `[g, h]`).
fn backward_steps<E: Float>(
    seq: Seq,
    g: usize,
    w: &[E],
    beta: E,
    carry: &mut [E],
    ds: &mut [E],
    cell: impl Fn(Step, &mut [E], &mut [E]) + Sync,
) {
    let (n, h) = (seq.n, seq.h);
    let w_m = Mat::row_major(w, h);
    // packed once for every step (f32 where the packed gemm runs; the
    // same bits as gemm)
    let packed = (n >= 2).then(|| PackedRhs::new(g, h, w_m)).flatten();
    let (carry_r, ds_r) = (Rows::new(carry), Rows::new(ds));
    for_batch_blocks(n, |r0, r1| {
        // SAFETY: this block reads and writes only rows r0..r1 of `carry`
        // (and of `ds` below), which `at` asserts inside the buffer.
        let cb = unsafe { carry_r.at(0, n, r0, r1, h) };
        for s in (0..seq.t_len).rev() {
            let (t, prev) = (seq.time(s), seq.prev(s));
            // SAFETY: rows r0..r1 of step `t` of `ds`, this block's own; the
            // previous step's slice `d` is dead by now.
            let d = unsafe { ds_r.at(t, n, r0, r1, g) };
            cell(Step { t, prev, r0, r1 }, cb, d);
            let dm = Mat::row_major(d, g);
            match &packed {
                Some(p) => p.gemm(r1 - r0, dm, beta, cb),
                None => gemm(r1 - r0, g, h, dm, w_m, beta, cb),
            }
        }
    });
}

/// `dW_hh = sum_t d_t^T h_{t-1}` (`d` is `[T, N, G]`, the step outputs
/// `ys` are `[T, N, H]`) as two products: every step but the first against
/// the previous step's output, then the first step against `h0`.
fn weight_grad<E: Float>(seq: Seq, d: &[E], ys: &[E], h0: &[E], g: usize) -> Storage<E> {
    let Seq {
        t_len,
        n,
        h,
        reverse,
    } = seq;
    // no zero fill: the first product below has `beta = 0`, which writes
    // every element without reading the buffer
    let mut dw = Storage::<E>::stale(g * h);
    let rows = (t_len - 1) * n;
    if rows > 0 {
        // forward: steps 1..T read ys[0..T-1]; reverse: steps 0..T-1 (time
        // order) read ys[1..T]
        let (d_at, y_at) = if reverse { (0, n) } else { (n, 0) };
        gemm(
            g,
            rows,
            h,
            Mat::transposed(&d[d_at * g..(d_at + rows) * g], g),
            Mat::row_major(&ys[y_at * h..(y_at + rows) * h], h),
            E::zero(),
            &mut dw,
        );
    }
    let first = seq.time(0);
    gemm(
        g,
        n,
        h,
        Mat::transposed(&d[first * n * g..(first + 1) * n * g], g),
        Mat::row_major(h0, h),
        if rows > 0 { E::one() } else { E::zero() },
        &mut dw,
    );
    dw
}

/// The set-up every fused sequence op shares: the checked sizes, the op's
/// inputs in the order its rule reads them (`xp, h0, states.., w_hh,
/// bias`), whether the backward pass needs saved state, and the output
/// buffer `ys` (`[T, N, H]`, written whole by the time loop).
struct Driver<E: Float, D: Device> {
    seq: Seq,
    inputs: Vec<Tensor<E, D>>,
    save: bool,
    ys: Storage<E>,
}

impl<E: Float, D: Device> Driver<E, D> {
    /// Checks `xp [T, N, G H]`, `h0 [N, H]`, each of `states [N, H]`,
    /// `w_hh [G H, H]` and `bias [G H]` (named `bias_name` in the message).
    ///
    /// # Panics
    /// When a shape does not fit; the message names `op` and the shapes.
    #[allow(clippy::too_many_arguments)]
    fn new(
        op: &str,
        gates: usize,
        xp: &Tensor<E, D>,
        h0: &Tensor<E, D>,
        states: &[(&str, &Tensor<E, D>)],
        w_hh: HiddenWeight<'_, E, D>,
        bias: Option<(&str, &Tensor<E, D>)>,
        reverse: bool,
    ) -> Self {
        let w_shape = w_hh.shape();
        let ok = xp.rank() == 3
            && h0.rank() == 2
            && xp.dim(0) > 0
            && h0.dim(0) == xp.dim(1)
            && xp.dim(2) == gates * h0.dim(1)
            && w_shape == [gates * h0.dim(1), h0.dim(1)];
        assert!(
            ok,
            "{op}: xp {:?}, h0 {:?}, w_hh {:?}: expected [T >= 1, N, {gates}H], [N, H], [{gates}H, H]",
            xp.shape(),
            h0.shape(),
            w_shape
        );
        let (t_len, n, h) = (xp.dim(0), xp.dim(1), h0.dim(1));
        for (name, s) in states {
            assert!(
                s.shape() == [n, h],
                "{op}: {name} has shape {:?}, expected [{n}, {h}]",
                s.shape()
            );
        }
        if let Some((name, b)) = bias {
            assert!(
                b.shape() == [gates * h],
                "{op}: {name} has shape {:?}, expected [{}]",
                b.shape(),
                gates * h
            );
        }
        let mut inputs = vec![xp.clone(), h0.clone()];
        inputs.extend(states.iter().map(|(_, s)| (*s).clone()));
        let fp8 = match w_hh {
            HiddenWeight::Dense(w) => {
                inputs.push(w.clone());
                false
            }
            HiddenWeight::Fp8(_) => true,
        };
        inputs.extend(bias.map(|(_, b)| b.clone()));
        let save = is_grad_enabled() && inputs.iter().any(|t| t.is_tracked());
        assert!(
            !(fp8 && save),
            "{op}: a gradient would be recorded through an fp8 w_hh (inference only)"
        );
        Driver {
            seq: Seq {
                t_len,
                n,
                h,
                reverse,
            },
            inputs,
            save,
            // no zero fill: the time loop writes every row of every step
            // before anything reads it
            ys: Storage::stale(t_len * n * h),
        }
    }

    /// `(seq, inputs, save, ys)`.
    fn into_parts(self) -> (Seq, Vec<Tensor<E, D>>, bool, Storage<E>) {
        (self.seq, self.inputs, self.save, self.ys)
    }

    /// Rows of `width` for `save ? T : 1` steps: a per-step buffer the
    /// backward pass reads, or one step's scratch when nothing is saved.
    /// Not zero-filled: the cells write all of a step's rows before
    /// they are read.
    fn per_step(&self, width: usize) -> Storage<E> {
        let steps = if self.save { self.seq.t_len } else { 1 };
        Storage::stale(steps * self.seq.n * width)
    }

    /// `out` (`[T, N, H]`) and `h_n`, from the buffer the time loop
    /// wrote: `out` recorded by `record` with the op's `inputs` when the
    /// state is saved; otherwise shown to the tools as the op `name` of
    /// those inputs ([`Tensor::seen`]), since the profiler would else
    /// credit the whole time loop to the next op recorded.
    fn finish(
        seq: Seq,
        ys: Arc<Storage<E>>,
        name: &'static str,
        inputs: Vec<Tensor<E, D>>,
        record: Option<impl FnOnce(Tensor<E, D>, Vec<Tensor<E, D>>) -> Tensor<E, D>>,
    ) -> (Tensor<E, D>, Tensor<E, D>) {
        let y = Tensor::<E, D>::from_parts(ys, Arc::from(&[seq.t_len, seq.n, seq.h][..]), None);
        let y = match record {
            Some(r) => r(y, inputs),
            None => y.seen(name, &inputs),
        };
        let h_n = y.narrow(0, seq.last(), 1).view(&[seq.n, seq.h]);
        (y, h_n)
    }
}

/// The column sums of the rows of `d` (`width` wide), row after row (the
/// gradient of a bias added to every row). With several threads each
/// takes a range of the columns (multiples of 16 wide): every column is
/// still summed row after row, so the bits do not depend on the split.
/// One thread sums all columns in one pass over `d` (4 MiB for the LSTM
/// rows' `da`, more than L2: a pass per range would read it again).
fn column_sum<E: Float>(d: &[E], width: usize) -> Storage<E> {
    const ALIGN: usize = 16;
    let mut sum = Storage::<E>::zeroed(width);
    let ranges = num_threads().min(width.div_ceil(4 * ALIGN)).max(1);
    let at = |c: usize| (c * width.div_ceil(ALIGN) / ranges * ALIGN).min(width);
    let out = Rows::new(&mut sum);
    // memory-bound: about 4 elements a nanosecond
    parallel_for_cost(ranges, d.len() / 4, |c| {
        let (c0, c1) = (at(c), at(c + 1));
        // SAFETY: columns c0..c1 of the sum, this range's own (the ranges
        // are disjoint); `span` asserts them in bounds.
        let acc = unsafe { out.span(c0, c1 - c0) };
        for row in d.chunks_exact(width) {
            for (a, &v) in acc.iter_mut().zip(&row[c0..c1]) {
                *a += v;
            }
        }
    });
    sum
}

/// `acc += x`, where an empty `acc` takes `x` (for the tensor-op reverse
/// passes).
fn accumulate<E: Float, D: Device>(acc: &mut Option<Tensor<E, D>>, x: Tensor<E, D>) {
    *acc = Some(match acc.take() {
        Some(a) => a.add(&x),
        None => x,
    });
}

/// `d * y (1 - y)`: the gradient through a sigmoid from its output `y`.
fn sigmoid_back<E: Float, D: Device>(y: &Tensor<E, D>, d: &Tensor<E, D>) -> Tensor<E, D> {
    d.mul(&y.mul(&y.rsub_scalar(E::one())))
}

/// Wraps a gradient buffer as a tensor of `shape`.
fn grad_tensor<E: Float, D: Device>(s: Storage<E>, shape: &[usize]) -> Tensor<E, D> {
    Tensor::from_parts(s, Arc::from(shape), None)
}
