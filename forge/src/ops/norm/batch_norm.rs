//! Batch normalisation, a fused op whose `create_graph` rule is written in
//! differentiable tensor ops (mean, centred second moment, `rsqrt`), so
//! gradients of any order flow through the statistics.

use super::stats::{
    lane_dot_dev, lane_sq_dev, normalize, per_channel, per_channel_par, per_run_par, BN_CHUNK,
};
use crate::cpu::buffers::build_chunks;
use crate::cpu::Storage;
use crate::ops::softmax::lane_sum;
use crate::tensor::{Device, Float, Tensor};

/// Batch normalisation over every dimension but the channel dimension 1 of
/// `x` (`(N, C)`, `(N, C, L)`, `(N, C, H, W)`, ...), then `* weight + bias`
/// per channel.
///
/// In training, `x` is normalised with the batch mean and the *biased*
/// batch variance, and the running statistics (when given) are updated as
/// `(1 - momentum) * running + momentum * batch`, with the *unbiased*
/// variance (`n / (n - 1)`, `n` values per channel). The updated statistics
/// are returned (untracked); the inputs are not modified. In evaluation,
/// `x` is normalised with the running statistics, which are returned
/// unchanged.
///
/// # Panics
/// When `x` has rank below 2, a per-channel tensor does not have shape
/// `(C,)`, training sees only one value per channel, or evaluation has no
/// running statistics.
///
/// ```
/// use forge::nn::functional::batch_norm;
/// use forge::Tensor;
/// let x = Tensor::<f64>::from_vec(vec![1.0, 3.0], &[2, 1]);
/// let (rm, rv) = (Tensor::zeros(&[1]), Tensor::ones(&[1]));
/// let (y, m, v) = batch_norm(&x, Some(&rm), Some(&rv), None, None, true, 0.1, 0.0);
/// assert_eq!(y.to_vec(), vec![-1.0, 1.0]);
/// assert!((m.unwrap().item() - 0.2).abs() < 1e-15);
/// assert!((v.unwrap().item() - (0.9 + 0.1 * 2.0)).abs() < 1e-15);
/// ```
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
#[track_caller]
pub fn batch_norm<E: Float, D: Device>(
    x: &Tensor<E, D>,
    running_mean: Option<&Tensor<E, D>>,
    running_var: Option<&Tensor<E, D>>,
    weight: Option<&Tensor<E, D>>,
    bias: Option<&Tensor<E, D>>,
    training: bool,
    momentum: f64,
    eps: f64,
) -> (Tensor<E, D>, Option<Tensor<E, D>>, Option<Tensor<E, D>>) {
    let shape = x.shape();
    shape_assert!(
        shape.len() >= 2,
        "batch_norm: input of shape {shape:?} needs at least 2 dimensions (N, C, ...)"
    );
    let pc = |what: &str, t: &Tensor<E, D>| per_channel("batch_norm", what, t, shape);
    for (what, t) in [("weight", weight), ("bias", bias)] {
        if let Some(t) = t {
            pc(what, t);
        }
    }
    let c = shape[1];
    if !training {
        let (rm, rv) = match (running_mean, running_var) {
            (Some(m), Some(v)) => (m, v),
            _ => shape_panic!("batch_norm: evaluation mode needs running_mean and running_var"),
        };
        pc("running_mean", rm);
        pc("running_var", rv);
        let out = batch_norm_eval_fused(x, rm, rv, weight, bias, eps);
        return (out, Some(rm.clone()), Some(rv.clone()));
    }
    let n = x.numel() / c.max(1);
    shape_assert!(
        n > 1,
        "batch_norm: expected more than 1 value per channel when training, got input shape {shape:?}"
    );
    let (out, mean, var) = batch_norm_train_fused(x, weight, bias, eps);
    let m = E::from_f64(momentum);
    let keep = E::from_f64(1.0 - momentum);
    let update = |running: Option<&Tensor<E, D>>, stat: Tensor<E, D>| {
        running.map(|r| {
            let r = pc("running statistics", r).detach();
            r.mul_scalar(keep)
                .add(&stat.detach().mul_scalar(m))
                .view(&[c])
        })
    };
    let new_mean = update(running_mean, mean);
    let unbiased = var
        .detach()
        .mul_scalar(E::from_f64(n as f64 / (n - 1) as f64));
    let new_var = update(running_var, unbiased);
    (out, new_mean, new_var)
}

