//! Classification losses on integer class targets: [`cross_entropy_with`] and
//! [`nll_loss`], with PyTorch's semantics (class dimension 1, K-dimensional
//! inputs `(N, C, d1, ...)`, per-class weights, `ignore_index`, label
//! smoothing). The target classes are picked with a one-hot mask built from
//! the integer targets: a constant, so every gradient (of any order) flows
//! through ordinary tensor ops.

use super::softmax::{exp_cost, row_blocks_mut};
use crate::tensor::{Device, Element, Float, Tensor};

/// How a loss reduces its per-element values: PyTorch's `reduction`
/// argument.
///
/// ```
/// use forge::nn::functional::{mse_loss, Reduction};
/// use forge::Tensor;
/// let a = Tensor::<f64>::from_vec(vec![1.0, 3.0], &[2]);
/// let b = Tensor::<f64>::zeros(&[2]);
/// assert_eq!(mse_loss(&a, &b, Reduction::Mean).item(), 5.0);
/// assert_eq!(mse_loss(&a, &b, Reduction::Sum).item(), 10.0);
/// assert_eq!(mse_loss(&a, &b, Reduction::None).to_vec(), vec![1.0, 9.0]);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reduction {
    /// The mean over the elements (weighted losses divide by the total weight).
    #[default]
    Mean,
    /// The sum over the elements.
    Sum,
    /// No reduction: one value per element (per sample for class losses).
    None,
}

/// Applies `reduction` to per-element losses (plain mean for `Mean`).
pub(crate) fn reduce<E: Float, D: Device>(
    loss: Tensor<E, D>,
    reduction: Reduction,
) -> Tensor<E, D> {
    match reduction {
        Reduction::Mean => loss.mean(),
        Reduction::Sum => loss.sum(),
        Reduction::None => loss,
    }
}

/// Options of [`nll_loss`], with PyTorch's defaults
/// (`weight = None, ignore_index = -100, reduction = Mean`).
///
/// ```
/// let o = forge::nn::functional::NllLossOptions::<f32>::default();
/// assert_eq!(o.ignore_index, -100);
/// ```
#[derive(Clone, Debug)]
pub struct NllLossOptions<E: Element = f32, D: Device = crate::Cpu> {
    /// Per-class weights, shape `(C,)`.
    pub weight: Option<Tensor<E, D>>,
    /// Targets equal to this contribute nothing (and are not counted by the mean).
    pub ignore_index: i64,
    /// Mean (divided by the summed weights of the non-ignored targets), sum or none.
    pub reduction: Reduction,
}

impl<E: Element, D: Device> Default for NllLossOptions<E, D> {
    fn default() -> Self {
        NllLossOptions {
            weight: None,
            ignore_index: -100,
            reduction: Reduction::Mean,
        }
    }
}

/// Options of [`cross_entropy_with`], with PyTorch's defaults
/// (`weight = None, ignore_index = -100, label_smoothing = 0, reduction = Mean`).
///
/// ```
/// use forge::nn::functional::CrossEntropyOptions;
/// let o = CrossEntropyOptions::<f32> { label_smoothing: 0.1, ..Default::default() };
/// assert_eq!(o.ignore_index, -100);
/// ```
#[derive(Clone, Debug)]
pub struct CrossEntropyOptions<E: Element = f32, D: Device = crate::Cpu> {
    /// Per-class weights, shape `(C,)`.
    pub weight: Option<Tensor<E, D>>,
    /// Targets equal to this contribute nothing (and are not counted by the mean).
    pub ignore_index: i64,
    /// `ls` in `(1 - ls) * nll + ls * mean_c(-log p_c)`, in `[0, 1]`.
    pub label_smoothing: f64,
    /// Mean (divided by the summed weights of the non-ignored targets), sum or none.
    pub reduction: Reduction,
}

impl<E: Element, D: Device> Default for CrossEntropyOptions<E, D> {
    fn default() -> Self {
        CrossEntropyOptions {
            weight: None,
            ignore_index: -100,
            label_smoothing: 0.0,
            reduction: Reduction::Mean,
        }
    }
}

