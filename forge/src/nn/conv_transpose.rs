//! The transposed convolution layer [`ConvTranspose2d`], with PyTorch's
//! parameter names, layout `[in, out / groups, kh, kw]` and default
//! initialisation (fan-in from weight dimension 1).

use super::builder::{conv_channels, size_setters};
use super::conv::{check_weights, conv_forward, grouped, new_params, IntoPair};
use super::forward::Forward;
use super::summary::record_output;
use crate::error::Result;
use crate::tensor::{Float, Rng, Tensor};
use forge_macros::Layer;

/// 2-d transposed convolution layer (`torch.nn.ConvTranspose2d`).
///
/// # Shapes
/// - `weight`: `[in_channels, out_channels / groups, kh, kw]`
/// - `bias`: `[out_channels]`
/// - input `[N, in_channels, H, W]` or unbatched `[in_channels, H, W]`
/// - output `[N, out_channels, OH, OW]`,
///   `OH = (H - 1) stride - 2 padding + dilation (kh - 1) + output_padding + 1`
///
/// PyTorch initialises it with the fan-in computed from weight dimension 1:
/// `U(-b, b)`, `b = 1/sqrt(out_channels / groups * kh * kw)`.
///
/// ```
/// use forge::prelude::*;
/// let up = forge::nn::ConvTranspose2d::<f32>::new(8, 4, 3, &mut Rng::new(0))
///     .stride(2).padding(1).output_padding(1);
/// assert_eq!(up.forward(Tensor::zeros(&[1, 8, 5, 5])).shape(), &[1, 4, 10, 10]);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct ConvTranspose2d<E: Float = f32> {
    /// `[in_channels, out_channels / groups, kh, kw]`.
    pub weight: Tensor<E>,
    /// `[out_channels]`, if the layer has a bias.
    pub bias: Option<Tensor<E>>,
    /// Stride (rows, columns).
    #[skip]
    pub stride: [usize; 2],
    /// Padding removed from each side of the output (rows, columns).
    #[skip]
    pub padding: [usize; 2],
    /// Extra rows / columns added to one side of the output.
    #[skip]
    pub output_padding: [usize; 2],
    /// Kernel dilation (rows, columns).
    #[skip]
    pub dilation: [usize; 2],
    /// Channel groups.
    #[skip]
    pub groups: usize,
}

impl<E: Float> ConvTranspose2d<E> {
    /// A trainable layer with stride 1, no padding or output padding,
    /// dilation 1, one group and a bias, initialised as PyTorch does.
    ///
    /// # Panics
    /// When a size is zero.
    ///
    /// ```
    /// let up = forge::nn::ConvTranspose2d::<f64>::new(2, 4, 2, &mut forge::Rng::new(0));
    /// assert_eq!(up.weight.shape(), &[2, 4, 2, 2]);
    /// assert!(up.weight.to_vec().iter().all(|w| w.abs() <= 0.25)); // fan_in 4 * 2 * 2
    /// ```
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        kernel: impl IntoPair,
        rng: &mut Rng,
    ) -> Self {
        let k = kernel.into_pair();
        let (weight, bias) =
            new_params("ConvTranspose2d", in_channels, out_channels, &k, true, rng);
        Self::with_weights(weight, bias)
    }

    /// A layer with the given weight `[in, out / groups, kh, kw]` and
    /// optional bias `[out]` (one group; set others with
    /// [`groups`](Self::groups) only on a new layer), used as given.
    ///
    /// # Errors
    /// [`ForgeError::Shape`](crate::ForgeError::Shape) when the weight is not 4-d or the bias is not
    /// `[weight.shape()[1]]`.
    ///
    /// ```
    /// let w = forge::Tensor::<f32>::ones(&[2, 3, 1, 1]);
    /// let up = forge::nn::ConvTranspose2d::from_weights(w, None).unwrap();
    /// assert_eq!(up.out_channels(), 3);
    /// ```
    pub fn from_weights(weight: Tensor<E>, bias: Option<Tensor<E>>) -> Result<Self> {
        check_weights("ConvTranspose2d", &weight, &bias, 4, |s| s[1])?;
        Ok(Self::with_weights(weight, bias))
    }

    /// Stride 1, no padding or output padding, dilation 1, one group.
    fn with_weights(weight: Tensor<E>, bias: Option<Tensor<E>>) -> Self {
        ConvTranspose2d {
            weight,
            bias,
            stride: [1, 1],
            padding: [0, 0],
            output_padding: [0, 0],
            dilation: [1, 1],
            groups: 1,
        }
    }

    size_setters! {
        impl IntoPair, IntoPair::into_pair,
        "forge::nn::ConvTranspose2d::<f32>::new(1, 1, 3, &mut forge::Rng::new(0))", "[2, 2]";
        stride: "the stride (rows, columns)";
        padding: "the padding removed from each side of the output (rows, columns)";
        output_padding: "the output padding (must stay below the stride or the dilation)";
        dilation: "the kernel dilation (rows, columns)";
    }

    conv_channels! {
        "ConvTranspose2d", 0, "in_channels";
        /// Splits the channels into `groups` groups, re-deriving the freshly
        /// initialised weight as `[in, out / groups, kh, kw]` with the grouped
        /// layer's default distribution. Call it on a new layer.
        ///
        /// # Panics
        /// When the layer already has groups, or a channel count is not
        /// divisible by `groups`.
        ///
        /// ```
        /// let c = forge::nn::ConvTranspose2d::<f32>::new(4, 6, 3, &mut forge::Rng::new(0)).groups(2);
        /// assert_eq!(c.weight.shape(), &[4, 3, 3, 3]);
        /// assert_eq!(c.out_channels(), 6);
        /// ```
        groups;
        /// Removes the bias.
        ///
        /// ```
        /// let c = forge::nn::ConvTranspose2d::<f32>::new(1, 1, 3, &mut forge::Rng::new(0)).no_bias();
        /// assert!(c.bias.is_none());
        /// ```
        no_bias;
        /// The number of input channels (`weight.shape()[0]`).
        ///
        /// ```
        /// assert_eq!(forge::nn::ConvTranspose2d::<f32>::new(3, 8, 3, &mut forge::Rng::new(0)).in_channels(), 3);
        /// ```
        in_channels;
        /// The number of output channels (`weight.shape()[1] * groups`).
        ///
        /// ```
        /// assert_eq!(forge::nn::ConvTranspose2d::<f32>::new(3, 8, 3, &mut forge::Rng::new(0)).out_channels(), 8);
        /// ```
        out_channels;
    }
}

impl<E: Float> Forward<Tensor<E>> for ConvTranspose2d<E> {
    type Output = Tensor<E>;

    /// The transposed convolution of `x` (`[N, C, H, W]` or `[C, H, W]`).
    ///
    /// # Panics
    /// When `x` has the wrong rank or number of channels (the message names
    /// the layer, the expected and the received shapes), or the output
    /// would be empty.
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let channels = (self.in_channels(), self.out_channels());
        let k = &self.weight.shape()[2..];
        let y = conv_forward("ConvTranspose2d", channels, &k, "H, W", x, |x| {
            x.conv_transpose2d(
                &self.weight,
                self.bias.as_ref(),
                self.stride,
                self.padding,
                self.output_padding,
                self.groups,
                self.dilation,
            )
        });
        record_output(self, y)
    }
}
