//! The GRU cell: the step kernels, the fused sequence op and its rule.

use super::gru_f32::{gru_rows_f32, GruStep};
use super::isa::avx2_or_baseline;
use super::{
    accumulate, backward_steps, column_sum, forward_steps, grad_tensor, sigmoid_back, step_rows,
    weight_grad, Driver, HiddenWeight, Rows, Seq,
};
use crate::autograd::BackwardCtx;
use crate::cpu::{vmath, Storage};
use crate::tensor::{Device, Float, Tensor};
use std::sync::Arc;

#[cfg(test)]
mod tests;

/// One GRU step on a block of rows: `hp = hw + b`, then `(r, z, n, hp_n)`
/// saved in `s` (`[rows, 4H]`) and `y = n + z (h_prev - n)`. In f32 on
/// AVX-512 or AVX2 + FMA, [`gru_rows_f32`]'s two loops per row (the same
/// bits as [`gru_rows_generic`]).
fn gru_rows<E: Float>(
    h: usize,
    xp: &[E],
    hw: &[E],
    b: Option<&[E]>,
    h_prev: &[E],
    s: &mut [E],
    y: &mut [E],
) {
    let mut st = GruStep {
        xp,
        hw,
        b,
        h_prev,
        s,
        y,
    };
    if !gru_rows_f32(h, &mut st) {
        gru_rows_generic(h, xp, hw, b, h_prev, st.s, st.y)
    }
}

/// [`gru_rows`] for any float type and CPU: a pass for the biases, the
/// activations through [`vmath`]'s slice functions.
fn gru_rows_generic<E: Float>(
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

avx2_or_baseline! {
    /// One reverse GRU step on a block of rows. `carry` holds `dh` from the
    /// later step on entry and this step's direct term `dh z` on exit (the
    /// product `dhp W_hh` is added to it afterwards). Writes `dxp` and `dhp`.
    /// Where the CPU has AVX2 and FMA, [`back_rows`] compiled for it (the
    /// same operations per element, none fused, so the same bits).
    fn gru_back_rows => back_rows(
        h: usize,
        s: &[E],
        h_prev: &[E],
        dy: &[E],
        carry: &mut [E],
        dxp: &mut [E],
        dhp: &mut [E],
    )
}

/// [`gru_back_rows`]' loop over the rows.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn back_rows<E: Float>(
    h: usize,
    s: &[E],
    h_prev: &[E],
    dy: &[E],
    carry: &mut [E],
    dxp: &mut [E],
    dhp: &mut [E],
) {
    let rows = carry.len() / h;
    assert!(s.len() >= rows * 4 * h && h_prev.len() >= rows * h && dy.len() >= rows * h);
    assert!(dxp.len() >= rows * 3 * h && dhp.len() >= rows * 3 * h);
    let (g3, g4) = (3 * h, 4 * h);
    for r in 0..rows {
        let k = r * h..(r + 1) * h;
        back_row(
            h,
            &s[r * g4..(r + 1) * g4],
            &h_prev[k.clone()],
            &dy[k.clone()],
            &mut carry[k],
            &mut dxp[r * g3..(r + 1) * g3],
            &mut dhp[r * g3..(r + 1) * g3],
        );
    }
}

/// One row of [`back_rows`]: `s` is `4H`, `dx`, `dp` `3H` (gate blocks
/// `H` apart), the rest `H`.
#[inline(always)]
fn back_row<E: Float>(
    h: usize,
    s: &[E],
    h_prev: &[E],
    dy: &[E],
    carry: &mut [E],
    dx: &mut [E],
    dp: &mut [E],
) {
    let one = E::one();
    let (sr, sz, sn, shp) = (&s[..h], &s[h..2 * h], &s[2 * h..3 * h], &s[3 * h..4 * h]);
    let (h_prev, dy, carry) = (&h_prev[..h], &dy[..h], &mut carry[..h]);
    let (dxr, rest) = dx[..3 * h].split_at_mut(h);
    let (dxz, dxn) = rest.split_at_mut(h);
    let (dpr, rest) = dp[..3 * h].split_at_mut(h);
    let (dpz, dpn) = rest.split_at_mut(h);
    for j in 0..h {
        let dh = dy[j] + carry[j];
        let (rr, z, nn, hpn) = (sr[j], sz[j], sn[j], shp[j]);
        let dn = dh * (one - z) * (one - nn * nn);
        let dz = dh * (h_prev[j] - nn) * (z * (one - z));
        let dr = dn * hpn * (rr * (one - rr));
        dxr[j] = dr;
        dxz[j] = dz;
        dxn[j] = dn;
        dpr[j] = dr;
        dpz[j] = dz;
        dpn[j] = dn * rr;
        carry[j] = dh * z;
    }
}

