//! [`Int8Weight`]: a weight quantized to signed bytes, and the dynamic
//! int8 product with it; [`Quantizable`], what a layer implements to be
//! converted by [`quantize_dynamic`](super::quantize_dynamic).

use crate::cpu::memory::Storage;
use crate::cpu::qgemm::{padded_k, PackedI8};
use crate::tensor::{Float, Tensor};

/// How many scales a quantized weight has.
///
/// ```
/// use forge::quant::Granularity;
/// assert_ne!(Granularity::PerTensor, Granularity::PerChannel);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Granularity {
    /// One scale for the whole weight (PyTorch's `default_dynamic_qconfig`).
    PerTensor,
    /// One scale per output channel (row of the weight; PyTorch's
    /// `per_channel_dynamic_qconfig`).
    PerChannel,
}

/// A layer that can convert its weight to int8 in place: what
/// [`quantize_dynamic`](super::quantize_dynamic) finds in a model (through
/// [`TensorVisitorMut::visit_quantizable`](crate::nn::TensorVisitorMut::visit_quantizable)).
///
/// ```
/// use forge::prelude::*;
/// use forge::quant::{Granularity, Quantizable};
/// let mut fc = Linear::<f32>::new(4, 3, &mut Rng::new(0));
/// assert!(fc.quantize_int8(Granularity::PerTensor));
/// assert!(!fc.quantize_int8(Granularity::PerTensor)); // already int8
/// ```
pub trait Quantizable {
    /// Quantizes the layer's weight; `false` when it already was.
    fn quantize_int8(&mut self, granularity: Granularity) -> bool;

    /// Converts the layer's weight to 8-bit floats held in memory (see
    /// [`to_fp8`](super::to_fp8)); `false` when the layer cannot or
    /// already did (the default: layers without an fp8 path).
    ///
    /// ```
    /// use forge::prelude::*;
    /// use forge::quant::{Fp8Format, Granularity, Quantizable};
    /// let mut fc = Linear::<f32>::new(4, 3, &mut Rng::new(0));
    /// assert!(fc.quantize_fp8(Fp8Format::E4M3, Granularity::PerTensor));
    /// assert!(!fc.quantize_int8(Granularity::PerTensor)); // already fp8
    /// ```
    fn quantize_fp8(&mut self, format: super::Fp8Format, granularity: Granularity) -> bool {
        let _ = (format, granularity);
        false
    }

    /// Converts the layer's lookup table to int8 with one scale per row
    /// (see [`quantize_embeddings`](super::quantize_embeddings)); `false`
    /// when the layer has no table or already did (the default).
    ///
    /// ```
    /// use forge::prelude::*;
    /// use forge::quant::Quantizable;
    /// let mut emb = forge::nn::Embedding::<f32>::new(10, 4, None, &mut Rng::new(0));
    /// assert!(emb.quantize_table_int8());
    /// assert!(!emb.quantize_table_int8()); // already int8
    /// let mut fc = Linear::<f32>::new(4, 3, &mut Rng::new(0));
    /// assert!(!fc.quantize_table_int8());
    /// ```
    fn quantize_table_int8(&mut self) -> bool {
        false
    }
}

/// The activation quantization parameters `(scale, zero_point)` PyTorch's
/// dynamic int8 linear (fbgemm, `reduce_range`) chooses for values in
/// `[min, max]`: the range widened to hold 0, spread over the integers
/// `0..=127`, the zero point the nearer-to-exact of the two ends' and
/// rounded to an integer (`ChooseQuantizationParams`).
///
/// ```
/// use forge::quant::activation_params;
/// let (scale, zp) = activation_params(-1.0, 3.0);
/// assert_eq!(scale, 4.0 / 127.0);
/// assert_eq!(zp, 32); // 1 / scale = 31.75
/// assert_eq!(activation_params(0.0, 0.0), (0.1, 0));
/// ```
pub fn activation_params(min: f32, max: f32) -> (f32, i32) {
    const SMALL_SCALE: f64 = 6.1e-5;
    let (qmin, qmax) = (0.0f64, 127.0f64);
    let mut min = f64::from(min.min(0.0));
    let mut max = f64::from(max.max(0.0));
    let mut scale = (max - min) / (qmax - qmin);
    if scale as f32 == 0.0 || (1.0 / scale as f32).is_infinite() {
        scale = 0.1;
    }
    if scale < SMALL_SCALE {
        let small = f64::from(SMALL_SCALE as f32);
        let org = scale;
        scale = small;
        if min == 0.0 {
            max = small * (qmax - qmin);
        } else if max == 0.0 {
            min = -small * (qmax - qmin);
        } else {
            let amplifier = small / org;
            min *= amplifier;
            max *= amplifier;
        }
    }
    let from_min = qmin - min / scale;
    let from_max = qmax - max / scale;
    let err_min = qmin.abs() - (min / scale).abs();
    let err_max = qmax.abs() - (max / scale).abs();
    let initial = if err_min < err_max {
        from_min
    } else {
        from_max
    };
    let zero_point = if initial < qmin {
        qmin
    } else if initial > qmax {
        qmax
    } else {
        initial.round_ties_even()
    };
    (scale as f32, zero_point as i32)
}

