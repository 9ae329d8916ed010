//! The padding layers of `torch.nn` (`ReflectionPad1d/2d/3d`,
//! `ReplicationPad*`, `CircularPad*`, `ZeroPad*`, `ConstantPad*`): layer
//! forms of [`Tensor::pad_with`]. They hold no tensors.

use super::forward::Forward;
use super::summary::record_output;
use crate::ops::PadMode;
use crate::tensor::{Float, Tensor};
use forge_macros::Layer;

/// F.pad's flat list (last dimension first, `before, after` each) as pairs.
fn pairs(padding: &[usize]) -> Vec<(usize, usize)> {
    padding.chunks(2).map(|p| (p[0], p[1])).collect()
}

macro_rules! pad_layer {
    ($name:ident, $k:literal, $torch:literal, $mode:expr, $doc:literal, $ex:literal) => {
        #[doc = concat!("`nn.", $torch, "`: pads the last ", stringify!($k),
            " dimension(s) ", $doc, " ([`Tensor::pad_with`]).\n\n",
            "# Shapes\nInput of rank ", stringify!($k), " + 1 or ", stringify!($k),
            " + 2 (unbatched or batched); each padded dimension grows by its two paddings.\n\n",
            "# Panics\nAs [`Tensor::pad_with`], on forward.\n\n",
            "```\nuse forge::prelude::*;\n", $ex, "\n```")]
        #[derive(Layer, Clone, Debug, PartialEq)]
        pub struct $name {
            /// The paddings in `F.pad`'s order: `(before, after)` of the
            /// last dimension, then of the one before, ...
            #[skip]
            pub padding: [usize; 2 * $k],
            /// The fill.
            #[skip]
            pub mode: PadMode,
        }

        impl $name {
            /// `padding` on every side of every padded dimension.
            ///
            /// ```
            #[doc = concat!("let p = forge::nn::", stringify!($name), "::new(1);")]
            #[doc = concat!("assert_eq!(p.padding, [1; 2 * ", stringify!($k), "]);")]
            /// ```
            pub fn new(padding: usize) -> Self {
                Self::sides([padding; 2 * $k])
            }

            /// Each side's padding, in `F.pad`'s order (the last
            /// dimension's `before, after` first).
            ///
            /// ```
            #[doc = concat!("let p = forge::nn::", stringify!($name), "::sides([2; 2 * ", stringify!($k), "]);")]
            #[doc = concat!("assert_eq!(p, forge::nn::", stringify!($name), "::new(2));")]
            /// ```
            pub fn sides(padding: [usize; 2 * $k]) -> Self {
                $name {
                    padding,
                    mode: $mode,
                }
            }
        }

        impl<E: Float> Forward<Tensor<E>> for $name {
            type Output = Tensor<E>;
            fn forward(&self, x: Tensor<E>) -> Tensor<E> {
                record_output(self, x.pad_with(&pairs(&self.padding), self.mode))
            }
        }
    };
}

pad_layer!(ReflectionPad1d, 1, "ReflectionPad1d", PadMode::Reflect, "with the input mirrored at its edges",
    "let y = forge::nn::ReflectionPad1d::sides([2, 1]).forward(Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0], &[1, 3]));\nassert_eq!(y.to_vec(), vec![3.0, 2.0, 1.0, 2.0, 3.0, 2.0]);");
pad_layer!(ReflectionPad2d, 2, "ReflectionPad2d", PadMode::Reflect, "with the input mirrored at its edges",
    "let y = forge::nn::ReflectionPad2d::new(1).forward(Tensor::<f32>::zeros(&[1, 2, 3, 3]));\nassert_eq!(y.shape(), &[1, 2, 5, 5]);");
pad_layer!(ReflectionPad3d, 3, "ReflectionPad3d", PadMode::Reflect, "with the input mirrored at its edges",
    "let y = forge::nn::ReflectionPad3d::new(1).forward(Tensor::<f32>::zeros(&[1, 2, 2, 3, 3]));\nassert_eq!(y.shape(), &[1, 2, 4, 5, 5]);");
pad_layer!(ReplicationPad1d, 1, "ReplicationPad1d", PadMode::Replicate, "with copies of the edge elements",
    "let y = forge::nn::ReplicationPad1d::sides([1, 2]).forward(Tensor::<f32>::from_vec(vec![1.0, 2.0], &[1, 2]));\nassert_eq!(y.to_vec(), vec![1.0, 1.0, 2.0, 2.0, 2.0]);");
pad_layer!(ReplicationPad2d, 2, "ReplicationPad2d", PadMode::Replicate, "with copies of the edge elements",
    "let y = forge::nn::ReplicationPad2d::new(2).forward(Tensor::<f32>::ones(&[2, 3, 3]));\nassert_eq!(y.shape(), &[2, 7, 7]);");
pad_layer!(ReplicationPad3d, 3, "ReplicationPad3d", PadMode::Replicate, "with copies of the edge elements",
    "let y = forge::nn::ReplicationPad3d::new(1).forward(Tensor::<f32>::ones(&[1, 1, 2, 2, 2]));\nassert_eq!(y.shape(), &[1, 1, 4, 4, 4]);");