/// Checks input/target shapes and builds the one-hot mask of the target
/// classes (zero rows for ignored targets). Returns the class axis, the
/// number of classes and the mask.
fn target_mask<E: Float, D: Device>(
    op: &str,
    input: &Tensor<E, D>,
    targets: &Tensor<i64, D>,
    ignore_index: i64,
) -> (usize, usize, Tensor<E, D>) {
    let shape = input.shape();
    assert!(
        !shape.is_empty(),
        "{op}: input must have a class dimension, got shape {shape:?}"
    );
    let axis = if shape.len() == 1 { 0 } else { 1 };
    let c = shape[axis];
    let mut expected = shape.to_vec();
    expected.remove(axis);
    assert!(
        targets.shape() == expected.as_slice(),
        "{op}: input shape {shape:?} needs targets of shape {expected:?}, got {:?}",
        targets.shape()
    );
    let inner: usize = shape[axis + 1..].iter().product();
    let mut mask = crate::cpu::Storage::filled(input.numel(), E::zero());
    for (i, &t) in targets.as_slice().iter().enumerate() {
        if t == ignore_index {
            continue;
        }
        assert!(
            (0..c as i64).contains(&t),
            "{op}: target {t} is out of range for {c} classes (input shape {shape:?})"
        );
        let (n, d) = (i / inner, i % inner);
        mask[(n * c + t as usize) * inner + d] = E::one();
    }
    (axis, c, Tensor::from_storage(mask, shape))
}

/// `x * mask` with the entries where `mask` is 0 set to 0 first, so that a
/// `-inf` (log-)probability of a class other than the target contributes 0
/// (as PyTorch's gather does) instead of `-inf * 0 = NaN`. The gradient is
/// `mask` at the picked entries and 0 elsewhere, as for `x * mask`.
fn pick<E: Float, D: Device>(x: &Tensor<E, D>, mask: &Tensor<E, D>) -> Tensor<E, D> {
    let off: Vec<bool> = mask.as_slice().iter().map(|&m| m == E::zero()).collect();
    let off = Tensor::<bool, D>::from_vec(off, mask.shape());
    x.masked_fill(&off, 0.0).mul(mask)
}

/// A `(C,)` weight viewed to broadcast along the class axis of `shape`.
fn class_weight<E: Float, D: Device>(
    op: &str,
    w: &Tensor<E, D>,
    shape: &[usize],
    axis: usize,
) -> Tensor<E, D> {
    assert!(
        w.shape() == [shape[axis]],
        "{op}: weight of shape {:?} does not match {} classes (input shape {shape:?})",
        w.shape(),
        shape[axis]
    );
    let mut view = vec![1usize; shape.len()];
    view[axis] = shape[axis];
    w.view(&view)
}

/// The negative log-likelihood loss on log-probabilities `input` of shape
/// `(N, C)`, `(N, C, d1, ...)` or `(C,)`, with integer class `targets` of
/// shape `(N,)`, `(N, d1, ...)` or `()`: `-w[t_i] * input[i, t_i]`, reduced.
/// The mean divides by `sum_i w[t_i]` over non-ignored targets (their count
/// without weights); with every target ignored it is NaN, as in PyTorch.
///
/// # Panics
/// When the target shape does not match the input shape without its class
/// dimension, a target is out of range (and not `ignore_index`), or the
/// weight does not have one entry per class.
///
/// ```
/// use forge::nn::functional::{nll_loss, NllLossOptions};
/// use forge::Tensor;
/// let logp = Tensor::<f64>::from_vec(vec![-0.5, -1.0, -2.0, -0.1], &[2, 2]);
/// let t = Tensor::<i64>::from_vec(vec![1, 0], &[2]);
/// let l = nll_loss(&logp, &t, NllLossOptions::default());
/// assert_eq!(l.item(), 1.5);
/// ```
pub fn nll_loss<E: Float, D: Device>(
    input: &Tensor<E, D>,
    targets: &Tensor<i64, D>,
    options: NllLossOptions<E, D>,
) -> Tensor<E, D> {
    let (axis, _, mask) = target_mask("nll_loss", input, targets, options.ignore_index);
    let mask = match &options.weight {
        Some(w) => mask.mul(&class_weight("nll_loss", w, input.shape(), axis)),
        None => mask,
    };
    let per = pick(input, &mask).sum_dim(&[axis as isize], false).neg();
    match options.reduction {
        Reduction::Mean => per.sum().div(&mask.sum()),
        Reduction::Sum => per.sum(),
        Reduction::None => per,
    }
}