/// `out[b, ch, s] = f(coef(ch), x[b, ch, s], g[b, ch, s])` over
/// `[n, c, sp]` (`g` zero when absent): [`per_run_par`] with the
/// coefficients of the run's channel.
fn per_element_par<E: Float, C: Copy + Sync>(
    c: usize,
    sp: usize,
    x: &[E],
    g: Option<&[E]>,
    coef: impl Fn(usize) -> C + Sync,
    f: impl Fn(C, E, E) -> E + Sync,
) -> Storage<E> {
    let c1 = c.max(1);
    if sp == 1 && c > 1 {
        // Planes of one element ([n, c, 1, 1] after a global pool, or a
        // 2-d batch norm): per-run coefficients would be taken once per
        // element; take each channel's once, then go row by row.
        let coefs: Vec<C> = (0..c).map(&coef).collect();
        let per = (BN_CHUNK / c).max(1) * c;
        return build_chunks(x.len(), per, |blk, out| {
            let j0 = blk * per;
            for (r, row) in out.chunks_mut(c).enumerate() {
                let at = j0 + r * c;
                let xr = &x[at..at + row.len()];
                match g {
                    Some(g) => {
                        let gr = &g[at..at + row.len()];
                        for (((o, &v), &gv), &k) in row.iter_mut().zip(xr).zip(gr).zip(&coefs) {
                            o.write(f(k, v, gv));
                        }
                    }
                    None => {
                        for ((o, &v), &k) in row.iter_mut().zip(xr).zip(&coefs) {
                            o.write(f(k, v, E::zero()));
                        }
                    }
                }
            }
        });
    }
    per_run_par(c, sp, x, g, |run| coef(run % c1), f)
}

/// Per channel of `[n, c]` (planes of one element), the fold of the
/// channel's elements `j = i c + ch` in image order from `E::zero()`, then
/// `finish(acc, ch)`; channels in parallel blocks, each block's images row
/// by row: `step(acc, c0, j)` folds the block's part of one row into the
/// block's accumulators (`acc[k]` for channel `c0 + k`, element `j + k`),
/// a loop over consecutive channels that the compiler vectorises (the
/// callers zip slices: no index checks inside). The same additions in the
/// same order as a per-channel fold of [`lane_sum`]-style sums over
/// one-element runs: those are `0 + v` terms, equal to `v` wherever `v`
/// is not `-0`, and a fold that starts at `+0` never holds `-0`, so adding
/// `+0` or `-0` to it gives the same bits.
fn flat_channel_folds<E: Float, T: Copy + Send>(
    n: usize,
    c: usize,
    step: impl Fn(&mut [E], usize, usize) + Sync,
    finish: impl Fn(E, usize) -> T + Sync,
) -> Storage<T> {
    let per = (BN_CHUNK / n.max(1)).clamp(1, c.max(1));
    build_chunks(c, per, |blk, out| {
        let c0 = blk * per;
        let mut acc = vec![E::zero(); out.len()];
        for i in 0..n {
            step(&mut acc, c0, i * c + c0);
        }
        for (k, (slot, &a)) in out.iter_mut().zip(&acc).enumerate() {
            slot.write(finish(a, c0 + k));
        }
    })
}

/// `acc[k] += v[j + k]` for every `k` (a [`flat_channel_folds`] step).
#[inline(always)]
fn fold_sum<E: Float>(acc: &mut [E], v: &[E], j: usize) {
    let len = acc.len();
    for (a, &x) in acc.iter_mut().zip(&v[j..j + len]) {
        *a += x;
    }
}

/// `acc[k] += (v[j + k] - mu[c0 + k])^2` for every `k` (a
/// [`flat_channel_folds`] step: the squared deviations of one row).
#[inline(always)]
fn fold_sq_dev<E: Float>(acc: &mut [E], v: &[E], mu: &[E], c0: usize, j: usize) {
    let len = acc.len();
    for ((a, &x), &m) in acc.iter_mut().zip(&v[j..j + len]).zip(&mu[c0..c0 + len]) {
        *a += (x - m) * (x - m);
    }
}