pad_layer!(CircularPad1d, 1, "CircularPad1d", PadMode::Circular, "with the input wrapped around",
    "let y = forge::nn::CircularPad1d::sides([1, 0]).forward(Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0], &[1, 3]));\nassert_eq!(y.to_vec(), vec![3.0, 1.0, 2.0, 3.0]);");
pad_layer!(CircularPad2d, 2, "CircularPad2d", PadMode::Circular, "with the input wrapped around",
    "let y = forge::nn::CircularPad2d::new(1).forward(Tensor::<f32>::zeros(&[1, 1, 3, 3]));\nassert_eq!(y.shape(), &[1, 1, 5, 5]);");
pad_layer!(CircularPad3d, 3, "CircularPad3d", PadMode::Circular, "with the input wrapped around",
    "let y = forge::nn::CircularPad3d::new(1).forward(Tensor::<f32>::zeros(&[1, 2, 2, 2]));\nassert_eq!(y.shape(), &[1, 4, 4, 4]);");
pad_layer!(ZeroPad1d, 1, "ZeroPad1d", PadMode::Constant(0.0), "with zeros",
    "let y = forge::nn::ZeroPad1d::new(1).forward(Tensor::<f32>::ones(&[1, 2]));\nassert_eq!(y.to_vec(), vec![0.0, 1.0, 1.0, 0.0]);");
pad_layer!(ZeroPad2d, 2, "ZeroPad2d", PadMode::Constant(0.0), "with zeros",
    "let y = forge::nn::ZeroPad2d::sides([1, 0, 0, 2]).forward(Tensor::<f32>::ones(&[1, 1, 2, 2]));\nassert_eq!(y.shape(), &[1, 1, 4, 3]);");
pad_layer!(ZeroPad3d, 3, "ZeroPad3d", PadMode::Constant(0.0), "with zeros",
    "let y = forge::nn::ZeroPad3d::new(1).forward(Tensor::<f32>::ones(&[1, 1, 1, 1, 1]));\nassert_eq!(y.sum().item(), 1.0);");

macro_rules! constant_pad_layer {
    ($name:ident, $k:literal, $ex:literal) => {
        #[doc = concat!("`nn.", stringify!($name), "`: pads the last ", stringify!($k),
            " dimension(s) with a constant value ([`Tensor::pad_with`] with [`PadMode::Constant`]).\n\n",
            "# Shapes\nAny input of rank at least ", stringify!($k),
            "; each padded dimension grows by its two paddings.\n\n",
            "# Panics\nAs [`Tensor::pad_with`], on forward.\n\n",
            "```\nuse forge::prelude::*;\n", $ex, "\n```")]
        #[derive(Layer, Clone, Debug, PartialEq)]
        pub struct $name {
            /// The paddings in `F.pad`'s order: `(before, after)` of the
            /// last dimension, then of the one before, ...
            #[skip]
            pub padding: [usize; 2 * $k],
            /// The fill (`PadMode::Constant(value)`).
            #[skip]
            pub mode: PadMode,
        }

        impl $name {
            /// `padding` on every side of every padded dimension, filled
            /// with `value`.
            ///
            /// ```
            #[doc = concat!("let p = forge::nn::", stringify!($name), "::new(1, 3.5);")]
            /// assert_eq!(p.mode, forge::ops::PadMode::Constant(3.5));
            /// ```
            pub fn new(padding: usize, value: f64) -> Self {
                Self::sides([padding; 2 * $k], value)
            }

            /// Each side's padding in `F.pad`'s order, filled with `value`.
            ///
            /// ```
            #[doc = concat!("let p = forge::nn::", stringify!($name), "::sides([2; 2 * ", stringify!($k), "], 1.0);")]
            #[doc = concat!("assert_eq!(p, forge::nn::", stringify!($name), "::new(2, 1.0));")]
            /// ```
            pub fn sides(padding: [usize; 2 * $k], value: f64) -> Self {
                $name {
                    padding,
                    mode: PadMode::Constant(value),
                }
            }
        }

        impl<E: Float> Forward<Tensor<E>> for $name {
            type Output = Tensor<E>;
            fn forward(&self, x: Tensor<E>) -> Tensor<E> {
                record_output(self, x.pad_with(&pairs(&self.padding), self.mode))
            }
        }
    };
}

constant_pad_layer!(ConstantPad1d, 1,
    "let y = forge::nn::ConstantPad1d::sides([0, 1], 9.0).forward(Tensor::<f32>::ones(&[2]));\nassert_eq!(y.to_vec(), vec![1.0, 1.0, 9.0]);");
constant_pad_layer!(ConstantPad2d, 2,
    "let y = forge::nn::ConstantPad2d::new(1, -1.0).forward(Tensor::<f32>::ones(&[2, 2]));\nassert_eq!(y.shape(), &[4, 4]);");
constant_pad_layer!(ConstantPad3d, 3,
    "let y = forge::nn::ConstantPad3d::new(1, 0.5).forward(Tensor::<f32>::ones(&[1, 1, 1]));\nassert_eq!(y.shape(), &[3, 3, 3]);");
