//! The fused class losses on integer targets behind
//! [`cross_entropy_with`] (logits; the log-softmax kernels are in
//! `cross_entropy.rs`) and [`nll_loss`] (log-probabilities): any input
//! `(N, C)`, `(N, C, d1, ..., dk)` or `(C,)`, a class weight that is
//! constant, tracked or absent, `ignore_index`, label smoothing (cross
//! entropy only) and the three reductions, in one forward pass and one
//! backward pass.
//!
//! Per position `p` (a row of `(N, C)` input, or `(i, d)` of K-d input),
//! with `w` the class weights (all 1 without), `t` the target, `ls` the
//! label smoothing and `lse` the log-sum-exp of the logits (0 for
//! `nll_loss`, whose input `x` is already `log p`):
//!
//! ```text
//! loss_p = (1 - ls) w_t (lse - x_t) + ls / C sum_k w_k (lse - x_k)
//! mean   = sum_p loss_p / T,  T = sum_p w_{t_p}   (positions not ignored)
//! d loss_p / d w_k = (1 - ls) [k = t] (lse - x_t) + ls / C (lse - x_k)
//! d mean / d w_k   = (sum_p d loss_p / d w_k - mean * #{p : t_p = k}) / T
//! ```
//!
//! An ignored position has loss 0 and gives no gradient (its input is not
//! read, so NaN there stays out). PyTorch refuses a weight that requires
//! grad ("nll_loss_forward is not differentiable with respect to argument
//! weight"); forge differentiates the loss above, the mean's `T` included.
//!
//! **Threads.** The passes over the input run over fixed blocks from the
//! shape only, and every sum across blocks (the weight's gradient) adds the
//! blocks' partial sums in block order, so every result is the same for
//! any number of threads.
//!
//! [`cross_entropy_with`]: super::cross_entropy_with
//! [`nll_loss`]: super::nll_loss

use super::cross_entropy;
use super::spec::{Kind, Options, Reduction, Spec};
use crate::ops::softmax::{lane_sum, row_blocks_mut, zeroed_output, ROW_BLOCK_ELEMS};
use crate::tensor::{Device, Float, Tensor};

/// The fused loss (see the module docs); `axis` and `c` are the class axis
/// and count of the checked `targets`. The weight's gradient is given when
/// it is tracked. Under `create_graph` the backward is the same formulas in
/// tensor ops on the recorded input and weight, so gradients of gradients
/// work in both.
///
/// # Panics
/// When the weight does not have shape `(C,)` or a target is out of range
/// (and not `ignore_index`).
pub(super) fn class_loss_fused<E: Float, D: Device>(
    kind: Kind,
    input: &Tensor<E, D>,
    targets: &Tensor<i64, D>,
    (axis, c): (usize, usize),
    options: Options<'_, E, D>,
) -> Tensor<E, D> {
    let (op, shape) = (kind.name(), input.shape());
    let ls = options.label_smoothing;
    let w: Option<Vec<E>> = options.weight.map(|w| {
        shape_assert!(
            w.shape() == [c],
            "{op}: weight of shape {:?} does not match {c} classes (input shape {shape:?})",
            w.shape()
        );
        w.to_vec()
    });
    let w_sum = w.as_ref().map_or(E::from_f64(c as f64), |w| lane_sum(w));
    let spec = Spec {
        kind,
        n: if axis == 0 { 1 } else { shape[0] },
        c,
        inner: shape[axis + 1..].iter().product(),
        ignore: options.ignore_index,
        w,
        w_sum,
        keep: E::from_f64(1.0 - ls),
        smooth: E::from_f64(ls / c as f64),
        smoothing: ls > 0.0,
    };
    let tv = targets.as_slice();
    for &t in tv {
        shape_assert!(
            t == spec.ignore || (0..c as i64).contains(&t),
            "{op}: target {t} is out of range for {c} classes (input shape {shape:?})"
        );
    }
    let x = input.as_slice();
    let (lse, per) = match kind {
        Kind::CrossEntropy => cross_entropy::forward(&spec, x, tv),
        Kind::Nll => (Vec::new(), nll_forward(&spec, x, tv)),
    };
    let total_w = tv
        .iter()
        .filter(|&&t| t != spec.ignore)
        .fold(E::zero(), |a, &t| a + spec.wc(t as usize));
    let reduction = options.reduction;
    let sum = || per.iter().fold(E::zero(), |a, &v| a + v);
    let (out, mean) = match reduction {
        Reduction::None => (Tensor::from_vec_in(per.clone(), targets.shape()), None),
        Reduction::Sum => (Tensor::scalar_in(sum()), None),
        Reduction::Mean => {
            let m = sum() / total_w;
            (Tensor::scalar_in(m), Some(m))
        }
    };
    let mut inputs = vec![input.clone()];
    inputs.extend(options.weight.cloned());
    let targets = targets.clone();
    out.record(op, inputs, move |ctx| {
        let tv = targets.as_slice();
        let (x, w) = (&ctx.inputs[0], ctx.inputs.get(1));
        let need_w = w.is_some_and(|w| w.is_tracked());
        if ctx.create_graph {
            let (gx, gw) = backward_graph(&spec, x, w, ctx.grad, tv, reduction);
            let mut out = vec![ctx.needs(0).then_some(gx)];
            if w.is_some() {
                out.push(need_w.then_some(gw));
            }
            return out;
        }
        let gs = ctx.grad.as_slice();
        // per position: the upstream factor (0 when ignored)
        let scale: Vec<E> = tv
            .iter()
            .enumerate()
            .map(|(p, &t)| match (t == spec.ignore, reduction) {
                (true, _) => E::zero(),
                (false, Reduction::None) => gs[p],
                (false, Reduction::Sum) => gs[0],
                (false, Reduction::Mean) => gs[0] / total_w,
            })
            .collect();
        let xs = x.as_slice();
        let gx = ctx.needs(0).then(|| {
            let gx = match kind {
                Kind::CrossEntropy => cross_entropy::backward(&spec, xs, tv, &lse, &scale),
                Kind::Nll => nll_backward(&spec, tv, &scale),
            };
            Tensor::from_parts(gx, x.shape.clone(), None)
        });
        let mut out = vec![gx];
        if w.is_some() {
            out.push(need_w.then(|| {
                Tensor::from_vec_in(weight_grad(&spec, xs, tv, &lse, &scale, mean), &[spec.c])
            }));
        }
        out
    })
}

