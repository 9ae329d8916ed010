//! Group normalisation, fused: per `(image, group)` statistics and the
//! per-channel affine in one op, and one backward rule, over fixed blocks
//! from the shape only.
//!
//! With `x` viewed as `[n, G, m]` (`m = C / G * S` values per group, `S`
//! the product of the trailing dimensions), per row `r = (i, group)`:
//!
//! ```text
//! mean_r, var_r (biased), rstd_r = 1 / sqrt(var_r + eps)
//! y = (x - mean_r) rstd_r w_ch + b_ch
//! dx = rstd_r (w_ch g - mean_r(w g) - xhat mean_r(w g xhat)),  xhat = (x - mean_r) rstd_r
//! dw_ch = sum_{i, s} g xhat,  db_ch = sum_{i, s} g
//! ```
//!
//! **Passes.** Forward: the row statistics (a sum, then the centred sum of
//! squares), then the output. Backward: the per-`(image, channel)` sums
//! `sum g` and `sum g (x - mean)` (one read of `g` and `x`), then `dx`
//! (a second read), with the per-row coefficients and the weight and bias
//! gradients formed from those `n C` sums in between, image by image.
//!
//! **Threads.** The statistics run over blocks of rows, the sums over
//! blocks of `(image, channel)` runs and the elementwise passes over blocks
//! of whole images, each block about 4K values (`BN_CHUNK`) whatever the
//! thread count; every sum is taken inside one run or row in a fixed order
//! (eight lanes) and the weight and bias sums over the images in order. So
//! every result is the same for any number of threads.

use super::stats::{
    lane_dot_dev, lane_sq_dev, normalize, per_channel, per_channel_par, per_run_par,
};
use crate::ops::softmax::lane_sum;
use crate::tensor::{Device, Float, Tensor};

/// Group normalisation: the channels of `x` (`(N, C, ...)`) are split into
/// `groups` groups of `C / groups`, each normalised over its channels and
/// the trailing dimensions (biased variance), then `* weight + bias` per
/// channel.
///
/// # Panics
/// When `x` has rank below 2, `groups` does not divide `C`, or a weight or
/// bias does not have shape `(C,)`.
///
/// ```
/// use forge::nn::functional::group_norm;
/// use forge::Tensor;
/// let x = Tensor::<f64>::from_vec(vec![1.0, 3.0, 10.0, 20.0], &[1, 4]);
/// let y = group_norm(&x, 2, None, None, 0.0);
/// assert_eq!(y.to_vec(), vec![-1.0, 1.0, -1.0, 1.0]);
/// ```
#[track_caller]
pub fn group_norm<E: Float, D: Device>(
    x: &Tensor<E, D>,
    groups: usize,
    weight: Option<&Tensor<E, D>>,
    bias: Option<&Tensor<E, D>>,
    eps: f64,
) -> Tensor<E, D> {
    let shape = x.shape();
    shape_assert!(
        shape.len() >= 2,
        "group_norm: input of shape {shape:?} needs at least 2 dimensions (N, C, ...)"
    );
    let c = shape[1];
    shape_assert!(
        groups > 0 && c.is_multiple_of(groups),
        "group_norm: {groups} groups do not divide {c} channels (input shape {shape:?})"
    );
    for (what, t) in [("weight", weight), ("bias", bias)] {
        if let Some(t) = t {
            per_channel("group_norm", what, t, shape);
        }
    }
    group_norm_fused(x, groups, weight, bias, eps)
}

