//! The 3-d convolution layer [`Conv3d`] (`torch.nn.Conv3d`), with
//! PyTorch's parameter names, layout and default initialisation, and
//! [`IntoTriple`], a size given once or per axis.
//!
//! ```
//! use forge::prelude::*;
//! use forge::nn::Conv3d;
//! let conv = Conv3d::<f32>::new(2, 4, 3, &mut Rng::new(0)).padding(1);
//! assert_eq!(conv.forward(Tensor::zeros(&[1, 2, 4, 5, 6])).shape(), &[1, 4, 4, 5, 6]);
//! ```

use super::builder::{conv_channels, size_setters};
use super::conv::{check_weights, conv_forward, grouped, new_params};
use super::forward::Forward;
use super::summary::record_output;
use crate::error::Result;
use crate::tensor::{Float, Rng, Tensor};
use forge_macros::Layer;

/// A size given as one number for all three spatial dimensions (`3`) or one
/// per dimension (`[3, 2, 2]` or `(3, 2, 2)`).
pub trait IntoTriple {
    /// The size for (depth, rows, columns).
    ///
    /// ```
    /// use forge::nn::IntoTriple;
    /// assert_eq!(3.into_triple(), [3, 3, 3]);
    /// assert_eq!((1, 2, 3).into_triple(), [1, 2, 3]);
    /// ```
    fn into_triple(self) -> [usize; 3];
}

impl IntoTriple for usize {
    fn into_triple(self) -> [usize; 3] {
        [self; 3]
    }
}

impl IntoTriple for [usize; 3] {
    fn into_triple(self) -> [usize; 3] {
        self
    }
}

impl IntoTriple for (usize, usize, usize) {
    fn into_triple(self) -> [usize; 3] {
        [self.0, self.1, self.2]
    }
}

/// 3-d convolution layer (`torch.nn.Conv3d`).
///
/// # Shapes
/// - `weight`: `[out_channels, in_channels / groups, kd, kh, kw]`
/// - `bias`: `[out_channels]` (absent after [`no_bias`](Conv3d::no_bias))
/// - input `[N, in_channels, D, H, W]` or unbatched `[in_channels, D, H, W]`
/// - output `[N, out_channels, OD, OH, OW]`, per axis
///   `floor((D + 2 padding - dilation (kd - 1) - 1) / stride) + 1`
///
/// ```
/// use forge::prelude::*;
/// let conv = forge::nn::Conv3d::<f32>::new(4, 6, [1, 3, 3], &mut Rng::new(0)).groups(2).stride(2);
/// assert_eq!(conv.weight.shape(), &[6, 2, 1, 3, 3]);
/// assert_eq!(conv.forward(Tensor::zeros(&[4, 3, 7, 7])).shape(), &[6, 2, 3, 3]);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct Conv3d<E: Float = f32> {
    /// `[out_channels, in_channels / groups, kd, kh, kw]`.
    pub weight: Tensor<E>,
    /// `[out_channels]`, if the layer has a bias.
    pub bias: Option<Tensor<E>>,
    /// Stride (depth, rows, columns).
    #[skip]
    pub stride: [usize; 3],
    /// Zero padding on each side (depth, rows, columns).
    #[skip]
    pub padding: [usize; 3],
    /// Kernel dilation (depth, rows, columns).
    #[skip]
    pub dilation: [usize; 3],
    /// Channel groups.
    #[skip]
    pub groups: usize,
}