/// `-w_t x_t` per position of log-probabilities (0 when ignored).
fn nll_forward<E: Float>(s: &Spec<E>, x: &[E], tv: &[i64]) -> Vec<E> {
    tv.iter()
        .enumerate()
        .map(|(p, &t)| match t == s.ignore {
            true => E::zero(),
            false => -(s.wc(t as usize) * x[s.at(p, t as usize)]),
        })
        .collect()
}

/// The input gradient of `nll_loss`: `-scale_p w_t` at each position's
/// target, 0 elsewhere (the zeros written in parallel blocks).
fn nll_backward<E: Float>(s: &Spec<E>, tv: &[i64], scale: &[E]) -> crate::cpu::Storage<E> {
    let mut gx = zeroed_output::<E>(s.n * s.c * s.inner);
    for (p, &t) in tv.iter().enumerate() {
        if t != s.ignore {
            gx[s.at(p, t as usize)] = -(scale[p] * s.wc(t as usize));
        }
    }
    gx
}

/// The weight's gradient from the saved `lse` (empty for `nll_loss`) and
/// the per-position `scale`: `sum_p scale_p d loss_p / d w_k`, minus
/// `scale_p mean` at each target for the mean (see the module docs).
fn weight_grad<E: Float>(
    s: &Spec<E>,
    x: &[E],
    tv: &[i64],
    lse: &[E],
    scale: &[E],
    mean: Option<E>,
) -> Vec<E> {
    let mut gw = match s.smoothing {
        true => smooth_sums(s, x, tv, lse, scale)
            .into_iter()
            .map(|v| s.smooth * v)
            .collect(),
        false => vec![E::zero(); s.c],
    };
    for (p, &t) in tv.iter().enumerate() {
        if t == s.ignore {
            continue;
        }
        let xt = x[s.at(p, t as usize)];
        let nll = lse.get(p).map_or(-xt, |&l| l - xt);
        let mut v = scale[p] * s.keep * nll;
        if let Some(m) = mean {
            v -= scale[p] * m;
        }
        gw[t as usize] += v;
    }
    gw
}

/// `sum_p scale_p (lse_p - x_pk)` per class `k` over the positions not
/// ignored (the smoothing term's weight gradient): `(N, C)` input over
/// blocks of rows (the forward's), one partial row of `C` sums per block;
/// K-d input over blocks of whole class runs, one sum per run `(i, k)`;
/// then the partials in block (image) order.
fn smooth_sums<E: Float>(s: &Spec<E>, x: &[E], tv: &[i64], lse: &[E], scale: &[E]) -> Vec<E> {
    let (n, c, inner) = (s.n, s.c, s.inner);
    let mut out = vec![E::zero(); c];
    if inner == 1 {
        let rows = ROW_BLOCK_ELEMS.div_ceil(c.max(1)).max(1);
        let mut part = vec![E::zero(); n.div_ceil(rows) * c];
        row_blocks_mut(
            &mut part,
            c,
            x.len(),
            #[inline(always)]
            |b, acc| {
                for i in b * rows..((b + 1) * rows).min(n) {
                    if tv[i] == s.ignore {
                        continue;
                    }
                    let (sp, l) = (scale[i], lse[i]);
                    for (a, &v) in acc.iter_mut().zip(&x[i * c..(i + 1) * c]) {
                        *a += sp * (l - v);
                    }
                }
            },
        );
        for row in part.chunks(c.max(1)) {
            for (o, &v) in out.iter_mut().zip(row) {
                *o += v;
            }
        }
    } else {
        let rb = (ROW_BLOCK_ELEMS / inner.max(1)).max(1);
        let mut runs = vec![E::zero(); n * c];
        row_blocks_mut(
            &mut runs,
            rb,
            x.len(),
            #[inline(always)]
            |b, chunk| {
                for (r, o) in chunk.iter_mut().enumerate() {
                    let run = b * rb + r;
                    let at = (run / c) * inner;
                    let xs = &x[run * inner..(run + 1) * inner];
                    for (d, &v) in xs.iter().enumerate() {
                        if tv[at + d] != s.ignore {
                            *o += scale[at + d] * (lse[at + d] - v);
                        }
                    }
                }
            },
        );
        for run in runs.chunks(c) {
            for (o, &v) in out.iter_mut().zip(run) {
                *o += v;
            }
        }
    }
    out
}