/// The fused op (see the module docs); `x` has rank >= 2, `groups` divides
/// its channels, and the weight and bias have one value per channel.
#[track_caller]
fn group_norm_fused<E: Float, D: Device>(
    x: &Tensor<E, D>,
    groups: usize,
    weight: Option<&Tensor<E, D>>,
    bias: Option<&Tensor<E, D>>,
    eps: f64,
) -> Tensor<E, D> {
    let shape = x.shape();
    let (n, c) = (shape[0], shape[1]);
    let sp: usize = shape[2..].iter().product();
    let cg = c / groups;
    let m = cg * sp;
    let xs = x.as_slice();
    let mut inputs = vec![x.clone()];
    inputs.extend(weight.cloned());
    inputs.extend(bias.cloned());
    let (cnt, e) = (E::from_f64(m as f64), E::from_f64(eps));
    // (mean, rstd) per row (image, group), rows in blocks of ~BN_CHUNK values
    let stats = per_channel_par(n * groups, m, |r| {
        if m == 0 {
            // no trailing values: no outputs; rstd 0 keeps the row's (zero)
            // sums out of the weight gradient instead of 0 * inf or NaN
            return (E::zero(), E::zero());
        }
        let row = &xs[r * m..(r + 1) * m];
        let mean = lane_sum(row) / cnt;
        let var = lane_sq_dev(row, mean) / cnt;
        (mean, (var + e).sqrt().recip())
    });
    // the row of run `(i, ch)` (run index i C + ch)
    let row_of = move |run: usize| (run / c) * groups + (run % c) / cg;
    let (w, b) = (weight.map(|t| t.as_slice()), bias.map(|t| t.as_slice()));
    let out = per_run_par(
        c,
        sp,
        xs,
        None,
        |run| {
            let (mean, rstd) = stats[row_of(run)];
            let ch = run % c;
            let k = w.map_or(rstd, |w| rstd * w[ch]);
            (mean, k, b.map_or(E::zero(), |b| b[ch]))
        },
        |(mean, k, bb), v, _| (v - mean) * k + bb,
    );
    let (has_w, has_b) = (weight.is_some(), bias.is_some());
    Tensor::from_parts(out, x.shape.clone(), None).record("group_norm", inputs, move |ctx| {
        let x = &ctx.inputs[0];
        let wt = has_w.then(|| &ctx.inputs[1]);
        if ctx.create_graph {
            return group_norm_backward_graph(x, wt, has_b, groups, eps, ctx.grad);
        }
        let (xs, g) = (x.as_slice(), ctx.grad.as_slice());
        let wc = |ch: usize| wt.map_or(E::one(), |w| w.as_slice()[ch]);
        // (sum g, sum g (x - mean)) per run (i, ch), in blocks of runs
        let sums = per_channel_par(n * c, sp, |run| {
            let at = run * sp..(run + 1) * sp;
            let mean = stats[row_of(run)].0;
            (
                lane_sum(&g[at.clone()]),
                lane_dot_dev(&g[at.clone()], &xs[at], mean),
            )
        });
        // per row: dx = k g - o - (x - mean) q with k = rstd w_ch,
        // o = rstd sum_ch(w sum g) / m, q = rstd^3 sum_ch(w sum g (x - mean)) / m
        let row_coef: Vec<(E, E)> = (0..n * groups)
            .map(|r| {
                let rstd = stats[r].1;
                let (s1, s2) = (0..cg).fold((E::zero(), E::zero()), |(a, b), j| {
                    let s = sums[r * cg + j];
                    let wv = wc((r % groups) * cg + j);
                    (a + wv * s.0, b + wv * s.1)
                });
                (rstd * s1 / cnt, rstd * rstd * rstd * s2 / cnt)
            })
            .collect();
        let gx = per_run_par(
            c,
            sp,
            xs,
            Some(g),
            |run| {
                let r = row_of(run);
                let (mean, rstd) = stats[r];
                (rstd * wc(run % c), row_coef[r].0, row_coef[r].1, mean)
            },
            |(k, o, q, mean), v, gv| k * gv - o - (v - mean) * q,
        );
        // weight and bias gradients: the runs' sums, image by image
        let (mut dw, mut db) = (vec![E::zero(); c], vec![E::zero(); c]);
        for (run, s) in sums.iter().enumerate() {
            let ch = run % c;
            dw[ch] += s.1 * stats[row_of(run)].1;
            db[ch] += s.0;
        }
        let mut grads = vec![Some(Tensor::from_parts(gx, x.shape.clone(), None))];
        if has_w {
            grads.push(Some(Tensor::from_vec(dw, &[c])));
        }
        if has_b {
            grads.push(Some(Tensor::from_vec(db, &[c])));
        }
        grads
    })
}

/// The group-norm gradients in tensor ops (differentiable in `x`, `w` and
/// the incoming gradient), for `create_graph`.
#[track_caller]
fn group_norm_backward_graph<E: Float, D: Device>(
    x: &Tensor<E, D>,
    w: Option<&Tensor<E, D>>,
    has_b: bool,
    groups: usize,
    eps: f64,
    g: &Tensor<E, D>,
) -> Vec<Option<Tensor<E, D>>> {
    let shape = x.shape();
    let grouped = [shape[0] as isize, groups as isize, -1];
    let (xhat, _, var) = normalize(&x.reshape(&grouped), &[2], eps);
    let rstd = var.add_scalar(E::from_f64(eps)).rsqrt();
    let gw = match w {
        Some(w) => g.mul(&per_channel("group_norm", "weight", w, shape)),
        None => g.clone(),
    }
    .reshape(&grouped);
    let gx = gw
        .sub(&gw.mean_dim(&[2], true))
        .sub(&xhat.mul(&gw.mul(&xhat).mean_dim(&[2], true)))
        .mul(&rstd);
    let axes: Vec<isize> = (0..shape.len() as isize).filter(|&a| a != 1).collect();
    let mut out = vec![Some(gx.view(shape))];
    if w.is_some() {
        out.push(Some(g.mul(&xhat.view(shape)).sum_dim(&axes, false)));
    }
    if has_b {
        out.push(Some(g.sum_dim(&axes, false)));
    }
    out
}