/// What the GRU backward pass needs from the forward pass.
struct GruSaved<E: Float> {
    /// The output `h_t` of every time index (the op's own buffer).
    ys: Arc<Storage<E>>,
    /// `(r, z, n, hp_n)` of every time index, `[T, N, 4H]`.
    s: Storage<E>,
    seq: Seq,
}

/// The GRU counterpart of [`lstm_sequence`](super::lstm_sequence): one
/// layer and direction over a whole sequence, fused. `xp` (`[T, N, 3H]`,
/// gate rows `(r, z, n)` as PyTorch) already holds `bias_ih`; `bias_hh`
/// (`b_hh`, `[3H]`) is added to the hidden product inside the step kernel,
/// since its `n` block is scaled by `r`. `h0` is `[N, H]`, `w_hh`
/// `[3H, H]`; the result is `(out [T, N, H], h_n)`, `out` in time order
/// whichever way `reverse` runs the steps.
///
/// One tape node for the sequence; gradients of gradients work (see the
/// module docs). [`Gru`](crate::nn::Gru) is built on it.
///
/// ```
/// // 4 steps, batch 2, hidden size 3: 9 gate rows
/// let b_hh = forge::Tensor::<f64>::zeros(&[9]).requires_grad();
/// let xp = forge::Tensor::ones(&[4, 2, 9]);
/// let (h0, w_hh) = (forge::Tensor::zeros(&[2, 3]), forge::Tensor::zeros(&[9, 3]));
/// let (out, h_n) = forge::nn::functional::gru_sequence(&xp, &h0, &w_hh, Some(&b_hh), true);
/// // reverse: the last step computed is time index 0
/// assert_eq!(h_n.to_vec(), out.narrow(0, 0, 1).to_vec());
/// assert_eq!(out.sum().backward().get(&b_hh).unwrap().shape(), &[9]);
/// ```
///
/// # Panics
/// When the shapes do not fit together; the message names them.
pub fn gru_sequence<E: Float, D: Device>(
    xp: &Tensor<E, D>,
    h0: &Tensor<E, D>,
    w_hh: &Tensor<E, D>,
    b_hh: Option<&Tensor<E, D>>,
    reverse: bool,
) -> (Tensor<E, D>, Tensor<E, D>) {
    gru_sequence_with(xp, h0, HiddenWeight::Dense(w_hh), b_hh, reverse)
}

/// [`gru_sequence`] with `w_hh` a tensor or, without recording, an fp8
/// weight prepared for the loop's products ([`HiddenWeight::Fp8`]: the
/// bits of the tensor holding its decoded values).
///
/// # Panics
/// As [`gru_sequence`], and when a gradient would be recorded through an
/// fp8 `w_hh`.
pub(crate) fn gru_sequence_with<E: Float, D: Device>(
    xp: &Tensor<E, D>,
    h0: &Tensor<E, D>,
    w_hh: HiddenWeight<'_, E, D>,
    b_hh: Option<&Tensor<E, D>>,
    reverse: bool,
) -> (Tensor<E, D>, Tensor<E, D>) {
    let bias = b_hh.map(|b| ("b_hh", b));
    let d = Driver::new("gru_sequence", 3, xp, h0, &[], w_hh, bias, reverse);
    let (n, h) = (d.seq.n, d.seq.h);
    let (g3, g4) = (3 * h, 4 * h);
    let mut sv = d.per_step(g4);
    let (seq, inputs, save, mut ys) = d.into_parts();
    let (xs, b) = (xp.as_slice(), b_hh.map(|b| b.as_slice()));
    let s_r = Rows::new(&mut sv);
    forward_steps(
        seq,
        g3,
        w_hh,
        h0.as_slice(),
        &mut ys,
        |st, hw, h_prev, y| {
            let (t, r0, r1) = (st.t, st.r0, st.r1);
            let ts = if save { t } else { 0 };
            // SAFETY: this block's own rows of the saved-gate buffer.
            let sb = unsafe { s_r.at(ts, n, r0, r1, g4) };
            gru_rows(h, step_rows(xs, t, n, r0, r1, g3), hw, b, h_prev, sb, y);
        },
    );
    let ys = Arc::new(ys);
    let record = save.then(|| {
        let saved = GruSaved {
            seq,
            s: sv,
            ys: ys.clone(),
        };
        move |y: Tensor<E, D>, inputs| {
            y.record("gru_sequence", inputs, move |ctx| gru_rule(ctx, &saved))
        }
    });
    Driver::finish(seq, ys, "gru_sequence", inputs, record)
}