/// The symmetric int8 scale of `values` (PyTorch's `MinMaxObserver` with
/// `qint8` and a symmetric scheme): the largest magnitude (0 included)
/// over 127.5, at least `f32::EPSILON`.
fn symmetric_scale(values: &[f32]) -> f32 {
    let (lo, hi) = values
        .iter()
        .fold((0.0f32, 0.0f32), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    ((-lo).max(hi) / 127.5).max(f32::EPSILON)
}

/// `v / scale` rounded to the nearest integer (ties to even) and clamped
/// to `i8`, as `torch.quantize_per_tensor` computes it (`v * (1 / scale)`).
fn quantize_value(v: f32, scale: f32) -> i8 {
    (v * (1.0 / scale)).round_ties_even().clamp(-128.0, 127.0) as i8
}

/// A `[out, in]` weight quantized to signed bytes with one scale (per
/// tensor) or one scale per output row, packed for the int8 kernels.
///
/// ```
/// use forge::quant::{Granularity, Int8Weight};
/// let w = [1.0, -0.5, 0.25, 2.0, 0.0, -1.9];
/// let q = Int8Weight::quantize(&w, 2, 3, Granularity::PerChannel);
/// assert_eq!(q.values(), vec![127, -64, 32, 127, 0, -121]);
/// assert_eq!(q.scales(), &[1.0 / 127.5, 2.0 / 127.5]);
/// ```
#[derive(Clone, Debug)]
pub struct Int8Weight {
    packed: PackedI8,
    scales: Vec<f32>,
    /// The weight's own shape (`[out, in]`, or a convolution's
    /// `[out, in / groups, kh, kw]`): how it is stored and loaded.
    shape: Vec<usize>,
}

impl Int8Weight {
    /// Quantizes a row-major `[out, in]` weight.
    ///
    /// # Panics
    /// When `w.len() != out * in_features`.
    ///
    /// ```
    /// use forge::quant::{Granularity, Int8Weight};
    /// let q = Int8Weight::quantize(&[-0.5, 1.0], 1, 2, Granularity::PerTensor);
    /// assert_eq!(q.values(), vec![-64, 127]);
    /// ```
    pub fn quantize(w: &[f32], out: usize, in_features: usize, granularity: Granularity) -> Self {
        assert_eq!(
            w.len(),
            out * in_features,
            "Int8Weight::quantize: {} values for a [{out}, {in_features}] weight",
            w.len()
        );
        let scales = match granularity {
            Granularity::PerTensor => vec![symmetric_scale(w)],
            Granularity::PerChannel => w
                .chunks(in_features.max(1))
                .take(out)
                .map(symmetric_scale)
                .collect(),
        };
        let values: Vec<i8> = w
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                quantize_value(
                    v,
                    scales[if scales.len() == 1 {
                        0
                    } else {
                        i / in_features
                    }],
                )
            })
            .collect();
        Int8Weight {
            packed: PackedI8::new(out, in_features, &values),
            scales,
            shape: vec![out, in_features],
        }
    }

    /// A weight from its integer values (row-major `[out, in]`) and its
    /// scales (one, or one per row).
    ///
    /// # Panics
    /// When the lengths do not fit `[out, in]`.
    ///
    /// ```
    /// use forge::quant::Int8Weight;
    /// let q = Int8Weight::from_values(&[1, -2], vec![0.5], 1, 2);
    /// assert_eq!(q.dequantize(), vec![0.5, -1.0]);
    /// ```
    pub fn from_values(values: &[i8], scales: Vec<f32>, out: usize, in_features: usize) -> Self {
        assert!(
            scales.len() == 1 || scales.len() == out,
            "Int8Weight: {} scales for {out} output channels",
            scales.len()
        );
        Int8Weight {
            packed: PackedI8::new(out, in_features, values),
            scales,
            shape: vec![out, in_features],
        }
    }

    /// The same weight seen with another shape of as many values whose
    /// first dimension is the output channels (a convolution's
    /// `[out, in / groups, kh, kw]`): the shape its state-dict tensor and
    /// its checkpoint entry have.
    ///
    /// # Panics
    /// When `shape[0]` is not `out_features` or the rest does not multiply
    /// to `in_features`.
    ///
    /// ```
    /// let q = forge::quant::Int8Weight::from_values(&[0; 12], vec![1.0], 2, 6).with_shape(&[2, 3, 2, 1]);
    /// assert_eq!(q.shape(), &[2, 3, 2, 1]);
    /// assert_eq!(q.values_tensor::<f32>().shape(), &[2, 3, 2, 1]);
    /// ```
    pub fn with_shape(mut self, shape: &[usize]) -> Self {
        let (out, k) = (self.out_features(), self.in_features());
        assert!(
            shape.first() == Some(&out) && shape[1..].iter().product::<usize>() == k,
            "Int8Weight::with_shape: {shape:?} is not a [{out}, {k}] weight"
        );
        self.shape = shape.to_vec();
        self
    }

    /// The weight's shape (`[out, in]` unless set by
    /// [`with_shape`](Self::with_shape)).
    ///
    /// ```
    /// let q = forge::quant::Int8Weight::from_values(&[0; 6], vec![1.0], 2, 3);
    /// assert_eq!(q.shape(), &[2, 3]);
    /// ```
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The number of output channels (rows).
    ///
    /// ```
    /// let q = forge::quant::Int8Weight::from_values(&[0; 6], vec![1.0], 2, 3);
    /// assert_eq!((q.out_features(), q.in_features()), (2, 3));
    /// ```
    pub fn out_features(&self) -> usize {
        self.packed.n()
    }

    /// The length of each row.
    ///
    /// ```
    /// let q = forge::quant::Int8Weight::from_values(&[0; 6], vec![1.0], 2, 3);
    /// assert_eq!(q.in_features(), 3);
    /// ```
    pub fn in_features(&self) -> usize {
        self.packed.k()
    }

    /// The scales: one, or one per output channel.
    ///
    /// ```
    /// let q = forge::quant::Int8Weight::from_values(&[0; 6], vec![1.0, 2.0], 2, 3);
    /// assert_eq!(q.scales(), &[1.0, 2.0]);
    /// ```
    pub fn scales(&self) -> &[f32] {
        &self.scales
    }

    /// The integer values, row-major `[out, in]`.
    ///
    /// ```
    /// let q = forge::quant::Int8Weight::from_values(&[3, -4], vec![1.0], 1, 2);
    /// assert_eq!(q.values(), vec![3, -4]);
    /// ```
    pub fn values(&self) -> Vec<i8> {
        self.packed.unpack()
    }

    /// The weight the integers stand for (`value * scale`), row-major.
    ///
    /// ```
    /// let q = forge::quant::Int8Weight::from_values(&[3, -4], vec![0.5, 0.25], 2, 1);
    /// assert_eq!(q.dequantize(), vec![1.5, -1.0]);
    /// ```
    pub fn dequantize(&self) -> Vec<f32> {
        let k = self.in_features().max(1);
        self.values()
            .iter()
            .enumerate()
            .map(|(i, &v)| f32::from(v) * self.scale_of(i / k))
            .collect()
    }

    /// Bytes held in memory by the integers: the packed int8 matrix (rows
    /// padded to 16, columns to 4) and its row sums. The scales are not
    /// counted: a layer reports them as their own tensor (`weight_scale`).
    ///
    /// ```
    /// let q = forge::quant::Int8Weight::from_values(&[0; 32 * 64], vec![1.0], 32, 64);
    /// assert_eq!(q.bytes(), 32 * 64 + 4 * 32);
    /// ```
    pub fn bytes(&self) -> usize {
        self.packed.bytes()
    }

    /// The integer values as a tensor of `E` of the weight's
    /// [`shape`](Self::shape) (exact): how the weight appears in a state dict.
    ///
    /// ```
    /// let q = forge::quant::Int8Weight::from_values(&[3, -4], vec![1.0], 1, 2);
    /// assert_eq!(q.values_tensor::<f32>().to_vec(), vec![3.0, -4.0]);
    /// ```
    pub fn values_tensor<E: Float>(&self) -> Tensor<E> {
        let v = self
            .values()
            .into_iter()
            .map(|x| E::from_f64(f64::from(x)))
            .collect();
        Tensor::from_vec(v, &self.shape)
    }

    /// The scales as a 1-D tensor (`[1]` or `[out]`).
    ///
    /// ```
    /// let q = forge::quant::Int8Weight::from_values(&[0, 0], vec![0.5, 2.0], 2, 1);
    /// assert_eq!(q.scale_tensor::<f64>().to_vec(), vec![0.5, 2.0]);
    /// ```
    pub fn scale_tensor<E: Float>(&self) -> Tensor<E> {
        let v = self
            .scales
            .iter()
            .map(|&s| E::from_f64(f64::from(s)))
            .collect();
        Tensor::from_vec(v, &[self.scales.len()])
    }

    /// Row `row` dequantized into `out` (`in_features` long): the same
    /// values as that row of [`dequantize`](Self::dequantize).
    ///
    /// # Panics
    /// When `row` is out of range or `out` is not one row long.
    pub(crate) fn dequantize_row_into(&self, row: usize, out: &mut [f32]) {
        assert_eq!(
            out.len(),
            self.in_features(),
            "Int8Weight: a row of {} values into {}",
            self.in_features(),
            out.len()
        );
        let s = self.scale_of(row);
        self.packed.row_with(row, |p, v| out[p] = f32::from(v) * s);
    }

    /// The estimated single-thread time, in nanoseconds, of the int8
    /// product of `m` rows with this weight (not its quantization or
    /// epilogue).
    pub(crate) fn product_cost_ns(&self, m: usize) -> usize {
        self.packed.cost_ns(m)
    }

    fn scale_of(&self, row: usize) -> f32 {
        self.scales[if self.scales.len() == 1 { 0 } else { row }]
    }

    /// `x w^T + bias` for `x` holding rows of `in_features` values, with
    /// the activations quantized dynamically (see the [module
    /// docs](super)): the int8 product PyTorch's dynamic `Linear` computes.
    ///
    /// # Panics
    /// When `x.len()` is not a multiple of `in_features` or the bias is not
    /// `out_features` long.
    ///
    /// ```
    /// use forge::quant::{Granularity, Int8Weight};
    /// let q = Int8Weight::quantize(&[1.0, -1.0], 1, 2, Granularity::PerTensor);
    /// let y = q.linear(&[0.5, 0.25], Some(&[1.0]));
    /// assert!((y[0] - 1.25).abs() < 0.01);
    /// ```
    pub fn linear(&self, x: &[f32], bias: Option<&[f32]>) -> Vec<f32> {
        self.linear_pooled(x, bias, None).to_vec()
    }

    /// [`linear`](Self::linear) into a pooled buffer, with every scratch
    /// buffer (the quantized rows, the `i32` sums) pooled too, and `act`
    /// (an element-wise slice function) applied to the outputs in the
    /// product's epilogue.
    ///
    /// With two threads or more and rows and work enough, each thread
    /// quantizes, multiplies and finishes its own block of rows
    /// ([`linear_by_rows`](Self::linear_by_rows)); else
    /// [`linear_whole`](Self::linear_whole). The same bits either way.
    pub(crate) fn linear_pooled(
        &self,
        x: &[f32],
        bias: Option<&[f32]>,
        act: Option<fn(&mut [f32])>,
    ) -> Storage<f32> {
        check_input(x, self.in_features());
        match self.linear_by_rows(x, bias, act) {
            Some(y) => y,
            None => self.linear_whole(x, bias, act),
        }
    }

    /// [`linear_pooled`](Self::linear_pooled) as one quantization pass and
    /// one product over all the rows, each split over the threads by its
    /// own cost estimate.
    pub(crate) fn linear_whole(
        &self,
        x: &[f32],
        bias: Option<&[f32]>,
        act: Option<fn(&mut [f32])>,
    ) -> Storage<f32> {
        let (n, k) = (self.out_features(), self.in_features());
        let (m, a, scale, zero_point) = quantize_input(x, k);
        let mut acc = Storage::<i32>::stale(m * n);
        let mut y = Storage::<f32>::stale(m * n);
        self.product_into(m, &a, scale, zero_point, bias, act, &mut acc, &mut y);
        y
    }

    /// [`linear_pooled`](Self::linear_pooled) of several weights with the
    /// same `in_features` on the same input `x` (no activation), `x`
    /// quantized once: each output is the same bits as that weight's own
    /// [`linear_pooled`](Self::linear_pooled) (the scale, the zero point and
    /// the bytes depend on `x` alone).
    ///
    /// # Panics
    /// When the weights' `in_features` differ, or as
    /// [`linear`](Self::linear).
    pub(crate) fn linear_shared(
        layers: &[(&Int8Weight, Option<&[f32]>)],
        x: &[f32],
    ) -> Vec<Storage<f32>> {
        let Some(k) = layers.first().map(|(w, _)| w.in_features()) else {
            return Vec::new();
        };
        assert!(
            layers.iter().all(|(w, _)| w.in_features() == k),
            "Int8Weight::linear_shared: weights of different widths"
        );
        let (m, a, scale, zero_point) = quantize_input(x, k);
        let width = layers.iter().map(|(w, _)| w.out_features()).max();
        let mut acc = Storage::<i32>::stale(m * width.unwrap_or(0));
        layers
            .iter()
            .map(|&(w, bias)| {
                let mut y = Storage::<f32>::stale(m * w.out_features());
                w.product_into(m, &a, scale, zero_point, bias, None, &mut acc, &mut y);
                y
            })
            .collect()
    }

    /// The `[m, out]` outputs from `m` rows of quantized activations `a`
    /// (each [`padded_k`] bytes, the padding zero) quantized with `scale`
    /// and `zero_point`, written into `y`: the int8 product (`acc`, at
    /// least `m x out`, is scratch for the paths that store their sums) and
    /// its `f32` epilogue,
    /// `(acc - zero_point * rowsum) * scale * w_scale + bias`, then `act`
    /// (element-wise) when given.
    ///
    /// # Panics
    /// When a buffer is too small or the bias is not `out` long.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn product_into(
        &self,
        m: usize,
        a: &[u8],
        scale: f32,
        zero_point: i32,
        bias: Option<&[f32]>,
        act: Option<fn(&mut [f32])>,
        acc: &mut [i32],
        y: &mut [f32],
    ) {
        let terms = self.epilogue_terms(scale, zero_point);
        self.product_with(m, a, &terms, bias, act, acc, y);
    }

    /// The per-column terms of [`product_into`](Self::product_into)'s
    /// epilogue for activations quantized with `scale` and `zero_point`:
    /// `scale * w_scale` and `zero_point * rowsum` for each output, the same
    /// for any rows of those activations (so a caller that splits the rows
    /// computes them once).
    pub(crate) fn epilogue_terms(&self, scale: f32, zero_point: i32) -> EpilogueTerms {
        let n = self.out_features();
        EpilogueTerms {
            per_row: (0..n).map(|j| scale * self.scale_of(j)).collect(),
            offsets: self
                .packed
                .row_sums()
                .iter()
                .map(|&s| zero_point.wrapping_mul(s))
                .collect(),
        }
    }

    /// [`product_into`](Self::product_into) with its epilogue's terms made
    /// beforehand ([`epilogue_terms`](Self::epilogue_terms)).
    ///
    /// # Panics
    /// As [`product_into`](Self::product_into).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn product_with(
        &self,
        m: usize,
        a: &[u8],
        terms: &EpilogueTerms,
        bias: Option<&[f32]>,
        act: Option<fn(&mut [f32])>,
        acc: &mut [i32],
        y: &mut [f32],
    ) {
        let n = self.out_features();
        if let Some(b) = bias {
            assert_eq!(
                b.len(),
                n,
                "Int8Weight::linear: bias of {} for {n} outputs",
                b.len()
            );
        }
        assert!(
            y.len() >= m * n,
            "Int8Weight::product: output of {} for {m} x {n}",
            y.len()
        );
        if n == 0 {
            return;
        }
        // The epilogue runs on each block of sums as soon as the product has
        // made it (in registers' reach, on the thread that made it).
        let kernel = crate::cpu::qgemm::Dequantize::new(&terms.offsets, &terms.per_row, bias);
        let dequantize = |j0: usize, acc: &[i32], y: &mut [f32]| {
            kernel.run(j0, acc, y);
            if let Some(act) = act {
                act(y);
            }
        };
        self.packed
            .gemm_then(m, a, acc, &mut y[..m * n], Some(&dequantize));
    }
}

