//! Convolutions: `conv2d`, `conv1d` and `conv_transpose2d` (NCHW / NCL).
//!
//! All three are built on three mutually adjoint primitives sharing one
//! [`ConvGeom`]: the convolution `y = conv(x, w)`, its input gradient
//! `x' = conv_t(y', w)` (which is the transposed convolution) and its weight
//! gradient `w' = conv_w(x, y')`. Because the convolution is bilinear, the
//! backward rule of each primitive is made of the other two, so gradients of
//! gradients work to any order:
//!
//! | op | d/d first input | d/d second input |
//! |---|---|---|
//! | `conv(x, w)` | `conv_t(g, w)` | `conv_w(x, g)` |
//! | `conv_t(y, w)` | `conv(g, w)` | `conv_w(g, y)` |
//! | `conv_w(x, y)` | `conv_t(y, g)` | `conv(x, g)` |
//!
//! A bias gradient is the output gradient summed over batch and space.

use super::grads::both;
use crate::autograd::is_grad_enabled;
use crate::cpu::conv::{
    channel_sums, conv2d_backward_input, conv2d_backward_input_kept, conv2d_backward_weight,
    conv2d_backward_weight_kept, conv2d_forward, conv2d_forward_keeping, ConvGeom, Kept,
};
use crate::tensor::{Device, Float, Tensor};

fn dims4(op: &str, what: &str, t: &[usize], layout: &str) -> [usize; 4] {
    t.try_into().unwrap_or_else(|_| {
        shape_panic!("{op}: {what} {t:?} must be 4-d {layout}");
    })
}

fn check_params(op: &str, stride: [usize; 2], dilation: [usize; 2], groups: usize) {
    shape_assert!(
        !stride.contains(&0),
        "{op}: stride {stride:?} must be positive"
    );
    shape_assert!(
        !dilation.contains(&0),
        "{op}: dilation {dilation:?} must be positive"
    );
    shape_assert!(groups > 0, "{op}: groups must be positive");
}

fn check_bias(op: &str, bias: Option<&[usize]>, channels: usize) {
    if let Some(b) = bias {
        shape_assert!(
            b == [channels],
            "{op}: bias {b:?} must have shape [{channels}] (one value per output channel)"
        );
    }
}

impl<E: Float, D: Device> Tensor<E, D> {
    /// 2-d convolution (cross-correlation, as `torch.nn.functional.conv2d`)
    /// of an input `[N, C, H, W]` with `weight [O, C / groups, kh, kw]`,
    /// plus an optional `bias [O]`. The output is `[N, O, OH, OW]` with
    /// `OH = floor((H + 2 padding - dilation (kh - 1) - 1) / stride) + 1`.
    ///
    /// # Panics
    /// When the ranks, channel counts, groups or bias shape do not fit, a
    /// stride or dilation is zero, or the padded input is smaller than the
    /// dilated kernel. The message names the op and the shapes, e.g.
    /// `conv2d: input [2, 3, 8, 8] has 3 channels, weight [16, 4, 3, 3] expects 4 (groups 1)`.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f32>::ones(&[1, 2, 4, 4]);
    /// let w = Tensor::<f32>::ones(&[3, 2, 3, 3]);
    /// let y = x.conv2d(&w, None, [1, 1], [1, 1], [1, 1], 1);
    /// assert_eq!(y.shape(), &[1, 3, 4, 4]);
    /// assert_eq!(y.as_slice()[5], 18.0); // an interior window: 2 channels x 9 taps
    /// ```
    #[track_caller]
    pub fn conv2d(
        &self,
        weight: &Self,
        bias: Option<&Self>,
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        groups: usize,
    ) -> Self {
        let geom = self.conv2d_geom(weight, bias, stride, padding, dilation, groups);
        // the direct kernel first: under autocast it runs in bf16 itself
        if let Some(y) = super::conv_infer::conv2d_direct(self, weight, bias, &geom) {
            return y.seen("conv2d", [self, weight].into_iter().chain(bias));
        }
        if let Some(y) = crate::autocast::conv2d_hook(self, weight, bias, &geom) {
            // bf16 products, nothing recorded: the tools still see the op
            return y.seen("conv2d", [self, weight].into_iter().chain(bias));
        }
        conv_apply(self, weight, bias, geom)
    }

