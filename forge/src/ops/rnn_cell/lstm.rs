//! The LSTM cell: the step kernels, the fused sequence op and its rules.

use super::isa::avx2_or_baseline;
use super::lstm_f32::{lstm_rows_f32, Outs, StepIns};
use super::lstm_projection::{projection, Proj};
use super::{
    accumulate, backward_steps, column_sum, forward_steps, grad_tensor, rows_of, sigmoid_back,
    step_rows, weight_grad, Driver, HiddenWeight, Rows, Seq,
};
use crate::autograd::BackwardCtx;
use crate::cpu::gemm::{gemm, Mat};
use crate::cpu::{vmath, Storage};
use crate::tensor::{Device, Float, Tensor};
use std::sync::Arc;

#[cfg(test)]
mod tests;

/// One LSTM step on a block of rows: `gates = act((xp + bias) + hw)`
/// (saved activated), `c = f c_prev + i g`, `y = o tanh(c)` (row `r` at
/// `r * y_stride` of `y`), and `tanh(c)` into `tc` when it is saved. In
/// f32 on AVX-512 or AVX2 + FMA, [`lstm_rows_f32`]'s wide loops (the
/// same bits as [`lstm_rows_generic`]).
pub(super) fn lstm_rows<E: Float>(h: usize, ins: &StepIns<'_, E>, out: &mut Outs<'_, E>) {
    if !lstm_rows_f32(h, ins, out) {
        lstm_rows_generic(h, ins, out)
    }
}

