//! More layers without tensors: [`Identity`], [`Unflatten`],
//! [`PixelShuffle`], [`PixelUnshuffle`].

use super::forward::Forward;
use super::summary::record_output;
use crate::base::norm_axis;
use crate::tensor::{Float, Tensor};
use forge_macros::Layer;

/// Returns its input unchanged (PyTorch's `nn.Identity`): a placeholder
/// where a model takes an optional layer.
///
/// ```
/// use forge::prelude::*;
/// let x = Tensor::<f32>::ones(&[2, 3]);
/// assert_eq!(forge::nn::Identity.forward(x.clone()).to_vec(), x.to_vec());
/// ```
#[derive(Layer, Clone, Copy, Debug, Default, PartialEq)]
pub struct Identity;

impl<E: Float> Forward<Tensor<E>> for Identity {
    type Output = Tensor<E>;
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        record_output(self, x)
    }
}

/// Splits dimension `dim` into `sizes` (PyTorch's `nn.Unflatten(dim,
/// unflattened_size)`); one size may be -1 (inferred).
///
/// # Shapes
/// Input with `dim` of size `prod(sizes)`; output with `dim` replaced by
/// `sizes`.
///
/// # Panics
/// When `dim` is out of range or the sizes do not fit.
///
/// ```
/// use forge::prelude::*;
/// let u = forge::nn::Unflatten { dim: 1, sizes: vec![2, -1] };
/// assert_eq!(u.forward(Tensor::<f32>::zeros(&[3, 8])).shape(), &[3, 2, 4]);
/// ```
#[derive(Layer, Clone, Debug, PartialEq)]
pub struct Unflatten {
    /// The dimension split.
    #[skip]
    pub dim: isize,
    /// Its new sizes (one may be -1).
    #[skip]
    pub sizes: Vec<isize>,
}

impl<E: Float> Forward<Tensor<E>> for Unflatten {
    type Output = Tensor<E>;
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let axis = norm_axis("Unflatten", self.dim, x.rank());
        let mut shape: Vec<isize> = x.shape()[..axis].iter().map(|&d| d as isize).collect();
        shape.extend(&self.sizes);
        shape.extend(x.shape()[axis + 1..].iter().map(|&d| d as isize));
        let known: isize = self.sizes.iter().filter(|&&s| s != -1).product();
        shape_assert!(
            self.sizes.iter().filter(|&&s| s == -1).count() <= 1
                && known > 0
                && x.shape()[axis] as isize % known == 0
                && (self.sizes.contains(&-1) || known == x.shape()[axis] as isize),
            "Unflatten: dimension {} of shape {:?} does not split into {:?}",
            self.dim,
            x.shape(),
            self.sizes
        );
        record_output(self, x.reshape(&shape))
    }
}

/// `[*, C r^2, H, W]` to `[*, C, H r, W r]` (PyTorch's
/// `nn.PixelShuffle(upscale_factor)`; [`Tensor::pixel_shuffle`]).
///
/// # Panics
/// When the channels are not a multiple of `r^2`.
///
/// ```
/// use forge::prelude::*;
/// let y = forge::nn::PixelShuffle(3).forward(Tensor::<f32>::zeros(&[2, 18, 4, 5]));
/// assert_eq!(y.shape(), &[2, 2, 12, 15]);
/// ```
#[derive(Layer, Clone, Copy, Debug, PartialEq)]
pub struct PixelShuffle(#[skip] pub usize);

impl<E: Float> Forward<Tensor<E>> for PixelShuffle {
    type Output = Tensor<E>;
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        record_output(self, x.pixel_shuffle(self.0))
    }
}

/// `[*, C, H r, W r]` to `[*, C r^2, H, W]` (PyTorch's
/// `nn.PixelUnshuffle(downscale_factor)`; [`Tensor::pixel_unshuffle`]).
///
/// # Panics
/// When the height or width is not a multiple of `r`.
///
/// ```
/// use forge::prelude::*;
/// let y = forge::nn::PixelUnshuffle(2).forward(Tensor::<f32>::zeros(&[1, 3, 4, 6]));
/// assert_eq!(y.shape(), &[1, 12, 2, 3]);
/// ```
#[derive(Layer, Clone, Copy, Debug, PartialEq)]
pub struct PixelUnshuffle(#[skip] pub usize);

impl<E: Float> Forward<Tensor<E>> for PixelUnshuffle {
    type Output = Tensor<E>;
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        record_output(self, x.pixel_unshuffle(self.0))
    }
}