/// Cross-entropy between `logits` (classes on dimension 1; shapes as in
/// [`nll_loss`]) and integer class `targets`: `nll_loss(log_softmax(logits))`,
/// with PyTorch's label smoothing `(1 - ls) * nll + ls / C * sum_c(-w_c log p_c)`
/// (the smoothing term is reduced like the nll term: its mean divides by
/// the same summed target weights).
///
/// # Panics
/// As [`nll_loss`], and when `label_smoothing` is outside `[0, 1]`.
///
/// ```
/// use forge::nn::functional::{cross_entropy_with, CrossEntropyOptions};
/// use forge::Tensor;
/// let logits = Tensor::<f64>::zeros(&[3, 4]);
/// let t = Tensor::<i64>::from_vec(vec![0, 3, -100], &[3]);
/// let l = cross_entropy_with(&logits, &t, CrossEntropyOptions::default());
/// assert!((l.item() - 4f64.ln()).abs() < 1e-15);
/// ```
pub fn cross_entropy_with<E: Float, D: Device>(
    logits: &Tensor<E, D>,
    targets: &Tensor<i64, D>,
    options: CrossEntropyOptions<E, D>,
) -> Tensor<E, D> {
    let ls = options.label_smoothing;
    assert!(
        (0.0..=1.0).contains(&ls),
        "cross_entropy: label_smoothing {ls} is outside [0, 1]"
    );
    let untracked_weight = options.weight.as_ref().is_none_or(|w| !w.is_tracked());
    if logits.rank() == 2 && targets.shape() == [logits.dim(0)] && untracked_weight {
        return cross_entropy_fused(logits, targets, &options);
    }
    let (axis, c, mask) = target_mask("cross_entropy", logits, targets, options.ignore_index);
    let lp = logits.log_softmax(axis as isize);
    let weight = options
        .weight
        .as_ref()
        .map(|w| class_weight("cross_entropy", w, logits.shape(), axis));
    let wmask = match &weight {
        Some(w) => mask.mul(w),
        None => mask.clone(),
    };
    let ax = [axis as isize];
    let nll = pick(&lp, &wmask).sum_dim(&ax, false).neg();
    let reduce_like_nll = |per: Tensor<E, D>| match options.reduction {
        Reduction::Mean => per.sum().div(&wmask.sum()),
        Reduction::Sum => per.sum(),
        Reduction::None => per,
    };
    if ls == 0.0 {
        return reduce_like_nll(nll);
    }
    // Not ignored: the mask summed over classes is 1 for those targets.
    let valid = mask.sum_dim(&ax, false);
    let weighted = match &weight {
        Some(w) => lp.mul(w),
        None => lp,
    };
    let smooth = weighted.sum_dim(&ax, false).neg().mul(&valid);
    let nll = reduce_like_nll(nll);
    let smooth = reduce_like_nll(smooth);
    nll.mul_scalar(E::from_f64(1.0 - ls))
        .add(&smooth.mul_scalar(E::from_f64(ls / c as f64)))
}

