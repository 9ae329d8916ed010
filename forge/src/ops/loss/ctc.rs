//! The connectionist temporal classification loss, `F.ctc_loss`.
//!
//! For one sample with log-probabilities `lp [T, C]` and target `l` of
//! length `L`, the extended target `l'` (length `2L + 1`) puts a blank
//! before, between and after the labels. In log space,
//! `alpha_0(0) = lp_0(blank)`, `alpha_0(1) = lp_0(l_1)`, and
//! `alpha_t(s) = lp_t(l'_s) + lse(alpha_{t-1}(s), alpha_{t-1}(s-1),
//! alpha_{t-1}(s-2))`, the last term only when `l'_s` is a label different
//! from `l'_{s-2}`; the loss is `-lse(alpha_{T-1}(2L), alpha_{T-1}(2L-1))`.
//! `beta` runs the same recursion backwards from the end, and
//! `alpha_t(s) + beta_t(s) - lp_t(l'_s)` is the log-probability of every
//! path through `(t, s)`, so
//! `d loss / d lp_t(c) = -exp(lse_{s: l'_s = c}(alpha_t(s) + beta_t(s)) - lp_t(c) + loss)`.
//!
//! This is the exact derivative with respect to `log_probs`. PyTorch's
//! kernel returns it plus `exp(lp_t(c))`, a term that assumes `log_probs`
//! came out of a `log_softmax` (whose backward removes it); both give the
//! same gradient through `log_softmax`. Samples are computed in parallel in
//! `f64`, each by one call, so results do not depend on the thread count.
//! PyTorch has no second derivative of this loss; neither has forge (a
//! double backward through it panics).

use super::spec::Reduction;
use crate::cpu::buffers::for_each_chunk_mut;
use crate::tensor::{Device, Element, Float, Tensor};
use std::sync::Arc;

/// The options of [`ctc_loss_with`], PyTorch's names and defaults.
///
/// ```
/// use forge::nn::functional::CtcLossOptions;
/// let o = CtcLossOptions::default();
/// assert_eq!((o.blank, o.zero_infinity), (0, false));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtcLossOptions {
    /// The blank label (default 0).
    pub blank: usize,
    /// `Mean` (default) divides each loss by its target length (at least 1)
    /// and averages over the batch; `Sum` adds; `None` gives one per sample.
    pub reduction: Reduction,
    /// Infinite losses (no alignment fits) and their gradients become 0.
    pub zero_infinity: bool,
}

/// `lse(a, b) = log(exp a + exp b)`, exact for `-inf`.
fn lse(a: f64, b: f64) -> f64 {
    let m = a.max(b);
    if m == f64::NEG_INFINITY {
        return m;
    }
    m + ((a - m).exp() + (b - m).exp()).ln()
}