/// The per-output terms of an int8 product's epilogue
/// ([`Int8Weight::epilogue_terms`]).
pub(crate) struct EpilogueTerms {
    /// `scale * w_scale[j]`.
    per_row: Storage<f32>,
    /// `zero_point * rowsum[j]` (wrapping).
    offsets: Storage<i32>,
}

/// Quantizes the rows of `x` (each `k` values) with one scale and zero
/// point over all of them ([`range_params`]) into `out`, rows of
/// [`padded_k`]`(k)` bytes whose padding is set to zero: the activations
/// of one dynamic int8 product.
pub(crate) fn quantize_rows(x: &[f32], k: usize, out: &mut [u8]) -> (f32, i32) {
    if x.is_empty() {
        return (1.0, 0);
    }
    let (scale, zero_point) = range_params(x);
    // the bytes of `quantize_activations`, vectorized and threaded (the
    // padding set to zero)
    crate::cpu::qgemm::quantize_rows(x, k, padded_k(k), scale, zero_point, out);
    (scale, zero_point)
}

/// The activation parameters of `x` (nonempty) over its whole range: see
/// [`activation_params`]. NaNs are skipped, as `f32::min` / `max` do.
pub(crate) fn range_params(x: &[f32]) -> (f32, i32) {
    let (lo, hi) = crate::cpu::qgemm::range(x);
    activation_params(lo, hi)
}

