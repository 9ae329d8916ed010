//! Convolution layers: [`Conv1d`], [`Conv2d`] (and, in `conv_transpose.rs`,
//! [`ConvTranspose2d`](super::ConvTranspose2d)), with
//! PyTorch's parameter names (`weight`, `bias`), layouts and default
//! initialisation (weight and bias `U(-1/sqrt(fan_in), 1/sqrt(fan_in))`).
//!
//! Built with a constructor and builder methods:
//!
//! ```
//! use forge::prelude::*;
//! use forge::nn::Conv2d;
//! let conv = Conv2d::<f32>::new(3, 16, 3, &mut Rng::new(0)).stride(2).padding(1);
//! let y = conv.forward(Tensor::zeros(&[8, 3, 32, 32]));
//! assert_eq!(y.shape(), &[8, 16, 16, 16]);
//! ```

use super::builder::{conv_channels, size_setters};
use super::forward::Forward;
use super::init::default_bound;
use super::summary::{record_output, summary_running};
use super::Activation;
use crate::error::{ForgeError, Result};
use crate::tensor::{Float, Rng, Tensor};
use forge_macros::Layer;

/// A size given as one number for every spatial dimension (`3`) or one per
/// dimension (`[3, 2]` or `(3, 2)`).
pub trait IntoPair {
    /// The size for (rows, columns).
    ///
    /// ```
    /// use forge::nn::IntoPair;
    /// assert_eq!(3.into_pair(), [3, 3]);
    /// assert_eq!([3, 2].into_pair(), [3, 2]);
    /// ```
    fn into_pair(self) -> [usize; 2];
}

impl IntoPair for usize {
    fn into_pair(self) -> [usize; 2] {
        [self, self]
    }
}

impl IntoPair for [usize; 2] {
    fn into_pair(self) -> [usize; 2] {
        self
    }
}

impl IntoPair for (usize, usize) {
    fn into_pair(self) -> [usize; 2] {
        [self.0, self.1]
    }
}

/// A trainable weight and bias drawn from `U(-b, b)`, `b = 1/sqrt(fan_in)`.
pub(super) fn init_params<E: Float>(
    wshape: &[usize],
    fan_in: usize,
    bias_len: usize,
    rng: &mut Rng,
) -> (Tensor<E>, Option<Tensor<E>>) {
    let b = default_bound(fan_in);
    let w = Tensor::uniform(wshape, -b, b, rng).requires_grad();
    let bias = Tensor::uniform(&[bias_len], -b, b, rng).requires_grad();
    (w, Some(bias))
}

/// A new convolution's weight and bias: the sizes checked (positive; the
/// message names the layer), the weight `[out, in, kernel..]` (`[in, out,
/// kernel..]` when `transposed`), both drawn by [`init_params`] with the
/// fan-in of weight dimension 1 times the kernel size, as PyTorch does.
#[track_caller]
pub(super) fn new_params<E: Float>(
    layer: &str,
    in_channels: usize,
    out_channels: usize,
    kernel: &[usize],
    transposed: bool,
    rng: &mut Rng,
) -> (Tensor<E>, Option<Tensor<E>>) {
    shape_assert!(
        in_channels > 0 && out_channels > 0 && kernel.iter().all(|&k| k > 0),
        "{layer}: in_channels {in_channels}, out_channels {out_channels} and kernel {kernel:?} must be positive"
    );
    let (c0, c1) = if transposed {
        (in_channels, out_channels)
    } else {
        (out_channels, in_channels)
    };
    let shape: Vec<usize> = [c0, c1].iter().chain(kernel).copied().collect();
    init_params(
        &shape,
        c1 * kernel.iter().product::<usize>(),
        out_channels,
        rng,
    )
}

