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
//! (the same vector `sigmoid`/`tanh` from [`vmath`], `xp + hw` after the
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

use crate::autograd::{is_grad_enabled, BackwardCtx};
use crate::cpu::gemm::{gemm, Mat};
use crate::cpu::{num_threads, parallel_for, vmath, Storage};
use crate::tensor::{Device, Float, Tensor};
use std::sync::Arc;

/// Fewest batch rows per block of the time loop.
const MIN_BLOCK_ROWS: usize = 8;

/// A buffer shared by the blocks of the time loop, each block reading and
/// writing only its own rows.
#[derive(Clone, Copy)]
struct Rows<E> {
    ptr: *mut E,
    len: usize,
}

// SAFETY: `Rows` is only used inside `for_batch_blocks`, whose blocks take
// disjoint row ranges of the buffer; the buffer outlives the call.
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
}

/// Runs `f(r0, r1)` for blocks of the batch's `n` rows: one block per
/// thread, each of at least [`MIN_BLOCK_ROWS`] rows (one block for a small
/// batch or one thread), in parallel.
fn for_batch_blocks(n: usize, f: impl Fn(usize, usize) + Sync) {
    let blocks = num_threads().min(n / MIN_BLOCK_ROWS).max(1);
    parallel_for(blocks, |b| f(b * n / blocks, (b + 1) * n / blocks));
}

/// The time index of step `s` of `t_len`.
fn time(s: usize, t_len: usize, reverse: bool) -> usize {
    if reverse {
        t_len - 1 - s
    } else {
        s
    }
}

/// `x[r0..r1]` of a buffer of rows `width` wide.
fn rows_of<E>(x: &[E], r0: usize, r1: usize, width: usize) -> &[E] {
    &x[r0 * width..r1 * width]
}

/// Rows `r0..r1` of time index `t` of a `[T, n, width]` buffer.
fn step_rows<E>(x: &[E], t: usize, n: usize, r0: usize, r1: usize, width: usize) -> &[E] {
    rows_of(&x[t * n * width..(t + 1) * n * width], r0, r1, width)
}

/// One LSTM step on a block of rows: `gates = act(xp + hw)` (saved
/// activated), `c = f c_prev + i g`, `y = o tanh(c)`, and `tanh(c)` into
/// `tc` when it is saved.
#[allow(clippy::too_many_arguments)]
fn lstm_rows<E: Float>(
    h: usize,
    xp: &[E],
    hw: &[E],
    c_prev: &[E],
    gates: &mut [E],
    c: &mut [E],
    y: &mut [E],
    mut tc: Option<&mut [E]>,
) {
    let g4 = 4 * h;
    for r in 0..c.len() / h {
        let a = &mut gates[r * g4..(r + 1) * g4];
        for ((a, &x), &w) in a.iter_mut().zip(&xp[r * g4..]).zip(&hw[r * g4..]) {
            *a = x + w;
        }
        vmath::sigmoid(&mut a[..2 * h]);
        vmath::tanh(&mut a[2 * h..3 * h]);
        vmath::sigmoid(&mut a[3 * h..]);
        let (cr, yr, cp) = (
            &mut c[r * h..(r + 1) * h],
            &mut y[r * h..(r + 1) * h],
            &c_prev[r * h..(r + 1) * h],
        );
        for j in 0..h {
            cr[j] = a[h + j] * cp[j] + a[j] * a[2 * h + j];
        }
        yr.copy_from_slice(cr);
        vmath::tanh(yr);
        if let Some(tc) = tc.as_deref_mut() {
            tc[r * h..(r + 1) * h].copy_from_slice(yr);
        }
        for (y, &o) in yr.iter_mut().zip(&a[3 * h..]) {
            *y = o * *y;
        }
    }
}

/// One reverse LSTM step on a block of rows. `carry` holds `dh` from the
/// later step's product on entry; `dc` holds the later step's cell
/// gradient and is replaced by this step's `dc_prev`. Writes the gate
/// pre-activation gradients to `da`.
#[allow(clippy::too_many_arguments)]
fn lstm_back_rows<E: Float>(
    h: usize,
    gates: &[E],
    tcs: &[E],
    c_prev: &[E],
    dy: Option<&[E]>,
    carry: &[E],
    dc: &mut [E],
    da: &mut [E],
) {
    let g4 = 4 * h;
    let one = E::one();
    for r in 0..tcs.len() / h {
        let a = &gates[r * g4..(r + 1) * g4];
        let d = &mut da[r * g4..(r + 1) * g4];
        for j in 0..h {
            let k = r * h + j;
            let dh = match dy {
                Some(dy) => dy[k] + carry[k],
                None => carry[k],
            };
            let (i, f, g, o) = (a[j], a[h + j], a[2 * h + j], a[3 * h + j]);
            let tc = tcs[k];
            let dct = dc[k] + dh * o * (one - tc * tc);
            d[j] = dct * g * (i * (one - i));
            d[h + j] = dct * c_prev[k] * (f * (one - f));
            d[2 * h + j] = dct * i * (one - g * g);
            d[3 * h + j] = dh * tc * (o * (one - o));
            dc[k] = dct * f;
        }
    }
}

