//! [`Upsample`]: the layer form of [`Tensor::interpolate`], as PyTorch's
//! `nn.Upsample(size, scale_factor, mode, align_corners)`.

use super::forward::Forward;
use super::summary::record_output;
use crate::ops::{Interpolate, InterpolateMode};
use crate::tensor::{Float, Tensor};
use forge_macros::Layer;

/// Resamples the spatial dimensions of `[N, C, *spatial]` inputs to a fixed
/// size or by a fixed factor ([`Tensor::interpolate`]). It holds no tensors.
///
/// # Shapes
/// Input `[N, C, *spatial]` with 1 to 3 spatial dimensions (as the mode
/// requires); output `[N, C, *resampled]`.
///
/// # Panics
/// As [`Tensor::interpolate`], on the first forward.
///
/// ```
/// use forge::nn::Upsample;
/// use forge::ops::InterpolateMode;
/// use forge::prelude::*;
/// let up = Upsample::scale_factor(2.0).mode(InterpolateMode::Bilinear);
/// let y = up.forward(Tensor::<f32>::ones(&[1, 3, 4, 5]));
/// assert_eq!(y.shape(), &[1, 3, 8, 10]);
/// assert!(y.to_vec().iter().all(|&v| (v - 1.0).abs() < 1e-6));
/// ```
#[derive(Layer, Clone, Debug, PartialEq)]
pub struct Upsample {
    /// The options every forward passes to [`Tensor::interpolate`].
    #[skip]
    pub options: Interpolate,
}

impl Upsample {
    /// Upsampling to a fixed spatial `size` (one value for every spatial
    /// dimension, or one per dimension), nearest mode.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let y = forge::nn::Upsample::size(&[3]).forward(Tensor::<f64>::ones(&[1, 1, 2]));
    /// assert_eq!(y.shape(), &[1, 1, 3]);
    /// ```
    pub fn size(size: &[usize]) -> Self {
        Upsample {
            options: Interpolate::size(size),
        }
    }

    /// Upsampling by `factor` along every spatial dimension, nearest mode.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let y = forge::nn::Upsample::scale_factor(2.0).forward(Tensor::<f64>::ones(&[1, 1, 2]));
    /// assert_eq!(y.shape(), &[1, 1, 4]);
    /// ```
    pub fn scale_factor(factor: f64) -> Self {
        Upsample {
            options: Interpolate::scale_factor(factor),
        }
    }

    /// The same layer with another mode.
    ///
    /// ```
    /// use forge::ops::InterpolateMode;
    /// let up = forge::nn::Upsample::scale_factor(2.0).mode(InterpolateMode::Bicubic);
    /// assert_eq!(up.options.mode, InterpolateMode::Bicubic);
    /// ```
    pub fn mode(mut self, mode: InterpolateMode) -> Self {
        self.options.mode = mode;
        self
    }

    /// The same layer with `align_corners` set (interpolating modes only).
    ///
    /// ```
    /// use forge::ops::InterpolateMode;
    /// let up = forge::nn::Upsample::scale_factor(2.0)
    ///     .mode(InterpolateMode::Bilinear)
    ///     .align_corners(true);
    /// assert_eq!(up.options.align_corners, Some(true));
    /// ```
    pub fn align_corners(mut self, align: bool) -> Self {
        self.options.align_corners = Some(align);
        self
    }
}

impl<E: Float> Forward<Tensor<E>> for Upsample {
    type Output = Tensor<E>;
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        record_output(self, x.interpolate(&self.options))
    }
}
