//! [`Fp8Weight`]: a weight held in memory as 8-bit floats with `f32`
//! scales, multiplied with the f32 gemm whose packing step decodes the
//! bytes (`cpu::gemm::fp8_panels`).
//!
//! The arithmetic, exactly: the weight element is `w = decode(byte) x
//! scale`, where `decode` is exact in `f32` (every 8-bit float is an `f32`)
//! and the multiplication rounds once; the product is then the f32 gemm
//! of `x` with those `w`, computed with the same kernel, blocks and order
//! as for an f32 weight holding them. So an fp8 layer's output equals, bit
//! for bit, the output of the f32 layer whose weight is
//! [`Fp8Weight::dequantize`].

use super::fp8::Fp8Format;
use super::int8::Granularity;
use crate::cpu::gemm::{gemm_fp8_t, Fp8Bits, Fp8Panels};
use crate::cpu::memory::Storage;
use crate::error::{ForgeError, Result};
use crate::tensor::{Element, Float, Tensor};

/// A `[out, in]` weight of 8-bit floats ([`Fp8Format`]) with one `f32`
/// scale for the whole weight or one per output row: `w = value x scale`.
///
/// ```
/// use forge::quant::{Fp8Format, Fp8Weight, Granularity};
/// let w = [448.0, -224.0, 0.5, 2.0, 0.0, -448.0];
/// let q = Fp8Weight::quantize(&w, 2, 3, Fp8Format::E4M3, Granularity::PerChannel);
/// assert_eq!(q.scales(), &[1.0, 1.0]);
/// assert_eq!(q.dequantize(), w); // these values are exact in E4M3
/// assert_eq!(q.bytes(), 32 * 3 + 32 * 4); // panels of 32 rows, a scale per row
/// ```
#[derive(Clone, Debug)]
pub struct Fp8Weight {
    panels: Fp8Panels,
    format: Fp8Format,
    /// The one scale of a per-tensor weight; a per-row weight's scales
    /// are the panels' (kept once).
    tensor_scale: Option<f32>,
    /// The weight's shape as its layer holds it: `[out, in]`, or
    /// `[out, in / groups, kh, kw]` for a convolution.
    dims: Vec<usize>,
}