/// One sample's loss and its gradient `[t_len, c]` (rows past its input
/// length are zero), from `lp(t, c)`.
fn sample(
    lp: &dyn Fn(usize, usize) -> f64,
    (t_len, c): (usize, usize),
    target: &[usize],
    blank: usize,
    zero_infinity: bool,
) -> (f64, Vec<f64>) {
    let s_len = 2 * target.len() + 1;
    let label = |s: usize| if s % 2 == 0 { blank } else { target[s / 2] };
    // Whether the skip from s - 2 to s is allowed.
    let skip = |s: usize| s >= 2 && s % 2 == 1 && label(s) != label(s - 2);
    let mut grad = vec![0.0; t_len * c];
    if t_len == 0 {
        let loss = if target.is_empty() {
            0.0
        } else {
            f64::INFINITY
        };
        return (
            if zero_infinity && loss.is_infinite() {
                0.0
            } else {
                loss
            },
            grad,
        );
    }
    let ninf = f64::NEG_INFINITY;
    let mut alpha = vec![ninf; t_len * s_len];
    alpha[0] = lp(0, blank);
    if s_len > 1 {
        alpha[1] = lp(0, label(1));
    }
    for t in 1..t_len {
        for s in 0..s_len {
            let prev = &alpha[(t - 1) * s_len..t * s_len];
            let mut a = prev[s];
            if s >= 1 {
                a = lse(a, prev[s - 1]);
            }
            if skip(s) {
                a = lse(a, prev[s - 2]);
            }
            alpha[t * s_len + s] = if a == ninf { ninf } else { a + lp(t, label(s)) };
        }
    }
    let last = &alpha[(t_len - 1) * s_len..];
    let ll = if s_len > 1 {
        lse(last[s_len - 1], last[s_len - 2])
    } else {
        last[0]
    };
    let loss = -ll;
    if loss.is_infinite() && zero_infinity {
        return (0.0, grad);
    }
    let mut beta = vec![ninf; t_len * s_len];
    let end = (t_len - 1) * s_len;
    beta[end + s_len - 1] = lp(t_len - 1, blank);
    if s_len > 1 {
        beta[end + s_len - 2] = lp(t_len - 1, label(s_len - 2));
    }
    for t in (0..t_len - 1).rev() {
        for s in 0..s_len {
            let next = &beta[(t + 1) * s_len..(t + 2) * s_len];
            let mut b = next[s];
            if s + 1 < s_len {
                b = lse(b, next[s + 1]);
            }
            if s + 2 < s_len && skip(s + 2) {
                b = lse(b, next[s + 2]);
            }
            beta[t * s_len + s] = if b == ninf { ninf } else { b + lp(t, label(s)) };
        }
    }
    // lse over s with label c of alpha + beta, per (t, c).
    let mut acc = vec![ninf; c];
    for t in 0..t_len {
        acc.fill(ninf);
        for s in 0..s_len {
            let v = alpha[t * s_len + s] + beta[t * s_len + s];
            acc[label(s)] = lse(acc[label(s)], v);
        }
        for (k, g) in grad[t * c..(t + 1) * c].iter_mut().enumerate() {
            if acc[k] != ninf {
                *g = -(acc[k] - lp(t, k) + loss).exp();
            }
        }
    }
    (loss, grad)
}

/// The forward results and what the backward needs.
struct CtcSpec {
    /// `[T, N, C]` (or `[T, C]`), the input's shape.
    shape: Vec<usize>,
    /// Per-sample gradient of the loss, sample-major: `[N, T, C]`.
    grad: Vec<f64>,
    /// Per-sample scale of the upstream gradient for the mean (1 for sum
    /// and none).
    scale: Vec<f64>,
    reduction: Reduction,
}

impl CtcSpec {
    fn dims(&self) -> (usize, usize, usize) {
        match self.shape[..] {
            [t, n, c] => (t, n, c),
            [t, c] => (t, 1, c),
            _ => unreachable!("ctc_loss: checked shape"),
        }
    }

    /// The per-sample upstream gradients of the reduced loss.
    fn upstream(&self, g: &[f64]) -> Vec<f64> {
        let n = self.scale.len();
        match self.reduction {
            Reduction::None => (0..n).map(|i| g[i] * self.scale[i]).collect(),
            _ => self.scale.iter().map(|s| g[0] * s).collect(),
        }
    }
}

/// `F.ctc_loss(log_probs, targets, input_lengths, target_lengths)` with
/// PyTorch's defaults (blank 0, mean over the batch of each loss divided by
/// its target length, no `zero_infinity`); see [`ctc_loss_with`].
///
/// # Panics
/// As [`ctc_loss_with`].
///
/// ```
/// use forge::nn::functional::ctc_loss;
/// use forge::Tensor;
/// // One frame, two classes, uniform: the empty target has probability 1/2.
/// let lp = Tensor::<f64>::full(&[1, 1, 2], 0.5f64.ln());
/// let t = Tensor::<i64>::zeros(&[1, 0]);
/// assert!((ctc_loss(&lp, &t, &[1], &[0]).item() - 2f64.ln()).abs() < 1e-12);
/// ```
#[track_caller]
pub fn ctc_loss<E: Float, D: Device>(
    log_probs: &Tensor<E, D>,
    targets: &Tensor<i64, D>,
    input_lengths: &[usize],
    target_lengths: &[usize],
) -> Tensor<E, D> {
    ctc_loss_with(
        log_probs,
        targets,
        input_lengths,
        target_lengths,
        CtcLossOptions::default(),
    )
}

