//! The int8 LSTM and GRU of PyTorch's dynamic quantization
//! (`torch.ao.nn.quantized.dynamic.LSTM` / `GRU`, the CPU path of ATen's
//! `quantized_lstm` / `quantized_gru`): per layer and direction, the input
//! projection of the whole sequence is one dynamic int8 product (one
//! activation scale for all `T x N` rows, `bias_ih` added in its epilogue),
//! then every step quantizes the hidden state `h` on its own and multiplies
//! it by the int8 `weight_hh` (`bias_hh` added), and the gates and the state
//! update run in `f32` exactly as in the float cell.

use super::buf::{f32_values, tensor_from_f32};
use super::inference::inference_only;
use super::int8::{quantize_rows, Granularity, Int8Weight};
use crate::cpu::memory::Storage;
use crate::cpu::qgemm::padded_k;
use crate::cpu::threads::parallel_for_cost;
use crate::tensor::{Element, Float, Tensor};
use std::sync::Arc;

/// The int8 weights of one layer and direction.
#[derive(Clone, Debug)]
pub(crate) struct Int8Cell {
    /// `weight_ih`, `[G H, in]`.
    pub(crate) ih: Arc<Int8Weight>,
    /// `weight_hh`, `[G H, H]`.
    pub(crate) hh: Arc<Int8Weight>,
}

impl Int8Cell {
    /// Quantizes a cell's two weights.
    pub(crate) fn quantize<E: Float>(
        w_ih: &Tensor<E>,
        w_hh: &Tensor<E>,
        granularity: Granularity,
    ) -> Self {
        let q = |w: &Tensor<E>| {
            Arc::new(Int8Weight::quantize(
                &to_f32(w),
                w.dim(0),
                w.dim(1),
                granularity,
            ))
        };
        Int8Cell {
            ih: q(w_ih),
            hh: q(w_hh),
        }
    }
}

/// Which cell's gates follow the projections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CellKind {
    /// `(i, f, g, o)`, states `h` and `c`.
    Lstm,
    /// `(r, z, n)`, state `h`.
    Gru,
}

impl CellKind {
    /// How many gates the weights stack.
    fn gates(self) -> usize {
        match self {
            CellKind::Lstm => 4,
            CellKind::Gru => 3,
        }
    }

    /// The layer's name in messages.
    fn name(self) -> &'static str {
        match self {
            CellKind::Lstm => "LSTM",
            CellKind::Gru => "GRU",
        }
    }
}

pub(crate) fn to_f32<E: Float>(t: &Tensor<E>) -> Vec<f32> {
    t.to_vec()
        .iter()
        .map(|&v| Element::to_f64(v) as f32)
        .collect()
}

