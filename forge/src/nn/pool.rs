//! Pooling layers (`torch.nn.MaxPool2d`, `AvgPool2d`, `AdaptiveAvgPool2d`,
//! `AdaptiveMaxPool2d` and their 1-d forms). They hold no tensors, work for
//! every float element type, accept batched (`[N, C, ..]`) and unbatched
//! (`[C, ..]`) inputs, and default the stride to the kernel size as PyTorch.
//!
//! ```
//! use forge::prelude::*;
//! use forge::nn::{AdaptiveAvgPool2d, MaxPool2d};
//! let x = Tensor::<f32>::zeros(&[2, 3, 8, 8]);
//! assert_eq!(MaxPool2d::new(2).forward(x.clone()).shape(), &[2, 3, 4, 4]);
//! assert_eq!(AdaptiveAvgPool2d::new(1).forward(x).shape(), &[2, 3, 1, 1]);
//! ```

use super::builder::size_setters;
use super::conv::IntoPair;
use super::forward::Forward;
use super::summary::record_output;
use crate::tensor::{Float, Tensor};
use forge_macros::Layer;

/// Checks the rank (`rank` batched or `rank - 1` unbatched) and applies `f`
/// to the batched form.
fn pooled<E: Float>(
    layer: &str,
    x: Tensor<E>,
    rank: usize,
    f: impl FnOnce(&Tensor<E>) -> Tensor<E>,
) -> Tensor<E> {
    let (batched, unbatched) = if rank == 4 {
        ("[N, C, H, W]", "[C, H, W]")
    } else {
        ("[N, C, L]", "[C, L]")
    };
    shape_assert!(
        x.rank() == rank || x.rank() + 1 == rank,
        "{layer}: expected input {batched} or {unbatched}, got {:?}",
        x.shape()
    );
    if x.rank() + 1 == rank {
        f(&x.unsqueeze(0)).squeeze(0)
    } else {
        f(&x)
    }
}

/// Defines an adaptive pooling layer: a struct holding the output size
/// (`output_size`), `new`, and a `Forward` that calls the op on the batched
/// input (through `pooled`, which checks the rank).
macro_rules! adaptive_pool {
    (
        $(#[doc = $doc:literal])*
        $name:ident: $size:ty, $arg:ty, $into:path;
        $what:literal, $rank:literal, $shapes:literal, $op:ident, $fmt:literal;
        $new_example:literal;
    ) => {
        $(#[doc = $doc])*
        #[derive(Layer, Clone, Copy, Debug, PartialEq, Eq)]
        pub struct $name {
            #[doc = $what]
            #[skip]
            pub output_size: $size,
        }

        impl $name {
            /// Pools any input to `output_size`.
            ///
            /// ```
            #[doc = $new_example]
            /// ```
            pub fn new(output_size: $arg) -> Self {
                $name {
                    output_size: $into(output_size),
                }
            }
        }

        impl<E: Float> Forward<Tensor<E>> for $name {
            type Output = Tensor<E>;

            #[doc = concat!("# Panics\nWhen `x` is not ", $shapes, " (the message names the layer, the expected and the received shapes).")]
            fn forward(&self, x: Tensor<E>) -> Tensor<E> {
                let name = format!(concat!(stringify!($name), "(", $fmt, ")"), self.output_size);
                record_output(self, pooled(&name, x, $rank, |x| x.$op(self.output_size)))
            }
        }
    };
}

/// 2-d max pooling (`torch.nn.MaxPool2d`: padding counts as -inf; floor
/// mode unless [`ceil_mode`](Self::ceil_mode); optional dilation).
///
/// ```
/// use forge::prelude::*;
/// let pool = forge::nn::MaxPool2d::new(3).stride(2).padding(1);
/// assert_eq!(pool.forward(Tensor::<f32>::zeros(&[1, 1, 7, 6])).shape(), &[1, 1, 4, 3]);
/// ```
#[derive(Layer, Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxPool2d {
    /// Window size (rows, columns).
    #[skip]
    pub kernel: [usize; 2],
    /// Stride (defaults to the kernel size).
    #[skip]
    pub stride: [usize; 2],
    /// Padding on each side (at most half the kernel).
    #[skip]
    pub padding: [usize; 2],
    /// The step between window positions (default 1).
    #[skip]
    pub dilation: [usize; 2],
    /// Round the output size up instead of down (default `false`).
    #[skip]
    pub ceil_mode: bool,
}

impl MaxPool2d {
    /// Max pooling over `kernel` windows, stride = kernel, no padding.
    ///
    /// ```
    /// assert_eq!(forge::nn::MaxPool2d::new([2, 3]).stride, [2, 3]);
    /// ```
    pub fn new(kernel: impl IntoPair) -> Self {
        let kernel = kernel.into_pair();
        MaxPool2d {
            kernel,
            stride: kernel,
            padding: [0, 0],
            dilation: [1, 1],
            ceil_mode: false,
        }
    }

    size_setters! {
        impl IntoPair, IntoPair::into_pair,
        "forge::nn::MaxPool2d::new(3)", "[2, 2]";
        dilation: "the dilation (the step between window positions)";
        stride: "the stride";
        padding: "the padding";
    }

    /// Sets ceil mode: the output size rounds up, keeping a last partial
    /// window that starts inside the input or its left padding.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let pool = forge::nn::MaxPool2d::new(2).ceil_mode(true);
    /// assert_eq!(pool.forward(Tensor::<f32>::zeros(&[1, 1, 5, 5])).shape(), &[1, 1, 3, 3]);
    /// ```
    pub fn ceil_mode(mut self, ceil_mode: bool) -> Self {
        self.ceil_mode = ceil_mode;
        self
    }
}

impl<E: Float> Forward<Tensor<E>> for MaxPool2d {
    type Output = Tensor<E>;

    /// # Panics
    /// When `x` is not `[N, C, H, W]` or `[C, H, W]` (the message names the
    /// layer, the expected and the received shapes), or is smaller than the
    /// kernel.
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let name = format!("MaxPool2d(kernel {:?})", self.kernel);
        let y = pooled(&name, x, 4, |x| {
            x.max_pool2d_with(
                self.kernel,
                self.stride,
                self.padding,
                self.dilation,
                self.ceil_mode,
            )
        });
        record_output(self, y)
    }
}