/// Re-derives a freshly initialised weight and bias for `groups` groups:
/// keeps the first `1/groups` of weight dimension 1 and widens both by
/// `sqrt(groups)`, since `U(-b, b) sqrt(g)` is exactly `U(-b', b')` for the
/// grouped layer's bound `b' = b sqrt(g)` (its fan-in is `g` times smaller).
pub(super) fn regroup<E: Float>(
    layer: &str,
    weight: &Tensor<E>,
    bias: &Option<Tensor<E>>,
    groups: usize,
) -> (Tensor<E>, Option<Tensor<E>>) {
    let d1 = weight.shape()[1];
    shape_assert!(
        groups > 0 && d1 / groups * groups == d1,
        "{layer}: weight {:?} dimension 1 ({d1}) is not divisible by groups {groups}",
        weight.shape()
    );
    let scale = E::from_f64((groups as f64).sqrt());
    let w = weight
        .detach()
        .narrow(1, 0, d1 / groups)
        .mul_scalar(scale)
        .requires_grad();
    let b = bias
        .as_ref()
        .map(|b| b.detach().mul_scalar(scale).requires_grad());
    (w, b)
}

pub(super) fn check_weights<E: Float>(
    layer: &str,
    weight: &Tensor<E>,
    bias: &Option<Tensor<E>>,
    rank: usize,
    bias_len: impl Fn(&[usize]) -> usize,
) -> Result<()> {
    if weight.rank() != rank {
        return Err(ForgeError::Shape {
            name: format!("{layer}.weight"),
            expected: vec![0; rank],
            found: weight.shape().to_vec(),
        });
    }
    if let Some(b) = bias {
        let n = bias_len(weight.shape());
        if b.shape() != [n] {
            return Err(ForgeError::Shape {
                name: format!("{layer}.bias"),
                expected: vec![n],
                found: b.shape().to_vec(),
            });
        }
    }
    Ok(())
}

/// Applies `f` to a batched input; an unbatched one (rank `rank - 1`) is
/// given a batch of one and returned without it.
pub(super) fn batched<E: Float>(
    x: Tensor<E>,
    rank: usize,
    f: impl FnOnce(&Tensor<E>) -> Tensor<E>,
) -> Tensor<E> {
    if x.rank() + 1 == rank {
        f(&x.unsqueeze(0)).squeeze(0)
    } else {
        f(&x)
    }
}

/// The channel dimension of a batched or unbatched input.
pub(super) fn channels_of(shape: &[usize], rank: usize) -> Option<usize> {
    match shape.len() {
        r if r == rank => Some(shape[1]),
        r if r + 1 == rank => Some(shape[0]),
        _ => None,
    }
}

/// Splits a freshly initialised layer into `groups` groups (see
/// [`Conv2d::groups`]): checks that it has one group and that `channels`
/// (the count `regroup` does not already check) divides, then regroups the
/// weight and bias.
#[allow(clippy::too_many_arguments)]
pub(super) fn grouped<E: Float>(
    layer: &str,
    current: usize,
    channels: usize,
    which: &str,
    weight: &Tensor<E>,
    bias: &Option<Tensor<E>>,
    groups: usize,
) -> (Tensor<E>, Option<Tensor<E>>) {
    shape_assert!(current == 1, "{layer}: groups can only be set once");
    shape_assert!(
        groups > 0 && channels / groups * groups == channels,
        "{layer}: {which} {channels} is not divisible by groups {groups}"
    );
    regroup(layer, weight, bias, groups)
}

/// The forward pass of a convolution layer: checks the input's rank and
/// channels (batched `[N, C, spatial]` or unbatched `[C, spatial]`), with
/// a message naming the layer and both shapes, and applies `f` to the
/// batched form.
pub(super) fn conv_forward<E: Float>(
    layer: &str,
    (c, o): (usize, usize),
    kernel: &dyn std::fmt::Debug,
    spatial: &str,
    x: Tensor<E>,
    f: impl FnOnce(&Tensor<E>) -> Tensor<E>,
) -> Tensor<E> {
    let rank = 3 + spatial.matches(',').count();
    shape_assert!(
        channels_of(x.shape(), rank) == Some(c),
        "{layer}({c} -> {o}, kernel {kernel:?}): expected input [N, {c}, {spatial}] or [{c}, {spatial}], got {:?}",
        x.shape()
    );
    batched(x, rank, f)
}