impl<E: Float> Conv3d<E> {
    /// A trainable layer with stride 1, no padding, dilation 1, one group
    /// and a bias, initialised as PyTorch does (weight and bias
    /// `U(-1/sqrt(fan_in), 1/sqrt(fan_in))`, `fan_in = in_channels kd kh kw`).
    ///
    /// # Panics
    /// When a size is zero.
    ///
    /// ```
    /// let conv = forge::nn::Conv3d::<f64>::new(2, 3, 2, &mut forge::Rng::new(1));
    /// assert_eq!(conv.weight.shape(), &[3, 2, 2, 2, 2]);
    /// assert!(conv.weight.to_vec().iter().all(|w| w.abs() <= 0.25));
    /// ```
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        kernel: impl IntoTriple,
        rng: &mut Rng,
    ) -> Self {
        let k = kernel.into_triple();
        let (weight, bias) = new_params("Conv3d", in_channels, out_channels, &k, false, rng);
        Self::with_weights(weight, bias)
    }

    /// A layer with the given weight `[out, in / groups, kd, kh, kw]` and
    /// optional bias `[out]`, used as given, with stride 1, no padding,
    /// dilation 1 and one group (set them with the builder methods; set
    /// `groups` on the field for grouped weights).
    ///
    /// # Errors
    /// [`ForgeError::Shape`](crate::ForgeError::Shape) when the weight is
    /// not 5-d or the bias is not `[out]`.
    ///
    /// ```
    /// let w = forge::Tensor::<f32>::ones(&[2, 1, 1, 1, 1]);
    /// let conv = forge::nn::Conv3d::from_weights(w, None).unwrap();
    /// assert_eq!(conv.out_channels(), 2);
    /// ```
    pub fn from_weights(weight: Tensor<E>, bias: Option<Tensor<E>>) -> Result<Self> {
        check_weights("Conv3d", &weight, &bias, 5, |s| s[0])?;
        Ok(Self::with_weights(weight, bias))
    }

    fn with_weights(weight: Tensor<E>, bias: Option<Tensor<E>>) -> Self {
        Conv3d {
            weight,
            bias,
            stride: [1; 3],
            padding: [0; 3],
            dilation: [1; 3],
            groups: 1,
        }
    }

    size_setters! {
        impl IntoTriple, IntoTriple::into_triple,
        "forge::nn::Conv3d::<f32>::new(1, 1, 3, &mut forge::Rng::new(0))", "[2, 2, 2]";
        stride: "the stride (depth, rows, columns)";
        padding: "the zero padding on each side (depth, rows, columns)";
        dilation: "the kernel dilation (depth, rows, columns)";
    }

    conv_channels! {
        "Conv3d", 1, "out_channels";
        /// Splits the channels into `groups` groups, re-deriving the freshly
        /// initialised weight as `[out, in / groups, kd, kh, kw]` with the
        /// grouped layer's default distribution. Call it on a new layer.
        ///
        /// # Panics
        /// When the layer already has groups, or `in_channels` or
        /// `out_channels` is not divisible by `groups`.
        ///
        /// ```
        /// let c = forge::nn::Conv3d::<f32>::new(4, 6, 3, &mut forge::Rng::new(0)).groups(2);
        /// assert_eq!(c.weight.shape(), &[6, 2, 3, 3, 3]);
        /// ```
        groups;
        /// Removes the bias.
        ///
        /// ```
        /// let c = forge::nn::Conv3d::<f32>::new(1, 1, 3, &mut forge::Rng::new(0)).no_bias();
        /// assert!(c.bias.is_none());
        /// ```
        no_bias;
        /// The number of input channels (`weight.shape()[1] * groups`).
        ///
        /// ```
        /// assert_eq!(forge::nn::Conv3d::<f32>::new(3, 8, 3, &mut forge::Rng::new(0)).in_channels(), 3);
        /// ```
        in_channels;
        /// The number of output channels (`weight.shape()[0]`).
        ///
        /// ```
        /// assert_eq!(forge::nn::Conv3d::<f32>::new(3, 8, 3, &mut forge::Rng::new(0)).out_channels(), 8);
        /// ```
        out_channels;
    }
}

impl<E: Float> Forward<Tensor<E>> for Conv3d<E> {
    type Output = Tensor<E>;

    /// The convolution of `x` (`[N, C, D, H, W]` or `[C, D, H, W]`).
    ///
    /// # Panics
    /// When `x` has the wrong rank or number of channels (the message names
    /// the layer, the expected and the received shapes), or is smaller than
    /// the dilated kernel.
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let channels = (self.in_channels(), self.out_channels());
        let k = &self.weight.shape()[2..];
        let y = conv_forward("Conv3d", channels, &k, "D, H, W", x, |x| {
            x.conv3d(
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