/// 2-d average pooling (`torch.nn.AvgPool2d`: floor mode unless
/// [`ceil_mode`](Self::ceil_mode); optional `divisor_override`).
///
/// ```
/// use forge::prelude::*;
/// let pool = forge::nn::AvgPool2d::new(3).stride(1).padding(1).count_include_pad(false);
/// let y = pool.forward(Tensor::<f64>::ones(&[1, 1, 4, 4]));
/// assert_eq!(y.to_vec(), vec![1.0; 16]);
/// ```
#[derive(Layer, Clone, Copy, Debug, PartialEq, Eq)]
pub struct AvgPool2d {
    /// Window size (rows, columns).
    #[skip]
    pub kernel: [usize; 2],
    /// Stride (defaults to the kernel size).
    #[skip]
    pub stride: [usize; 2],
    /// Zero padding on each side (at most half the kernel).
    #[skip]
    pub padding: [usize; 2],
    /// Whether padding counts in the divisor (default `true`).
    #[skip]
    pub count_include_pad: bool,
    /// Round the output size up instead of down (default `false`).
    #[skip]
    pub ceil_mode: bool,
    /// Divide every window sum by this instead (default `None`).
    #[skip]
    pub divisor_override: Option<usize>,
}

impl AvgPool2d {
    /// Average pooling over `kernel` windows, stride = kernel, no padding,
    /// padding counted in the divisor.
    ///
    /// ```
    /// assert!(forge::nn::AvgPool2d::new(2).count_include_pad);
    /// ```
    pub fn new(kernel: impl IntoPair) -> Self {
        let kernel = kernel.into_pair();
        AvgPool2d {
            kernel,
            stride: kernel,
            padding: [0, 0],
            count_include_pad: true,
            ceil_mode: false,
            divisor_override: None,
        }
    }

    /// Sets ceil mode: the output size rounds up, keeping a last partial
    /// window that starts inside the input or its left padding.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let pool = forge::nn::AvgPool2d::new(2).ceil_mode(true);
    /// assert_eq!(pool.forward(Tensor::<f32>::ones(&[1, 1, 3, 3])).to_vec(), vec![1.0; 4]);
    /// ```
    pub fn ceil_mode(mut self, ceil_mode: bool) -> Self {
        self.ceil_mode = ceil_mode;
        self
    }

