//! [`Conv2d`] with its weight held as 8-bit floats
//! ([`to_fp8`](crate::quant::to_fp8)): the bytes and scales stay resident
//! (a quarter of the f32 weight), and each call decodes them with the f32
//! gemm's panel decoder (`cpu::gemm::fp8_panels`) into a pooled f32 weight
//! that the call's convolution packs as it packs any f32 weight (im2col
//! and gemm, the small-channel kernels, or the direct kernel's blocks) and
//! drops afterwards. The convolution that runs is the f32 layer's, on the
//! same values, so the output equals, bit for bit, the f32 layer holding
//! [`Fp8Weight::dequantize`]'s weight, at any thread count; the evaluation
//! mode convolution + batch norm of ResNet's blocks (`conv_bn_act.rs`)
//! folds the decoded weight the same way.
//!
//! The layer is inference only: a backward pass that reaches its output
//! panics naming it.

use super::conv::{conv_forward, Conv2d};
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

    /// The layer as an f32 convolution holding its decoded weight (for
    /// one call; `None` when the weight is not fp8).
    pub(crate) fn fp8_decoded(&self) -> Option<Conv2d<E>> {
        let q = self.fp8.as_ref()?;
        let mut c = self.clone();
        c.weight = q.dequantized_tensor();
        c.fp8 = None;
        Some(c)
    }

    /// The fp8 forward pass of `x` (`[N, C, H, W]` or `[C, H, W]`): the
    /// f32 convolution with the decoded weight, recorded so that a
    /// backward pass reaching it panics naming the layer.
    pub(super) fn forward_fp8(&self, q: &Fp8Weight, x: Tensor<E>) -> Tensor<E> {
        let channels = (self.in_channels(), self.out_channels());
        let kernel = &q.weight_shape()[2..];
        let w = q.dequantized_tensor::<E>();
        conv_forward("Conv2d", channels, &kernel, "H, W", x, |x| {
            let y = x.conv2d(
                &w,
                self.bias.as_ref(),
                self.stride,
                self.padding,
                self.dilation,
                self.groups,
            );
            let mut inputs = vec![x.clone()];
            inputs.extend(self.bias.clone());
            let layer = format!(
                "Conv2d({} -> {}, kernel {kernel:?}) with an fp8 weight",
                channels.0, channels.1
            );
            inference_only(y, inputs, "conv2d_fp8", layer)
        })
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