/// 2-d convolution layer (`torch.nn.Conv2d`).
///
/// # Shapes
/// - `weight`: `[out_channels, in_channels / groups, kh, kw]`
/// - `bias`: `[out_channels]` (absent after [`no_bias`](Conv2d::no_bias))
/// - input `[N, in_channels, H, W]` or unbatched `[in_channels, H, W]`
/// - output `[N, out_channels, OH, OW]`, `OH = floor((H + 2 padding - dilation (kh - 1) - 1) / stride) + 1`
///
/// ```
/// use forge::prelude::*;
/// use forge::nn::Conv2d;
/// let conv = Conv2d::<f32>::new(4, 8, [3, 1], &mut Rng::new(0)).groups(2).dilation(2);
/// assert_eq!(conv.weight.shape(), &[8, 2, 3, 1]);
/// assert_eq!(conv.forward(Tensor::zeros(&[1, 4, 9, 9])).shape(), &[1, 8, 5, 9]);
/// ```
///
/// # Int8
/// [`quantize_dynamic`](crate::quant::quantize_dynamic) converts the weight
/// of a one-group layer to int8; `weight` is then empty
/// (`[out_channels, in_channels, 0, 0]`) and the state dict holds the
/// integer values as `weight` and their scales as `weight_scale`.
///
/// # Fp8
/// [`to_fp8`](crate::quant::to_fp8) keeps the weight as 8-bit floats
/// ([`Conv2d::fp8`]), decoded on each call in the packing step of the
/// direct kernel or of im2col + gemm (into the f32 weight, for the
/// other paths): the output is the f32 layer's with the decoded weight,
/// bit for bit (inference only).
#[derive(Clone, Debug)]
pub struct Conv2d<E: Float = f32> {
    /// `[out_channels, in_channels / groups, kh, kw]`
    /// (`[out_channels, in_channels, 0, 0]` once quantized).
    pub weight: Tensor<E>,
    /// `[out_channels]`, if the layer has a bias.
    pub bias: Option<Tensor<E>>,
    /// Stride (rows, columns).
    pub stride: [usize; 2],
    /// Zero padding on each side (rows, columns).
    pub padding: [usize; 2],
    /// Kernel dilation (rows, columns).
    pub dilation: [usize; 2],
    /// Channel groups.
    pub groups: usize,
    /// The int8 weight, once quantized (see `conv2d_int8.rs`).
    pub(crate) int8: Option<std::sync::Arc<crate::quant::Int8Weight>>,
    /// The 8-bit float weight, once converted (see `conv2d_fp8.rs`).
    pub(crate) fp8: Option<std::sync::Arc<crate::quant::Fp8Weight>>,
}