#[cfg(test)]
thread_local! {
    /// How many times this thread decoded a whole weight into f32
    /// ([`Fp8Weight::dequantize_pooled`]), for the tests of the layers
    /// that decode in their packing step instead.
    pub(crate) static WHOLE_DECODES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

fn bits_of(format: Fp8Format) -> Fp8Bits {
    match format {
        Fp8Format::E4M3 => Fp8Bits::E4M3,
        Fp8Format::E5M2 => Fp8Bits::E5M2,
    }
}

/// The scale that maps the largest magnitude of `values` onto the format's
/// largest finite value (1 for an all-zero or non-finite range), as
/// [`fp8_tensors`](super::fp8_tensors) chooses it.
fn amax_scale(values: &[f32], format: Fp8Format) -> f32 {
    let amax = values.iter().fold(0f32, |m, x| m.max(x.abs()));
    if amax > 0.0 && amax.is_finite() {
        amax / format.max_finite()
    } else {
        1.0
    }
}

impl Fp8Weight {
    /// Quantizes a row-major `[out, in]` weight: each scale is the largest
    /// magnitude (of the weight, or of its row) over the format's largest
    /// finite value, each value `w / scale` rounded to the format
    /// ([`Fp8Format::encode_saturating`]), the layout of
    /// [`fp8_tensors`](super::fp8_tensors).
    ///
    /// # Panics
    /// When `w.len() != out * in_features`.
    ///
    /// ```
    /// use forge::quant::{Fp8Format, Fp8Weight, Granularity};
    /// let q = Fp8Weight::quantize(&[0.1, -0.2], 1, 2, Fp8Format::E5M2, Granularity::PerTensor);
    /// let d = q.dequantize();
    /// assert!((d[0] - 0.1).abs() < 0.1 * 0.125 && d[1] == -0.2);
    /// ```
    pub fn quantize(
        w: &[f32],
        out: usize,
        in_features: usize,
        format: Fp8Format,
        granularity: Granularity,
    ) -> Self {
        assert_eq!(
            w.len(),
            out * in_features,
            "Fp8Weight::quantize: {} values for a [{out}, {in_features}] weight",
            w.len()
        );
        let scales = match granularity {
            Granularity::PerTensor => vec![amax_scale(w, format)],
            Granularity::PerChannel => w
                .chunks(in_features.max(1))
                .take(out)
                .map(|r| amax_scale(r, format))
                .collect(),
        };
        let k = in_features.max(1);
        let bytes: Vec<u8> = w
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                format.encode_saturating(v / scales[if scales.len() == 1 { 0 } else { i / k }])
            })
            .collect();
        Self::from_bytes(&bytes, scales, out, in_features, format)
    }

    /// A weight from its bytes (row-major `[out, in]`) and scales (one, or
    /// one per row).
    ///
    /// # Panics
    /// When the lengths do not fit `[out, in]`.
    ///
    /// ```
    /// use forge::quant::{Fp8Format, Fp8Weight};
    /// let q = Fp8Weight::from_bytes(&[0x38, 0xc0], vec![0.5], 1, 2, Fp8Format::E4M3);
    /// assert_eq!(q.dequantize(), vec![0.5, -1.0]);
    /// ```
    pub fn from_bytes(
        bytes: &[u8],
        scales: Vec<f32>,
        out: usize,
        in_features: usize,
        format: Fp8Format,
    ) -> Self {
        assert!(
            scales.len() == 1 || scales.len() == out,
            "Fp8Weight: {} scales for {out} output rows",
            scales.len()
        );
        let per_row: Vec<f32> = (0..out)
            .map(|j| scales[if scales.len() == 1 { 0 } else { j }])
            .collect();
        Fp8Weight {
            panels: Fp8Panels::new(out, in_features, bytes, &per_row, bits_of(format)),
            format,
            tensor_scale: (scales.len() == 1).then(|| scales[0]),
            dims: vec![out, in_features],
        }
    }

    /// The same weight with the shape its layer holds it in (a
    /// convolution's `[out, in / groups, kh, kw]`): the rows stay `out`
    /// and each row the product of the other dimensions. The shape is how
    /// the weight appears in state dicts and checkpoints.
    ///
    /// # Panics
    /// When `shape` is not `[out, ..]` with `in` values per row.
    ///
    /// ```
    /// use forge::quant::{Fp8Format, Fp8Weight};
    /// let q = Fp8Weight::from_bytes(&[0; 12], vec![1.0], 2, 6, Fp8Format::E4M3).with_shape(&[2, 3, 2, 1]);
    /// assert_eq!((q.shape(), q.weight_shape()), ([2, 6], &[2, 3, 2, 1][..]));
    /// assert_eq!(q.values_tensor::<f32>().shape(), &[2, 3, 2, 1]);
    /// ```
    pub fn with_shape(mut self, shape: &[usize]) -> Self {
        let [out, k] = self.shape();
        assert!(
            shape.len() >= 2 && shape[0] == out && shape[1..].iter().product::<usize>() == k,
            "Fp8Weight::with_shape: {shape:?} is not a [{out}, {k}] weight"
        );
        self.dims = shape.to_vec();
        self
    }

    /// The weight's shape as its layer holds it: [`shape`](Self::shape)
    /// unless set by [`with_shape`](Self::with_shape).
    ///
    /// ```
    /// use forge::quant::{Fp8Format, Fp8Weight};
    /// let q = Fp8Weight::from_bytes(&[0; 6], vec![1.0], 2, 3, Fp8Format::E4M3);
    /// assert_eq!(q.weight_shape(), &[2, 3]);
    /// ```
    pub fn weight_shape(&self) -> &[usize] {
        &self.dims
    }

    /// A weight from a checkpoint's tensors: `values` an `F8_E4M3` /
    /// `F8_E5M2` tensor `[out, in]` (or `[out, ..]`, e.g. a convolution's
    /// `[out, in, kh, kw]`, kept as [`weight_shape`](Self::weight_shape)), `scale` its companion (`[]`, `[1]`,
    /// `[out]` or `[out, 1]`; absent means 1), read without any f32 copy
    /// of the weight.
    ///
    /// # Errors
    /// [`ForgeError::DType`] when `values` is not an 8-bit float tensor or
    /// the scale not a float one; [`ForgeError::Shape`] when `values` is
    /// at least 2-D or the scale neither one value nor one per row.
    ///
    /// ```
    /// use forge::io::AnyTensor;
    /// use forge::quant::Fp8Weight;
    /// use forge::Tensor;
    /// let v = AnyTensor::F8E4M3(Tensor::from_vec(vec![0x38, 0xc0], &[1, 2]));
    /// let s = AnyTensor::F32(Tensor::from_vec(vec![0.5], &[]));
    /// let q = Fp8Weight::from_tensors("weight", &v, Some(&s)).unwrap();
    /// assert_eq!(q.dequantize(), vec![0.5, -1.0]);
    /// let bad = AnyTensor::F32(Tensor::from_vec(vec![1.0, 2.0], &[1, 2]));
    /// assert!(Fp8Weight::from_tensors("weight", &bad, None).is_err());
    /// ```
    pub fn from_tensors(
        name: &str,
        values: &crate::io::AnyTensor,
        scale: Option<&crate::io::AnyTensor>,
    ) -> Result<Self> {
        use crate::io::AnyTensor;
        use crate::tensor::DType;
        let (bytes, format) = match values {
            AnyTensor::F8E4M3(t) => (t, Fp8Format::E4M3),
            AnyTensor::F8E5M2(t) => (t, Fp8Format::E5M2),
            other => {
                return Err(ForgeError::dtype(
                    name.to_string(),
                    &[DType::F8E4M3, DType::F8E5M2],
                    other.dtype(),
                ))
            }
        };
        if bytes.rank() < 2 {
            return Err(ForgeError::Shape {
                name: name.to_string(),
                expected: vec![0, 0],
                found: bytes.shape().to_vec(),
            });
        }
        let (out, k) = (bytes.shape()[0], bytes.shape()[1..].iter().product());
        let scales = match scale {
            None => vec![1.0],
            Some(s) => {
                let floats = [DType::F16, DType::BF16, DType::F32, DType::F64];
                if !floats.contains(&s.dtype()) {
                    return Err(ForgeError::dtype(
                        format!("{name}_scale"),
                        &floats,
                        s.dtype(),
                    ));
                }
                let v = s.to_float::<f32>().to_vec();
                let fits = match s.shape() {
                    [] | [1] => v.len() == 1,
                    [r] | [r, 1] => *r == out,
                    _ => false,
                };
                if !fits {
                    return Err(ForgeError::Shape {
                        name: format!("{name}_scale"),
                        expected: vec![out, 1],
                        found: s.shape().to_vec(),
                    });
                }
                v
            }
        };
        Ok(Self::from_bytes(bytes.as_slice(), scales, out, k, format).with_shape(bytes.shape()))
    }

    /// The format of the values.
    ///
    /// ```
    /// use forge::quant::{Fp8Format, Fp8Weight};
    /// assert_eq!(Fp8Weight::from_bytes(&[0], vec![1.0], 1, 1, Fp8Format::E5M2).format(), Fp8Format::E5M2);
    /// ```
    pub fn format(&self) -> Fp8Format {
        self.format
    }

    /// `[out, in]`.
    ///
    /// ```
    /// use forge::quant::{Fp8Format, Fp8Weight};
    /// assert_eq!(Fp8Weight::from_bytes(&[0; 6], vec![1.0], 2, 3, Fp8Format::E4M3).shape(), [2, 3]);
    /// ```
    pub fn shape(&self) -> [usize; 2] {
        let (n, k) = self.panels.dims();
        [n, k]
    }

    /// The scales: one, or one per output row.
    ///
    /// ```
    /// use forge::quant::{Fp8Format, Fp8Weight};
    /// let q = Fp8Weight::from_bytes(&[0; 2], vec![0.5, 2.0], 2, 1, Fp8Format::E4M3);
    /// assert_eq!(q.scales(), &[0.5, 2.0]);
    /// ```
    pub fn scales(&self) -> &[f32] {
        match &self.tensor_scale {
            Some(s) => std::slice::from_ref(s),
            None => self.panels.row_scales(),
        }
    }

    /// The bytes, row-major `[out, in]`.
    ///
    /// ```
    /// use forge::quant::{Fp8Format, Fp8Weight};
    /// let q = Fp8Weight::from_bytes(&[1, 2, 3], vec![1.0], 1, 3, Fp8Format::E4M3);
    /// assert_eq!(q.values(), vec![1, 2, 3]);
    /// ```
    pub fn values(&self) -> Vec<u8> {
        self.panels.row_major()
    }

    /// The weight the bytes stand for, row-major: `decode(byte) x scale`,
    /// rounded once (the f32 weight whose layer computes the same bits).
    ///
    /// ```
    /// use forge::quant::{Fp8Format, Fp8Weight};
    /// let q = Fp8Weight::from_bytes(&[0x38, 0x40], vec![3.0], 1, 2, Fp8Format::E4M3);
    /// assert_eq!(q.dequantize(), vec![3.0, 6.0]);
    /// ```
    pub fn dequantize(&self) -> Vec<f32> {
        self.dequantize_pooled().to_vec()
    }

    /// The bytes and scales in the gemm's panel order, for the kernels
    /// that decode them in their packing step (the recurrent layers'
    /// packed weights, the convolutions' packed weights).
    pub(crate) fn panels(&self) -> &Fp8Panels {
        &self.panels
    }

    /// [`dequantize`](Self::dequantize) into a pooled buffer, decoded by
    /// the gemm's panel decoder (`Fp8Panels::decode_rows`): the weight an
    /// fp8 convolution or recurrent layer hands to the f32 kernels for one
    /// call.
    pub(crate) fn dequantize_pooled(&self) -> Storage<f32> {
        #[cfg(test)]
        WHOLE_DECODES.with(|d| d.set(d.get() + 1));
        let (n, k) = self.panels.dims();
        let mut out = Storage::<f32>::stale(n * k);
        if n > 0 && k > 0 {
            self.panels.decode_rows(0, n, &mut out);
        }
        out
    }

    /// The dequantized weight as a tensor of `E` of
    /// [`weight_shape`](Self::weight_shape) (untracked): for `f32`, the
    /// weight an f32 layer holding [`dequantize`](Self::dequantize)'s
    /// values has.
    pub(crate) fn dequantized_tensor<E: Float>(&self) -> Tensor<E> {
        super::buf::tensor_from_f32(self.dequantize_pooled(), &self.dims)
    }

    /// Bytes held in memory: the values (rows rounded up to whole panels
    /// of 32), one `f32` scale per row as the kernel reads them (a
    /// per-row weight's scales themselves), and a per-tensor weight's one
    /// scale.
    ///
    /// ```
    /// use forge::quant::{Fp8Format, Fp8Weight};
    /// let q = Fp8Weight::from_bytes(&[0; 64 * 100], vec![1.0], 64, 100, Fp8Format::E4M3);
    /// assert_eq!(q.bytes(), 64 * 100 + 64 * 4 + 4);
    /// ```
    pub fn bytes(&self) -> usize {
        self.panels.bytes() + if self.tensor_scale.is_some() { 4 } else { 0 }
    }

    /// The values decoded (unscaled, exact) as a tensor of `E` of
    /// [`weight_shape`](Self::weight_shape): how the weight appears in a
    /// state dict.
    ///
    /// ```
    /// use forge::quant::{Fp8Format, Fp8Weight};
    /// let q = Fp8Weight::from_bytes(&[0x38, 0xc0], vec![0.5], 1, 2, Fp8Format::E4M3);
    /// assert_eq!(q.values_tensor::<f32>().to_vec(), vec![1.0, -2.0]);
    /// ```
    pub fn values_tensor<E: Float>(&self) -> Tensor<E> {
        let v = self
            .values()
            .into_iter()
            .map(|b| E::from_f64(f64::from(self.format.decode(b))))
            .collect();
        Tensor::from_vec(v, &self.dims)
    }

    /// The scales as a tensor: `[]` for one, `[out, 1]` for one per row
    /// (the shapes FP8 checkpoints use).
    ///
    /// ```
    /// use forge::quant::{Fp8Format, Fp8Weight};
    /// let q = Fp8Weight::from_bytes(&[0; 2], vec![0.5, 2.0], 2, 1, Fp8Format::E4M3);
    /// assert_eq!(q.scale_tensor::<f32>().shape(), &[2, 1]);
    /// ```
    pub fn scale_tensor<E: Float>(&self) -> Tensor<E> {
        let scales = self.scales();
        let v = scales.iter().map(|&s| E::from_f64(f64::from(s))).collect();
        if scales.len() == 1 {
            Tensor::from_vec(v, &[])
        } else {
            Tensor::from_vec(v, &[scales.len(), 1])
        }
    }

    /// `x w^T + bias` for `x` holding rows of `in` values, the weight
    /// decoded panel by panel in the gemm's packing step: the bits of the
    /// f32 `linear` with [`dequantize`](Self::dequantize)'s weight.
    ///
    /// # Panics
    /// When `x.len()` is not a multiple of `in` or the bias is not `out`
    /// long.
    ///
    /// ```
    /// use forge::quant::{Fp8Format, Fp8Weight};
    /// let q = Fp8Weight::from_bytes(&[0x38, 0xb8], vec![2.0], 1, 2, Fp8Format::E4M3);
    /// assert_eq!(q.linear(&[3.0, 1.0], Some(&[0.5])), vec![4.5]);
    /// ```
    pub fn linear(&self, x: &[f32], bias: Option<&[f32]>) -> Vec<f32> {
        self.linear_pooled(x, bias).to_vec()
    }

    /// [`linear`](Self::linear) into a pooled buffer.
    pub(crate) fn linear_pooled(&self, x: &[f32], bias: Option<&[f32]>) -> Storage<f32> {
        let [n, k] = self.shape();
        assert!(
            k > 0 && x.len().is_multiple_of(k),
            "Fp8Weight::linear: {} inputs are not rows of {k}",
            x.len()
        );
        let m = x.len() / k;
        let (mut y, beta) = match bias {
            Some(b) => {
                assert_eq!(
                    b.len(),
                    n,
                    "Fp8Weight::linear: bias of {} for {n} outputs",
                    b.len()
                );
                // the output starts as the bias and the product is added
                // (`beta = 1`), as the f32 `linear` does
                let mut y = Storage::<f32>::stale(m * n);
                for row in y.chunks_exact_mut(n.max(1)) {
                    row.copy_from_slice(b);
                }
                (y, 1.0)
            }
            None => (Storage::<f32>::stale(m * n), 0.0),
        };
        if m == 1 {
            // one row (token-by-token decoding): the bytes read in place,
            // the same bits as the gemm's one-row path
            crate::cpu::qgemm::gemv_fp8(&self.panels, x, beta, &mut y);
        } else {
            gemm_fp8_t(m, x, &self.panels, beta, &mut y);
        }
        y
    }
}