/// The `n` runs of channel `ch` in `[n, c, sp]`: `(i * c + ch) * sp..`.
fn channel_runs(
    n: usize,
    c: usize,
    sp: usize,
    ch: usize,
) -> impl Iterator<Item = std::ops::Range<usize>> {
    (0..n).map(move |i| (i * c + ch) * sp..(i * c + ch + 1) * sp)
}

/// Per channel of `[n, c, sp]`: `(sum(g), rstd sum(g (x - center)))`, the
/// bias and weight gradients of a batch norm, in parallel over blocks of
/// channels (each channel's runs in image order, eight lanes each).
fn grad_sums<E: Float>(
    [n, c, sp]: [usize; 3],
    g: &[E],
    xs: &[E],
    center: &[E],
    rstd: &[E],
) -> Storage<(E, E)> {
    if sp == 1 {
        let sg = flat_channel_folds(n, c, |a, _, j| fold_sum(a, g, j), |a, _| a);
        return flat_channel_folds(
            n,
            c,
            |acc: &mut [E], c0, j| {
                let len = acc.len();
                let parts = g[j..j + len].iter().zip(&xs[j..j + len]);
                for ((a, (&gv, &v)), &m) in acc.iter_mut().zip(parts).zip(&center[c0..c0 + len]) {
                    *a += gv * (v - m);
                }
            },
            |a, ch| (sg[ch], a * rstd[ch]),
        );
    }
    per_channel_par(c, n * sp, |ch| {
        let runs = || channel_runs(n, c, sp, ch);
        let sg = runs().fold(E::zero(), |a, r| a + lane_sum(&g[r]));
        let sgx = runs().fold(E::zero(), |a, r| {
            a + lane_dot_dev(&g[r.clone()], &xs[r], center[ch])
        });
        (sg, sgx * rstd[ch])
    })
}

/// `[dx, dw?, db?]` from the input gradient and the [`grad_sums`].
#[track_caller]
fn affine_grads<E: Float, D: Device>(
    gx: Tensor<E, D>,
    sums: &Storage<(E, E)>,
    has_w: bool,
    has_b: bool,
) -> Vec<Option<Tensor<E, D>>> {
    let c = sums.len();
    let mut grads = vec![Some(gx)];
    if has_w {
        grads.push(Some(Tensor::from_storage_in(
            Storage::map(sums, |s| s.1),
            &[c],
        )));
    }
    if has_b {
        grads.push(Some(Tensor::from_storage_in(
            Storage::map(sums, |s| s.0),
            &[c],
        )));
    }
    grads
}