/// One layer and direction of a quantized cell over a time-major input
/// `x` (`[T, N, in]`) from the initial states `init` (each `[N, H]`):
/// the outputs `[T, N, H]` in time order and the final states.
///
/// Every buffer comes from the pool: the quantized `h`, the `i32` sums and
/// the gates are taken once per sequence and reused at every step, whose
/// blocks of batch rows run on the kernels' threads ([`int8_steps`]). The gate functions are forge's
/// vectorizable `sigmoid_f32` / `tanh_f32` (within 2 and 2.5 ulp), as the
/// f32 cells use.
///
/// # Panics
/// When the shapes do not fit the cell's weights.
pub(crate) fn int8_sequence<E: Float>(
    kind: CellKind,
    cell: &Int8Cell,
    x: &Tensor<E>,
    bias_ih: Option<&Tensor<E>>,
    bias_hh: Option<&Tensor<E>>,
    init: &[Tensor<E>],
    reverse: bool,
) -> (Tensor<E>, Vec<Tensor<E>>) {
    let (t_len, n) = (x.dim(0), x.dim(1));
    let gh = cell.hh.out_features();
    let h_size = cell.hh.in_features();
    let g = gh / h_size.max(1);
    assert!(
        h_size > 0 && g == kind.gates() && g * h_size == gh,
        "int8 {kind:?}: weight_hh [{gh}, {h_size}] is not [{} H, H]",
        kind.gates()
    );
    let b_ih = bias_ih.map(|b| f32_values(b.as_slice()));
    let b_hh = bias_hh.map(|b| f32_values(b.as_slice()));
    // the whole sequence's input projection, one activation scale
    let xp = cell
        .ih
        .linear_pooled(&f32_values(x.as_slice()), b_ih.as_deref(), None);
    let mut h = Storage::from_slice(&f32_values(init[0].as_slice()));
    let mut c = match kind {
        CellKind::Lstm => Storage::from_slice(&f32_values(init[1].as_slice())),
        CellKind::Gru => Storage::with_capacity(0),
    };
    assert_eq!(
        h.len(),
        n * h_size,
        "int8 {kind:?}: h0 is not [{n}, {h_size}]"
    );
    if kind == CellKind::Lstm {
        assert_eq!(
            c.len(),
            n * h_size,
            "int8 {kind:?}: c0 is not [{n}, {h_size}]"
        );
    }
    let mut out = Storage::<f32>::stale(t_len * n * h_size);
    let bufs = StepBuffers {
        h: &mut h,
        c: &mut c,
        out: &mut out,
    };
    int8_steps(
        kind,
        cell,
        &xp,
        b_hh.as_deref(),
        bufs,
        reverse,
        step_block_rows(n),
    );
    let mut states = vec![tensor_from_f32(h, &[n, h_size])];
    if kind == CellKind::Lstm {
        states.push(tensor_from_f32(c, &[n, h_size]));
    }
    // recorded, so that a backward pass reaching the layer panics naming it
    // (the int8 loop has no backward) instead of leaving the layers before
    // it without gradients
    let mut inputs = vec![x.clone()];
    inputs.extend(bias_ih.cloned());
    inputs.extend(bias_hh.cloned());
    inputs.extend(init.iter().cloned());
    let layer = format!(
        "{}({} -> {h_size}) with int8 weights",
        kind.name(),
        cell.ih.in_features()
    );
    let record = |y: Tensor<E>, op| inference_only(y, inputs.clone(), op, layer.clone());
    let states = states
        .into_iter()
        .map(|s| record(s, "rnn_int8_state"))
        .collect();
    (
        record(tensor_from_f32(out, &[t_len, n, h_size]), "rnn_int8"),
        states,
    )
}

/// The fewest batch rows per block of a step's parallel loop: two AMX
/// tiles of 16 rows, the int8 product's own block
/// ([`qgemm`](crate::cpu::qgemm)), so that a split step does not run its
/// product on part-filled tiles.
const STEP_BLOCK_ROWS: usize = 32;

/// The rows per block of [`int8_steps`] for `n` rows: one block per
/// thread (a step's product then streams `weight_hh` once per thread, and
/// one thread runs the whole batch as one product), each of at least
/// [`STEP_BLOCK_ROWS`] rows.
fn step_block_rows(n: usize) -> usize {
    let blocks = crate::cpu::threads::num_threads()
        .min(n / STEP_BLOCK_ROWS)
        .max(1);
    n.div_ceil(blocks).max(1)
}

/// Estimated nanoseconds per gate value of a step (its share of the int8
/// product, the epilogue and the gate functions): an LSTM step of 64 rows
/// with `H = 128` took about 70 µs on one thread (Intel Xeon model 207,
/// 2026-12-06), 2.1 ns for each of its 64 x 512 gate values.
const STEP_NS_PER_GATE: usize = 2;

/// The states and the output of [`int8_steps`]: `h` (`[N, H]`), `c`
/// (`[N, H]` for an LSTM, empty for a GRU), updated in place, and `out`
/// (`[T, N, H]`), every step's `h`.
struct StepBuffers<'a> {
    h: &'a mut [f32],
    c: &'a mut [f32],
    out: &'a mut [f32],
}

/// One block of rows of one step: its rows of the int8 sums, of the
/// hidden projection and of the states.
struct StepBlock<'a> {
    r0: usize,
    acc: &'a mut [i32],
    hp: &'a mut [f32],
    h: &'a mut [f32],
    c: &'a mut [f32],
}