/// An fp8 weight from state-dict tensors: `values` the decoded values
/// (`[out, in]` or `[out, ..]`, kept as its shape, encoded back to `format`: exact for values of the
/// format, rounded to nearest otherwise) and `scales` (`[]`, `[1]`,
/// `[out]` or `[out, 1]`).
///
/// # Panics
/// When the tensors do not fit a weight (a checkpoint's shapes are checked
/// against the model's before anything is replaced).
pub(crate) fn from_float_tensors<E: Float>(
    values: &Tensor<E>,
    scales: &Tensor<E>,
    format: Fp8Format,
) -> Fp8Weight {
    assert!(
        values.rank() >= 2,
        "fp8 weight: expected [out, in, ..], got {:?}",
        values.shape()
    );
    let (out, k) = (values.shape()[0], values.shape()[1..].iter().product());
    let bytes: Vec<u8> = values
        .to_vec()
        .iter()
        .map(|&v| format.encode(Element::to_f64(v) as f32))
        .collect();
    let scales = scales
        .to_vec()
        .iter()
        .map(|&s| Element::to_f64(s) as f32)
        .collect();
    Fp8Weight::from_bytes(&bytes, scales, out, k, format).with_shape(values.shape())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cpu decoder equals `Fp8Format::decode` on every byte.
    #[test]
    fn panel_decoding_is_the_format_decoding() {
        for format in [Fp8Format::E4M3, Fp8Format::E5M2] {
            for b in 0..=255u8 {
                let (a, want) = (bits_of(format).decode(b), format.decode(b));
                assert!(
                    a.to_bits() == want.to_bits() || a.is_nan() && want.is_nan(),
                    "{format:?} {b:#x}: {a} vs {want}"
                );
            }
        }
    }

    /// Quantizing then dequantizing is within half a step of the format
    /// (3 mantissa bits: a relative error of at most 2^-4 for normals,
    /// plus the absolute subnormal step times the scale).
    #[test]
    fn quantize_is_within_half_a_step() {
        let mut rng = crate::tensor::Rng::new(2);
        let (n, k) = (5, 40);
        let w: Vec<f32> = (0..n * k).map(|_| rng.normal() as f32).collect();
        let q = Fp8Weight::quantize(&w, n, k, Fp8Format::E4M3, Granularity::PerChannel);
        let d = q.dequantize();
        for (i, (&a, &b)) in w.iter().zip(&d).enumerate() {
            let s = q.scales()[i / k];
            assert!(
                (a - b).abs() <= a.abs() / 16.0 + s * 2f32.powi(-10),
                "{a} {b}"
            );
        }
    }
}