    /// The geometry of [`conv2d`](Self::conv2d) for these operands, with
    /// its checks.
    ///
    /// # Panics
    /// As [`conv2d`](Self::conv2d).
    #[track_caller]
    pub(super) fn conv2d_geom(
        &self,
        weight: &Self,
        bias: Option<&Self>,
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        groups: usize,
    ) -> ConvGeom {
        let op = "conv2d";
        let x = dims4(op, "input", self.shape(), "[N, C, H, W]");
        let w = dims4(op, "weight", weight.shape(), "[O, C/groups, kh, kw]");
        check_params(op, stride, dilation, groups);
        shape_assert!(
            x[1] == w[1] * groups,
            "{op}: input {:?} has {} channels, weight {:?} expects {} (groups {groups})",
            self.shape(),
            x[1],
            weight.shape(),
            w[1] * groups
        );
        shape_assert!(
            w[0] / groups * groups == w[0],
            "{op}: weight {:?} has {} output channels, not divisible by groups {groups}",
            weight.shape(),
            w[0]
        );
        check_bias(op, bias.map(|b| b.shape()), w[0]);
        ConvGeom::new(x, w, stride, padding, dilation, groups)
            .filter(|_| w[2] > 0 && w[3] > 0)
            .unwrap_or_else(|| {
                shape_panic!(
                    "{op}: input {:?} padded by {padding:?} is smaller than weight {:?} dilated by {dilation:?}",
                    self.shape(),
                    weight.shape()
                )
            })
    }

    /// 1-d convolution of an input `[N, C, L]` with `weight [O, C / groups, k]`
    /// and an optional `bias [O]`, as `torch.nn.functional.conv1d`; computed
    /// as a [`conv2d`](Self::conv2d) over a unit height.
    ///
    /// # Panics
    /// As [`conv2d`](Self::conv2d), with the 3-d shapes in the message.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[1, 1, 4]);
    /// let w = Tensor::<f32>::from_vec(vec![1.0, -1.0], &[1, 1, 2]);
    /// let y = x.conv1d(&w, None, 1, 0, 1, 1);
    /// assert_eq!(y.to_vec(), vec![-1.0, -1.0, -1.0]);
    /// ```
    #[track_caller]
    pub fn conv1d(
        &self,
        weight: &Self,
        bias: Option<&Self>,
        stride: usize,
        padding: usize,
        dilation: usize,
        groups: usize,
    ) -> Self {
        let op = "conv1d";
        let (xs, ws) = (self.shape(), weight.shape());
        shape_assert!(xs.len() == 3, "conv1d: input {xs:?} must be 3-d [N, C, L]");
        shape_assert!(
            ws.len() == 3,
            "conv1d: weight {ws:?} must be 3-d [O, C/groups, k]"
        );
        check_params(op, [stride, 1], [dilation, 1], groups);
        shape_assert!(
            xs[1] == ws[1] * groups,
            "{op}: input {xs:?} has {} channels, weight {ws:?} expects {} (groups {groups})",
            xs[1],
            ws[1] * groups
        );
        check_bias(op, bias.map(|b| b.shape()), ws[0]);
        shape_assert!(
            xs[2] + 2 * padding > dilation * (ws[2].max(1) - 1) && ws[2] > 0,
            "{op}: input {xs:?} padded by {padding} is smaller than weight {ws:?} dilated by {dilation}"
        );
        let y = self.view(&[xs[0], xs[1], 1, xs[2]]).conv2d(
            &weight.view(&[ws[0], ws[1], 1, ws[2]]),
            bias,
            [1, stride],
            [0, padding],
            [1, dilation],
            groups,
        );
        let ys = y.shape().to_vec();
        y.view(&[ys[0], ys[1], ys[3]])
    }