/// The CTC loss of `log_probs` (`[T, N, C]`, or `[T, C]` for one sample;
/// log-probabilities over `C` classes, normally a `log_softmax` output)
/// against `targets`, as `F.ctc_loss`: targets padded `[N, S]` (sample `n`
/// is the first `target_lengths[n]` of row `n`) or concatenated `[sum
/// target_lengths]`; sample `n` uses its first `input_lengths[n]` frames.
/// Labels are in `[0, C)` and never `blank`. See [`CtcLossOptions`] for the
/// reductions and `zero_infinity`. Differentiable once in `log_probs` (the
/// exact derivative; see the module docs for PyTorch's extra term).
///
/// # Panics
/// When the shapes or lengths do not fit (an input length above `T`, a
/// target length above `S`, the concatenated lengths not summing to the
/// targets' length), a label is out of range or is the blank, or on a
/// second derivative with respect to `log_probs`.
///
/// ```
/// use forge::nn::functional::{ctc_loss_with, CtcLossOptions, Reduction};
/// use forge::Tensor;
/// let lp = Tensor::<f64>::full(&[2, 1, 3], -(3f64.ln()));
/// let t = Tensor::<i64>::from_vec(vec![1], &[1]); // concatenated
/// let o = CtcLossOptions { reduction: Reduction::Sum, ..Default::default() };
/// // Paths "1 1", "1 b", "b 1": 3 of 9.
/// let l = ctc_loss_with(&lp, &t, &[2], &[1], o);
/// assert!((l.item() - 3f64.ln()).abs() < 1e-12);
/// ```
#[track_caller]
pub fn ctc_loss_with<E: Float, D: Device>(
    log_probs: &Tensor<E, D>,
    targets: &Tensor<i64, D>,
    input_lengths: &[usize],
    target_lengths: &[usize],
    options: CtcLossOptions,
) -> Tensor<E, D> {
    let op = "ctc_loss";
    let shape = log_probs.shape().to_vec();
    let (t_max, n, c) = match shape[..] {
        [t, n, c] => (t, n, c),
        [t, c] => (t, 1, c),
        _ => shape_panic!("{op}: log_probs {shape:?} must be [T, N, C] or [T, C]"),
    };
    shape_assert!(
        input_lengths.len() == n && target_lengths.len() == n,
        "{op}: log_probs {shape:?} has {n} samples, input_lengths {} and target_lengths {} values",
        input_lengths.len(),
        target_lengths.len()
    );
    shape_assert!(
        options.blank < c,
        "{op}: blank {} is not a class of log_probs {shape:?}",
        options.blank
    );
    let ts = targets.shape();
    let tv = targets.as_slice();
    let padded = ts.len() == 2 && shape.len() == 3;
    let mut starts = Vec::with_capacity(n);
    if padded {
        shape_assert!(
            ts[0] == n,
            "{op}: targets {ts:?} must have one row per sample of log_probs {shape:?}"
        );
        for (i, &l) in target_lengths.iter().enumerate() {
            shape_assert!(
                l <= ts[1],
                "{op}: target_lengths[{i}] = {l} exceeds the padded targets {ts:?}"
            );
            starts.push(i * ts[1]);
        }
    } else {
        shape_assert!(
            ts.len() == 1 && ts[0] == target_lengths.iter().sum::<usize>(),
            "{op}: targets {ts:?} must be [N, S] padded or 1-d holding sum(target_lengths) = {} labels",
            target_lengths.iter().sum::<usize>()
        );
        let mut at = 0;
        for &l in target_lengths {
            starts.push(at);
            at += l;
        }
    }
    let mut labels = Vec::with_capacity(n);
    for i in 0..n {
        shape_assert!(
            input_lengths[i] <= t_max,
            "{op}: input_lengths[{i}] = {} exceeds T = {t_max} of log_probs {shape:?}",
            input_lengths[i]
        );
        let tgt: Vec<usize> = tv[starts[i]..starts[i] + target_lengths[i]]
            .iter()
            .map(|&v| {
                shape_assert!(
                    v >= 0 && (v as usize) < c && v as usize != options.blank,
                    "{op}: target label {v} of sample {i} is outside [0, {c}) or the blank {}",
                    options.blank
                );
                v as usize
            })
            .collect();
        labels.push(tgt);
    }
    let x = log_probs.as_slice();
    let mut results: Vec<(f64, Vec<f64>)> = vec![(0.0, Vec::new()); n];
    for_each_chunk_mut(&mut results, 1, |i, r| {
        let lp = |t: usize, k: usize| Element::to_f64(x[(t * n + i) * c + k]);
        r[0] = sample(
            &lp,
            (input_lengths[i], c),
            &labels[i],
            options.blank,
            options.zero_infinity,
        );
    });
    let losses: Vec<f64> = results.iter().map(|r| r.0).collect();
    let scale: Vec<f64> = match options.reduction {
        Reduction::Mean => target_lengths
            .iter()
            .map(|&l| 1.0 / (n as f64 * l.max(1) as f64))
            .collect(),
        _ => vec![1.0; n],
    };
    let value: Vec<E> = match options.reduction {
        Reduction::None => losses.iter().map(|&v| E::from_f64(v)).collect(),
        _ => vec![E::from_f64(
            losses.iter().zip(&scale).map(|(l, s)| l * s).sum::<f64>(),
        )],
    };
    let out_shape: Vec<usize> = match options.reduction {
        Reduction::None if shape.len() == 3 => vec![n],
        _ => vec![],
    };
    let mut grad = vec![0.0; n * t_max * c];
    for (i, (_, g)) in results.into_iter().enumerate() {
        grad[i * t_max * c..][..g.len()].copy_from_slice(&g);
    }
    let spec = Arc::new(CtcSpec {
        shape,
        grad,
        scale,
        reduction: options.reduction,
    });
    Tensor::from_vec_in(value, &out_shape).record("ctc_loss", vec![log_probs.clone()], move |ctx| {
        vec![Some(ctc_grad_apply(ctx.grad, &ctx.inputs[0], spec.clone()))]
    })
}