/// What the LSTM backward pass needs from the forward pass.
struct LstmSaved<E: Float> {
    t_len: usize,
    n: usize,
    h: usize,
    reverse: bool,
    /// Activated gates `(i, f, g, o)` of every time index, `[T, N, 4H]`.
    gates: Storage<E>,
    /// `c_t` of every time index, `[T, N, H]`.
    cs: Storage<E>,
    /// `tanh(c_t)` of every time index, `[T, N, H]`.
    tcs: Storage<E>,
    /// The output `h_t` of every time index (the op's own buffer).
    ys: Arc<Storage<E>>,
}

/// Runs one LSTM layer and direction over a sequence, fused: the input
/// projection `xp` (`[T, N, 4H]`, both biases added, gate rows
/// `(i, f, g, o)` as PyTorch), the initial states `h0`, `c0` (`[N, H]`) and
/// the hidden weights `w_hh` (`[4H, H]`) give `(out, h_n, c_n)`: `out`
/// `[T, N, H]` holds `h_t` for every time index, in time order also when
/// `reverse` runs the steps from `T - 1` down to 0.
///
/// One tape node for the sequence (and one more for `c_n`); gradients of
/// gradients work (see the module docs). [`Lstm`](crate::nn::Lstm) is built
/// on it.
///
/// # Panics
/// When the shapes do not fit together; the message names them.
///
/// ```
/// use forge::nn::functional::lstm_sequence;
/// use forge::Tensor;
/// let (t, n, h) = (5, 2, 3);
/// let xp = Tensor::<f64>::ones(&[t, n, 4 * h]).requires_grad();
/// let (h0, c0) = (Tensor::zeros(&[n, h]), Tensor::zeros(&[n, h]));
/// let w = Tensor::<f64>::zeros(&[4 * h, h]).requires_grad();
/// let (out, h_n, c_n) = lstm_sequence(&xp, &h0, &c0, &w, false);
/// assert_eq!(out.shape(), &[t, n, h]);
/// assert_eq!(h_n.to_vec(), out.narrow(0, t - 1, 1).to_vec());
/// assert!(c_n.to_vec().iter().all(|&c| c > 0.0));
/// let g = out.sum().backward();
/// assert_eq!(g.get(&w).unwrap().shape(), &[4 * h, h]);
/// ```
pub fn lstm_sequence<E: Float, D: Device>(
    xp: &Tensor<E, D>,
    h0: &Tensor<E, D>,
    c0: &Tensor<E, D>,
    w_hh: &Tensor<E, D>,
    reverse: bool,
) -> (Tensor<E, D>, Tensor<E, D>, Tensor<E, D>) {
    let (t_len, n, h) = check_shapes("lstm_sequence", 4, xp, h0, w_hh);
    assert!(
        c0.shape() == [n, h],
        "lstm_sequence: c0 has shape {:?}, expected [{n}, {h}]",
        c0.shape()
    );
    let inputs = vec![xp.clone(), h0.clone(), c0.clone(), w_hh.clone()];
    let save = is_grad_enabled() && inputs.iter().any(|t| t.is_tracked());
    let (nh, g4) = (n * h, 4 * h);
    let mut ys = Storage::<E>::zeroed(t_len * nh);
    let mut cs = Storage::<E>::zeroed(t_len * nh);
    let mut tcs = Storage::<E>::zeroed(if save { t_len * nh } else { 0 });
    let mut gates = Storage::<E>::zeroed((if save { t_len } else { 1 }) * n * g4);
    let (xs, w, h0s, c0s) = (xp.as_slice(), w_hh.as_slice(), h0.as_slice(), c0.as_slice());
    // one product buffer for every block (rows r0..r1 each), taken before
    // the blocks run: the pool traffic does not depend on their schedule
    let mut hw_all = Storage::<E>::zeroed(n * g4);
    let (ys_r, cs_r, tc_r, g_r, hw_r) = (
        Rows::new(&mut ys),
        Rows::new(&mut cs),
        Rows::new(&mut tcs),
        Rows::new(&mut gates),
        Rows::new(&mut hw_all),
    );
    for_batch_blocks(n, |r0, r1| {
        let m = r1 - r0;
        // SAFETY: this block's own rows of the product buffer.
        let hw = unsafe { hw_r.at(0, n, r0, r1, g4) };
        for s in 0..t_len {
            let t = time(s, t_len, reverse);
            let prev = (s > 0).then(|| time(s - 1, t_len, reverse));
            // SAFETY (every `at` below): this block reads and writes only
            // rows r0..r1 of each buffer, and reads time index `prev`
            // while it writes time index `t != prev`.
            let (h_prev, c_prev): (&[E], &[E]) = match prev {
                Some(p) => unsafe { (ys_r.at(p, n, r0, r1, h), cs_r.at(p, n, r0, r1, h)) },
                None => (rows_of(h0s, r0, r1, h), rows_of(c0s, r0, r1, h)),
            };
            gemm(
                m,
                h,
                g4,
                Mat::row_major(h_prev, h),
                Mat::transposed(w, h),
                E::zero(),
                hw,
            );
            let gt = if save { t } else { 0 };
            let (y, c, g) = unsafe {
                (
                    ys_r.at(t, n, r0, r1, h),
                    cs_r.at(t, n, r0, r1, h),
                    g_r.at(gt, n, r0, r1, g4),
                )
            };
            let tc = save.then(|| unsafe { tc_r.at(t, n, r0, r1, h) });
            let xt = step_rows(xs, t, n, r0, r1, g4);
            lstm_rows(h, xt, hw, c_prev, g, c, y, tc);
        }
    });
    let last = time(t_len - 1, t_len, reverse);
    let c_n = Storage::from_slice(&cs[last * nh..(last + 1) * nh]);
    let ys = Arc::new(ys);
    let shape_y: Arc<[usize]> = Arc::from(&[t_len, n, h][..]);
    let shape_c: Arc<[usize]> = Arc::from(&[n, h][..]);
    let y = Tensor::<E, D>::from_parts(ys.clone(), shape_y, None);
    let c_n = Tensor::<E, D>::from_parts(c_n, shape_c, None);
    let (y, c_n) = if save {
        let saved = Arc::new(LstmSaved {
            t_len,
            n,
            h,
            reverse,
            gates,
            cs,
            tcs,
            ys,
        });
        let s2 = saved.clone();
        let y = y.record("lstm_sequence", inputs.clone(), move |ctx| {
            lstm_rule(ctx, &saved, false)
        });
        let c_n = c_n.record("lstm_sequence_c_n", inputs, move |ctx| {
            lstm_rule(ctx, &s2, true)
        });
        (y, c_n)
    } else {
        (y, c_n)
    };
    let h_n = y.narrow(0, last, 1).view(&[n, h]);
    (y, h_n, c_n)
}