/// Training-mode batch norm over `x [N, C, S...]`, fused: per-channel
/// statistics (biased variance) and `(x - mean) * (rstd w) + b` in one op,
/// and one backward pass, `dx = w rstd (g - mean(g) - xhat mean(g xhat))`,
/// `dw = sum(g xhat)`, `db = sum(g)` per channel. Statistics and sums run
/// in parallel over blocks of channels, each channel's runs summed image
/// by image in eight lanes; the elementwise passes in parallel over blocks
/// of images. Under `create_graph` the same formulas are written in tensor
/// ops. Returns the output and the batch mean and biased variance
/// (untracked, shape `(1, C, 1, ...)`).
#[track_caller]
fn batch_norm_train_fused<E: Float, D: Device>(
    x: &Tensor<E, D>,
    weight: Option<&Tensor<E, D>>,
    bias: Option<&Tensor<E, D>>,
    eps: f64,
) -> (Tensor<E, D>, Tensor<E, D>, Tensor<E, D>) {
    let shape = x.shape().to_vec();
    let (n, c) = (shape[0], shape[1]);
    let sp: usize = shape[2..].iter().product();
    let cnt = E::from_f64((n * sp) as f64);
    let xs = x.as_slice();
    let stats = if sp == 1 {
        let mu = flat_channel_folds(n, c, |a, _, j| fold_sum(a, xs, j), |a, _| a / cnt);
        flat_channel_folds(
            n,
            c,
            |acc: &mut [E], c0, j| fold_sq_dev(acc, xs, &mu, c0, j),
            |a, ch| (mu[ch], a / cnt),
        )
    } else {
        per_channel_par(c, n * sp, |ch| {
            let mu = channel_runs(n, c, sp, ch).fold(E::zero(), |a, r| a + lane_sum(&xs[r])) / cnt;
            let ss = channel_runs(n, c, sp, ch).fold(E::zero(), |a, r| a + lane_sq_dev(&xs[r], mu));
            (mu, ss / cnt)
        })
    };
    let e = E::from_f64(eps);
    let rstd: Vec<E> = stats.iter().map(|&(_, v)| (v + e).sqrt().recip()).collect();
    let (w, b) = (weight.map(|t| t.as_slice()), bias.map(|t| t.as_slice()));
    let wc = |ch: usize| w.map_or(E::one(), |w| w[ch]);
    let scale: Vec<E> = (0..c).map(|ch| rstd[ch] * wc(ch)).collect();
    let out = per_element_par(
        c,
        sp,
        xs,
        None,
        |ch| (stats[ch].0, scale[ch], b.map_or(E::zero(), |b| b[ch])),
        |(m, k, bb), v, _| (v - m) * k + bb,
    );
    let mut stat_shape = vec![1usize; shape.len()];
    stat_shape[1] = c;
    let mean_t = Tensor::from_storage_in(Storage::map(&stats, |s| s.0), &stat_shape);
    let var_t = Tensor::from_storage_in(Storage::map(&stats, |s| s.1), &stat_shape);
    let mean: Vec<E> = stats.iter().map(|s| s.0).collect();
    let mut inputs = vec![x.clone()];
    inputs.extend(weight.cloned());
    inputs.extend(bias.cloned());
    let (has_w, has_b) = (weight.is_some(), bias.is_some());
    let y =
        Tensor::from_parts(out, x.shape.clone(), None).record("batch_norm", inputs, move |ctx| {
            let x = &ctx.inputs[0];
            let wt = has_w.then(|| &ctx.inputs[1]);
            if ctx.create_graph {
                return batch_norm_backward_graph(x, wt, has_b, eps, ctx.grad);
            }
            let wc = |ch: usize| wt.map_or(E::one(), |w| w.as_slice()[ch]);
            let (xs, g) = (x.as_slice(), ctx.grad.as_slice());
            // (sum g, sum g (x - mean) rstd) per channel
            let sums = grad_sums([n, c, sp], g, xs, &mean, &rstd);
            // dx = k (g - a - (x - mean) q) with k = w rstd, a = sum(g) / cnt,
            // q = rstd sum(g xhat) / cnt
            let coef: Vec<(E, E, E)> = (0..c)
                .map(|ch| {
                    (
                        wc(ch) * rstd[ch],
                        sums[ch].0 / cnt,
                        rstd[ch] * (sums[ch].1 / cnt),
                    )
                })
                .collect();
            let gx = per_element_par(
                c,
                sp,
                xs,
                Some(g),
                |ch| (coef[ch], mean[ch]),
                |((k, a, q), m), v, gv| k * (gv - a - (v - m) * q),
            );
            affine_grads(
                Tensor::from_parts(gx, x.shape.clone(), None),
                &sums,
                has_w,
                has_b,
            )
        });
    (y, mean_t, var_t)
}