    /// Divides every window sum by `divisor` instead of the window size.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let pool = forge::nn::AvgPool2d::new(2).divisor_override(Some(8));
    /// assert_eq!(pool.forward(Tensor::<f32>::ones(&[1, 1, 2, 2])).to_vec(), vec![0.5]);
    /// ```
    pub fn divisor_override(mut self, divisor: Option<usize>) -> Self {
        self.divisor_override = divisor;
        self
    }

    size_setters! {
        impl IntoPair, IntoPair::into_pair,
        "forge::nn::AvgPool2d::new(3)", "[2, 2]";
        stride: "the stride";
        padding: "the padding";
    }

    /// Sets whether padding counts in the divisor.
    ///
    /// ```
    /// assert!(!forge::nn::AvgPool2d::new(3).count_include_pad(false).count_include_pad);
    /// ```
    pub fn count_include_pad(mut self, include: bool) -> Self {
        self.count_include_pad = include;
        self
    }
}

impl<E: Float> Forward<Tensor<E>> for AvgPool2d {
    type Output = Tensor<E>;

    /// # Panics
    /// When `x` is not `[N, C, H, W]` or `[C, H, W]` (the message names the
    /// layer, the expected and the received shapes), or is smaller than the
    /// kernel.
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let name = format!("AvgPool2d(kernel {:?})", self.kernel);
        let y = pooled(&name, x, 4, |x| {
            x.avg_pool2d_with(
                self.kernel,
                self.stride,
                self.padding,
                self.ceil_mode,
                self.count_include_pad,
                self.divisor_override,
            )
        });
        record_output(self, y)
    }
}

adaptive_pool! {
    /// Adaptive 2-d average pooling to a fixed output size
    /// (`torch.nn.AdaptiveAvgPool2d`).
    ///
    /// ```
    /// use forge::prelude::*;
    /// let pool = forge::nn::AdaptiveAvgPool2d::new([3, 2]);
    /// assert_eq!(pool.forward(Tensor::<f32>::zeros(&[2, 3, 7, 5])).shape(), &[2, 3, 3, 2]);
    /// ```
    AdaptiveAvgPool2d: [usize; 2], impl IntoPair, IntoPair::into_pair;
    "Output size (rows, columns).", 4, "`[N, C, H, W]` or `[C, H, W]`", adaptive_avg_pool2d, "{:?}";
    "assert_eq!(forge::nn::AdaptiveAvgPool2d::new(1).output_size, [1, 1]);";
}

adaptive_pool! {
    /// Adaptive 2-d max pooling to a fixed output size
    /// (`torch.nn.AdaptiveMaxPool2d`).
    ///
    /// ```
    /// use forge::prelude::*;
    /// let pool = forge::nn::AdaptiveMaxPool2d::new(2);
    /// assert_eq!(pool.forward(Tensor::<f32>::zeros(&[3, 7, 5])).shape(), &[3, 2, 2]);
    /// ```
    AdaptiveMaxPool2d: [usize; 2], impl IntoPair, IntoPair::into_pair;
    "Output size (rows, columns).", 4, "`[N, C, H, W]` or `[C, H, W]`", adaptive_max_pool2d, "{:?}";
    "assert_eq!(forge::nn::AdaptiveMaxPool2d::new([2, 3]).output_size, [2, 3]);";
}

/// 1-d max pooling (`torch.nn.MaxPool1d`).
///
/// ```
/// use forge::prelude::*;
/// let pool = forge::nn::MaxPool1d::new(2);
/// assert_eq!(pool.forward(Tensor::<f32>::zeros(&[2, 3, 9])).shape(), &[2, 3, 4]);
/// ```
#[derive(Layer, Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxPool1d {
    /// Window size.
    #[skip]
    pub kernel: usize,
    /// Stride (defaults to the kernel size).
    #[skip]
    pub stride: usize,
    /// Padding on each side (at most half the kernel).
    #[skip]
    pub padding: usize,
}

impl MaxPool1d {
    /// Max pooling over `kernel` windows, stride = kernel, no padding.
    ///
    /// ```
    /// assert_eq!(forge::nn::MaxPool1d::new(3).stride, 3);
    /// ```
    pub fn new(kernel: usize) -> Self {
        MaxPool1d {
            kernel,
            stride: kernel,
            padding: 0,
        }
    }

    size_setters! {
        usize, std::convert::identity,
        "forge::nn::MaxPool1d::new(3)", "2";
        stride: "the stride";
        padding: "the padding";
    }
}

impl<E: Float> Forward<Tensor<E>> for MaxPool1d {
    type Output = Tensor<E>;