/// [`cross_entropy_with`] for `(N, C)` logits and a constant (or no)
/// weight, fused: one pass per row forward (max, `exp` by the vector
/// kernel, log-sum-exp, the target and smoothing terms) and one pass
/// backward, `gx = s_i ((1 - ls) w_t (p - onehot) + ls / C (sum(w) p - w))`
/// with `p` recomputed from the saved log-sum-exp. Under `create_graph` the
/// backward is the same formula in tensor ops (with `softmax` on the
/// tape), so gradients of gradients work.
fn cross_entropy_fused<E: Float, D: Device>(
    logits: &Tensor<E, D>,
    targets: &Tensor<i64, D>,
    options: &CrossEntropyOptions<E, D>,
) -> Tensor<E, D> {
    let (n, c) = (logits.dim(0), logits.dim(1));
    let ls = options.label_smoothing;
    let ignore = options.ignore_index;
    let w: Option<Vec<E>> = options.weight.as_ref().map(|w| {
        assert!(
            w.shape() == [c],
            "cross_entropy: weight of shape {:?} does not match {c} classes (input shape {:?})",
            w.shape(),
            logits.shape()
        );
        w.to_vec()
    });
    let wc = |k: usize| class_w(w.as_deref(), k);
    let w_sum = w
        .as_ref()
        .map_or(E::from_f64(c as f64), |w| super::softmax::lane_sum(w));
    let tv = targets.as_slice();
    for &t in tv {
        assert!(
            t == ignore || (0..c as i64).contains(&t),
            "cross_entropy: target {t} is out of range for {c} classes (input shape {:?})",
            logits.shape()
        );
    }
    let (keep, smooth) = (E::from_f64(1.0 - ls), E::from_f64(ls / c as f64));
    let x = logits.as_slice();
    // (log-sum-exp, loss) of every row, in parallel over fixed blocks of
    // rows (each row is computed by one block, so the thread count does not
    // matter)
    let rows = super::softmax::ROW_BLOCK_ELEMS.div_ceil(c.max(1)).max(1);
    // each block's chunk: its rows' (lse, loss) pairs, then a scratch row
    // (one buffer taken before the blocks run, so the pool traffic does not
    // depend on how the blocks are scheduled)
    let chunk_len = 2 * rows + c;
    let mut stats = crate::cpu::Storage::<E>::zeroed(n.div_ceil(rows) * chunk_len);
    row_blocks_mut(&mut stats, chunk_len, exp_cost(x.len()), |b, chunk| {
        let (pairs, scratch) = chunk.split_at_mut(2 * rows);
        for (r, st) in pairs.chunks_mut(2).take(rows.min(n - b * rows)).enumerate() {
            let i = b * rows + r;
            let t = tv[i];
            if t == ignore {
                continue;
            }
            let row = &x[i * c..(i + 1) * c];
            let m = row.iter().fold(E::neg_infinity(), |a, &b| a.max(b));
            let m = if m.is_finite() { m } else { E::zero() };
            for (o, &v) in scratch.iter_mut().zip(row) {
                *o = v - m;
            }
            crate::cpu::vmath::exp(scratch);
            let l = m + super::softmax::lane_sum(scratch).ln();
            let wt = wc(t as usize);
            let mut loss = keep * wt * (l - row[t as usize]);
            if ls > 0.0 {
                let sm = match &w {
                    Some(w) => w
                        .iter()
                        .zip(row)
                        .fold(E::zero(), |a, (&wk, &v)| a + wk * (l - v)),
                    None => row.iter().fold(E::zero(), |a, &v| a + (l - v)),
                };
                loss += smooth * sm;
            }
            st[0] = l;
            st[1] = loss;
        }
    });
    let pair = |i: usize| (i / rows) * chunk_len + 2 * (i % rows);
    let lse: Vec<E> = (0..n).map(|i| stats[pair(i)]).collect();
    let per: Vec<E> = (0..n).map(|i| stats[pair(i) + 1]).collect();
    let total_w = tv
        .iter()
        .filter(|&&t| t != ignore)
        .fold(E::zero(), |a, &t| a + wc(t as usize));
    let reduction = options.reduction;
    let out = match reduction {
        Reduction::None => Tensor::from_vec(per, &[n]),
        Reduction::Sum => Tensor::scalar(per.iter().fold(E::zero(), |a, &v| a + v)),
        Reduction::Mean => Tensor::scalar(per.iter().fold(E::zero(), |a, &v| a + v) / total_w),
    };
    let targets = targets.clone();
    out.record("cross_entropy", vec![logits.clone()], move |ctx| {
        let valid = |i: usize| targets.as_slice()[i] != ignore;
        let scale = |i: usize| match reduction {
            Reduction::None => ctx.grad.as_slice()[i],
            Reduction::Sum => ctx.grad.as_slice()[0],
            Reduction::Mean => ctx.grad.as_slice()[0] / total_w,
        };
        if ctx.create_graph {
            return vec![Some(fused_ce_backward_graph(
                &ctx.inputs[0],
                ctx.grad,
                targets.as_slice(),
                ignore,
                w.as_deref(),
                (keep, smooth, w_sum, total_w),
                reduction,
            ))];
        }
        let wc = |k: usize| class_w(w.as_deref(), k);
        let x = ctx.inputs[0].as_slice();
        let mut gx = crate::cpu::Storage::filled(n * c, E::zero());
        // in parallel over the forward pass's blocks of rows
        row_blocks_mut(&mut gx, rows * c, exp_cost(x.len()), |b, chunk| {
            for (r, g) in chunk.chunks_mut(c).enumerate() {
                let i = b * rows + r;
                if !valid(i) {
                    continue;
                }
                let t = targets.as_slice()[i] as usize;
                let s = scale(i);
                let row = &x[i * c..(i + 1) * c];
                for (o, &v) in g.iter_mut().zip(row) {
                    *o = v - lse[i];
                }
                crate::cpu::vmath::exp(g);
                let a = s * keep * wc(t);
                let b = s * smooth;
                for (k, o) in g.iter_mut().enumerate() {
                    let p = *o;
                    *o = a * p + b * (w_sum * p - wc(k));
                }
                g[t] -= a;
            }
        });
        vec![Some(Tensor::from_parts(
            gx,
            ctx.inputs[0].shape.clone(),
            None,
        ))]
    })
}

