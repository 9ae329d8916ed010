//! The 3-d convolution `conv3d` (NCDHW), built as `conv2d` is (see
//! `conv.rs`) on three mutually adjoint primitives sharing one
//! [`Conv3dGeom`]: the convolution `conv(x, w)`, its input gradient
//! `conv_t(y', w)` and its weight gradient `conv_w(x, y')`. The convolution
//! is bilinear, so each primitive's rule is made of the other two and
//! gradients of gradients work to any order.

use super::grads::both;
use crate::cpu::conv::channel_sums;
use crate::cpu::conv3d::{
    conv3d_backward_input, conv3d_backward_weight, conv3d_forward, Conv3dGeom,
};
use crate::tensor::{Device, Float, Tensor};

impl<E: Float, D: Device> Tensor<E, D> {
    /// 3-d convolution (cross-correlation, as `torch.nn.functional.conv3d`)
    /// of an input `[N, C, D, H, W]` with `weight [O, C / groups, kd, kh, kw]`
    /// plus an optional `bias [O]`. The output is `[N, O, OD, OH, OW]` with
    /// `OD = floor((D + 2 padding - dilation (kd - 1) - 1) / stride) + 1`
    /// (per axis).
    ///
    /// # Panics
    /// When the ranks, channel counts, groups or bias shape do not fit, a
    /// stride or dilation is zero, or the padded input is smaller than the
    /// dilated kernel; the message names the op and the shapes.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f32>::ones(&[1, 2, 3, 4, 4]);
    /// let w = Tensor::<f32>::ones(&[5, 2, 3, 3, 3]);
    /// let y = x.conv3d(&w, None, [1, 1, 1], [1, 1, 1], [1, 1, 1], 1);
    /// assert_eq!(y.shape(), &[1, 5, 3, 4, 4]);
    /// assert_eq!(y.as_slice()[16 + 5], 54.0); // an interior window: 2 channels x 27 taps
    /// ```
    #[track_caller]
    pub fn conv3d(
        &self,
        weight: &Self,
        bias: Option<&Self>,
        stride: [usize; 3],
        padding: [usize; 3],
        dilation: [usize; 3],
        groups: usize,
    ) -> Self {
        let op = "conv3d";
        let (xs, ws) = (self.shape(), weight.shape());
        let x: [usize; 5] = xs.try_into().unwrap_or_else(|_| {
            shape_panic!("{op}: input {xs:?} must be 5-d [N, C, D, H, W]");
        });
        let w: [usize; 5] = ws.try_into().unwrap_or_else(|_| {
            shape_panic!("{op}: weight {ws:?} must be 5-d [O, C/groups, kd, kh, kw]");
        });
        shape_assert!(
            !stride.contains(&0),
            "{op}: stride {stride:?} must be positive"
        );
        shape_assert!(
            !dilation.contains(&0),
            "{op}: dilation {dilation:?} must be positive"
        );
        shape_assert!(groups > 0, "{op}: groups must be positive");
        shape_assert!(
            x[1] == w[1] * groups,
            "{op}: input {xs:?} has {} channels, weight {ws:?} expects {} (groups {groups})",
            x[1],
            w[1] * groups
        );
        shape_assert!(
            w[0] % groups == 0,
            "{op}: weight {ws:?} has {} output channels, not divisible by groups {groups}",
            w[0]
        );
        if let Some(b) = bias {
            shape_assert!(
                b.shape() == [w[0]],
                "{op}: bias {:?} must have shape [{}] (one value per output channel)",
                b.shape(),
                w[0]
            );
        }
        let geom = Conv3dGeom::new(x, w, stride, padding, dilation, groups).unwrap_or_else(|| {
            shape_panic!(
                "{op}: input {xs:?} padded by {padding:?} is smaller than weight {ws:?} dilated by {dilation:?}"
            )
        });
        conv_apply(self, weight, bias, geom)
    }
}

fn out_shape(g: &Conv3dGeom) -> Vec<usize> {
    vec![g.n, g.o, g.out[0], g.out[1], g.out[2]]
}