/// The LSTM rule: `ctx.grad` is the gradient of `out` (`cell == false`) or
/// of `c_n` (`cell == true`).
fn lstm_rule<E: Float, D: Device>(
    ctx: &BackwardCtx<'_, E, D>,
    saved: &LstmSaved<E>,
    cell: bool,
) -> Vec<Option<Tensor<E, D>>> {
    let i = ctx.inputs;
    if ctx.create_graph {
        let g = ctx.grad;
        let (dy, dc) = if cell {
            (None, Some(g))
        } else {
            (Some(g), None)
        };
        return lstm_graph_backward(&i[0], &i[1], &i[2], &i[3], dy, dc, saved.reverse);
    }
    let LstmSaved {
        t_len,
        n,
        h,
        reverse,
        ..
    } = *saved;
    let (nh, g4) = (n * h, 4 * h);
    let g = ctx.grad.as_slice();
    let dy = (!cell).then_some(g);
    let mut dc = if cell {
        Storage::from_slice(g)
    } else {
        Storage::<E>::zeroed(nh)
    };
    let mut carry = Storage::<E>::zeroed(nh);
    let mut da = Storage::<E>::zeroed(t_len * n * g4);
    let (w, c0) = (i[3].as_slice(), i[2].as_slice());
    let (dc_r, carry_r, da_r) = (
        Rows::new(&mut dc),
        Rows::new(&mut carry),
        Rows::new(&mut da),
    );
    for_batch_blocks(n, |r0, r1| {
        let m = r1 - r0;
        // SAFETY (every `at` below): this block reads and writes only rows
        // r0..r1 of `dc`, `carry` and `da`.
        let (dcb, cb) = unsafe { (dc_r.at(0, n, r0, r1, h), carry_r.at(0, n, r0, r1, h)) };
        for s in (0..t_len).rev() {
            let t = time(s, t_len, reverse);
            let c_prev = match (s > 0).then(|| time(s - 1, t_len, reverse)) {
                Some(p) => step_rows(&saved.cs, p, n, r0, r1, h),
                None => rows_of(c0, r0, r1, h),
            };
            let dab = unsafe { da_r.at(t, n, r0, r1, g4) };
            lstm_back_rows(
                h,
                step_rows(&saved.gates, t, n, r0, r1, g4),
                step_rows(&saved.tcs, t, n, r0, r1, h),
                c_prev,
                dy.map(|d| step_rows(d, t, n, r0, r1, h)),
                cb,
                dcb,
                dab,
            );
            // dh_{t-1} = da_t W_hh
            gemm(
                m,
                g4,
                h,
                Mat::row_major(dab, g4),
                Mat::row_major(w, h),
                E::zero(),
                cb,
            );
        }
    });
    let h0 = i[1].as_slice();
    let dw = ctx
        .needs(3)
        .then(|| weight_grad(&da, &saved.ys, h0, t_len, n, g4, h, reverse));
    let shape = |s: &[usize]| -> Arc<[usize]> { Arc::from(s) };
    vec![
        ctx.needs(0)
            .then(|| Tensor::from_parts(da, shape(&[t_len, n, g4]), None)),
        ctx.needs(1)
            .then(|| Tensor::from_parts(carry, shape(&[n, h]), None)),
        ctx.needs(2)
            .then(|| Tensor::from_parts(dc, shape(&[n, h]), None)),
        dw.map(|dw| Tensor::from_parts(dw, shape(&[g4, h]), None)),
    ]
}