/// Evaluation-mode batch norm, fused: `y = (x - rm) * k + b` with `k = w
/// / sqrt(rv + eps)` per channel, one pass in parallel over blocks of
/// images. Backward, one pass for `x` (`dx = g k`) and per-channel sums for
/// `w` (`sum(g (x - rm)) / sqrt(rv + eps)`) and `b` (`sum(g)`); when a
/// running statistic is tracked, its gradients come from the same sums:
/// `drm = -k sum(g)`, `drv = -k / (2 (rv + eps)) sum(g (x - rm)) / sqrt(rv +
/// eps)`. Under `create_graph` the same formulas in tensor ops
/// (differentiable in `x`, `g`, `w` and the statistics).
#[track_caller]
fn batch_norm_eval_fused<E: Float, D: Device>(
    x: &Tensor<E, D>,
    rm: &Tensor<E, D>,
    rv: &Tensor<E, D>,
    weight: Option<&Tensor<E, D>>,
    bias: Option<&Tensor<E, D>>,
    eps: f64,
) -> Tensor<E, D> {
    let shape = x.shape().to_vec();
    let (n, c) = (shape[0], shape[1]);
    let sp: usize = shape[2..].iter().product();
    let e = E::from_f64(eps);
    let rm_v = rm.to_vec();
    let rstd: Vec<E> = rv
        .as_slice()
        .iter()
        .map(|&v| (v + e).sqrt().recip())
        .collect();
    let (w, b) = (weight.map(|t| t.as_slice()), bias.map(|t| t.as_slice()));
    let scale: Vec<E> = (0..c)
        .map(|ch| rstd[ch] * w.map_or(E::one(), |w| w[ch]))
        .collect();
    let out = per_element_par(
        c,
        sp,
        x.as_slice(),
        None,
        |ch| (rm_v[ch], scale[ch], b.map_or(E::zero(), |b| b[ch])),
        |(m, k, bb), v, _| (v - m) * k + bb,
    );
    let mut inputs = vec![x.clone()];
    inputs.extend(weight.cloned());
    inputs.extend(bias.cloned());
    let (has_w, has_b) = (weight.is_some(), bias.is_some());
    // the statistics are inputs (after w and b) only when one is tracked
    let stats_in = (rm.is_tracked() || rv.is_tracked()).then_some(inputs.len());
    if stats_in.is_some() {
        inputs.extend([rm.clone(), rv.clone()]);
    }
    let (rm_t, rv_t) = (rm.clone(), rv.clone());
    Tensor::from_parts(out, x.shape.clone(), None).record("batch_norm_eval", inputs, move |ctx| {
        let (x, g) = (&ctx.inputs[0], ctx.grad);
        let wt = has_w.then(|| &ctx.inputs[1]);
        if ctx.create_graph {
            let (rm_g, rv_g) = match stats_in {
                Some(i) => (&ctx.inputs[i], &ctx.inputs[i + 1]),
                None => (&rm_t, &rv_t),
            };
            return batch_norm_eval_graph(x, g, wt, has_b, stats_in.is_some(), rm_g, rv_g, e);
        }
        let (xs, gs) = (x.as_slice(), g.as_slice());
        let k: Vec<E> = (0..c)
            .map(|ch| rstd[ch] * wt.map_or(E::one(), |w| w.as_slice()[ch]))
            .collect();
        let gx = per_element_par(c, sp, xs, Some(gs), |ch| k[ch], |k, _, gv| gv * k);
        let sums = grad_sums([n, c, sp], gs, xs, &rm_v, &rstd);
        let mut grads = affine_grads(
            Tensor::from_parts(gx, x.shape.clone(), None),
            &sums,
            has_w,
            has_b,
        );
        if stats_in.is_some() {
            let half = E::from_f64(0.5);
            let drm = (0..c).map(|ch| -(k[ch] * sums[ch].0)).collect();
            let drv = (0..c)
                .map(|ch| -(half * k[ch] * rstd[ch] * sums[ch].1))
                .collect();
            grads.push(Some(Tensor::from_vec_in(drm, &[c])));
            grads.push(Some(Tensor::from_vec_in(drv, &[c])));
        }
        grads
    })
}