impl<E: Float> Conv2d<E> {
    /// A trainable layer with stride 1, no padding, dilation 1, one group
    /// and a bias, initialised as PyTorch does (weight and bias
    /// `U(-1/sqrt(fan_in), 1/sqrt(fan_in))`, `fan_in = in_channels kh kw`).
    ///
    /// # Panics
    /// When a size is zero.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let conv = forge::nn::Conv2d::<f64>::new(2, 3, 2, &mut Rng::new(1));
    /// assert_eq!(conv.weight.shape(), &[3, 2, 2, 2]);
    /// assert!(conv.weight.to_vec().iter().all(|w| w.abs() <= 1.0 / 8f64.sqrt()));
    /// ```
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        kernel: impl IntoPair,
        rng: &mut Rng,
    ) -> Self {
        let k = kernel.into_pair();
        let (weight, bias) = new_params("Conv2d", in_channels, out_channels, &k, false, rng);
        Self::with_weights(weight, bias)
    }

    /// A layer with the given weight `[out, in / groups, kh, kw]` and
    /// optional bias `[out]`, used as given, with stride 1, no padding,
    /// dilation 1 and one group (set them with the builder methods).
    ///
    /// # Errors
    /// [`ForgeError::Shape`] when the weight is not 4-d or the bias is not `[out]`.
    ///
    /// ```
    /// let w = forge::Tensor::<f32>::ones(&[2, 1, 1, 1]);
    /// let conv = forge::nn::Conv2d::from_weights(w, None).unwrap();
    /// assert_eq!(conv.out_channels(), 2);
    /// ```
    pub fn from_weights(weight: Tensor<E>, bias: Option<Tensor<E>>) -> Result<Self> {
        check_weights("Conv2d", &weight, &bias, 4, |s| s[0])?;
        Ok(Self::with_weights(weight, bias))
    }

    /// Stride 1, no padding, dilation 1, one group.
    fn with_weights(weight: Tensor<E>, bias: Option<Tensor<E>>) -> Self {
        Conv2d {
            weight,
            bias,
            stride: [1, 1],
            padding: [0, 0],
            dilation: [1, 1],
            groups: 1,
            int8: None,
            fp8: None,
        }
    }

    size_setters! {
        impl IntoPair, IntoPair::into_pair,
        "forge::nn::Conv2d::<f32>::new(1, 1, 3, &mut forge::Rng::new(0))", "[2, 2]";
        stride: "the stride (rows, columns)";
        padding: "the zero padding on each side (rows, columns)";
        dilation: "the kernel dilation (rows, columns)";
    }

    conv_channels! {
        "Conv2d", 1, "out_channels";
        /// Splits the channels into `groups` groups, re-deriving the freshly
        /// initialised weight as `[out, in / groups, kh, kw]` with the grouped
        /// layer's default distribution. Call it on a new layer (with one group).
        ///
        /// # Panics
        /// When the layer already has groups, or `in_channels` or
        /// `out_channels` is not divisible by `groups`.
        ///
        /// ```
        /// let c = forge::nn::Conv2d::<f32>::new(4, 6, 3, &mut forge::Rng::new(0)).groups(2);
        /// assert_eq!(c.weight.shape(), &[6, 2, 3, 3]);
        /// ```
        groups;
        /// Removes the bias.
        ///
        /// ```
        /// let c = forge::nn::Conv2d::<f32>::new(1, 1, 3, &mut forge::Rng::new(0)).no_bias();
        /// assert!(c.bias.is_none());
        /// ```
        no_bias;
        /// The number of input channels (`weight.shape()[1] * groups`).
        ///
        /// ```
        /// assert_eq!(forge::nn::Conv2d::<f32>::new(3, 8, 3, &mut forge::Rng::new(0)).in_channels(), 3);
        /// ```
        in_channels;
        /// The number of output channels (`weight.shape()[0]`).
        ///
        /// ```
        /// assert_eq!(forge::nn::Conv2d::<f32>::new(3, 8, 3, &mut forge::Rng::new(0)).out_channels(), 8);
        /// ```
        out_channels;
    }
}

impl<E: Float> Conv2d<E> {
    /// `act` applied to [`forward`](Forward::forward)`(x)`, the same values
    /// (bit for bit). Outside autograd, for an `f32` layer whose weight is
    /// not quantized, the convolution applies the activation itself (in
    /// its product's epilogue, on each block of outputs while it is in
    /// cache; see `Tensor::conv2d_then`) instead of as an op of its own,
    /// unless a [`summary`](crate::nn::summary) is recording outputs,
    /// which must see the layer's own.
    ///
    /// ```
    /// use forge::nn::{Activation, Conv2d, Forward};
    /// let mut rng = forge::Rng::new(0);
    /// let conv = Conv2d::<f32>::new(3, 8, 3, &mut rng).padding(1);
    /// let x = forge::Tensor::<f32>::normal(&[2, 3, 8, 8], 0.0, 1.0, &mut rng);
    /// let fused = forge::no_grad(|| conv.forward_activated(x.clone(), Activation::Relu));
    /// assert_eq!(fused.to_vec(), conv.forward(x).relu().to_vec());
    /// ```
    ///
    /// # Panics
    /// As [`forward`](Forward::forward).
    #[track_caller]
    pub fn forward_activated(&self, x: Tensor<E>, act: Activation) -> Tensor<E> {
        if self.int8.is_some() || self.fp8.is_some() || summary_running() {
            return act.apply(&self.forward(x));
        }
        let channels = (self.in_channels(), self.out_channels());
        let k = &self.weight.shape()[2..];
        let (w, b) = (&self.weight, self.bias.as_ref());
        let (s, p, d, g) = (self.stride, self.padding, self.dilation, self.groups);
        conv_forward("Conv2d", channels, &k, "H, W", x, |x| {
            x.conv2d_then(w, b, s, p, d, g, act.f32_in_place())
                .unwrap_or_else(|| act.apply(&x.conv2d(w, b, s, p, d, g)))
        })
    }
}