/// The time loop of [`int8_sequence`] over the input projection `xp`
/// (`[T, N, G H]`, `bias_ih` included). Each step quantizes all of `h`
/// with one scale (the batch's range, as PyTorch's per-tensor dynamic
/// quantization), then runs its blocks of `block_rows` rows in parallel:
/// each multiplies its rows of the quantized `h` by `weight_hh` (the
/// epilogue adding `bias_hh`) and updates its rows' states. The `i32`
/// sums of a row are exact whatever rows share its product, and the
/// epilogue and the gates work row by row, so the result does not depend
/// on `block_rows` or on the thread count.
fn int8_steps(
    kind: CellKind,
    cell: &Int8Cell,
    xp: &[f32],
    b_hh: Option<&[f32]>,
    bufs: StepBuffers<'_>,
    reverse: bool,
    block_rows: usize,
) {
    let StepBuffers { h, c, out } = bufs;
    let gh = cell.hh.out_features();
    let h_size = cell.hh.in_features();
    let n = h.len() / h_size;
    let t_len = out.len() / (n * h_size).max(1);
    let kp = padded_k(h_size);
    let block_rows = block_rows.max(1);
    // the step's scratch, taken once
    let mut a = Storage::<u8>::stale(n * kp);
    let mut acc = Storage::<i32>::stale(n * gh);
    let mut hp = Storage::<f32>::stale(n * gh);
    for step in 0..t_len {
        let t = if reverse { t_len - 1 - step } else { step };
        let (scale, zp) = quantize_rows(h, h_size, &mut a);
        let xt = &xp[t * n * gh..(t + 1) * n * gh];
        let c_rows = if kind == CellKind::Lstm {
            block_rows * h_size
        } else {
            0
        };
        // each block's rows of every buffer, claimed once by the chunk that
        // runs it (the lock is never contended)
        let blocks: Vec<std::sync::Mutex<StepBlock>> = acc
            .chunks_mut(block_rows * gh)
            .zip(hp.chunks_mut(block_rows * gh))
            .zip(h.chunks_mut(block_rows * h_size))
            .zip(
                c.chunks_mut(c_rows.max(1))
                    .chain(std::iter::repeat_with(|| &mut [][..])),
            )
            .enumerate()
            .map(|(i, (((acc, hp), h), c))| {
                std::sync::Mutex::new(StepBlock {
                    r0: i * block_rows,
                    acc,
                    hp,
                    h,
                    c,
                })
            })
            .collect();
        let a = &a[..];
        // the epilogue's per-column terms depend on the step's scale, not
        // on the rows: made once for every block
        let terms = cell.hh.epilogue_terms(scale, zp);
        parallel_for_cost(blocks.len(), n * gh * STEP_NS_PER_GATE, |i| {
            let mut guard = blocks[i].lock().unwrap_or_else(|e| e.into_inner());
            let blk = &mut *guard;
            let rows = blk.h.len() / h_size;
            let a = &a[blk.r0 * kp..(blk.r0 + rows) * kp];
            cell.hh
                .product_with(rows, a, &terms, b_hh, None, blk.acc, blk.hp);
            let mut tmp = Storage::<f32>::stale(h_size);
            for b in 0..rows {
                let r = blk.r0 + b;
                let xr = &xt[r * gh..(r + 1) * gh];
                let hr = &mut blk.hp[b * gh..(b + 1) * gh];
                let hb = &mut blk.h[b * h_size..(b + 1) * h_size];
                match kind {
                    CellKind::Lstm => {
                        let cb = &mut blk.c[b * h_size..(b + 1) * h_size];
                        gates::lstm(hr, xr, cb, hb, &mut tmp);
                    }
                    CellKind::Gru => gates::gru(hr, xr, hb, &mut tmp),
                }
            }
        });
        out[t * n * h_size..(t + 1) * n * h_size].copy_from_slice(h);
    }
}

/// The gates and the state update of one batch row, compiled for the
/// CPU's vector width (the loops vectorize only with the target features
/// the transcendental helpers need, as in `ops/rnn_cell/lstm_f32.rs`);
/// every build computes the same operations in the same order, so the bits
/// do not depend on the path.
mod gates {
    use crate::cpu::vmath::{sigmoid_f32, tanh_f32};