/// The evaluation-mode batch-norm gradients in tensor ops, for
/// `create_graph`: `[dx, dw?, db?, drm?, drv?]` (the statistics' when
/// `stats` is set).
#[allow(clippy::too_many_arguments)]
#[track_caller]
fn batch_norm_eval_graph<E: Float, D: Device>(
    x: &Tensor<E, D>,
    g: &Tensor<E, D>,
    w: Option<&Tensor<E, D>>,
    has_b: bool,
    stats: bool,
    rm: &Tensor<E, D>,
    rv: &Tensor<E, D>,
    eps: E,
) -> Vec<Option<Tensor<E, D>>> {
    let pc = |t: &Tensor<E, D>| per_channel("batch_norm", "statistics", t, x.shape());
    let axes: Vec<isize> = (0..x.rank() as isize).filter(|&a| a != 1).collect();
    let rstd = pc(rv).add_scalar(eps).rsqrt();
    let k = match w {
        Some(w) => rstd.mul(&pc(w)),
        None => rstd.clone(),
    };
    let gk = g.mul(&k);
    let xhat = x.sub(&pc(rm)).mul(&rstd);
    let mut out = vec![Some(gk.clone())];
    if w.is_some() {
        out.push(Some(g.mul(&xhat).sum_dim(&axes, false)));
    }
    if has_b {
        out.push(Some(g.sum_dim(&axes, false)));
    }
    if stats {
        out.push(Some(gk.sum_dim(&axes, false).neg()));
        let drv = gk.mul(&xhat).mul(&rstd).mul_scalar(E::from_f64(-0.5));
        out.push(Some(drv.sum_dim(&axes, false)));
    }
    out
}