impl<E: Float> Forward<Tensor<E>> for Conv2d<E> {
    type Output = Tensor<E>;

    /// The convolution of `x` (`[N, C, H, W]` or `[C, H, W]`).
    ///
    /// # Panics
    /// When `x` has the wrong rank or number of channels (the message names
    /// the layer, the expected and the received shapes), or is smaller than
    /// the dilated kernel.
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let channels = (self.in_channels(), self.out_channels());
        if let Some(q) = &self.int8 {
            let k = &q.shape()[2..];
            let y = conv_forward("Conv2d", channels, &k, "H, W", x, |x| {
                self.forward_int8(q, x)
            });
            return record_output(self, y);
        }
        if let Some(q) = &self.fp8 {
            let y = self.forward_fp8(q, x);
            return record_output(self, y);
        }
        let k = &self.weight.shape()[2..];
        let y = conv_forward("Conv2d", channels, &k, "H, W", x, |x| {
            x.conv2d(
                &self.weight,
                self.bias.as_ref(),
                self.stride,
                self.padding,
                self.dilation,
                self.groups,
            )
        });
        record_output(self, y)
    }
}

/// 1-d convolution layer (`torch.nn.Conv1d`).
///
/// # Shapes
/// - `weight`: `[out_channels, in_channels / groups, k]`
/// - `bias`: `[out_channels]`
/// - input `[N, in_channels, L]` or unbatched `[in_channels, L]`
/// - output `[N, out_channels, OL]`, `OL = floor((L + 2 padding - dilation (k - 1) - 1) / stride) + 1`
///
/// ```
/// use forge::prelude::*;
/// let conv = forge::nn::Conv1d::<f32>::new(3, 4, 3, &mut Rng::new(0)).stride(2).padding(1);
/// assert_eq!(conv.forward(Tensor::zeros(&[2, 3, 11])).shape(), &[2, 4, 6]);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct Conv1d<E: Float = f32> {
    /// `[out_channels, in_channels / groups, k]`.
    pub weight: Tensor<E>,
    /// `[out_channels]`, if the layer has a bias.
    pub bias: Option<Tensor<E>>,
    /// Stride.
    #[skip]
    pub stride: usize,
    /// Zero padding on each side.
    #[skip]
    pub padding: usize,
    /// Kernel dilation.
    #[skip]
    pub dilation: usize,
    /// Channel groups.
    #[skip]
    pub groups: usize,
}

impl<E: Float> Conv1d<E> {
    /// A trainable layer with stride 1, no padding, dilation 1, one group
    /// and a bias, initialised as PyTorch does (`fan_in = in_channels k`).
    ///
    /// # Panics
    /// When a size is zero.
    ///
    /// ```
    /// let conv = forge::nn::Conv1d::<f32>::new(2, 3, 5, &mut forge::Rng::new(0));
    /// assert_eq!(conv.weight.shape(), &[3, 2, 5]);
    /// ```
    pub fn new(in_channels: usize, out_channels: usize, kernel: usize, rng: &mut Rng) -> Self {
        let (weight, bias) = new_params("Conv1d", in_channels, out_channels, &[kernel], false, rng);
        Self::with_weights(weight, bias)
    }

