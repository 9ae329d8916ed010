//! [`Conv2d`]'s tensors as a layer reports them (the weight as int8 or
//! fp8 once converted) and its int8 forward pass ([`crate::quant`]).

use super::conv::Conv2d;
use super::layer::{enter_layer, enter_layer_mut, Layer};
use super::visit::{TensorKind, TensorVisitor, TensorVisitorMut, Visit, Visitable};
use crate::quant::{
    conv2d_int8, f32_values, inference_only, tensor_from_f32, visit_int8, visit_int8_mut,
    ConvGeometry, Fp8Format, Granularity, Int8Weight, Quantizable,
};
use crate::tensor::{Element, Float, Tensor};
use std::sync::Arc;

impl<E: Float> Conv2d<E> {
    /// The int8 weight, once the layer is quantized.
    ///
    /// ```
    /// use forge::prelude::*;
    /// use forge::quant::{Granularity, Quantizable};
    /// let mut conv = forge::nn::Conv2d::<f32>::new(3, 4, 3, &mut Rng::new(0));
    /// assert!(conv.int8().is_none());
    /// assert!(conv.quantize_int8(Granularity::PerChannel));
    /// assert_eq!(conv.int8().unwrap().shape(), &[4, 3, 3, 3]);
    /// assert_eq!((conv.in_channels(), conv.out_channels()), (3, 4));
    /// ```
    pub fn int8(&self) -> Option<&Int8Weight> {
        self.int8.as_deref()
    }

    /// The int8 convolution of a batched input `[N, C, H, W]`, recorded so
    /// that a backward pass reaching it panics naming the layer.
    pub(super) fn forward_int8(&self, q: &Int8Weight, x: &Tensor<E>) -> Tensor<E> {
        let s = x.shape();
        let xs = f32_values(x.as_slice());
        let bias = self.bias.as_ref().map(|b| f32_values(b.as_slice()));
        let g = ConvGeometry {
            stride: self.stride,
            padding: self.padding,
            dilation: self.dilation,
            kernel: [q.shape()[2], q.shape()[3]],
        };
        shape_assert!(
            g.output(s[2], s[3]).is_some(),
            "Conv2d: input {:?} is smaller than the dilated kernel {:?}",
            s,
            g.kernel
        );
        let (y, [oh, ow]) = conv2d_int8(q, &xs, [s[0], s[1], s[2], s[3]], bias.as_deref(), &g);
        let y = tensor_from_f32(y, &[s[0], q.out_features(), oh, ow]);
        let mut inputs = vec![x.clone()];
        inputs.extend(self.bias.clone());
        let layer = format!(
            "Conv2d({} -> {}, kernel {:?}) with an int8 weight",
            s[1],
            q.out_features(),
            g.kernel
        );
        inference_only(y, inputs, "conv2d_int8", layer)
    }
}

impl<E: Float> Conv2d<E> {
    /// The weight's shape, its values as f32 rows (one per output channel)
    /// and the row length: what the int8 and fp8 conversions quantize.
    pub(super) fn weight_rows_f32(&self) -> (Vec<usize>, Vec<f32>, usize) {
        let shape = self.weight.shape().to_vec();
        let w = self
            .weight
            .to_vec()
            .iter()
            .map(|&v| Element::to_f64(v) as f32)
            .collect();
        let k = shape[1..].iter().product();
        (shape, w, k)
    }
}

impl<E: Float> Quantizable for Conv2d<E> {
    /// Quantizes the weight of a one-group layer (`false` when it already
    /// is, or the layer has groups, which stays in f32).
    fn quantize_int8(&mut self, granularity: Granularity) -> bool {
        if self.int8.is_some() || self.fp8.is_some() || self.groups != 1 {
            return false;
        }
        let (shape, w, k) = self.weight_rows_f32();
        let q = Int8Weight::quantize(&w, shape[0], k, granularity).with_shape(&shape);
        self.int8 = Some(Arc::new(q));
        self.weight = Tensor::zeros(&[shape[0], shape[1], 0, 0]);
        true
    }

    /// Converts the weight to 8-bit floats (`conv2d_fp8.rs`); `false` when
    /// it already is fp8 or int8.
    fn quantize_fp8(&mut self, format: Fp8Format, granularity: Granularity) -> bool {
        self.convert_fp8(format, granularity)
    }
}

impl<E: Float> Layer<E> for Conv2d<E> {
    fn visit_tensors(&self, v: &mut dyn TensorVisitor<E>) {
        match (&self.int8, &self.fp8) {
            (Some(q), _) => visit_int8(v, "weight", q),
            (_, Some(q)) => v.visit_fp8("weight", q),
            _ => v.visit("weight", &self.weight, TensorKind::Weight),
        }
        if let Some(b) = &self.bias {
            v.visit("bias", b, TensorKind::Weight);
        }
    }

    fn visit_tensors_mut(&mut self, v: &mut dyn TensorVisitorMut<E>) {
        v.visit_quantizable("", self);
        match (&mut self.int8, &mut self.fp8) {
            (Some(q), _) => visit_int8_mut(v, "weight", q),
            (_, Some(q)) => v.visit_fp8("weight", q),
            _ => v.visit("weight", &mut self.weight, TensorKind::Weight),
        }
        if let Some(b) = &mut self.bias {
            v.visit("bias", b, TensorKind::Weight);
        }
    }
}

impl<E: Float> Visit<E> for Conv2d<E> {
    fn visit(&self, name: &str, v: &mut dyn TensorVisitor<E>) {
        enter_layer(self, name, v)
    }
    fn visit_mut(&mut self, name: &str, v: &mut dyn TensorVisitorMut<E>) {
        enter_layer_mut(self, name, v)
    }
}

#[diagnostic::do_not_recommend]
impl<E: Float> Visitable for Conv2d<E> {}