/// The weight of class `k` (1 without weights).
fn class_w<E: Float>(w: Option<&[E]>, k: usize) -> E {
    w.map_or(E::one(), |w| w[k])
}

/// The fused cross-entropy's input gradient in tensor ops (differentiable
/// in the logits and in the incoming gradient), for `create_graph`.
fn fused_ce_backward_graph<E: Float, D: Device>(
    x: &Tensor<E, D>,
    g: &Tensor<E, D>,
    targets: &[i64],
    ignore: i64,
    w: Option<&[E]>,
    (keep, smooth, w_sum, total_w): (E, E, E, E),
    reduction: Reduction,
) -> Tensor<E, D> {
    let (n, c) = (x.dim(0), x.dim(1));
    let wc = |k: usize| class_w(w, k);
    // Constants: w_t one-hot, w_t per row, validity per row, w per class.
    let mut onehot = vec![E::zero(); n * c];
    let mut wt = vec![E::zero(); n];
    let mut valid = vec![E::zero(); n];
    for (i, &t) in targets.iter().enumerate() {
        if t != ignore {
            onehot[i * c + t as usize] = wc(t as usize);
            wt[i] = wc(t as usize);
            valid[i] = E::one();
        }
    }
    let onehot = Tensor::<E, D>::from_vec(onehot, &[n, c]);
    let wt = Tensor::<E, D>::from_vec(wt, &[n, 1]);
    let valid = Tensor::<E, D>::from_vec(valid, &[n, 1]);
    let wrow = Tensor::<E, D>::from_vec((0..c).map(wc).collect(), &[1, c]);
    let p = x.softmax(1);
    let nll = p.mul(&wt).sub(&onehot).mul_scalar(keep);
    let sm = p
        .mul(&valid.mul_scalar(w_sum))
        .sub(&valid.mul(&wrow))
        .mul_scalar(smooth);
    let d = nll.add(&sm);
    match reduction {
        Reduction::None => d.mul(&g.view(&[n, 1])),
        Reduction::Sum => d.mul(g),
        Reduction::Mean => d.mul(&g.div_scalar(total_w)),
    }
}