    /// A layer with the given weight `[out, in / groups, k]` and optional
    /// bias `[out]`, used as given.
    ///
    /// # Errors
    /// [`ForgeError::Shape`] when the weight is not 3-d or the bias is not `[out]`.
    ///
    /// ```
    /// let w = forge::Tensor::<f32>::ones(&[2, 1, 3]);
    /// assert!(forge::nn::Conv1d::from_weights(w, None).is_ok());
    /// ```
    pub fn from_weights(weight: Tensor<E>, bias: Option<Tensor<E>>) -> Result<Self> {
        check_weights("Conv1d", &weight, &bias, 3, |s| s[0])?;
        Ok(Self::with_weights(weight, bias))
    }

    /// Stride 1, no padding, dilation 1, one group.
    fn with_weights(weight: Tensor<E>, bias: Option<Tensor<E>>) -> Self {
        Conv1d {
            weight,
            bias,
            stride: 1,
            padding: 0,
            dilation: 1,
            groups: 1,
        }
    }

    size_setters! {
        usize, std::convert::identity,
        "forge::nn::Conv1d::<f32>::new(1, 1, 3, &mut forge::Rng::new(0))", "2";
        stride: "the stride";
        padding: "the zero padding on each side";
        dilation: "the kernel dilation";
    }

    conv_channels! {
        "Conv1d", 1, "out_channels";
        /// Splits the channels into `groups` groups (see [`Conv2d::groups`]).
        ///
        /// # Panics
        /// When the layer already has groups, or a channel count is not
        /// divisible by `groups`.
        ///
        /// ```
        /// let c = forge::nn::Conv1d::<f32>::new(4, 4, 3, &mut forge::Rng::new(0)).groups(4);
        /// assert_eq!(c.weight.shape(), &[4, 1, 3]);
        /// ```
        groups;
        /// Removes the bias.
        ///
        /// ```
        /// let c = forge::nn::Conv1d::<f32>::new(1, 1, 3, &mut forge::Rng::new(0)).no_bias();
        /// assert!(c.bias.is_none());
        /// ```
        no_bias;
        /// The number of input channels.
        ///
        /// ```
        /// assert_eq!(forge::nn::Conv1d::<f32>::new(3, 8, 3, &mut forge::Rng::new(0)).in_channels(), 3);
        /// ```
        in_channels;
        /// The number of output channels.
        ///
        /// ```
        /// assert_eq!(forge::nn::Conv1d::<f32>::new(3, 8, 3, &mut forge::Rng::new(0)).out_channels(), 8);
        /// ```
        out_channels;
    }
}

impl<E: Float> Forward<Tensor<E>> for Conv1d<E> {
    type Output = Tensor<E>;

    /// The convolution of `x` (`[N, C, L]` or `[C, L]`).
    ///
    /// # Panics
    /// When `x` has the wrong rank or number of channels (the message names
    /// the layer, the expected and the received shapes), or is shorter than
    /// the dilated kernel.
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let channels = (self.in_channels(), self.out_channels());
        let k = self.weight.shape()[2];
        let y = conv_forward("Conv1d", channels, &k, "L", x, |x| {
            x.conv1d(
                &self.weight,
                self.bias.as_ref(),
                self.stride,
                self.padding,
                self.dilation,
                self.groups,
            )
        });
        record_output(self, y)
    }
}

#[cfg(test)]
mod tests {
    use crate::cpu::conv::{direct_preferred, ConvGeom};
    use crate::nn::{Conv2d, Forward, Layer};
    use crate::tensor::{Rng, Tensor};
    use crate::{no_grad, optim::Sgd};

    /// The no-grad output of `conv` and of a layer built fresh from its
    /// values (whose packing cannot be stale) are the same bits.
    fn cached_equals_fresh(conv: &Conv2d<f32>, x: &Tensor<f32>, what: &str) {
        let got = no_grad(|| conv.forward(x.clone())).to_vec();
        // new storages holding copies of the values (a state-dict load
        // would share the storages, and with them the packing)
        let copy = |t: &Tensor<f32>| Tensor::from_vec(t.to_vec(), t.shape());
        let mut fresh = Conv2d::<f32>::new(8, 32, 3, &mut Rng::new(0)).padding(1);
        fresh.weight = copy(&conv.weight);
        fresh.bias = conv.bias.as_ref().map(copy);
        let want = no_grad(|| fresh.forward(x.clone())).to_vec();
        let same = got
            .iter()
            .zip(&want)
            .all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(
            same,
            "no-grad conv2d used stale packed weights after {what}"
        );
    }