/// The batch-norm (training) gradients in tensor ops, for `create_graph`.
#[track_caller]
fn batch_norm_backward_graph<E: Float, D: Device>(
    x: &Tensor<E, D>,
    w: Option<&Tensor<E, D>>,
    has_b: bool,
    eps: f64,
    g: &Tensor<E, D>,
) -> Vec<Option<Tensor<E, D>>> {
    let shape = x.shape();
    let axes: Vec<isize> = (0..shape.len() as isize).filter(|&a| a != 1).collect();
    let (xhat, _, var) = normalize(x, &axes, eps);
    let rstd = var.add_scalar(E::from_f64(eps)).rsqrt();
    let gw = match w {
        Some(w) => g.mul(&per_channel("batch_norm", "weight", w, shape)),
        None => g.clone(),
    };
    let gx = gw
        .sub(&gw.mean_dim(&axes, true))
        .sub(&xhat.mul(&gw.mul(&xhat).mean_dim(&axes, true)))
        .mul(&rstd);
    let mut out = vec![Some(gx)];
    if w.is_some() {
        out.push(Some(g.mul(&xhat).sum_dim(&axes, false)));
    }
    if has_b {
        out.push(Some(g.sum_dim(&axes, false)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n x c` values with exact zeros of both signs, ties and wide
    /// magnitudes mixed in.
    fn values(len: usize, seed: u64) -> Vec<f64> {
        let mut s = seed;
        (0..len)
            .map(|i| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let u = (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
                match i % 11 {
                    3 => -0.0,
                    7 => 0.0,
                    9 => 1e8 * u,
                    _ => u,
                }
            })
            .collect()
    }

    fn same_bits<T: Copy, B: PartialEq + std::fmt::Debug>(a: &[T], b: &[T], bits: impl Fn(T) -> B) {
        assert_eq!(a.len(), b.len());
        for (i, (&x, &y)) in a.iter().zip(b).enumerate() {
            assert_eq!(bits(x), bits(y), "element {i}");
        }
    }

    /// The one-element-plane paths (`sp == 1`) give the bits of the
    /// per-channel and per-run paths they replace: the statistics, the
    /// gradient sums and the elementwise passes, for channel counts that
    /// split into several parallel blocks and batches of 1.
    #[test]
    fn one_element_planes_match_the_per_channel_folds() {
        for (n, c) in [(16, 512), (1, 7), (3, 2), (64, 300), (2, 20_000)] {
            let x = values(n * c, (n * 31 + c) as u64);
            let g = values(n * c, (n * 7 + c * 3) as u64);
            let cnt = (n as f64).recip();
            // the statistics of batch_norm_train_fused
            let mu = flat_channel_folds(n, c, |a, _, j| fold_sum(a, &x, j), |a, _| a * cnt);
            let flat = flat_channel_folds(
                n,
                c,
                |a: &mut [f64], c0, j| fold_sq_dev(a, &x, &mu, c0, j),
                |a, ch| (mu[ch], a * cnt),
            );
            let runs = per_channel_par(c, n, |ch| {
                let m = channel_runs(n, c, 1, ch).fold(0.0, |a, r| a + lane_sum(&x[r])) * cnt;
                let ss = channel_runs(n, c, 1, ch).fold(0.0, |a, r| a + lane_sq_dev(&x[r], m));
                (m, ss * cnt)
            });
            same_bits(&flat, &runs, |(a, b): (f64, f64)| {
                (a.to_bits(), b.to_bits())
            });
            // grad_sums against its per-channel form
            let rstd: Vec<f64> = (0..c).map(|ch| 1.0 + ch as f64 * 0.25).collect();
            let sums = grad_sums([n, c, 1], &g, &x, &mu, &rstd);
            let want = per_channel_par(c, n, |ch| {
                let sg = channel_runs(n, c, 1, ch).fold(0.0, |a, r| a + lane_sum(&g[r]));
                let sgx = channel_runs(n, c, 1, ch)
                    .fold(0.0, |a, r| a + lane_dot_dev(&g[r.clone()], &x[r], mu[ch]));
                (sg, sgx * rstd[ch])
            });
            same_bits(&sums, &want, |(a, b): (f64, f64)| {
                (a.to_bits(), b.to_bits())
            });
            // the elementwise pass, with and without a gradient
            let f = |(m, k): (f64, f64), v: f64, gv: f64| (v - m) * k + gv;
            let coef = |ch: usize| (mu[ch], rstd[ch]);
            for gg in [None, Some(&g[..])] {
                let fast = per_element_par(c, 1, &x, gg, coef, f);
                let slow = per_run_par(c, 1, &x, gg, |run| coef(run % c), f);
                same_bits(&fast, &slow, f64::to_bits);
            }
        }
    }

    /// Training-mode batch norm (output, input, weight and bias gradients)
    /// has the same bits on 1 and 2 threads, for ResNet-18's small planes
    /// (`[16, 256, 2, 2]`, one block per image of 1024 values;
    /// `[16, 512, 1, 1]`), a larger one and an odd shape, and at 2 threads
    /// the 16K-value layer does use the pool (blocks of [`BN_CHUNK`] values).
    #[test]
    fn train_batch_norm_is_bit_identical_for_1_and_2_threads() {
        let _threads = crate::cpu::threads::lock_thread_count();
        use crate::cpu::threads::{pool_dispatches, set_num_threads};
        for shape in [
            [16, 256, 2, 2],
            [16, 512, 1, 1],
            [8, 64, 8, 8],
            [3, 5, 7, 3],
        ] {
            let len: usize = shape.iter().product();
            let to32 = |v: Vec<f64>| v.into_iter().map(|x| x as f32).collect::<Vec<f32>>();
            let x = Tensor::<f32>::from_vec_in(to32(values(len, 1)), &shape).requires_grad();
            let w =
                Tensor::<f32>::from_vec_in(to32(values(shape[1], 2)), &[shape[1]]).requires_grad();
            let b =
                Tensor::<f32>::from_vec_in(to32(values(shape[1], 3)), &[shape[1]]).requires_grad();
            let gy = Tensor::<f32>::from_vec_in(to32(values(len, 4)), &shape);
            let run = |threads| {
                set_num_threads(threads);
                let before = pool_dispatches();
                let (y, _, _) = batch_norm_train_fused(&x, Some(&w), Some(&b), 1e-5);
                let g = y.backward_with(&gy, false);
                let bits =
                    |t: &Tensor<f32>| t.to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                let out = [
                    &y,
                    g.get(&x).unwrap(),
                    g.get(&w).unwrap(),
                    g.get(&b).unwrap(),
                ]
                .map(bits);
                (out, pool_dispatches() > before)
            };
            let (one, _) = run(1);
            let (two, pooled) = run(2);
            assert!(one == two, "{shape:?}: 1 and 2 threads differ");
            if shape == [16, 256, 2, 2] {
                assert!(pooled, "{shape:?} ran on one thread at 2 threads");
            }
        }
        set_num_threads(1);
    }
}