fn in_shape(g: &Conv3dGeom) -> Vec<usize> {
    vec![g.n, g.c, g.size[0], g.size[1], g.size[2]]
}

/// `conv(x, w) + b` over `geom`, recorded with its rule.
#[track_caller]
fn conv_apply<E: Float, D: Device>(
    x: &Tensor<E, D>,
    w: &Tensor<E, D>,
    b: Option<&Tensor<E, D>>,
    geom: Conv3dGeom,
) -> Tensor<E, D> {
    let data = conv3d_forward(&geom, x.as_slice(), w.as_slice(), b.map(|b| b.as_slice()));
    let mut inputs = vec![x.clone(), w.clone()];
    inputs.extend(b.cloned());
    Tensor::from_parts(data, out_shape(&geom).into(), None).record("conv3d", inputs, move |ctx| {
        let (x, w, g) = (&ctx.inputs[0], &ctx.inputs[1], ctx.grad);
        let (gx, gw) = both(
            [ctx.needs(0), ctx.needs(1)],
            || conv_t_apply(g, w, geom),
            || conv_w_apply(x, g, geom),
        );
        let mut out = vec![gx, gw];
        if ctx.inputs.len() == 3 {
            out.push(ctx.needs(2).then(|| channel_sum(g)));
        }
        out
    })
}

/// The input gradient of `conv` over `geom` (the transposed convolution):
/// maps `y [n, o, od, oh, ow]` to `[n, c, d, h, w]`.
#[track_caller]
fn conv_t_apply<E: Float, D: Device>(
    y: &Tensor<E, D>,
    w: &Tensor<E, D>,
    geom: Conv3dGeom,
) -> Tensor<E, D> {
    let data = conv3d_backward_input(&geom, y.as_slice(), w.as_slice(), None);
    Tensor::from_parts(data, in_shape(&geom).into(), None).record(
        "conv3d_input_grad",
        vec![y.clone(), w.clone()],
        move |ctx| {
            let (y, w, g) = (&ctx.inputs[0], &ctx.inputs[1], ctx.grad);
            let (gy, gw) = both(
                [ctx.needs(0), ctx.needs(1)],
                || conv_apply(g, w, None, geom),
                || conv_w_apply(g, y, geom),
            );
            vec![gy, gw]
        },
    )
}

/// The weight gradient of `conv` over `geom`: maps `x [n, c, d, h, w]` and
/// `y [n, o, od, oh, ow]` to `[o, c / groups, kd, kh, kw]`.
#[track_caller]
fn conv_w_apply<E: Float, D: Device>(
    x: &Tensor<E, D>,
    y: &Tensor<E, D>,
    geom: Conv3dGeom,
) -> Tensor<E, D> {
    let data = conv3d_backward_weight(&geom, x.as_slice(), y.as_slice());
    let [kd, kh, kw] = geom.kernel;
    let shape = vec![geom.o, geom.c / geom.groups, kd, kh, kw];
    Tensor::from_parts(data, shape.into(), None).record(
        "conv3d_weight_grad",
        vec![x.clone(), y.clone()],
        move |ctx| {
            let (x, y, g) = (&ctx.inputs[0], &ctx.inputs[1], ctx.grad);
            let (gx, gy) = both(
                [ctx.needs(0), ctx.needs(1)],
                || conv_t_apply(y, g, geom),
                || conv_apply(x, g, None, geom),
            );
            vec![gx, gy]
        },
    )
}

/// The bias gradient: `g [n, c, d, h, w]` summed over batch and space to
/// `[c]`; its rule broadcasts the incoming `[c]` gradient back.
#[track_caller]
fn channel_sum<E: Float, D: Device>(g: &Tensor<E, D>) -> Tensor<E, D> {
    let s = g.shape();
    let (n, c, l) = (s[0], s[1], s[2..].iter().product());
    let data = channel_sums(g.as_slice(), n, c, l);
    Tensor::from_parts(data, [c].into(), None).record("conv3d_bias_grad", vec![g.clone()], |ctx| {
        let s = ctx.inputs[0].shape();
        vec![Some(ctx.grad.view(&[1, s[1], 1, 1, 1]).expand(s))]
    })
}