/// `x` rounded to the nearest integer, ties to even, for `|x| <= 2^22`:
/// adding and subtracting `1.5 x 2^23` leaves no fraction bits, and the
/// addition rounds as the FPU does (to nearest even), the same bits as
/// `f32::round_ties_even` in that range, and plain arithmetic that the
/// compiler vectorizes (`round_ties_even` is a library call without
/// SSE4.1).
#[inline(always)]
fn round_small(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0; // 1.5 x 2^23
    (x + MAGIC) - MAGIC
}

/// `x` quantized to unsigned bytes with `scale` and `zero_point` into the
/// start of `out` (`zero_point + x / scale`, rounded half to even, clamped
/// to `[0, 255]`, as `torch.quantize_per_tensor` with `quint8`).
pub(crate) fn quantize_activations(x: &[f32], scale: f32, zero_point: i32, out: &mut [u8]) {
    let inverse = 1.0 / scale;
    let zp = zero_point as f32;
    for (q, &v) in out.iter_mut().zip(x) {
        // clamped to [-1, 256] first (a NaN becomes -1, hence 0 as
        // `round_ties_even` then `as u8` gives it): rounding then clamping
        // to [0, 255] gives the same byte as rounding the unclamped value
        // not `clamp`: it passes a NaN through, `max` turns it into -1
        #[allow(clippy::manual_clamp)]
        let t = (zp + v * inverse).max(-1.0).min(256.0);
        *q = round_small(t).clamp(0.0, 255.0) as u8;
    }
}