    /// 2-d transposed convolution (`torch.nn.functional.conv_transpose2d`):
    /// the gradient of [`conv2d`](Self::conv2d) with respect to its input.
    /// The input is `[N, C_in, H, W]`, `weight [C_in, C_out / groups, kh, kw]`,
    /// `bias [C_out]`; the output is `[N, C_out, OH, OW]` with
    /// `OH = (H - 1) stride - 2 padding + dilation (kh - 1) + output_padding + 1`.
    ///
    /// # Panics
    /// When the ranks, channel counts, groups or bias shape do not fit, a
    /// stride or dilation is zero, `output_padding` is not smaller than the
    /// stride or the dilation, or the output would be empty.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f32>::ones(&[1, 1, 2, 2]);
    /// let w = Tensor::<f32>::ones(&[1, 1, 2, 2]);
    /// let y = x.conv_transpose2d(&w, None, [2, 2], [0, 0], [0, 0], 1, [1, 1]);
    /// assert_eq!(y.shape(), &[1, 1, 4, 4]);
    /// assert_eq!(y.to_vec(), vec![1.0; 16]);
    /// ```
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub fn conv_transpose2d(
        &self,
        weight: &Self,
        bias: Option<&Self>,
        stride: [usize; 2],
        padding: [usize; 2],
        output_padding: [usize; 2],
        groups: usize,
        dilation: [usize; 2],
    ) -> Self {
        let op = "conv_transpose2d";
        let x = dims4(op, "input", self.shape(), "[N, C_in, H, W]");
        let w = dims4(op, "weight", weight.shape(), "[C_in, C_out/groups, kh, kw]");
        check_params(op, stride, dilation, groups);
        shape_assert!(
            x[1] == w[0],
            "{op}: input {:?} has {} channels, weight {:?} expects {} (groups {groups})",
            self.shape(),
            x[1],
            weight.shape(),
            w[0]
        );
        shape_assert!(
            w[0] / groups * groups == w[0],
            "{op}: weight {:?} has {} input channels, not divisible by groups {groups}",
            weight.shape(),
            w[0]
        );
        for a in 0..2 {
            shape_assert!(
                output_padding[a] < stride[a].max(dilation[a]),
                "{op}: output_padding {output_padding:?} must be smaller than stride {stride:?} or dilation {dilation:?}"
            );
        }
        let c_out = w[1] * groups;
        check_bias(op, bias.map(|b| b.shape()), c_out);
        let len = |a: usize| {
            ((x[2 + a].max(1) - 1) * stride[a] + dilation[a] * (w[2 + a].max(1) - 1)
                + output_padding[a]
                + 1)
            .checked_sub(2 * padding[a])
            .filter(|&v| v > 0 && x[2 + a] > 0 && w[2 + a] > 0)
            .unwrap_or_else(|| {
                shape_panic!(
                    "{op}: input {:?} with weight {:?}, stride {stride:?}, padding {padding:?} gives an empty output",
                    self.shape(),
                    weight.shape()
                )
            })
        };
        let geom = ConvGeom {
            n: x[0],
            c: c_out,
            h: len(0),
            w: len(1),
            o: w[0],
            kh: w[2],
            kw: w[3],
            oh: x[2],
            ow: x[3],
            stride,
            padding,
            dilation,
            groups,
        };
        conv_t_apply(self, weight, bias, geom, None)
    }
}

/// `conv(x, w) + b` over `geom`, recorded with its rule. When the rule
/// will need the weight gradient (recording on, `w` tracked), the forward
/// may keep its column matrix for it, or over tap classes the used taps'
/// weights for the input gradient ([`conv2d_forward_keeping`]), held by
/// the rule until the tape drops it and used only while `x` (columns) or
/// `w` (taps) have not been written since (their storage's version).
#[track_caller]
fn conv_apply<E: Float, D: Device>(
    x: &Tensor<E, D>,
    w: &Tensor<E, D>,
    b: Option<&Tensor<E, D>>,
    geom: ConvGeom,
) -> Tensor<E, D> {
    let (xs, ws, bs) = (x.as_slice(), w.as_slice(), b.map(|b| b.as_slice()));
    let (data, kept) = if is_grad_enabled() && w.is_tracked() {
        conv2d_forward_keeping(&geom, xs, ws, bs)
    } else {
        (conv2d_forward(&geom, xs, ws, bs), None)
    };
    let versions = (x.storage.version(), w.storage.version());
    let shape = [geom.n, geom.o, geom.oh, geom.ow];
    let mut inputs = vec![x.clone(), w.clone()];
    inputs.extend(b.cloned());
    Tensor::from_parts(data, shape.into(), None).record("conv2d", inputs, move |ctx| {
        let (x, w, g) = (&ctx.inputs[0], &ctx.inputs[1], ctx.grad);
        let current = (x.storage.version(), w.storage.version());
        let kept_cols = kept
            .as_ref()
            .filter(|k| k.has_columns() && current.0 == versions.0);
        let kept_taps = kept
            .as_ref()
            .filter(|k| !k.has_columns() && current.1 == versions.1);
        let (gx, gw) = both(
            [ctx.needs(0), ctx.needs(1)],
            || conv_t_apply(g, w, None, geom, kept_taps),
            || conv_w_apply(x, g, geom, kept_cols),
        );
        let mut out = vec![gx, gw];
        if ctx.inputs.len() == 3 {
            out.push(ctx.needs(2).then(|| channel_sum(g)));
        }
        out
    })
}

