//! 8-bit float checkpoints: writing a state dict as `F8_E4M3` /
//! `F8_E5M2` tensors with per-tensor scales ([`fp8_tensors`]), and
//! reading such tensors back into float ones ([`dequantize`]).

use super::fp8::Fp8Format;
use crate::error::{ForgeError, Result};
use crate::io::AnyTensor;
use crate::tensor::{Element, Float, Tensor};
use std::collections::BTreeMap;

/// `values` (an `F8_E4M3` / `F8_E5M2` tensor) decoded and multiplied by
/// its `scale`, the companion tensor the common FP8 checkpoints store
/// beside each weight as `<name>_scale` (one value for the tensor, shape
/// `[]` or `[1]`, or one per output row, `[out]` or `[out, 1]`); without a
/// scale the values as they are.
///
/// # Errors
/// [`ForgeError::Shape`] when the scale is neither one value nor one per
/// row.
pub(crate) fn dequantize<E: Float>(
    name: &str,
    values: &AnyTensor,
    scale: Option<&AnyTensor>,
) -> Result<Tensor<E>> {
    let v = values.to_float::<E>();
    let Some(scale) = scale else {
        return Ok(v);
    };
    let s = scale.to_float::<E>().to_vec();
    let rows = v.shape().first().copied().unwrap_or(1);
    let per = if s.len() == 1 {
        v.numel()
    } else if s.len() == rows && rows > 0 {
        v.numel() / rows
    } else {
        return Err(ForgeError::Shape {
            name: format!("{name}_scale"),
            expected: vec![rows],
            found: scale.shape().to_vec(),
        });
    };
    let out = v
        .to_vec()
        .iter()
        .enumerate()
        .map(|(i, &x)| x * s[if s.len() == 1 { 0 } else { i / per.max(1) }])
        .collect();
    Ok(Tensor::from_vec(out, v.shape()))
}

/// A state dict as an 8-bit float checkpoint: every tensor of two or more
/// dimensions (the weights) scaled per tensor so that its largest
/// magnitude is the format's largest finite value, stored as `format`,
/// with its scale (`amax / max_finite`, `F32`, shape `[]`) as
/// `<name>_scale`, the layout of the FP8 checkpoints vLLM and
/// compressed-tensors read (`weight` + `weight_scale`); the other tensors
/// (biases, norms) stay `F32`. [`LayerIo::load_weights`] reads the file
/// back into the f32 model with no other code.
///
/// [`LayerIo::load_weights`]: crate::checkpoint::LayerIo::load_weights
///
/// ```
/// use forge::prelude::*;
/// use forge::quant::{fp8_tensors, Fp8Format};
/// let fc = Linear::<f32>::new(4, 3, &mut Rng::new(0));
/// let t = fp8_tensors(&fc.state_dict(), Fp8Format::E4M3);
/// assert_eq!(t["weight"].dtype(), forge::DType::F8E4M3);
/// assert_eq!(t["weight_scale"].shape(), &[] as &[usize]);
/// assert_eq!(t["bias"].dtype(), forge::DType::F32);
/// ```
pub fn fp8_tensors<E: Float>(
    dict: &BTreeMap<String, Tensor<E>>,
    format: Fp8Format,
) -> BTreeMap<String, AnyTensor> {
    let mut out = BTreeMap::new();
    for (name, t) in dict {
        let v: Vec<f32> = t
            .to_vec()
            .iter()
            .map(|&x| Element::to_f64(x) as f32)
            .collect();
        if t.rank() < 2 {
            out.insert(name.clone(), AnyTensor::F32(Tensor::from_vec(v, t.shape())));
            continue;
        }
        let amax = v.iter().fold(0f32, |m, x| m.max(x.abs()));
        let scale = if amax > 0.0 && amax.is_finite() {
            amax / format.max_finite()
        } else {
            1.0
        };
        let bytes = v
            .iter()
            .map(|&x| format.encode_saturating(x / scale))
            .collect();
        let bytes = Tensor::from_vec(bytes, t.shape());
        out.insert(
            name.clone(),
            match format {
                Fp8Format::E4M3 => AnyTensor::F8E4M3(bytes),
                Fp8Format::E5M2 => AnyTensor::F8E5M2(bytes),
            },
        );
        out.insert(
            format!("{name}_scale"),
            AnyTensor::F32(Tensor::from_vec(vec![scale], &[])),
        );
    }
    out
}