/// [`lstm_rows`] for any float type and CPU: one pass per gate block and
/// per update, the activations through [`vmath`]'s slice functions.
pub(super) fn lstm_rows_generic<E: Float>(h: usize, ins: &StepIns<'_, E>, out: &mut Outs<'_, E>) {
    let StepIns {
        xp,
        bias,
        hw,
        c_prev,
    } = *ins;
    let Outs {
        c,
        y,
        y_stride,
        gates,
        tc,
    } = out;
    let ys = *y_stride;
    let g4 = 4 * h;
    for r in 0..c.len() / h {
        let a = &mut gates[r * g4..(r + 1) * g4];
        let (x, w) = (&xp[r * g4..(r + 1) * g4], &hw[r * g4..(r + 1) * g4]);
        match bias {
            Some(b) => {
                for (((a, &x), &w), &b) in a.iter_mut().zip(x).zip(w).zip(b) {
                    *a = (x + b) + w;
                }
            }
            None => {
                for ((a, &x), &w) in a.iter_mut().zip(x).zip(w) {
                    *a = x + w;
                }
            }
        }
        vmath::sigmoid(&mut a[..2 * h]);
        vmath::tanh(&mut a[2 * h..3 * h]);
        vmath::sigmoid(&mut a[3 * h..]);
        let (cr, yr, cp) = (
            &mut c[r * h..(r + 1) * h],
            &mut y[r * ys..r * ys + h],
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

avx2_or_baseline! {
    /// One reverse LSTM step on a block of rows. `carry` holds `dh` from the
    /// later step's product on entry; `dc` holds the later step's cell
    /// gradient and is replaced by this step's `dc_prev`. Writes the gate
    /// pre-activation gradients to `da`. Where the CPU has AVX2 and FMA,
    /// [`back_rows`] compiled for it (8 lanes instead of the baseline's 4;
    /// the same operations per element, none fused, so the same bits).
    fn lstm_back_rows => back_rows(
        h: usize,
        gates: &[E],
        tcs: &[E],
        c_prev: &[E],
        dy: Option<&[E]>,
        carry: &[E],
        dc: &mut [E],
        da: &mut [E],
    )
}

/// [`lstm_back_rows`]' loop over the rows, with or without `dy`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn back_rows<E: Float>(
    h: usize,
    gates: &[E],
    tcs: &[E],
    c_prev: &[E],
    dy: Option<&[E]>,
    carry: &[E],
    dc: &mut [E],
    da: &mut [E],
) {
    let rows = tcs.len() / h;
    assert!(gates.len() >= rows * 4 * h && da.len() >= rows * 4 * h);
    assert!(c_prev.len() >= rows * h && carry.len() >= rows * h && dc.len() >= rows * h);
    assert!(dy.is_none_or(|d| d.len() >= rows * h));
    let g4 = 4 * h;
    for r in 0..rows {
        let (a, d) = (&gates[r * g4..(r + 1) * g4], &mut da[r * g4..(r + 1) * g4]);
        let k = r * h..(r + 1) * h;
        let (tc, cp, cy) = (&tcs[k.clone()], &c_prev[k.clone()], &carry[k.clone()]);
        let dcr = &mut dc[k.clone()];
        match dy {
            Some(dy) => back_row::<E, true>(h, a, tc, cp, &dy[k], cy, dcr, d),
            None => back_row::<E, false>(h, a, tc, cp, cy, cy, dcr, d),
        }
    }
}

/// One row of [`back_rows`]: `a`, `d` are `4H` (gate blocks `H` apart),
/// the rest `H`; `dy` is read only with `DY`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn back_row<E: Float, const DY: bool>(
    h: usize,
    a: &[E],
    tc: &[E],
    c_prev: &[E],
    dy: &[E],
    carry: &[E],
    dc: &mut [E],
    d: &mut [E],
) {
    let one = E::one();
    let (ai, af, ag, ao) = (&a[..h], &a[h..2 * h], &a[2 * h..3 * h], &a[3 * h..4 * h]);
    let (tc, c_prev, dy, carry, dc) = (&tc[..h], &c_prev[..h], &dy[..h], &carry[..h], &mut dc[..h]);
    let (di, rest) = d.split_at_mut(h);
    let (df, rest) = rest.split_at_mut(h);
    let (dg, do_) = rest.split_at_mut(h);
    let do_ = &mut do_[..h];
    for j in 0..h {
        let dh = if DY { dy[j] + carry[j] } else { carry[j] };
        let (i, f, g, o) = (ai[j], af[j], ag[j], ao[j]);
        let t = tc[j];
        let dct = dc[j] + dh * o * (one - t * t);
        di[j] = dct * g * (i * (one - i));
        df[j] = dct * c_prev[j] * (f * (one - f));
        dg[j] = dct * i * (one - g * g);
        do_[j] = dh * t * (o * (one - o));
        dc[j] = dct * f;
    }
}

/// A layer op's input and `W_ih` (see [`lstm_rule`]).
type InputAndWeight<E, D> = (Tensor<E, D>, Tensor<E, D>);

/// What the LSTM backward pass needs from the forward pass.
struct LstmSaved<E: Float> {
    seq: Seq,
    /// Activated gates `(i, f, g, o)` of every time index, `[T, N, 4H]`.
    gates: Storage<E>,
    /// `c_t` of every time index, `[T, N, H]`.
    cs: Storage<E>,
    /// `tanh(c_t)` of every time index, `[T, N, H]`.
    tcs: Storage<E>,
    /// The output `h_t` of every time index (the op's own buffer).
    ys: Arc<Storage<E>>,
    /// Whether `dW_hh` is left to the input projection's rule (a layer
    /// op, `lstm_projection.rs`; not under `backward_with_graph`).
    hh_elsewhere: bool,
}

/// Runs one LSTM layer and direction over a sequence, fused: the input
/// projection `xp` (`[T, N, 4H]`, gate rows `(i, f, g, o)` as PyTorch),
/// the initial states `h0`, `c0` (`[N, H]`), the hidden weights `w_hh`
/// (`[4H, H]`) and an optional `bias` (`[4H]`, PyTorch's
/// `bias_ih + bias_hh`) give `(out, h_n, c_n)`: `out` `[T, N, H]` holds
/// `h_t` for every time index, in time order also when `reverse` runs the
/// steps from `T - 1` down to 0. Each step's gate pre-activations are
/// `(xp_t + bias) + h_{t-1} W_hh^T`, in that order: the bias costs no pass
/// of its own, and the values are those of adding it to `xp` first.
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
/// let b = Tensor::<f64>::zeros(&[4 * h]).requires_grad();
/// let (out, h_n, c_n) = lstm_sequence(&xp, &h0, &c0, &w, Some(&b), false);
/// assert_eq!(out.shape(), &[t, n, h]);
/// assert_eq!(h_n.to_vec(), out.narrow(0, t - 1, 1).to_vec());
/// assert!(c_n.to_vec().iter().all(|&c| c > 0.0));
/// let g = out.sum().backward();
/// assert_eq!(g.get(&w).unwrap().shape(), &[4 * h, h]);
/// // the bias enters every row of xp: its gradient is xp's summed over T, N
/// let (gb, gx) = (g.get(&b).unwrap(), g.get(&xp).unwrap());
/// assert_eq!(gb.to_vec(), gx.sum_dim(&[0, 1], false).to_vec());
/// ```
pub fn lstm_sequence<E: Float, D: Device>(
    xp: &Tensor<E, D>,
    h0: &Tensor<E, D>,
    c0: &Tensor<E, D>,
    w_hh: &Tensor<E, D>,
    bias: Option<&Tensor<E, D>>,
    reverse: bool,
) -> (Tensor<E, D>, Tensor<E, D>, Tensor<E, D>) {
    lstm_sequence_with(xp, h0, c0, HiddenWeight::Dense(w_hh), bias, reverse)
}

/// [`lstm_sequence`] with `w_hh` a tensor or, without recording, an fp8
/// weight prepared for the loop's products ([`HiddenWeight::Fp8`]: the
/// bits of the tensor holding its decoded values).
///
/// # Panics
/// As [`lstm_sequence`], and when a gradient would be recorded through an
/// fp8 `w_hh`.
pub(crate) fn lstm_sequence_with<E: Float, D: Device>(
    xp: &Tensor<E, D>,
    h0: &Tensor<E, D>,
    c0: &Tensor<E, D>,
    w_hh: HiddenWeight<'_, E, D>,
    bias: Option<&Tensor<E, D>>,
    reverse: bool,
) -> (Tensor<E, D>, Tensor<E, D>, Tensor<E, D>) {
    lstm_core(xp, h0, c0, w_hh, bias, reverse, None)
}

/// [`lstm_sequence_with`]; with `proj`, `xp` (untracked) is `proj`'s
/// input projection, which is recorded as an op of its own once the
/// steps have run, whose rule also takes `dW_hh` (`lstm_projection.rs`).
pub(super) fn lstm_core<E: Float, D: Device>(
    xp: &Tensor<E, D>,
    h0: &Tensor<E, D>,
    c0: &Tensor<E, D>,
    w_hh: HiddenWeight<'_, E, D>,
    bias: Option<&Tensor<E, D>>,
    reverse: bool,
    proj: Option<Proj<'_, E, D>>,
) -> (Tensor<E, D>, Tensor<E, D>, Tensor<E, D>) {
    let bias_in = bias.map(|b| ("bias", b));
    let mut d = Driver::new(
        "lstm_sequence",
        4,
        xp,
        h0,
        &[("c0", c0)],
        w_hh,
        bias_in,
        reverse,
    );
    if let Some(p) = &proj {
        // the projection's inputs are the op's too
        d.save |= crate::autograd::is_grad_enabled() && (p.x.is_tracked() || p.w_ih.is_tracked());
    }
    let (t_len, n, h) = (d.seq.t_len, d.seq.n, d.seq.h);
    let (nh, g4) = (n * h, 4 * h);
    let mut gates = d.per_step(g4);
    let (seq, mut inputs, save, mut ys) = d.into_parts();
    // c_t of every time index when saved; otherwise only two slots, the
    // step's and the previous step's (step s in slot s % 2)
    // (`cs`, `tcs`: no zero fill, each step writes its rows of the slot
    // before the next step reads them)
    let mut cs = Storage::<E>::stale(if save { t_len * nh } else { 2 * nh });
    let slot = |t: usize| {
        if save {
            t
        } else {
            (if seq.reverse { t_len - 1 - t } else { t }) % 2
        }
    };
    let mut tcs = Storage::<E>::stale(if save { t_len * nh } else { 0 });
    let (xs, c0s, bs) = (xp.as_slice(), c0.as_slice(), bias.map(|b| b.as_slice()));
    let (cs_r, tc_r, g_r) = (
        Rows::new(&mut cs),
        Rows::new(&mut tcs),
        Rows::new(&mut gates),
    );
    forward_steps(seq, g4, w_hh, h0.as_slice(), &mut ys, |st, hw, _, y| {
        let (t, r0, r1) = (st.t, st.r0, st.r1);
        // Every `at` below: this block reads and writes only rows r0..r1
        // of each buffer, and reads time index `prev` while it writes time
        // index `t != prev` (`slot(prev) != slot(t)`: consecutive steps
        // take the two slots in turn when they are not saved); `at`
        // asserts each range inside its buffer.
        let c_prev: &[E] = match st.prev {
            // SAFETY: rows r0..r1 of slot(prev), read only (see above).
            Some(p) => unsafe { cs_r.at(slot(p), n, r0, r1, h) },
            None => rows_of(c0s, r0, r1, h),
        };
        let gt = if save { t } else { 0 };
        // SAFETY: rows r0..r1 of slot(t) and of gate step `gt`, distinct
        // buffers, this block's own (see above).
        let (c, gates) = unsafe { (cs_r.at(slot(t), n, r0, r1, h), g_r.at(gt, n, r0, r1, g4)) };
        // SAFETY: rows r0..r1 of step `t` of `tcs`, this block's own.
        let tc = save.then(|| unsafe { tc_r.at(t, n, r0, r1, h) });
        let xt = step_rows(xs, t, n, r0, r1, g4);
        let ins = StepIns {
            xp: xt,
            bias: bs,
            hw,
            c_prev,
        };
        let y_stride = h;
        let mut outs = Outs {
            c,
            y,
            y_stride,
            gates,
            tc,
        };
        lstm_rows(h, &ins, &mut outs);
    });
    let last = slot(seq.last());
    let c_n = Storage::from_slice(&cs[last * nh..(last + 1) * nh]);
    let c_n = grad_tensor::<E, D>(c_n, &[n, h]);
    let ys = Arc::new(ys);
    let mut c_n = Some(c_n);
    let hh_elsewhere = save && proj.is_some();
    // the projection's input and weight, for the rule under
    // `backward_with_graph`
    let xw = proj.map(|p| Arc::new((p.x.clone(), p.w_ih.clone())));
    if let (Some(p), true) = (proj, save) {
        inputs[0] = p.record(&inputs[0], &inputs[1], &inputs[3], seq, ys.clone());
    }
    let record = save.then(|| {
        let saved = Arc::new(LstmSaved {
            seq,
            gates,
            cs,
            tcs,
            ys: ys.clone(),
            hh_elsewhere,
        });
        let (s2, xw2) = (saved.clone(), xw.clone());
        let c = c_n.take().expect("c_n");
        let i2 = inputs.clone();
        c_n = Some(c.record("lstm_sequence_c_n", i2, move |ctx| {
            lstm_rule(ctx, &s2, xw2.as_deref(), true)
        }));
        move |y: Tensor<E, D>, inputs| {
            y.record("lstm_sequence", inputs, move |ctx| {
                lstm_rule(ctx, &saved, xw.as_deref(), false)
            })
        }
    });
    let (y, h_n) = Driver::finish(seq, ys, "lstm_sequence", inputs, record);
    (y, h_n, c_n.expect("c_n"))
}

/// The LSTM rule: `ctx.grad` is the gradient of `out` (`cell == false`) or
/// of `c_n` (`cell == true`). `xw`, for a layer op (`lstm_projection.rs`), is
/// the input and `W_ih` that `xp` is the projection of: under
/// `backward_with_graph` the rule recomputes `xp` from them as a
/// `matmul_t` on the tape (the projection op's own rule would also give
/// `dW_hh` for whatever reaches `xp` in a later backward pass).
fn lstm_rule<E: Float, D: Device>(
    ctx: &BackwardCtx<'_, E, D>,
    saved: &LstmSaved<E>,
    xw: Option<&InputAndWeight<E, D>>,
    cell: bool,
) -> Vec<Option<Tensor<E, D>>> {
    let i = ctx.inputs;
    let seq = saved.seq;
    if ctx.create_graph {
        let g = ctx.grad;
        let (dy, dc) = if cell {
            (None, Some(g))
        } else {
            (Some(g), None)
        };
        let xp = xw.map(|(x, w_ih)| projection(x, w_ih));
        let xp = xp.as_ref().unwrap_or(&i[0]);
        return lstm_graph_backward(xp, &i[1], &i[2], &i[3], i.get(4), dy, dc, seq.reverse);
    }
    let Seq { t_len, n, h, .. } = seq;
    let (nh, g4) = (n * h, 4 * h);
    let g = ctx.grad.as_slice();
    let dy = (!cell).then_some(g);
    let mut dc = if cell {
        Storage::from_slice(g)
    } else {
        Storage::<E>::zeroed(nh)
    };
    // `carry` is `dh` from after the last step: zero. `da` is written
    // whole, every step's rows before they are read: no zero fill (4 MiB
    // at T = 32, N = 64, H = 128).
    let mut carry = Storage::<E>::zeroed(nh);
    let mut da = Storage::<E>::stale(t_len * n * g4);
    let c0 = i[2].as_slice();
    let dc_r = Rows::new(&mut dc);
    // dh_{t-1} = da_t W_hh
    backward_steps(
        seq,
        g4,
        i[3].as_slice(),
        E::zero(),
        &mut carry,
        &mut da,
        |st, cb, dab| {
            let (t, r0, r1) = (st.t, st.r0, st.r1);
            let c_prev = match st.prev {
                Some(p) => step_rows(&saved.cs, p, n, r0, r1, h),
                None => rows_of(c0, r0, r1, h),
            };
            // SAFETY: this block's own rows of `dc`.
            let dcb = unsafe { dc_r.at(0, n, r0, r1, h) };
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
        },
    );
    let dw = (ctx.needs(3) && !saved.hh_elsewhere)
        .then(|| weight_grad(seq, &da, &saved.ys, i[1].as_slice(), g4));
    // the bias is added to every row of xp: its gradient is da's column sum
    let db = (i.len() > 4 && ctx.needs(4)).then(|| column_sum(&da, g4));
    let mut out = vec![
        ctx.needs(0).then(|| grad_tensor(da, &[t_len, n, g4])),
        ctx.needs(1).then(|| grad_tensor(carry, &[n, h])),
        ctx.needs(2).then(|| grad_tensor(dc, &[n, h])),
        dw.map(|dw| grad_tensor(dw, &[g4, h])),
    ];
    if i.len() > 4 {
        out.push(db.map(|db| grad_tensor(db, &[g4])));
    }
    out
}

/// The LSTM's reverse pass in tensor ops (for `backward_with_graph`): the
/// steps are recomputed from the inputs with tensor ops, so every gradient
/// is itself on the tape. `dy` is the gradient of `out`, `dc_n` that of
/// `c_n`.
#[allow(clippy::too_many_arguments)]
fn lstm_graph_backward<E: Float, D: Device>(
    xp: &Tensor<E, D>,
    h0: &Tensor<E, D>,
    c0: &Tensor<E, D>,
    w: &Tensor<E, D>,
    bias: Option<&Tensor<E, D>>,
    dy: Option<&Tensor<E, D>>,
    dc_n: Option<&Tensor<E, D>>,
    reverse: bool,
) -> Vec<Option<Tensor<E, D>>> {
    let (t_len, n, h) = (xp.dim(0), xp.dim(1), h0.dim(1));
    let seq = Seq {
        t_len,
        n,
        h,
        reverse,
    };
    let one = E::one();
    // (i, f, g, o, c_prev, tanh c, h_prev) of every step
    let mut steps = Vec::with_capacity(t_len);
    let (mut hc, mut cc) = (h0.clone(), c0.clone());
    for s in 0..t_len {
        let t = seq.time(s);
        let x = xp.narrow(0, t, 1).view(&[n, 4 * h]);
        let x = match bias {
            Some(b) => x.add(b),
            None => x,
        };
        let a = x.add(&hc.matmul_t(w));
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
    let mut dh: Option<Tensor<E, D>> = None;
    let mut dc: Option<Tensor<E, D>> = dc_n.cloned();
    let mut dw: Option<Tensor<E, D>> = None;
    let mut das: Vec<Option<Tensor<E, D>>> = vec![None; t_len];
    for s in (0..t_len).rev() {
        let t = seq.time(s);
        let (i, f, g, o, c_prev, tc, h_prev) = &steps[s];
        let dht = match (dy.map(|d| d.narrow(0, t, 1).view(&[n, h])), dh.take()) {
            (Some(a), Some(b)) => a.add(&b),
            (Some(a), None) => a,
            (None, Some(b)) => b,
            (None, None) => Tensor::zeros_in(&[n, h]),
        };
        let through = dht.mul(o).mul(&tc.square().rsub_scalar(one));
        let dct = match dc.take() {
            Some(d) => d.add(&through),
            None => through,
        };
        let da = Tensor::cat(
            &[
                &sigmoid_back(i, &dct.mul(g)),
                &sigmoid_back(f, &dct.mul(c_prev)),
                &dct.mul(i).mul(&g.square().rsub_scalar(one)),
                &sigmoid_back(o, &dht.mul(tc)),
            ],
            1,
        );
        dc = Some(dct.mul(f));
        dh = Some(da.matmul(w));
        accumulate(&mut dw, da.t().matmul(h_prev));
        das[t] = Some(da);
    }
    let das: Vec<Tensor<E, D>> = das.into_iter().flatten().collect();
    let refs: Vec<&Tensor<E, D>> = das.iter().collect();
    let dxp = Tensor::stack(&refs, 0);
    let db = bias.map(|_| dxp.sum_dim(&[0, 1], false));
    let mut out = vec![Some(dxp), dh, dc, dw];
    if bias.is_some() {
        out.push(db);
    }
    out
}

/// One LSTM layer and direction from its time-major input `x`
/// (`[T, N, I]`): `xp = x W_ih^T` (`W_ih` `[4H, I]`), then
/// [`lstm_sequence`](super::lstm_sequence) on `xp` with `h0`, `c0`,
/// `w_hh` and the summed `bias`: `(out, h_n, c_n)`, recorded as
/// `lstm_projection.rs` says.
///
/// # Panics
/// When the shapes do not fit together; the message names them.
pub(crate) fn lstm_layer<E: Float, D: Device>(
    x: &Tensor<E, D>,
    w_ih: &Tensor<E, D>,
    h0: &Tensor<E, D>,
    c0: &Tensor<E, D>,
    w_hh: &Tensor<E, D>,
    bias: Option<&Tensor<E, D>>,
    reverse: bool,
) -> (Tensor<E, D>, Tensor<E, D>, Tensor<E, D>) {
    assert!(
        x.rank() == 3 && w_ih.rank() == 2 && w_ih.dim(1) == x.dim(2),
        "lstm_layer: x {:?}, w_ih {:?}: expected [T, N, I], [4H, I]",
        x.shape(),
        w_ih.shape()
    );
    let (t_len, n, fan_in) = (x.dim(0), x.dim(1), x.dim(2));
    let g4 = w_ih.dim(0);
    // the product `x.view([T N, I]).matmul_t(w_ih)` makes, on the same
    // operands: the same bits
    let xc = x.detach().contiguous();
    let wc = w_ih.detach().contiguous();
    let mut xp = Storage::<E>::stale(t_len * n * g4);
    let (a, b) = (
        Mat::row_major(xc.as_slice(), fan_in),
        Mat::transposed(wc.as_slice(), fan_in),
    );
    gemm(t_len * n, fan_in, g4, a, b, E::zero(), &mut xp);
    let xp = grad_tensor::<E, D>(xp, &[t_len, n, g4]);
    let proj = Proj { x, xc: &xc, w_ih };
    let w_hh = HiddenWeight::Dense(w_hh);
    lstm_core(&xp, h0, c0, w_hh, bias, reverse, Some(proj))
}