    /// LSTM: `hr` holds `linear_hh(h)` (`[4 H]`, gates `i f g o`), `xr`
    /// `linear_ih(x)`; `c` and `h` are updated, `tmp` (`[H]`) is scratch.
    #[inline(always)]
    fn lstm_body(hr: &mut [f32], xr: &[f32], c: &mut [f32], h: &mut [f32], tmp: &mut [f32]) {
        let hs = h.len();
        // PyTorch: gates = linear_hh(h) + linear_ih(x)
        for (v, &xv) in hr.iter_mut().zip(xr) {
            *v += xv;
        }
        let (i_f, go) = hr.split_at_mut(2 * hs);
        let (g, o) = go.split_at_mut(hs);
        for v in i_f.iter_mut() {
            *v = sigmoid_f32(*v);
        }
        for v in o[..hs].iter_mut() {
            *v = sigmoid_f32(*v);
        }
        for v in g.iter_mut() {
            *v = tanh_f32(*v);
        }
        let (i, f) = i_f.split_at(hs);
        let tmp = &mut tmp[..hs];
        for ((((cv, t), &iv), &fv), &gv) in c.iter_mut().zip(tmp.iter_mut()).zip(i).zip(f).zip(&*g)
        {
            *cv = fv * *cv + iv * gv;
            *t = tanh_f32(*cv);
        }
        for ((hv, &ov), &t) in h.iter_mut().zip(&o[..hs]).zip(&*tmp) {
            *hv = ov * t;
        }
    }

    /// GRU: `hr` holds `linear_hh(h)` (`[3 H]`, gates `r z n`), `xr`
    /// `linear_ih(x)`; `h` is updated, `tmp` (`[H]`) is scratch.
    #[inline(always)]
    fn gru_body(hr: &mut [f32], xr: &[f32], h: &mut [f32], tmp: &mut [f32]) {
        let hs = h.len();
        let (rz, hn) = hr.split_at_mut(2 * hs);
        for (v, &xv) in rz.iter_mut().zip(&xr[..2 * hs]) {
            *v = sigmoid_f32(*v + xv);
        }
        let (r, z) = rz.split_at(hs);
        let tmp = &mut tmp[..hs];
        for (((t, &xn), &hnv), &rv) in tmp.iter_mut().zip(&xr[2 * hs..]).zip(&hn[..hs]).zip(r) {
            *t = tanh_f32(xn + hnv * rv);
        }
        for ((hv, &t), &zv) in h.iter_mut().zip(&*tmp).zip(z) {
            *hv = (*hv - t) * zv + t;
        }
    }

    macro_rules! build {
        ($lstm:ident, $gru:ident, $features:literal) => {
            /// # Safety
            /// The CPU has the target features.
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = $features)]
            #[inline(never)]
            unsafe fn $lstm(
                hr: &mut [f32],
                xr: &[f32],
                c: &mut [f32],
                h: &mut [f32],
                tmp: &mut [f32],
            ) {
                lstm_body(hr, xr, c, h, tmp)
            }