/// The gradient with respect to `log_probs` for the upstream gradient `g`
/// of the reduced loss, recorded with its rule in `g` (linear); its rule in
/// `log_probs` (PyTorch has none) panics.
#[track_caller]
fn ctc_grad_apply<E: Float, D: Device>(
    g: &Tensor<E, D>,
    log_probs: &Tensor<E, D>,
    spec: Arc<CtcSpec>,
) -> Tensor<E, D> {
    let (t_max, n, c) = spec.dims();
    let gv: Vec<f64> = g.as_slice().iter().map(|&v| Element::to_f64(v)).collect();
    let up = spec.upstream(&gv);
    let mut out = vec![E::zero(); t_max * n * c];
    for t in 0..t_max {
        for i in 0..n {
            let src = &spec.grad[(i * t_max + t) * c..][..c];
            for (o, &s) in out[(t * n + i) * c..][..c].iter_mut().zip(src) {
                *o = E::from_f64(s * up[i]);
            }
        }
    }
    Tensor::from_vec_in(out, &spec.shape).record(
        "ctc_loss_backward",
        vec![g.clone(), log_probs.clone()],
        move |ctx| {
            assert!(
                !ctx.needs(1),
                "ctc_loss: no second derivative with respect to log_probs (PyTorch has none either)"
            );
            let (t_max, n, c) = spec.dims();
            let gg = ctx.grad.as_slice();
            let per: Vec<f64> = (0..n)
                .map(|i| {
                    (0..t_max)
                        .map(|t| {
                            let src = &spec.grad[(i * t_max + t) * c..][..c];
                            src.iter()
                                .zip(&gg[(t * n + i) * c..][..c])
                                .map(|(a, &b)| a * Element::to_f64(b))
                                .sum::<f64>()
                        })
                        .sum::<f64>()
                        * spec.scale[i]
                })
                .collect();
            let gs = ctx.inputs[0].shape();
            let data: Vec<E> = match spec.reduction {
                Reduction::None => per.iter().map(|&v| E::from_f64(v)).collect(),
                _ => vec![E::from_f64(per.iter().sum())],
            };
            vec![ctx.needs(0).then(|| Tensor::from_vec_in(data, gs)), None]
        },
    )
}