/// `x` with the entries where `m` is 0 set to 0, times `m`: a `-inf` log
/// probability that the loss does not use gives 0, not `-inf * 0 = NaN`.
#[track_caller]
fn pick<E: Float, D: Device>(x: &Tensor<E, D>, m: &Tensor<E, D>) -> Tensor<E, D> {
    let off: Vec<bool> = m.as_slice().iter().map(|&v| v == E::zero()).collect();
    x.masked_fill(&Tensor::<bool, D>::from_vec_in(off, m.shape()), 0.0)
        .mul(m)
}

/// The input and weight gradients in tensor ops (differentiable in the
/// input, the weight and the incoming gradient), for `create_graph`: the
/// input viewed as `[N, C]` or `[N, C, d1 ... dk]` (flattened), the
/// targets as constant masks, the weight (ones without) viewed along the
/// class axis.
#[track_caller]
fn backward_graph<E: Float, D: Device>(
    s: &Spec<E>,
    x: &Tensor<E, D>,
    w: Option<&Tensor<E, D>>,
    g: &Tensor<E, D>,
    tv: &[i64],
    reduction: Reduction,
) -> (Tensor<E, D>, Tensor<E, D>) {
    let (n, c, inner) = (s.n, s.c, s.inner);
    let dims: Vec<usize> = if inner == 1 {
        vec![n, c]
    } else {
        vec![n, c, inner]
    };
    let (mut per_pos, mut per_class) = (dims.clone(), vec![1; dims.len()]);
    per_pos[1] = 1;
    per_class[1] = c;
    // one-hot of the targets, validity, and the loss's factor of
    // (lse - x_k): (1 - ls) [k = t] + ls / C, 0 when ignored
    let mut onehot = vec![E::zero(); n * c * inner];
    let mut valid = vec![E::zero(); n * inner];
    let mut factor = vec![E::zero(); n * c * inner];
    for (p, &t) in tv.iter().enumerate() {
        if t != s.ignore {
            onehot[s.at(p, t as usize)] = E::one();
            valid[p] = E::one();
            for k in 0..c {
                factor[s.at(p, k)] = s.smooth;
            }
            factor[s.at(p, t as usize)] += s.keep;
        }
    }
    let onehot = Tensor::<E, D>::from_vec_in(onehot, &dims);
    let valid = Tensor::<E, D>::from_vec_in(valid, &per_pos);
    let factor = Tensor::<E, D>::from_vec_in(factor, &dims);
    let wrow = match w {
        Some(w) => w.view(&per_class),
        None => Tensor::ones_in(&per_class),
    };
    let wmask = onehot.mul(&wrow);
    let wt = wmask.sum_dim(&[1], true);
    let total = wt.sum();
    let scale = match reduction {
        Reduction::None => g.view(&per_pos),
        Reduction::Sum => g.clone(),
        Reduction::Mean => g.div(&total),
    };
    let xv = x.view(&dims);
    let (gx, nl) = match s.kind {
        Kind::CrossEntropy => {
            let p = xv.softmax(1);
            let mut d = p.mul(&wt).sub(&wmask).mul_scalar(s.keep);
            if s.smoothing {
                let sm = p.mul(&valid.mul(&wrow.sum())).sub(&valid.mul(&wrow));
                d = d.add(&sm.mul_scalar(s.smooth));
            }
            (d, xv.log_softmax(1).neg())
        }
        Kind::Nll => (wmask.neg(), xv.neg()),
    };
    let gx = gx.mul(&scale).view(x.shape());
    // d loss / d w_k per entry, then summed over the positions
    let dw = pick(&nl, &factor);
    let axes: Vec<isize> = (0..dims.len() as isize).filter(|&a| a != 1).collect();
    let mut gw = dw.mul(&scale).sum_dim(&axes, false);
    if reduction == Reduction::Mean {
        let mean = dw.mul(&wrow).sum().div(&total);
        let count = onehot.sum_dim(&axes, false);
        gw = gw.sub(&count.mul(&mean.mul(&scale)));
    }
    (gx, gw)
}