            /// # Safety
            /// The CPU has the target features.
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = $features)]
            #[inline(never)]
            unsafe fn $gru(hr: &mut [f32], xr: &[f32], h: &mut [f32], tmp: &mut [f32]) {
                gru_body(hr, xr, h, tmp)
            }
        };
    }
    build!(lstm_avx512, gru_avx512, "avx512f");
    build!(lstm_avx2, gru_avx2, "avx2,fma");

    /// Which build this CPU (and the CPU class in force) runs.
    #[derive(Clone, Copy)]
    enum Path {
        Avx512,
        Avx2,
        Portable,
    }

    fn path() -> Path {
        #[cfg(target_arch = "x86_64")]
        {
            use crate::cpu::class::cpu_has;
            if cpu_has!("avx512f") {
                return Path::Avx512;
            }
            if cpu_has!("avx2") && cpu_has!("fma") {
                return Path::Avx2;
            }
        }
        Path::Portable
    }

    /// See `lstm_body`.
    pub(super) fn lstm(hr: &mut [f32], xr: &[f32], c: &mut [f32], h: &mut [f32], tmp: &mut [f32]) {
        match path() {
            // SAFETY: `path` chose the build from what the CPU has.
            #[cfg(target_arch = "x86_64")]
            Path::Avx512 => unsafe { lstm_avx512(hr, xr, c, h, tmp) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            Path::Avx2 => unsafe { lstm_avx2(hr, xr, c, h, tmp) },
            _ => lstm_body(hr, xr, c, h, tmp),
        }
    }

    /// See `gru_body`.
    pub(super) fn gru(hr: &mut [f32], xr: &[f32], h: &mut [f32], tmp: &mut [f32]) {
        match path() {
            // SAFETY: `path` chose the build from what the CPU has.
            #[cfg(target_arch = "x86_64")]
            Path::Avx512 => unsafe { gru_avx512(hr, xr, h, tmp) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            Path::Avx2 => unsafe { gru_avx2(hr, xr, h, tmp) },
            _ => gru_body(hr, xr, h, tmp),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Rng;

    /// `len` values drawn uniformly from `[-scale, scale)`.
    fn values(len: usize, scale: f32, rng: &mut Rng) -> Vec<f32> {
        (0..len)
            .map(|_| (rng.uniform() as f32 * 2.0 - 1.0) * scale)
            .collect()
    }

    /// `(out, h, c)` of [`int8_steps`] on `n` rows in blocks of
    /// `block_rows`, at `threads` threads.
    #[allow(clippy::too_many_arguments)]
    fn run(
        kind: CellKind,
        cell: &Int8Cell,
        xp: &[f32],
        b_hh: &[f32],
        h0: &[f32],
        c0: &[f32],
        t_len: usize,
        block_rows: usize,
        threads: usize,
    ) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        crate::cpu::set_num_threads(threads);
        let (mut h, mut c) = (h0.to_vec(), c0.to_vec());
        let mut out = vec![f32::NAN; t_len * h0.len()];
        let bufs = StepBuffers {
            h: &mut h,
            c: &mut c,
            out: &mut out,
        };
        int8_steps(kind, cell, xp, Some(b_hh), bufs, false, block_rows);
        (out, h, c)
    }

    /// A step's blocks of rows give the bits of the whole batch as one
    /// block (the loop before it was split), for blocks of several sizes,
    /// the last one short, at 1 to 3 threads; so the result does not depend
    /// on the thread count either.
    #[test]
    fn step_blocks_give_the_bits_of_one_block() {
        let _threads = crate::cpu::threads::lock_thread_count();
        let before = crate::cpu::num_threads();
        let mut rng = Rng::new(7);
        let (t_len, n, h_size, input) = (5, 70, 40, 12);
        for kind in [CellKind::Lstm, CellKind::Gru] {
            let gh = kind.gates() * h_size;
            let w_ih = Tensor::from_vec(values(gh * input, 0.3, &mut rng), &[gh, input]);
            let w_hh = Tensor::from_vec(values(gh * h_size, 0.3, &mut rng), &[gh, h_size]);
            let cell = Int8Cell::quantize(&w_ih, &w_hh, Granularity::PerChannel);
            let xp = values(t_len * n * gh, 1.5, &mut rng);
            let b_hh = values(gh, 0.5, &mut rng);
            let h0 = values(n * h_size, 1.0, &mut rng);
            let c0 = match kind {
                CellKind::Lstm => values(n * h_size, 1.0, &mut rng),
                CellKind::Gru => Vec::new(),
            };
            let want = run(kind, &cell, &xp, &b_hh, &h0, &c0, t_len, n, 1);
            assert!(want.0.iter().all(|v| v.is_finite()), "{kind:?}");
            for block_rows in [1, 7, 32, 35, 69] {
                for threads in [1, 2, 3] {
                    let dispatches = crate::cpu::threads::pool_dispatches();
                    let got = run(
                        kind, &cell, &xp, &b_hh, &h0, &c0, t_len, block_rows, threads,
                    );
                    // the steps' blocks did run on the pool (each step's
                    // estimate is above the threshold at these sizes)
                    let pooled = crate::cpu::threads::pool_dispatches() > dispatches;
                    assert_eq!(
                        pooled,
                        threads > 1,
                        "{kind:?}: {block_rows} rows, {threads} threads"
                    );
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert!(
                        bits(&got.0) == bits(&want.0)
                            && bits(&got.1) == bits(&want.1)
                            && bits(&got.2) == bits(&want.2),
                        "{kind:?}: blocks of {block_rows} rows at {threads} threads"
                    );
                }
            }
        }
        crate::cpu::set_num_threads(before);
    }
}