    /// A no-grad `f32` convolution of a VGG-style layer (many channels on a
    /// 16x16 or 8x8 plane, batch 16, where `direct_preferred_f32` takes
    /// im2col + gemm) gives the recording path's bits, at 1 and 2 threads,
    /// with and without a bias.
    #[test]
    fn no_grad_wide_planes_match_the_recording_path() {
        use crate::cpu::conv::direct_preferred_f32;
        let mut rng = Rng::new(5);
        for (c, o, s) in [(64, 72, 16), (96, 40, 8)] {
            let geom =
                ConvGeom::new([16, c, s, s], [o, c, 3, 3], [1, 1], [1, 1], [1, 1], 1).unwrap();
            assert!(direct_preferred(&geom) && !direct_preferred_f32(&geom));
            let x = Tensor::<f32>::normal(&[16, c, s, s], 0.0, 1.0, &mut rng);
            for bias in [true, false] {
                let mut conv = Conv2d::<f32>::new(c, o, 3, &mut rng).padding(1);
                if !bias {
                    conv = conv.no_bias();
                }
                let bits =
                    |t: Tensor<f32>| t.to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                crate::cpu::set_num_threads(1);
                let want = bits(conv.forward(x.clone()));
                for threads in [1, 2] {
                    crate::cpu::set_num_threads(threads);
                    let got = bits(no_grad(|| conv.forward(x.clone())));
                    assert!(
                        got == want,
                        "{c}->{o} on {s}x{s}, bias {bias}, {threads} threads"
                    );
                }
            }
        }
        crate::cpu::set_num_threads(1);
    }

    /// A no-grad `f32` convolution at batch 1 runs the direct kernel
    /// (`ops/conv_infer.rs`) with
    /// the weight packed once and kept on the weight's storage: after an
    /// in-place optimizer step, a copy-on-write one and a state-dict load
    /// it packs the new values.
    #[test]
    fn every_weight_change_repacks() {
        let mut rng = Rng::new(21);
        let mut conv = Conv2d::<f32>::new(8, 32, 3, &mut rng).padding(1);
        let x = Tensor::<f32>::uniform(&[1, 8, 6, 6], -1.0, 1.0, &mut rng);
        let geom = ConvGeom::new([1, 8, 6, 6], [32, 8, 3, 3], [1, 1], [1, 1], [1, 1], 1).unwrap();
        assert!(direct_preferred(&geom), "the test needs the direct path");
        cached_equals_fresh(&conv, &x, "nothing");
        let grads = |conv: &Conv2d<f32>| conv.forward(x.clone()).sum().backward();
        let g = grads(&conv);
        let v = conv.weight.storage.version();
        Sgd::<f32>::new(0.5).step(&mut conv, &g).unwrap();
        assert!(
            conv.weight.storage.version() != v,
            "the step wrote in place"
        );
        cached_equals_fresh(&conv, &x, "an in-place optimizer step");
        let old = conv.weight.clone();
        let g = grads(&conv);
        Sgd::<f32>::new(0.5).step(&mut conv, &g).unwrap();
        assert!(!std::sync::Arc::ptr_eq(&old.storage, &conv.weight.storage));
        cached_equals_fresh(&conv, &x, "a copy-on-write optimizer step");
        let other = Conv2d::<f32>::new(8, 32, 3, &mut rng).padding(1);
        conv.load_state_dict(&other.state_dict()).unwrap();
        cached_equals_fresh(&conv, &x, "load_state_dict");
    }