    /// # Panics
    /// When `x` is not `[N, C, L]` or `[C, L]` (the message names the layer,
    /// the expected and the received shapes), or is shorter than the kernel.
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let name = format!("MaxPool1d(kernel {})", self.kernel);
        let y = pooled(&name, x, 3, |x| {
            x.max_pool1d(self.kernel, self.stride, self.padding)
        });
        record_output(self, y)
    }
}

/// 1-d average pooling (`torch.nn.AvgPool1d`).
///
/// ```
/// use forge::prelude::*;
/// let pool = forge::nn::AvgPool1d::new(2);
/// let y = pool.forward(Tensor::<f64>::from_vec(vec![1.0, 3.0, 5.0, 7.0], &[1, 1, 4]));
/// assert_eq!(y.to_vec(), vec![2.0, 6.0]);
/// ```
#[derive(Layer, Clone, Copy, Debug, PartialEq, Eq)]
pub struct AvgPool1d {
    /// Window size.
    #[skip]
    pub kernel: usize,
    /// Stride (defaults to the kernel size).
    #[skip]
    pub stride: usize,
    /// Zero padding on each side (at most half the kernel).
    #[skip]
    pub padding: usize,
    /// Whether padding counts in the divisor (default `true`).
    #[skip]
    pub count_include_pad: bool,
}

impl AvgPool1d {
    /// Average pooling over `kernel` windows, stride = kernel, no padding,
    /// padding counted in the divisor.
    ///
    /// ```
    /// assert_eq!(forge::nn::AvgPool1d::new(3).stride, 3);
    /// ```
    pub fn new(kernel: usize) -> Self {
        AvgPool1d {
            kernel,
            stride: kernel,
            padding: 0,
            count_include_pad: true,
        }
    }

    size_setters! {
        usize, std::convert::identity,
        "forge::nn::AvgPool1d::new(3)", "2";
        stride: "the stride";
        padding: "the padding";
    }

    /// Sets whether padding counts in the divisor.
    ///
    /// ```
    /// assert!(!forge::nn::AvgPool1d::new(3).count_include_pad(false).count_include_pad);
    /// ```
    pub fn count_include_pad(mut self, include: bool) -> Self {
        self.count_include_pad = include;
        self
    }
}

impl<E: Float> Forward<Tensor<E>> for AvgPool1d {
    type Output = Tensor<E>;

    /// # Panics
    /// When `x` is not `[N, C, L]` or `[C, L]` (the message names the layer,
    /// the expected and the received shapes), or is shorter than the kernel.
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let name = format!("AvgPool1d(kernel {})", self.kernel);
        let y = pooled(&name, x, 3, |x| {
            x.avg_pool1d(
                self.kernel,
                self.stride,
                self.padding,
                self.count_include_pad,
            )
        });
        record_output(self, y)
    }
}

adaptive_pool! {
    /// Adaptive 1-d average pooling (`torch.nn.AdaptiveAvgPool1d`).
    ///
    /// ```
    /// use forge::prelude::*;
    /// let pool = forge::nn::AdaptiveAvgPool1d::new(1);
    /// let y = pool.forward(Tensor::<f64>::from_vec(vec![1.0, 3.0, 5.0], &[1, 3]));
    /// assert_eq!(y.to_vec(), vec![3.0]);
    /// ```
    AdaptiveAvgPool1d: usize, usize, std::convert::identity;
    "Output length.", 3, "`[N, C, L]` or `[C, L]`", adaptive_avg_pool1d, "{}";
    "assert_eq!(forge::nn::AdaptiveAvgPool1d::new(4).output_size, 4);";
}

adaptive_pool! {
    /// Adaptive 1-d max pooling (`torch.nn.AdaptiveMaxPool1d`).
    ///
    /// ```
    /// use forge::prelude::*;
    /// let pool = forge::nn::AdaptiveMaxPool1d::new(2);
    /// let y = pool.forward(Tensor::<f64>::from_vec(vec![1.0, 3.0, 5.0, 2.0], &[1, 1, 4]));
    /// assert_eq!(y.to_vec(), vec![3.0, 5.0]);
    /// ```
    AdaptiveMaxPool1d: usize, usize, std::convert::identity;
    "Output length.", 3, "`[N, C, L]` or `[C, L]`", adaptive_max_pool1d, "{}";
    "assert_eq!(forge::nn::AdaptiveMaxPool1d::new(4).output_size, 4);";
}
