//! The 1-d transposed convolution layer [`ConvTranspose1d`], with
//! PyTorch's parameter names, layout `[in, out / groups, k]` and default
//! initialisation (fan-in from weight dimension 1).

use super::builder::{conv_channels, size_setters};
use super::conv::{check_weights, conv_forward, grouped, new_params};
use super::forward::Forward;
use super::summary::record_output;
use crate::error::Result;
use crate::tensor::{Float, Rng, Tensor};
use forge_macros::Layer;

/// 1-d transposed convolution layer (`torch.nn.ConvTranspose1d`).
///
/// # Shapes
/// - `weight`: `[in_channels, out_channels / groups, k]`
/// - `bias`: `[out_channels]`
/// - input `[N, in_channels, L]` or unbatched `[in_channels, L]`
/// - output `[N, out_channels, OL]`,
///   `OL = (L - 1) stride - 2 padding + dilation (k - 1) + output_padding + 1`
///
/// PyTorch initialises it with the fan-in computed from weight dimension 1:
/// `U(-b, b)`, `b = 1/sqrt(out_channels / groups * k)`.
///
/// ```
/// use forge::prelude::*;
/// let up = forge::nn::ConvTranspose1d::<f32>::new(8, 4, 4, &mut Rng::new(0))
///     .stride(2).padding(1);
/// assert_eq!(up.forward(Tensor::zeros(&[1, 8, 5])).shape(), &[1, 4, 10]);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct ConvTranspose1d<E: Float = f32> {
    /// `[in_channels, out_channels / groups, k]`.
    pub weight: Tensor<E>,
    /// `[out_channels]`, if the layer has a bias.
    pub bias: Option<Tensor<E>>,
    /// Stride.
    #[skip]
    pub stride: usize,
    /// Padding removed from each side of the output.
    #[skip]
    pub padding: usize,
    /// Extra elements added to one side of the output.
    #[skip]
    pub output_padding: usize,
    /// Kernel dilation.
    #[skip]
    pub dilation: usize,
    /// Channel groups.
    #[skip]
    pub groups: usize,
}

impl<E: Float> ConvTranspose1d<E> {
    /// A trainable layer with stride 1, no padding or output padding,
    /// dilation 1, one group and a bias, initialised as PyTorch does.
    ///
    /// # Panics
    /// When a size is zero.
    ///
    /// ```
    /// let up = forge::nn::ConvTranspose1d::<f64>::new(2, 4, 4, &mut forge::Rng::new(0));
    /// assert_eq!(up.weight.shape(), &[2, 4, 4]);
    /// assert!(up.weight.to_vec().iter().all(|w| w.abs() <= 0.25)); // fan_in 4 * 4
    /// ```
    pub fn new(in_channels: usize, out_channels: usize, kernel: usize, rng: &mut Rng) -> Self {
        let (weight, bias) = new_params(
            "ConvTranspose1d",
            in_channels,
            out_channels,
            &[kernel],
            true,
            rng,
        );
        Self::with_weights(weight, bias)
    }

    /// A layer with the given weight `[in, out / groups, k]` and optional
    /// bias `[out]` (one group), used as given.
    ///
    /// # Errors
    /// [`ForgeError::Shape`](crate::ForgeError::Shape) when the weight is
    /// not 3-d or the bias is not `[weight.shape()[1]]`.
    ///
    /// ```
    /// let w = forge::Tensor::<f32>::ones(&[2, 3, 1]);
    /// let up = forge::nn::ConvTranspose1d::from_weights(w, None).unwrap();
    /// assert_eq!(up.out_channels(), 3);
    /// ```
    pub fn from_weights(weight: Tensor<E>, bias: Option<Tensor<E>>) -> Result<Self> {
        check_weights("ConvTranspose1d", &weight, &bias, 3, |s| s[1])?;
        Ok(Self::with_weights(weight, bias))
    }

    /// Stride 1, no padding or output padding, dilation 1, one group.
    fn with_weights(weight: Tensor<E>, bias: Option<Tensor<E>>) -> Self {
        ConvTranspose1d {
            weight,
            bias,
            stride: 1,
            padding: 0,
            output_padding: 0,
            dilation: 1,
            groups: 1,
        }
    }

    size_setters! {
        usize, std::convert::identity,
        "forge::nn::ConvTranspose1d::<f32>::new(1, 1, 3, &mut forge::Rng::new(0))", "2";
        stride: "the stride";
        padding: "the padding removed from each side of the output";
        output_padding: "the output padding (must stay below the stride or the dilation)";
        dilation: "the kernel dilation";
    }

    conv_channels! {
        "ConvTranspose1d", 0, "in_channels";
        /// Splits the channels into `groups` groups, re-deriving the freshly
        /// initialised weight as `[in, out / groups, k]`. Call it on a new
        /// layer.
        ///
        /// # Panics
        /// When the layer already has groups, or a channel count is not
        /// divisible by `groups`.
        ///
        /// ```
        /// let c = forge::nn::ConvTranspose1d::<f32>::new(4, 6, 3, &mut forge::Rng::new(0)).groups(2);
        /// assert_eq!(c.weight.shape(), &[4, 3, 3]);
        /// ```
        groups;
        /// Removes the bias.
        ///
        /// ```
        /// let c = forge::nn::ConvTranspose1d::<f32>::new(1, 1, 3, &mut forge::Rng::new(0)).no_bias();
        /// assert!(c.bias.is_none());
        /// ```
        no_bias;
        /// The number of input channels (`weight.shape()[0]`).
        ///
        /// ```
        /// assert_eq!(forge::nn::ConvTranspose1d::<f32>::new(3, 8, 3, &mut forge::Rng::new(0)).in_channels(), 3);
        /// ```
        in_channels;
        /// The number of output channels (`weight.shape()[1] * groups`).
        ///
        /// ```
        /// assert_eq!(forge::nn::ConvTranspose1d::<f32>::new(3, 8, 3, &mut forge::Rng::new(0)).out_channels(), 8);
        /// ```
        out_channels;
    }
}

impl<E: Float> Forward<Tensor<E>> for ConvTranspose1d<E> {
    type Output = Tensor<E>;

    /// The transposed convolution of `x` (`[N, C, L]` or `[C, L]`).
    ///
    /// # Panics
    /// When `x` has the wrong rank or number of channels (the message names
    /// the layer, the expected and the received shapes), or the output
    /// would be empty.
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let channels = (self.in_channels(), self.out_channels());
        let k = self.weight.shape()[2];
        let y = conv_forward("ConvTranspose1d", channels, &k, "L", x, |x| {
            x.conv_transpose1d(
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