/// `dW_hh = sum_t d_t^T h_{t-1}` (`d` is `[T, N, G]`, the step outputs
/// `ys` are `[T, N, H]`) as two products: every step but the first against
/// the previous step's output, then the first step against `h0`.
#[allow(clippy::too_many_arguments)]
fn weight_grad<E: Float>(
    d: &[E],
    ys: &[E],
    h0: &[E],
    t_len: usize,
    n: usize,
    g: usize,
    h: usize,
    reverse: bool,
) -> Storage<E> {
    let mut dw = Storage::<E>::zeroed(g * h);
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
    let first = time(0, t_len, reverse);
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

/// The LSTM's reverse pass in tensor ops (for `backward_with_graph`): the
/// steps are recomputed from the inputs with tensor ops, so every gradient
/// is itself on the tape. `dy` is the gradient of `out`, `dc_n` that of
/// `c_n`.
fn lstm_graph_backward<E: Float, D: Device>(
    xp: &Tensor<E, D>,
    h0: &Tensor<E, D>,
    c0: &Tensor<E, D>,
    w: &Tensor<E, D>,
    dy: Option<&Tensor<E, D>>,
    dc_n: Option<&Tensor<E, D>>,
    reverse: bool,
) -> Vec<Option<Tensor<E, D>>> {
    let (t_len, n, h) = (xp.dim(0), xp.dim(1), h0.dim(1));
    let one = E::one();
    // (i, f, g, o, c_prev, tanh c, h_prev) of every step
    let mut steps = Vec::with_capacity(t_len);
    let (mut hc, mut cc) = (h0.clone(), c0.clone());
    for s in 0..t_len {
        let t = time(s, t_len, reverse);
        let a = xp.narrow(0, t, 1).view(&[n, 4 * h]).add(&hc.matmul_t(w));
        let i = a.narrow(1, 0, h).sigmoid();
        let f = a.narrow(1, h, h).sigmoid();
        let g = a.narrow(1, 2 * h, h).tanh();
        let o = a.narrow(1, 3 * h, h).sigmoid();
        let c = f.mul(&cc).add(&i.mul(&g));
        let tc = c.tanh();
        let hn = o.mul(&tc);
        steps.push((i, f, g, o, cc, tc, hc));
        hc = hn;
        cc = c;
    }
    let sig_d = |y: &Tensor<E, D>, d: &Tensor<E, D>| d.mul(&y.mul(&y.rsub_scalar(one)));
    let mut dh: Option<Tensor<E, D>> = None;
    let mut dc: Option<Tensor<E, D>> = dc_n.cloned();
    let mut dw: Option<Tensor<E, D>> = None;
    let mut das: Vec<Option<Tensor<E, D>>> = vec![None; t_len];
    for s in (0..t_len).rev() {
        let t = time(s, t_len, reverse);
        let (i, f, g, o, c_prev, tc, h_prev) = &steps[s];
        let dht = match (dy.map(|d| d.narrow(0, t, 1).view(&[n, h])), dh.take()) {
            (Some(a), Some(b)) => a.add(&b),
            (Some(a), None) => a,
            (None, Some(b)) => b,
            (None, None) => Tensor::zeros(&[n, h]),
        };
        let through = dht.mul(o).mul(&tc.square().rsub_scalar(one));
        let dct = match dc.take() {
            Some(d) => d.add(&through),
            None => through,
        };
        let da = Tensor::cat(
            &[
                &sig_d(i, &dct.mul(g)),
                &sig_d(f, &dct.mul(c_prev)),
                &dct.mul(i).mul(&g.square().rsub_scalar(one)),
                &sig_d(o, &dht.mul(tc)),
            ],
            1,
        );
        dc = Some(dct.mul(f));
        dh = Some(da.matmul(w));
        let dws = da.t().matmul(h_prev);
        dw = Some(match dw {
            Some(acc) => acc.add(&dws),
            None => dws,
        });
        das[t] = Some(da);
    }
    let das: Vec<Tensor<E, D>> = das.into_iter().flatten().collect();
    let refs: Vec<&Tensor<E, D>> = das.iter().collect();
    vec![Some(Tensor::stack(&refs, 0)), dh, dc, dw]
}

/// Checks `xp [T, N, G H]`, `h0 [N, H]`, `w_hh [G H, H]`; returns `(T, N, H)`.
fn check_shapes<E: Float, D: Device>(
    op: &str,
    gates: usize,
    xp: &Tensor<E, D>,
    h0: &Tensor<E, D>,
    w_hh: &Tensor<E, D>,
) -> (usize, usize, usize) {
    let ok = xp.rank() == 3
        && h0.rank() == 2
        && xp.dim(0) > 0
        && h0.dim(0) == xp.dim(1)
        && xp.dim(2) == gates * h0.dim(1)
        && w_hh.shape() == [gates * h0.dim(1), h0.dim(1)];
    assert!(
        ok,
        "{op}: xp {:?}, h0 {:?}, w_hh {:?}: expected [T >= 1, N, {gates}H], [N, H], [{gates}H, H]",
        xp.shape(),
        h0.shape(),
        w_hh.shape()
    );
    (xp.dim(0), xp.dim(1), h0.dim(1))
}

/// One GRU step on a block of rows: `hp = hw + b`, then `(r, z, n, hp_n)`
/// saved in `s` (`[rows, 4H]`) and `y = n + z (h_prev - n)`.
fn gru_rows<E: Float>(
    h: usize,
    xp: &[E],
    hw: &[E],
    b: Option<&[E]>,
    h_prev: &[E],
    s: &mut [E],
    y: &mut [E],
) {
    let (g3, g4) = (3 * h, 4 * h);
    for r in 0..y.len() / h {
        let (x, w) = (&xp[r * g3..(r + 1) * g3], &hw[r * g3..(r + 1) * g3]);
        let sr = &mut s[r * g4..(r + 1) * g4];
        // hp_n into the last block; r, z pre-activations into the first two
        for j in 0..g3 {
            let hp = match b {
                Some(b) => w[j] + b[j],
                None => w[j],
            };
            if j < 2 * h {
                sr[j] = x[j] + hp;
            } else {
                sr[h + j] = hp;
            }
        }
        vmath::sigmoid(&mut sr[..2 * h]);
        for j in 0..h {
            sr[2 * h + j] = x[2 * h + j] + sr[j] * sr[3 * h + j];
        }
        vmath::tanh(&mut sr[2 * h..3 * h]);
        let (yr, hp) = (&mut y[r * h..(r + 1) * h], &h_prev[r * h..(r + 1) * h]);
        for j in 0..h {
            let nn = sr[2 * h + j];
            yr[j] = nn + sr[h + j] * (hp[j] - nn);
        }
    }
}

/// One reverse GRU step on a block of rows. `carry` holds `dh` from the
/// later step on entry and this step's direct term `dh z` on exit (the
/// product `dhp W_hh` is added to it afterwards). Writes `dxp` and `dhp`.
#[allow(clippy::too_many_arguments)]
fn gru_back_rows<E: Float>(
    h: usize,
    s: &[E],
    h_prev: &[E],
    dy: &[E],
    carry: &mut [E],
    dxp: &mut [E],
    dhp: &mut [E],
) {
    let (g3, g4) = (3 * h, 4 * h);
    let one = E::one();
    for r in 0..carry.len() / h {
        let sr = &s[r * g4..(r + 1) * g4];
        let (dx, dp) = (
            &mut dxp[r * g3..(r + 1) * g3],
            &mut dhp[r * g3..(r + 1) * g3],
        );
        for j in 0..h {
            let k = r * h + j;
            let dh = dy[k] + carry[k];
            let (rr, z, nn, hpn) = (sr[j], sr[h + j], sr[2 * h + j], sr[3 * h + j]);
            let dn = dh * (one - z) * (one - nn * nn);
            let dz = dh * (h_prev[k] - nn) * (z * (one - z));
            let dr = dn * hpn * (rr * (one - rr));
            dx[j] = dr;
            dx[h + j] = dz;
            dx[2 * h + j] = dn;
            dp[j] = dr;
            dp[h + j] = dz;
            dp[2 * h + j] = dn * rr;
            carry[k] = dh * z;
        }
    }
}

/// What the GRU backward pass needs from the forward pass.
struct GruSaved<E: Float> {
    t_len: usize,
    n: usize,
    h: usize,
    reverse: bool,
    /// `(r, z, n, hp_n)` of every time index, `[T, N, 4H]`.
    s: Storage<E>,
    /// The output `h_t` of every time index (the op's own buffer).
    ys: Arc<Storage<E>>,
}

/// Runs one GRU layer and direction over a sequence, fused: the input
/// projection `xp` (`[T, N, 3H]`, with `bias_ih` added but not `bias_hh`,
/// gate rows `(r, z, n)` as PyTorch), the initial state `h0` (`[N, H]`),
/// the hidden weights `w_hh` (`[3H, H]`) and bias `b_hh` (`[3H]`) give
/// `(out, h_n)`: `out` `[T, N, H]` holds `h_t` for every time index, in
/// time order also when `reverse` runs the steps from `T - 1` down to 0.
///
/// One tape node for the sequence; gradients of gradients work (see the
/// module docs). [`Gru`](crate::nn::Gru) is built on it.
///
/// # Panics
/// When the shapes do not fit together; the message names them.
///
/// ```
/// use forge::nn::functional::gru_sequence;
/// use forge::Tensor;
/// let (t, n, h) = (4, 2, 3);
/// let xp = Tensor::<f64>::ones(&[t, n, 3 * h]).requires_grad();
/// let h0 = Tensor::zeros(&[n, h]);
/// let w = Tensor::<f64>::zeros(&[3 * h, h]).requires_grad();
/// let b = Tensor::<f64>::zeros(&[3 * h]).requires_grad();
/// let (out, h_n) = gru_sequence(&xp, &h0, &w, Some(&b), true);
/// assert_eq!(out.shape(), &[t, n, h]);
/// // reverse: the last step computed is time index 0
/// assert_eq!(h_n.to_vec(), out.narrow(0, 0, 1).to_vec());
/// let g = out.sum().backward();
/// assert_eq!(g.get(&b).unwrap().shape(), &[3 * h]);
/// ```
pub fn gru_sequence<E: Float, D: Device>(
    xp: &Tensor<E, D>,
    h0: &Tensor<E, D>,
    w_hh: &Tensor<E, D>,
    b_hh: Option<&Tensor<E, D>>,
    reverse: bool,
) -> (Tensor<E, D>, Tensor<E, D>) {
    let (t_len, n, h) = check_shapes("gru_sequence", 3, xp, h0, w_hh);
    if let Some(b) = b_hh {
        assert!(
            b.shape() == [3 * h],
            "gru_sequence: b_hh has shape {:?}, expected [{}]",
            b.shape(),
            3 * h
        );
    }
    let mut inputs = vec![xp.clone(), h0.clone(), w_hh.clone()];
    inputs.extend(b_hh.cloned());
    let save = is_grad_enabled() && inputs.iter().any(|t| t.is_tracked());
    let (nh, g3, g4) = (n * h, 3 * h, 4 * h);
    let mut ys = Storage::<E>::zeroed(t_len * nh);
    let mut sv = Storage::<E>::zeroed((if save { t_len } else { 1 }) * n * g4);
    let (xs, w, b, h0s) = (
        xp.as_slice(),
        w_hh.as_slice(),
        b_hh.map(|b| b.as_slice()),
        h0.as_slice(),
    );
    // one product buffer for every block, as in `lstm_sequence`
    let mut hw_all = Storage::<E>::zeroed(n * g3);
    let (ys_r, s_r, hw_r) = (
        Rows::new(&mut ys),
        Rows::new(&mut sv),
        Rows::new(&mut hw_all),
    );
    for_batch_blocks(n, |r0, r1| {
        let m = r1 - r0;
        // SAFETY: this block's own rows of the product buffer.
        let hw = unsafe { hw_r.at(0, n, r0, r1, g3) };
        for s in 0..t_len {
            let t = time(s, t_len, reverse);
            // SAFETY (every `at` below): this block reads and writes only
            // rows r0..r1 of each buffer, and reads time index `prev`
            // while it writes time index `t != prev`.
            let h_prev: &[E] = match (s > 0).then(|| time(s - 1, t_len, reverse)) {
                Some(p) => unsafe { ys_r.at(p, n, r0, r1, h) },
                None => rows_of(h0s, r0, r1, h),
            };
            gemm(
                m,
                h,
                g3,
                Mat::row_major(h_prev, h),
                Mat::transposed(w, h),
                E::zero(),
                hw,
            );
            let st = if save { t } else { 0 };
            let (y, sb) = unsafe { (ys_r.at(t, n, r0, r1, h), s_r.at(st, n, r0, r1, g4)) };
            gru_rows(h, step_rows(xs, t, n, r0, r1, g3), hw, b, h_prev, sb, y);
        }
    });
    let last = time(t_len - 1, t_len, reverse);
    let ys = Arc::new(ys);
    let y = Tensor::<E, D>::from_parts(ys.clone(), Arc::from(&[t_len, n, h][..]), None);
    let y = if save {
        let saved = GruSaved {
            t_len,
            n,
            h,
            reverse,
            s: sv,
            ys,
        };
        y.record("gru_sequence", inputs, move |ctx| gru_rule(ctx, &saved))
    } else {
        y
    };
    let h_n = y.narrow(0, last, 1).view(&[n, h]);
    (y, h_n)
}

fn gru_rule<E: Float, D: Device>(
    ctx: &BackwardCtx<'_, E, D>,
    saved: &GruSaved<E>,
) -> Vec<Option<Tensor<E, D>>> {
    let i = ctx.inputs;
    if ctx.create_graph {
        return gru_graph_backward(&i[0], &i[1], &i[2], i.get(3), ctx.grad, saved.reverse);
    }
    let GruSaved {
        t_len,
        n,
        h,
        reverse,
        ..
    } = *saved;
    let (g3, g4) = (3 * h, 4 * h);
    let dy = ctx.grad.as_slice();
    let mut carry = Storage::<E>::zeroed(n * h);
    let mut dxp = Storage::<E>::zeroed(t_len * n * g3);
    let mut dhp = Storage::<E>::zeroed(t_len * n * g3);
    let (w, h0) = (i[2].as_slice(), i[1].as_slice());
    let ys = &saved.ys[..];
    let (c_r, x_r, p_r) = (
        Rows::new(&mut carry),
        Rows::new(&mut dxp),
        Rows::new(&mut dhp),
    );
    for_batch_blocks(n, |r0, r1| {
        let m = r1 - r0;
        // SAFETY (every `at` below): this block reads and writes only rows
        // r0..r1 of `carry`, `dxp` and `dhp`.
        let cb = unsafe { c_r.at(0, n, r0, r1, h) };
        for s in (0..t_len).rev() {
            let t = time(s, t_len, reverse);
            let h_prev = match (s > 0).then(|| time(s - 1, t_len, reverse)) {
                Some(p) => step_rows(ys, p, n, r0, r1, h),
                None => rows_of(h0, r0, r1, h),
            };
            let (xb, pb) = unsafe { (x_r.at(t, n, r0, r1, g3), p_r.at(t, n, r0, r1, g3)) };
            let st = step_rows(&saved.s, t, n, r0, r1, g4);
            gru_back_rows(h, st, h_prev, step_rows(dy, t, n, r0, r1, h), cb, xb, pb);
            // dh_{t-1} = dh z + dhp_t W_hh
            gemm(
                m,
                g3,
                h,
                Mat::row_major(pb, g3),
                Mat::row_major(w, h),
                E::one(),
                cb,
            );
        }
    });
    let dw = ctx
        .needs(2)
        .then(|| weight_grad(&dhp, ys, h0, t_len, n, g3, h, reverse));
    let db = (i.len() > 3 && ctx.needs(3)).then(|| {
        let mut db = Storage::<E>::zeroed(g3);
        for row in dhp.chunks_exact(g3) {
            for (a, &v) in db.iter_mut().zip(row) {
                *a += v;
            }
        }
        db
    });
    let shape = |s: &[usize]| -> Arc<[usize]> { Arc::from(s) };
    let mut out = vec![
        ctx.needs(0)
            .then(|| Tensor::from_parts(dxp, shape(&[t_len, n, g3]), None)),
        ctx.needs(1)
            .then(|| Tensor::from_parts(carry, shape(&[n, h]), None)),
        dw.map(|dw| Tensor::from_parts(dw, shape(&[g3, h]), None)),
    ];
    if i.len() > 3 {
        out.push(db.map(|db| Tensor::from_parts(db, shape(&[g3]), None)));
    }
    out
}

/// The GRU's reverse pass in tensor ops (for `backward_with_graph`), as
/// [`lstm_graph_backward`].
fn gru_graph_backward<E: Float, D: Device>(
    xp: &Tensor<E, D>,
    h0: &Tensor<E, D>,
    w: &Tensor<E, D>,
    b: Option<&Tensor<E, D>>,
    dy: &Tensor<E, D>,
    reverse: bool,
) -> Vec<Option<Tensor<E, D>>> {
    let (t_len, n, h) = (xp.dim(0), xp.dim(1), h0.dim(1));
    let one = E::one();
    // (r, z, n, hp_n, h_prev) of every step
    let mut steps = Vec::with_capacity(t_len);
    let mut hc = h0.clone();
    for s in 0..t_len {
        let t = time(s, t_len, reverse);
        let x = xp.narrow(0, t, 1).view(&[n, 3 * h]);
        let mut hp = hc.matmul_t(w);
        if let Some(b) = b {
            hp = hp.add(b);
        }
        let rz = x.narrow(1, 0, 2 * h).add(&hp.narrow(1, 0, 2 * h)).sigmoid();
        let r = rz.narrow(1, 0, h);
        let z = rz.narrow(1, h, h);
        let hpn = hp.narrow(1, 2 * h, h);
        let nn = x.narrow(1, 2 * h, h).add(&r.mul(&hpn)).tanh();
        let hn = nn.add(&z.mul(&hc.sub(&nn)));
        steps.push((r, z, nn, hpn, hc));
        hc = hn;
    }
    let sig_d = |y: &Tensor<E, D>, d: &Tensor<E, D>| d.mul(&y.mul(&y.rsub_scalar(one)));
    let mut carry: Option<Tensor<E, D>> = None;
    let mut dw: Option<Tensor<E, D>> = None;
    let mut db: Option<Tensor<E, D>> = None;
    let mut dxs: Vec<Option<Tensor<E, D>>> = vec![None; t_len];
    for s in (0..t_len).rev() {
        let t = time(s, t_len, reverse);
        let (r, z, nn, hpn, h_prev) = &steps[s];
        let dyt = dy.narrow(0, t, 1).view(&[n, h]);
        let dh = match carry.take() {
            Some(c) => dyt.add(&c),
            None => dyt,
        };
        let dn = dh
            .mul(&z.rsub_scalar(one))
            .mul(&nn.square().rsub_scalar(one));
        let dz = sig_d(z, &dh.mul(&h_prev.sub(nn)));
        let dr = sig_d(r, &dn.mul(hpn));
        let dhp = Tensor::cat(&[&dr, &dz, &dn.mul(r)], 1);
        dxs[t] = Some(Tensor::cat(&[&dr, &dz, &dn], 1));
        carry = Some(dh.mul(z).add(&dhp.matmul(w)));
        let dws = dhp.t().matmul(h_prev);
        dw = Some(match dw {
            Some(acc) => acc.add(&dws),
            None => dws,
        });
        let dbs = dhp.sum_to(&[3 * h]);
        db = Some(match db {
            Some(acc) => acc.add(&dbs),
            None => dbs,
        });
    }
    let dxs: Vec<Tensor<E, D>> = dxs.into_iter().flatten().collect();
    let refs: Vec<&Tensor<E, D>> = dxs.iter().collect();
    let mut out = vec![Some(Tensor::stack(&refs, 0)), carry, dw];
    if b.is_some() {
        out.push(db);
    }
    out
}
