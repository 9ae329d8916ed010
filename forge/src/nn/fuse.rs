//! Folding an evaluation-mode batch norm into the convolution or linear
//! layer before it, as PyTorch's `torch.nn.utils.fusion.fuse_conv_bn_eval`
//! and `fuse_linear_bn_eval` do: one layer instead of two for inference.
//!
//! In evaluation mode a batch norm is a per-channel affine map,
//! `y = (x - mean) * s + beta` with `s = gamma / sqrt(var + eps)`, so it
//! folds into the preceding layer's weights: `W' = W * s` (each output
//! channel's row scaled) and `b' = (b - mean) * s + beta`. The arithmetic
//! follows PyTorch's order of operations element by element (the scale as
//! `gamma * (1 / sqrt(var + eps))`; the convolution's bias as
//! `((b - mean) * (1 / sqrt(var + eps))) * gamma + beta`, the linear
//! layer's as `(b - mean) * s + beta`), so the fused weights equal
//! PyTorch's bit for bit. The fused layer's outputs differ from the unfused
//! pair's by rounding only (the scale moves inside the products).

use super::conv::Conv2d;
use super::linear::Linear;
use super::norm::{BatchNorm1d, BatchNorm2d};
use crate::tensor::{Float, Tensor};

/// A batch norm's parameters and running statistics as vectors, with
/// PyTorch's defaults for a non-affine one (`gamma = 1`, `beta = 0`).
struct Stats<E> {
    gamma: Vec<E>,
    beta: Vec<E>,
    mean: Vec<E>,
    /// `1 / sqrt(var + eps)`.
    rsqrt: Vec<E>,
}

impl<E: Float> Stats<E> {
    fn new(
        weight: &Option<Tensor<E>>,
        bias: &Option<Tensor<E>>,
        mean: Tensor<E>,
        var: Tensor<E>,
        eps: f64,
    ) -> Self {
        let c = mean.numel();
        let eps = E::from(eps).expect("eps fits the element type");
        Stats {
            gamma: weight.as_ref().map_or(vec![E::one(); c], Tensor::to_vec),
            beta: bias.as_ref().map_or(vec![E::zero(); c], Tensor::to_vec),
            mean: mean.to_vec(),
            rsqrt: var
                .to_vec()
                .into_iter()
                .map(|v| E::one() / (v + eps).sqrt())
                .collect(),
        }
    }
}

/// The fused weight `[C, ...]` (each channel's block scaled by `scale[c]`),
/// tracked when the original was.
fn scale_rows<E: Float>(weight: &Tensor<E>, scale: &[E]) -> Tensor<E> {
    let t = Tensor::from_vec(scaled_rows(&weight.to_vec(), scale), weight.shape());
    if weight.is_tracked() {
        t.requires_grad()
    } else {
        t
    }
}

fn check_training(op: &str, training: bool) {
    assert!(
        !training,
        "{op}: the batch norm is in training mode; fusing uses its running statistics, so call eval() first"
    );
}

fn check_channels(op: &str, layer: &str, out: usize, bn: usize) {
    assert!(
        out == bn,
        "{op}: the {layer} has {out} output channels but the batch norm has {bn} features"
    );
}

/// The per-output-channel scale `gamma / sqrt(var + eps)` (as
/// `gamma * (1 / sqrt(var + eps))`) and the fused bias
/// `((b - mean) * (1 / sqrt(var + eps))) * gamma + beta` of folding `bn`
/// into `conv` (channel counts checked by the caller): PyTorch's
/// `fuse_conv_bn_weights` element by element. Shared by
/// [`fuse_conv_bn_eval`] and the evaluation-mode fused path
/// (`nn/conv_bn_act.rs`), so both fold to the same bits.
pub(crate) fn conv_bn_scale_bias<E: Float>(
    conv: &Conv2d<E>,
    bn: &BatchNorm2d<E>,
) -> (Vec<E>, Vec<E>) {
    let out = conv.weight.shape()[0];
    let s = Stats::new(
        &bn.weight,
        &bn.bias,
        bn.running_mean.get(),
        bn.running_var.get(),
        bn.eps,
    );
    let scale: Vec<E> = (0..out).map(|c| s.gamma[c] * s.rsqrt[c]).collect();
    let b = conv
        .bias
        .as_ref()
        .map_or(vec![E::zero(); out], Tensor::to_vec);
    let fused_b: Vec<E> = (0..out)
        .map(|c| (b[c] - s.mean[c]) * s.rsqrt[c] * s.gamma[c] + s.beta[c])
        .collect();
    (scale, fused_b)
}

/// The fused weight's values: each output channel's block of `weight`
/// scaled by `scale[c]` (one product per element, as [`fuse_conv_bn_eval`]).
pub(crate) fn scaled_rows<E: Float>(weight: &[E], scale: &[E]) -> Vec<E> {
    let per = weight.len() / scale.len().max(1);
    weight
        .iter()
        .enumerate()
        .map(|(i, &v)| v * scale[i / per])
        .collect()
}