/// Panics unless `x` is whole rows of `k > 0` inputs.
fn check_input(x: &[f32], k: usize) {
    assert!(
        k > 0 && x.len().is_multiple_of(k),
        "Int8Weight::linear: {} inputs are not rows of {k}",
        x.len()
    );
}

/// `x` as rows of `k` inputs quantized for the int8 product: the row
/// count, the bytes (rows of [`padded_k`]`(k)` in a pooled buffer), the
/// scale and the zero point, one pass shared by every product on `x`.
///
/// # Panics
/// When `k` is 0 or `x` is not whole rows of `k`.
fn quantize_input(x: &[f32], k: usize) -> (usize, Storage<u8>, f32, i32) {
    check_input(x, k);
    let m = x.len() / k;
    let mut a = Storage::<u8>::stale(m * padded_k(k));
    let (scale, zero_point) = quantize_rows(x, k, &mut a);
    (m, a, scale, zero_point)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn activation_params_follow_pytorch() {
        // values from torch's ChooseQuantizationParams(min, max, 0, 255,
        // reduce_range=True) as computed by hand from its definition
        assert_eq!(activation_params(0.0, 1.27), (1.27 / 127.0, 0));
        let (s, zp) = activation_params(-1.27, 0.0);
        assert_eq!((s, zp), (1.27 / 127.0, 127));
        // a tiny range is widened to the smallest scale
        assert_eq!(activation_params(0.0, 1e-6).0, 6.1e-5);
    }

    #[test]
    fn vector_quantization_rounds_as_round_ties_even() {
        // the reference: the formula as written, with the library rounding
        let reference = |v: f32, inverse: f32, zp: f32| -> u8 {
            (zp + v * inverse).round_ties_even().clamp(0.0, 255.0) as u8
        };
        let mut x: Vec<f32> = (-600..600).map(|i| i as f32 * 0.25).collect();
        x.extend([
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1e30,
            -1e30,
            0.5,
            1.5,
            2.5,
            -0.5,
            254.5,
            255.5,
            -0.0,
            f32::MIN_POSITIVE,
        ]);
        for (scale, zp) in [(1.0, 0), (0.5, 64), (0.013, 127), (3.0, 5)] {
            let mut out = vec![0u8; x.len()];
            quantize_activations(&x, scale, zp, &mut out);
            for (&v, &q) in x.iter().zip(&out) {
                assert_eq!(q, reference(v, 1.0 / scale, zp as f32), "{v} {scale} {zp}");
            }
        }
    }

    #[test]
    fn range_skips_nans_and_spans_every_lane() {
        let mut x = vec![0.5f32; 37];
        x[3] = f32::NAN;
        x[36] = -2.0; // in the remainder past the 16-lane chunks
        x[17] = 4.0;
        assert_eq!(range_params(&x), activation_params(-2.0, 4.0));
    }

    #[test]
    fn shared_quantization_equals_each_layers_own_product() {
        let k = 37;
        let w = |out: usize, seed: usize| -> Vec<f32> {
            (0..out * k)
                .map(|i| (((i + seed) * 7919) % 1999) as f32 * 0.001 - 1.0)
                .collect()
        };
        let (a, b) = (w(20, 1), w(70, 2));
        let qa = Int8Weight::quantize(&a, 20, k, Granularity::PerTensor);
        let qb = Int8Weight::quantize(&b, 70, k, Granularity::PerChannel);
        let bias: Vec<f32> = (0..70).map(|j| j as f32 * 0.1 - 3.0).collect();
        let x: Vec<f32> = (0..9 * k)
            .map(|i| ((i * 613) % 401) as f32 * 0.02 - 3.0)
            .collect();
        let ys = Int8Weight::linear_shared(&[(&qa, None), (&qb, Some(&bias)), (&qa, None)], &x);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let own_a = qa.linear(&x, None);
        assert_eq!(bits(&ys[0]), bits(&own_a));
        assert_eq!(bits(&ys[1]), bits(&qb.linear(&x, Some(&bias))));
        assert_eq!(bits(&ys[2]), bits(&own_a));
    }

    #[test]
    fn linear_is_within_one_activation_step() {
        // exact weights; inputs in [0, 3] are quantized with a step of
        // 3 / 127, so each is off by at most half of it (0.012) and each
        // output by at most 0.012 x (0.5 + 1 + 1.5) = 0.036 < 0.05
        let q = Int8Weight::from_values(&[1, -2, 3, 4, 0, -5], vec![0.5, 0.25], 2, 3);
        let x = [0.0, 1.0, 2.0, 3.0, 1.5, 0.1];
        let y = q.linear(&x, Some(&[1.0, -1.0]));
        let w = q.dequantize();
        for i in 0..2 {
            for j in 0..2 {
                let want: f32 =
                    (0..3).map(|p| x[i * 3 + p] * w[j * 3 + p]).sum::<f32>() + [1.0, -1.0][j];
                assert!(
                    (y[i * 2 + j] - want).abs() < 0.05,
                    "{i} {j}: {} vs {want}",
                    y[i * 2 + j]
                );
            }
        }
    }
}