    /// `forward_activated` outside autograd equals the layer followed by
    /// the activation op, bit for bit, on every path a convolution takes:
    /// im2col with the product stored straight into the output (16x16 and
    /// 32x32 planes, the chunks of images serial and, at two threads, in
    /// parallel), im2col through a product buffer (a strided convolution
    /// whose planes are not whole vectors), several groups, the
    /// small-channel kernels, the direct kernel (8x8 planes), an unbatched
    /// input; with and without bias, ReLU and GELU, 1 and 2 threads; also
    /// while recording (not fused) and in f64 (not fused).
    #[test]
    fn forward_activated_equals_the_layer_then_the_activation() {
        let _threads = crate::cpu::threads::lock_thread_count();
        use crate::nn::Activation;
        let mut rng = Rng::new(21);
        let bits = |t: &Tensor<f32>| t.to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        // (x shape, out channels, kernel, stride, padding, groups)
        let cases: [([usize; 4], usize, usize, usize, usize, usize); 7] = [
            ([2, 16, 32, 32], 32, 3, 1, 1, 1),
            ([3, 24, 16, 16], 40, 3, 1, 1, 1),
            ([32, 32, 16, 16], 32, 3, 1, 1, 1),
            ([5, 8, 13, 11], 12, 3, 2, 1, 1),
            ([4, 8, 9, 9], 12, 3, 1, 1, 2),
            ([6, 1, 28, 28], 6, 5, 1, 2, 1),
            ([16, 64, 8, 8], 64, 3, 1, 1, 1),
        ];
        for (xs, o, k, stride, pad, groups) in cases {
            for with_bias in [true, false] {
                let mut conv = Conv2d::<f32>::new(xs[1], o, k, &mut rng)
                    .stride(stride)
                    .padding(pad)
                    .groups(groups);
                if !with_bias {
                    conv = conv.no_bias();
                }
                let x = Tensor::<f32>::normal(&xs, 0.0, 1.0, &mut rng);
                for threads in [1, 2] {
                    crate::cpu::set_num_threads(threads);
                    for act in [Activation::Relu, Activation::Gelu] {
                        let want = no_grad(|| act.apply(&conv.forward(x.clone())));
                        let got = no_grad(|| conv.forward_activated(x.clone(), act));
                        assert_eq!(got.shape(), want.shape());
                        assert!(
                            bits(&got) == bits(&want),
                            "{xs:?} -> {o}, {k}x{k} stride {stride} groups {groups} \
                             bias {with_bias} {act:?} {threads} threads"
                        );
                    }
                }
            }
        }
        crate::cpu::set_num_threads(1);
        // the packed weight kept on its storage follows an in-place step
        let mut conv = Conv2d::<f32>::new(32, 64, 3, &mut rng).padding(1);
        let x = Tensor::<f32>::normal(&[4, 32, 16, 16], 0.0, 1.0, &mut rng);
        for step in 0..3 {
            let got = no_grad(|| conv.forward_activated(x.clone(), Activation::Relu));
            let want = no_grad(|| conv.forward(x.clone()).relu());
            assert!(bits(&got) == bits(&want), "after {step} steps");
            let g = conv.forward(x.clone()).sum().backward();
            Sgd::<f32>::new(0.5).step(&mut conv, &g).unwrap();
        }
        // unbatched
        let conv = Conv2d::<f32>::new(16, 32, 3, &mut rng).padding(1);
        let x = Tensor::<f32>::normal(&[16, 32, 32], 0.0, 1.0, &mut rng);
        let got = no_grad(|| conv.forward_activated(x.clone(), Activation::Relu));
        let want = no_grad(|| conv.forward(x.clone()).relu());
        assert_eq!(got.shape(), &[32, 32, 32]);
        assert!(bits(&got) == bits(&want));
        // recording: the two ops, with their gradient
        let got = conv.forward_activated(x.clone(), Activation::Relu);
        assert!(got.is_tracked());
        assert!(bits(&got) == bits(&conv.forward(x).relu()));
        // f64
        let conv = Conv2d::<f64>::new(4, 8, 3, &mut rng).padding(1);
        let x = Tensor::<f64>::normal(&[2, 4, 16, 16], 0.0, 1.0, &mut rng);
        let got = no_grad(|| conv.forward_activated(x.clone(), Activation::Gelu));
        assert_eq!(got.to_vec(), no_grad(|| conv.forward(x).gelu()).to_vec());
    }
}