fn gru_rule<E: Float, D: Device>(
    ctx: &BackwardCtx<'_, E, D>,
    saved: &GruSaved<E>,
) -> Vec<Option<Tensor<E, D>>> {
    let i = ctx.inputs;
    let seq = saved.seq;
    if ctx.create_graph {
        return gru_graph_backward(&i[0], &i[1], &i[2], i.get(3), ctx.grad, seq.reverse);
    }
    let Seq { t_len, n, h, .. } = seq;
    let (g3, g4) = (3 * h, 4 * h);
    let dy = ctx.grad.as_slice();
    let mut carry = Storage::<E>::zeroed(n * h);
    // `dxp`, `dhp`: written whole by the step kernel, every step's rows
    // before they are read (no zero fill); `carry` starts at zero
    let mut dxp = Storage::<E>::stale(t_len * n * g3);
    let mut dhp = Storage::<E>::stale(t_len * n * g3);
    let h0 = i[1].as_slice();
    let ys = &saved.ys[..];
    let x_r = Rows::new(&mut dxp);
    // dh_{t-1} = dh z + dhp_t W_hh
    backward_steps(
        seq,
        g3,
        i[2].as_slice(),
        E::one(),
        &mut carry,
        &mut dhp,
        |st, cb, pb| {
            let (t, r0, r1) = (st.t, st.r0, st.r1);
            let h_prev = match st.prev {
                Some(p) => step_rows(ys, p, n, r0, r1, h),
                None => super::rows_of(h0, r0, r1, h),
            };
            // SAFETY: this block's own rows of time index `t` of `dxp`.
            let xb = unsafe { x_r.at(t, n, r0, r1, g3) };
            let sg = step_rows(&saved.s, t, n, r0, r1, g4);
            gru_back_rows(h, sg, h_prev, step_rows(dy, t, n, r0, r1, h), cb, xb, pb);
        },
    );
    let dw = ctx.needs(2).then(|| weight_grad(seq, &dhp, ys, h0, g3));
    let db = (i.len() > 3 && ctx.needs(3)).then(|| column_sum(&dhp, g3));
    let mut out = vec![
        ctx.needs(0).then(|| grad_tensor(dxp, &[t_len, n, g3])),
        ctx.needs(1).then(|| grad_tensor(carry, &[n, h])),
        dw.map(|dw| grad_tensor(dw, &[g3, h])),
    ];
    if i.len() > 3 {
        out.push(db.map(|db| grad_tensor(db, &[g3])));
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
    let seq = Seq {
        t_len,
        n,
        h,
        reverse,
    };
    let one = E::one();
    // (r, z, n, hp_n, h_prev) of every step
    let mut steps = Vec::with_capacity(t_len);
    let mut hc = h0.clone();
    for s in 0..t_len {
        let t = seq.time(s);
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
    let mut carry: Option<Tensor<E, D>> = None;
    let mut dw: Option<Tensor<E, D>> = None;
    let mut db: Option<Tensor<E, D>> = None;
    let mut dxs: Vec<Option<Tensor<E, D>>> = vec![None; t_len];
    for s in (0..t_len).rev() {
        let t = seq.time(s);
        let (r, z, nn, hpn, h_prev) = &steps[s];
        let dyt = dy.narrow(0, t, 1).view(&[n, h]);
        let dh = match carry.take() {
            Some(c) => dyt.add(&c),
            None => dyt,
        };
        let dn = dh
            .mul(&z.rsub_scalar(one))
            .mul(&nn.square().rsub_scalar(one));
        let dz = sigmoid_back(z, &dh.mul(&h_prev.sub(nn)));
        let dr = sigmoid_back(r, &dn.mul(hpn));
        let dhp = Tensor::cat(&[&dr, &dz, &dn.mul(r)], 1);
        dxs[t] = Some(Tensor::cat(&[&dr, &dz, &dn], 1));
        carry = Some(dh.mul(z).add(&dhp.matmul(w)));
        accumulate(&mut dw, dhp.t().matmul(h_prev));
        accumulate(&mut db, dhp.sum_to(&[3 * h]));
    }
    let dxs: Vec<Tensor<E, D>> = dxs.into_iter().flatten().collect();
    let refs: Vec<&Tensor<E, D>> = dxs.iter().collect();
    let mut out = vec![Some(Tensor::stack(&refs, 0)), carry, dw];
    if b.is_some() {
        out.push(db);
    }
    out
}
