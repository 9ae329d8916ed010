//! [`Conv2d`] with its weight held as 8-bit floats
//! ([`to_fp8`](crate::quant::to_fp8)): the bytes and scales stay resident
//! (a quarter of the f32 weight), and each call decodes them in the
//! packing step of the kernel that runs (`ops/conv_fp8.rs`): the direct
//! kernel's blocks (`cpu/conv/direct.rs`, outside autograd at small
//! batches) or im2col and gemm's packed weight (`cpu/conv/im2col.rs`) are
//! made straight from the bytes in a pooled buffer for the call, the f32
//! gemm's panel decoder (`cpu::gemm::fp8_panels`) writing each value, so
//! no f32 copy of the weight exists besides the packed one. Where the
//! convolution takes another path (the small-channel kernels of
//! `cpu/conv/conv_small.rs`, whose weights are small; several groups; the
//! tap classes of tiny planes; planes of at most 16 positions; autocast's
//! bf16 im2col product; `f64`), the call decodes the whole weight into a
//! pooled f32 tensor and runs the f32 convolution with it, as before.
//!
//! Either way the convolution that runs is the f32 layer's, on the same
//! values in the same order, so the output equals, bit for bit, the f32
//! layer holding [`Fp8Weight::dequantize`]'s weight, at any thread count;
//! the evaluation-mode convolution + batch norm of ResNet's blocks
//! (`conv_bn_act.rs`) folds the batch norm's scale into the direct
//! kernel's blocks as they are decoded (decoded value x scale, the one
//! rounding the f32 fold makes), for that call only: the folded f32
//! panels are not cached (they would be an f32 copy of the weight).
//!
//! The layer is inference only: a backward pass that reaches its output
//! panics naming it.

use super::conv::{conv_forward, Conv2d};
use crate::cpu::conv::ConvGeom;
use crate::ops::conv_fp8::conv2d_fp8;
use crate::quant::{inference_only, Fp8Format, Fp8Weight, Granularity};
use crate::tensor::{Float, Tensor};
use std::sync::Arc;

impl<E: Float> Conv2d<E> {
    /// The 8-bit float weight, once the layer is converted by
    /// [`to_fp8`](crate::quant::to_fp8) (`weight` is then empty, `[out,
    /// in / groups, 0, 0]`, and the state dict holds the decoded values as
    /// `weight` and their scales as `weight_scale`).
    ///
    /// ```
    /// use forge::prelude::*;
    /// use forge::quant::{to_fp8, Fp8Format, Granularity};
    /// let mut conv = forge::nn::Conv2d::<f32>::new(3, 4, 3, &mut Rng::new(0));
    /// assert!(conv.fp8().is_none());
    /// to_fp8(&mut conv, Fp8Format::E4M3, Granularity::PerChannel);
    /// let q = conv.fp8().unwrap();
    /// assert_eq!((q.weight_shape(), q.scales().len()), (&[4, 3, 3, 3][..], 4));
    /// assert_eq!((conv.in_channels(), conv.out_channels()), (3, 4));
    /// ```
    pub fn fp8(&self) -> Option<&Fp8Weight> {
        self.fp8.as_deref()
    }

    /// The fp8 forward pass of `x` (`[N, C, H, W]` or `[C, H, W]`): the
    /// f32 convolution's path, its weight packing decoding the bytes
    /// where that path is the direct kernel or im2col and gemm
    /// (`ops/conv_fp8.rs`), else the f32 convolution with the whole weight
    /// decoded for the call; recorded so that a backward pass reaching it
    /// panics naming the layer.
    pub(super) fn forward_fp8(&self, q: &Fp8Weight, x: Tensor<E>) -> Tensor<E> {
        let channels = (self.in_channels(), self.out_channels());
        let kernel = &q.weight_shape()[2..];
        conv_forward("Conv2d", channels, &kernel, "H, W", x, |x| {
            let y = self.forward_packed(q, x).unwrap_or_else(|| {
                x.conv2d(
                    &q.dequantized_tensor(),
                    self.bias.as_ref(),
                    self.stride,
                    self.padding,
                    self.dilation,
                    self.groups,
                )
            });
            let mut inputs = vec![x.clone()];
            inputs.extend(self.bias.clone());
            let layer = format!(
                "Conv2d({} -> {}, kernel {kernel:?}) with an fp8 weight",
                channels.0, channels.1
            );
            inference_only(y, inputs, "conv2d_fp8", layer)
        })
    }

    /// The geometry of this layer's convolution of `x` (`[N, C, H, W]`)
    /// with its fp8 weight `q`, when every check of `conv2d` passes
    /// (`None` otherwise: `conv2d` on the decoded weight then panics with
    /// its message).
    pub(crate) fn fp8_geometry(&self, q: &Fp8Weight, x: &Tensor<E>) -> Option<ConvGeom> {
        let ws: [usize; 4] = q.weight_shape().try_into().ok()?;
        let xs: [usize; 4] = x.shape().try_into().ok()?;
        let g = self.groups;
        let ok = g > 0
            && self.stride.iter().chain(&self.dilation).all(|&v| v > 0)
            && xs[1] == ws[1] * g
            && ws[0].is_multiple_of(g)
            && ws[2] > 0
            && ws[3] > 0
            && self.bias.as_ref().is_none_or(|b| b.shape() == [ws[0]]);
        ok.then(|| ConvGeom::new(xs, ws, self.stride, self.padding, self.dilation, g))
            .flatten()
    }

    /// [`forward_fp8`](Self::forward_fp8)'s convolution by a path that
    /// decodes the weight in its packing step, or `None`.
    fn forward_packed(&self, q: &Fp8Weight, x: &Tensor<E>) -> Option<Tensor<E>> {
        let geom = self.fp8_geometry(q, x)?;
        conv2d_fp8(x, q.panels(), self.bias.as_ref(), &geom)
    }

    /// Converts the weight to 8-bit floats (any number of groups); `false`
    /// when it already is fp8 or int8.
    pub(super) fn convert_fp8(&mut self, format: Fp8Format, granularity: Granularity) -> bool {
        if self.int8.is_some() || self.fp8.is_some() {
            return false;
        }
        let (shape, w, k) = self.weight_rows_f32();
        let q = Fp8Weight::quantize(&w, shape[0], k, format, granularity).with_shape(&shape);
        self.fp8 = Some(Arc::new(q));
        self.weight = Tensor::zeros(&[shape[0], shape[1], 0, 0]);
        true
    }
}