/// A [`Conv2d`] that computes `bn(conv(x))` for an evaluation-mode
/// [`BatchNorm2d`]: the batch norm folded into the convolution's weight and
/// bias (PyTorch's `fuse_conv_bn_eval`). Stride, padding, dilation and
/// groups are kept; the result always has a bias. The fused tensors are
/// new leaves (trainable when the convolution's weight was), computed off
/// the tape.
///
/// # Panics
/// When the batch norm is in training mode, or its feature count differs
/// from the convolution's output channels.
///
/// ```
/// use forge::prelude::*;
/// use forge::nn::{fuse_conv_bn_eval, BatchNorm2d, Conv2d};
/// let conv = Conv2d::<f64>::new(2, 3, 3, &mut Rng::new(0)).padding(1);
/// let mut bn = BatchNorm2d::<f64>::new(3);
/// bn.running_var.set(Tensor::from_vec(vec![0.5, 2.0, 4.0], &[3]));
/// bn.eval();
/// let fused = fuse_conv_bn_eval(&conv, &bn);
/// let x = Tensor::<f64>::uniform(&[1, 2, 5, 5], -1.0, 1.0, &mut Rng::new(1));
/// let (a, b) = (bn.forward(conv.forward(x.clone())), fused.forward(x));
/// assert!(a.to_vec().iter().zip(b.to_vec()).all(|(a, b)| (a - b).abs() < 1e-12));
/// ```
pub fn fuse_conv_bn_eval<E: Float>(conv: &Conv2d<E>, bn: &BatchNorm2d<E>) -> Conv2d<E> {
    let op = "fuse_conv_bn_eval";
    check_training(op, bn.training);
    assert!(
        conv.int8.is_none(),
        "{op}: the convolution is quantized to int8; fold the batch norm before quantize_dynamic"
    );
    assert!(
        conv.fp8.is_none(),
        "{op}: the convolution's weight is fp8; fold the batch norm before to_fp8"
    );
    let out = conv.weight.shape()[0];
    check_channels(op, "convolution", out, bn.num_features());
    let (scale, fused_b) = conv_bn_scale_bias(conv, bn);
    let tracked = conv.bias.as_ref().is_some_and(Tensor::is_tracked) || conv.weight.is_tracked();
    let bias = Tensor::from_vec(fused_b, &[out]);
    Conv2d {
        weight: scale_rows(&conv.weight, &scale),
        bias: Some(if tracked { bias.requires_grad() } else { bias }),
        stride: conv.stride,
        padding: conv.padding,
        dilation: conv.dilation,
        groups: conv.groups,
        int8: None,
        fp8: None,
    }
}

/// A [`Linear`] that computes `bn(linear(x))` for an evaluation-mode
/// [`BatchNorm1d`] (PyTorch's `fuse_linear_bn_eval`): weight rows scaled by
/// `gamma / sqrt(var + eps)`, bias `(b - mean) * scale + beta`. The result
/// always has a bias; the fused tensors are new leaves (trainable when the
/// layer's weight was), computed off the tape. A batch norm without affine
/// parameters counts as `gamma = 1`, `beta = 0`.
///
/// # Panics
/// When the batch norm is in training mode, or its feature count differs
/// from the layer's output features, or the layer is already int8
/// ([`quantize_dynamic`](crate::quant::quantize_dynamic) comes after folding).
///
/// ```
/// use forge::prelude::*;
/// use forge::nn::{fuse_linear_bn_eval, BatchNorm1d, Linear};
/// let lin = Linear::<f64>::new(4, 3, &mut Rng::new(0));
/// let mut bn = BatchNorm1d::<f64>::new(3);
/// bn.running_mean.set(Tensor::from_vec(vec![0.1, -0.2, 0.3], &[3]));
/// bn.eval();
/// let fused = fuse_linear_bn_eval(&lin, &bn);
/// let x = Tensor::<f64>::uniform(&[2, 4], -1.0, 1.0, &mut Rng::new(1));
/// let (a, b) = (bn.forward(lin.forward(x.clone())), fused.forward(x));
/// assert!(a.to_vec().iter().zip(b.to_vec()).all(|(a, b)| (a - b).abs() < 1e-12));
/// ```
pub fn fuse_linear_bn_eval<E: Float>(linear: &Linear<E>, bn: &BatchNorm1d<E>) -> Linear<E> {
    let op = "fuse_linear_bn_eval";
    check_training(op, bn.training);
    assert!(
        linear.int8().is_none(),
        "{op}: the linear layer is quantized to int8; fold the batch norm before quantize_dynamic"
    );
    let out = linear.weight.shape()[0];
    check_channels(op, "linear layer", out, bn.num_features());
    let s = Stats::new(
        &bn.weight,
        &bn.bias,
        bn.running_mean.get(),
        bn.running_var.get(),
        bn.eps,
    );
    let scale: Vec<E> = (0..out).map(|c| s.gamma[c] * s.rsqrt[c]).collect();
    let b = linear
        .bias
        .as_ref()
        .map_or(vec![E::zero(); out], Tensor::to_vec);
    let fused_b: Vec<E> = (0..out)
        .map(|c| (b[c] - s.mean[c]) * scale[c] + s.beta[c])
        .collect();
    let tracked =
        linear.bias.as_ref().is_some_and(Tensor::is_tracked) || linear.weight.is_tracked();
    let bias = Tensor::from_vec(fused_b, &[out]);
    let bias = Some(if tracked { bias.requires_grad() } else { bias });
    Linear::from_weights(scale_rows(&linear.weight, &scale), bias)
        .expect("the fused weight and bias keep the layer's shapes")
}