/// The input gradient of `conv` over `geom` (the transposed convolution):
/// maps `y [n, o, oh, ow]` to `[n, c, h, w]`, plus a per-channel bias `[c]`;
/// with what the forward of `w` kept (`kept`, no bias), the same bits.
#[track_caller]
fn conv_t_apply<E: Float, D: Device>(
    y: &Tensor<E, D>,
    w: &Tensor<E, D>,
    b: Option<&Tensor<E, D>>,
    geom: ConvGeom,
    kept: Option<&Kept<E>>,
) -> Tensor<E, D> {
    let data = match (kept, b) {
        (Some(k), None) => conv2d_backward_input_kept(&geom, y.as_slice(), w.as_slice(), k),
        _ => conv2d_backward_input(&geom, y.as_slice(), w.as_slice(), b.map(|b| b.as_slice())),
    };
    let shape = [geom.n, geom.c, geom.h, geom.w];
    let mut inputs = vec![y.clone(), w.clone()];
    inputs.extend(b.cloned());
    Tensor::from_parts(data, shape.into(), None).record("conv_transpose2d", inputs, move |ctx| {
        let (y, w, g) = (&ctx.inputs[0], &ctx.inputs[1], ctx.grad);
        let (gy, gw) = both(
            [ctx.needs(0), ctx.needs(1)],
            || conv_apply(g, w, None, geom),
            || conv_w_apply(g, y, geom, None),
        );
        let mut out = vec![gy, gw];
        if ctx.inputs.len() == 3 {
            out.push(ctx.needs(2).then(|| channel_sum(g)));
        }
        out
    })
}

/// The bias gradient: `g [n, c, h, w]` summed over batch and space to `[c]`
/// (a contiguous pass per channel, much faster than a general `sum_dim`).
/// Its rule broadcasts the incoming `[c]` gradient back to `g`'s shape.
#[track_caller]
fn channel_sum<E: Float, D: Device>(g: &Tensor<E, D>) -> Tensor<E, D> {
    let s = g.shape();
    let (n, c, l) = (s[0], s[1], s[2] * s[3]);
    let data = channel_sums(g.as_slice(), n, c, l);
    Tensor::from_parts(data, [c].into(), None).record("conv_bias_grad", vec![g.clone()], |ctx| {
        let s = ctx.inputs[0].shape();
        vec![Some(ctx.grad.view(&[1, s[1], 1, 1]).expand(s))]
    })
}

/// The weight gradient of `conv` over `geom`: maps `x [n, c, h, w]` and
/// `y [n, o, oh, ow]` to `[o, c / groups, kh, kw]`, from `kept`, `x`'s
/// column matrix, where the forward kept it (the same bits).
#[track_caller]
fn conv_w_apply<E: Float, D: Device>(
    x: &Tensor<E, D>,
    y: &Tensor<E, D>,
    geom: ConvGeom,
    kept: Option<&Kept<E>>,
) -> Tensor<E, D> {
    let data = match kept {
        Some(cols) => conv2d_backward_weight_kept(&geom, cols, y.as_slice()),
        None => conv2d_backward_weight(&geom, x.as_slice(), y.as_slice()),
    };
    let shape = [geom.o, geom.c / geom.groups, geom.kh, geom.kw];
    Tensor::from_parts(data, shape.into(), None).record(
        "conv2d_weight_grad",
        vec![x.clone(), y.clone()],
        move |ctx| {
            let (x, y, g) = (&ctx.inputs[0], &ctx.inputs[1], ctx.grad);
            let (gx, gy) = both(
                [ctx.needs(0), ctx.needs(1)],
                || conv_t_apply(y, g, None, geom, None),
                || conv_apply(x, g, None, geom),
            );
            vec![gx, gy]
        },
    )
}
