//! Normalisation: [`batch_norm`], [`layer_norm`], [`group_norm`], written
//! in differentiable tensor ops (mean, centred second moment, `rsqrt`), so
//! gradients of any order flow through the statistics.

use crate::tensor::{Device, Float, Tensor};

/// `(x - mean) / sqrt(var + eps)` over `axes` with the biased variance;
/// also returns the (keepdim) mean and variance.
fn normalize<E: Float, D: Device>(
    x: &Tensor<E, D>,
    axes: &[isize],
    eps: f64,
) -> (Tensor<E, D>, Tensor<E, D>, Tensor<E, D>) {
    let mean = x.mean_dim(axes, true);
    let xc = x.sub(&mean);
    let var = xc.square().mean_dim(axes, true);
    let out = xc.mul(&var.add_scalar(E::from_f64(eps)).rsqrt());
    (out, mean, var)
}

/// Checks that a per-channel tensor has shape `(C,)` and views it as
/// `(1, C, 1, ...)` for an input of rank `rank`.
fn per_channel<E: Float, D: Device>(
    op: &str,
    what: &str,
    t: &Tensor<E, D>,
    x_shape: &[usize],
) -> Tensor<E, D> {
    let c = x_shape[1];
    assert!(
        t.shape() == [c],
        "{op}: {what} of shape {:?} does not match {c} channels (input shape {x_shape:?})",
        t.shape()
    );
    let mut v = vec![1usize; x_shape.len()];
    v[1] = c;
    t.view(&v)
}

fn affine<E: Float, D: Device>(
    out: Tensor<E, D>,
    weight: Option<&Tensor<E, D>>,
    bias: Option<&Tensor<E, D>>,
) -> Tensor<E, D> {
    let out = match weight {
        Some(w) => out.mul(w),
        None => out,
    };
    match bias {
        Some(b) => out.add(b),
        None => out,
    }
}

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
    assert!(
        shape.len() >= 2,
        "batch_norm: input of shape {shape:?} needs at least 2 dimensions (N, C, ...)"
    );
    let pc = |what: &str, t: &Tensor<E, D>| per_channel("batch_norm", what, t, shape);
    let w = weight.map(|w| pc("weight", w));
    let b = bias.map(|b| pc("bias", b));
    let c = shape[1];
    if !training {
        let (rm, rv) = match (running_mean, running_var) {
            (Some(m), Some(v)) => (m, v),
            _ => panic!("batch_norm: evaluation mode needs running_mean and running_var"),
        };
        let out = x
            .sub(&pc("running_mean", rm))
            .mul(&pc("running_var", rv).add_scalar(E::from_f64(eps)).rsqrt());
        let out = affine(out, w.as_ref(), b.as_ref());
        return (out, Some(rm.clone()), Some(rv.clone()));
    }
    let n = x.numel() / c.max(1);
    assert!(
        n > 1,
        "batch_norm: expected more than 1 value per channel when training, got input shape {shape:?}"
    );
    let axes: Vec<isize> = (0..shape.len() as isize).filter(|&a| a != 1).collect();
    let (out, mean, var) = normalize(x, &axes, eps);
    let out = affine(out, w.as_ref(), b.as_ref());
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

/// Layer normalisation over the trailing dimensions `normalized_shape`
/// (biased variance, `eps` inside the square root), then elementwise
/// `* weight + bias` (both of shape `normalized_shape`).
///
/// # Panics
/// When the shape of `x` does not end with `normalized_shape`, or a weight
/// or bias has another shape.
///
/// ```
/// use forge::nn::functional::layer_norm;
/// use forge::Tensor;
/// let x = Tensor::<f64>::from_vec(vec![1.0, 3.0, 10.0, 20.0], &[2, 2]);
/// let y = layer_norm(&x, &[2], None, None, 0.0);
/// assert_eq!(y.to_vec(), vec![-1.0, 1.0, -1.0, 1.0]);
/// ```
pub fn layer_norm<E: Float, D: Device>(
    x: &Tensor<E, D>,
    normalized_shape: &[usize],
    weight: Option<&Tensor<E, D>>,
    bias: Option<&Tensor<E, D>>,
    eps: f64,
) -> Tensor<E, D> {
    let shape = x.shape();
    let k = normalized_shape.len();
    assert!(
        k >= 1 && shape.len() >= k && &shape[shape.len() - k..] == normalized_shape,
        "layer_norm: input of shape {shape:?} does not end with normalized_shape {normalized_shape:?}"
    );
    for (what, t) in [("weight", weight), ("bias", bias)] {
        if let Some(t) = t {
            assert!(
                t.shape() == normalized_shape,
                "layer_norm: {what} of shape {:?} differs from normalized_shape {normalized_shape:?}",
                t.shape()
            );
        }
    }
    let axes: Vec<isize> = (1..=k as isize).map(|a| -a).collect();
    let (out, _, _) = normalize(x, &axes, eps);
    affine(out, weight, bias)
}

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
pub fn group_norm<E: Float, D: Device>(
    x: &Tensor<E, D>,
    groups: usize,
    weight: Option<&Tensor<E, D>>,
    bias: Option<&Tensor<E, D>>,
    eps: f64,
) -> Tensor<E, D> {
    let shape = x.shape();
    assert!(
        shape.len() >= 2,
        "group_norm: input of shape {shape:?} needs at least 2 dimensions (N, C, ...)"
    );
    let c = shape[1];
    assert!(
        groups > 0 && c.is_multiple_of(groups),
        "group_norm: {groups} groups do not divide {c} channels (input shape {shape:?})"
    );
    let w = weight.map(|w| per_channel("group_norm", "weight", w, shape));
    let b = bias.map(|b| per_channel("group_norm", "bias", b, shape));
    let grouped = x.reshape(&[shape[0] as isize, groups as isize, -1]);
    let (out, _, _) = normalize(&grouped, &[2], eps);
    affine(out.view(shape), w.as_ref(), b.as_ref())
}
