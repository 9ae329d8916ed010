//! ResNet-18 as torchvision defines it (`torchvision.models.resnet18`),
//! built from [`BasicBlock`]s, with torchvision's state-dict names
//! (`conv1.weight`, `bn1.running_mean`, `layer2.0.downsample.0.weight`,
//! `fc.bias`, ...) so that its checkpoints load by name.

use crate::nn::init::{kaiming_normal, FanMode, Nonlinearity};
use crate::nn::{conv_bn_act, record_output};
use crate::nn::{AdaptiveAvgPool2d, BatchNorm2d, Conv2d, Forward, Layer, Linear, MaxPool2d};
use crate::tensor::{Float, Rng, Tensor};

/// A 3x3 convolution without bias, initialised as torchvision does
/// (`kaiming_normal_(mode='fan_out', nonlinearity='relu')`).
fn conv<E: Float>(
    cin: usize,
    cout: usize,
    k: usize,
    stride: usize,
    pad: usize,
    rng: &mut Rng,
) -> Conv2d<E> {
    let w = kaiming_normal::<E>(
        &[cout, cin, k, k],
        0.0,
        FanMode::FanOut,
        Nonlinearity::Relu,
        rng,
    );
    Conv2d::from_weights(w.requires_grad(), None)
        .expect("a 4-d weight")
        .stride(stride)
        .padding(pad)
}

/// The shortcut of a [`BasicBlock`] that changes shape: a 1x1 convolution
/// with the block's stride, then batch norm (torchvision's
/// `downsample.0`, `downsample.1`).
///
/// ```
/// use forge::models::resnet::Downsample;
/// use forge::prelude::*;
/// let d = Downsample::<f32>::new(4, 8, 2, &mut Rng::new(0));
/// assert_eq!(d.forward(Tensor::ones(&[1, 4, 6, 6])).shape(), &[1, 8, 3, 3]);
/// assert!(d.state_dict().contains_key("1.running_var"));
/// ```
#[derive(Layer, Clone, Debug)]
pub struct Downsample<E: Float = f32>(pub Conv2d<E>, pub BatchNorm2d<E>);

impl<E: Float> Downsample<E> {
    /// A 1x1 projection from `cin` to `cout` channels with `stride`.
    ///
    /// ```
    /// let d = forge::models::resnet::Downsample::<f32>::new(4, 8, 2, &mut forge::Rng::new(0));
    /// assert_eq!(d.0.weight.shape(), &[8, 4, 1, 1]);
    /// ```
    pub fn new(cin: usize, cout: usize, stride: usize, rng: &mut Rng) -> Self {
        Downsample(conv(cin, cout, 1, stride, 0, rng), BatchNorm2d::new(cout))
    }
}

impl<E: Float> Forward<Tensor<E>> for Downsample<E> {
    type Output = Tensor<E>;
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        record_output(self, conv_bn_act(&self.0, &self.1, x, None, false))
    }
}

/// torchvision's `BasicBlock`:
/// `relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))`, where `conv1` is
/// 3x3 with the block's stride, `conv2` 3x3, both padded by 1 and without
/// bias, and the shortcut is the identity or a [`Downsample`].
///
/// In training mode the batch norms normalise with the batch statistics
/// and update their running statistics (PyTorch's rule, momentum 0.1);
/// in eval mode they use the running statistics.
///
/// # Shapes
/// `[N, cin, H, W]` to `[N, cout, ceil(H / stride), ceil(W / stride)]`.
///
/// ```
/// use forge::models::resnet::BasicBlock;
/// use forge::prelude::*;
/// let b = BasicBlock::<f32>::new(6, 12, 2, &mut Rng::new(0));
/// assert_eq!(b.forward(Tensor::ones(&[2, 6, 7, 7])).shape(), &[2, 12, 4, 4]);
/// assert!(b.downsample.is_some());
/// assert!(BasicBlock::<f32>::new(6, 6, 1, &mut Rng::new(0)).downsample.is_none());
/// ```
#[derive(Layer, Clone, Debug)]
pub struct BasicBlock<E: Float = f32> {
    /// 3x3, stride `stride`.
    pub conv1: Conv2d<E>,
    /// After `conv1`.
    pub bn1: BatchNorm2d<E>,
    /// 3x3, stride 1.
    pub conv2: Conv2d<E>,
    /// After `conv2`.
    pub bn2: BatchNorm2d<E>,
    /// The projection shortcut, when the shape changes.
    pub downsample: Option<Downsample<E>>,
}

impl<E: Float> BasicBlock<E> {
    /// A block from `cin` to `cout` channels with `stride`, with a
    /// [`Downsample`] shortcut when `stride != 1` or `cin != cout`;
    /// torchvision's initialisation.
    ///
    /// ```
    /// let b = forge::models::resnet::BasicBlock::<f32>::new(3, 3, 1, &mut forge::Rng::new(0));
    /// assert_eq!(b.conv1.weight.shape(), &[3, 3, 3, 3]);
    /// ```
    pub fn new(cin: usize, cout: usize, stride: usize, rng: &mut Rng) -> Self {
        BasicBlock {
            conv1: conv(cin, cout, 3, stride, 1, rng),
            bn1: BatchNorm2d::new(cout),
            conv2: conv(cout, cout, 3, 1, 1, rng),
            bn2: BatchNorm2d::new(cout),
            downsample: (stride != 1 || cin != cout)
                .then(|| Downsample::new(cin, cout, stride, rng)),
        }
    }
}

impl<E: Float> Forward<Tensor<E>> for BasicBlock<E> {
    type Output = Tensor<E>;
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let identity = match &self.downsample {
            Some(d) => d.forward(x.clone()),
            None => x.clone(),
        };
        // In eval mode under no_grad each convolution's batch norm, the
        // residual sum and the ReLUs run as one pass over its output
        // (nn::conv_bn_act, same bits as the layers in turn).
        let y = conv_bn_act(&self.conv1, &self.bn1, x, None, true);
        let y = conv_bn_act(&self.conv2, &self.bn2, y, Some(&identity), true);
        record_output(self, y)
    }
}

/// ResNet-18 (torchvision's `resnet18`): a 7x7 stride-2 stem with batch
/// norm, ReLU and 3x3 stride-2 max pooling, four stages of two
/// [`BasicBlock`]s (64, 128, 256, 512 channels; stages 2-4 halve the
/// resolution), global average pooling and a linear classifier.
///
/// # Shapes
/// `[N, 3, H, W]` (H, W >= 32 for the 5 halvings to leave at least 1x1)
/// to logits `[N, num_classes]`.
///
/// ```
/// use forge::models::resnet::resnet18;
/// use forge::prelude::*;
/// let m = resnet18::<f32>(10, &mut Rng::new(0));
/// assert_eq!(m.num_parameters(), 11_181_642); // torchvision's count
/// assert_eq!(m.state_dict().len(), 122);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct ResNet<E: Float = f32> {
    /// 7x7, stride 2, 3 -> 64 channels.
    pub conv1: Conv2d<E>,
    /// After the stem convolution.
    pub bn1: BatchNorm2d<E>,
    /// 3x3, stride 2, padding 1.
    #[skip]
    pub maxpool: MaxPool2d,
    /// 64 channels.
    pub layer1: Vec<BasicBlock<E>>,
    /// 128 channels, stride 2.
    pub layer2: Vec<BasicBlock<E>>,
    /// 256 channels, stride 2.
    pub layer3: Vec<BasicBlock<E>>,
    /// 512 channels, stride 2.
    pub layer4: Vec<BasicBlock<E>>,
    /// To 1x1.
    #[skip]
    pub avgpool: AdaptiveAvgPool2d,
    /// 512 -> `num_classes`.
    pub fc: Linear<E>,
}

/// ResNet-18 with `num_classes` outputs and torchvision's initialisation
/// (convolutions kaiming-normal with `fan_out`, batch norms weight 1 and
/// bias 0, the classifier as PyTorch's `Linear`).
///
/// ```
/// use forge::models::resnet::resnet18;
/// use forge::prelude::*;
/// let m = resnet18::<f32>(1000, &mut Rng::new(0));
/// assert_eq!(m.num_parameters(), 11_689_512);
/// ```
pub fn resnet18<E: Float>(num_classes: usize, rng: &mut Rng) -> ResNet<E> {
    let stage = |cin: usize, cout: usize, stride: usize, rng: &mut Rng| {
        vec![
            BasicBlock::new(cin, cout, stride, rng),
            BasicBlock::new(cout, cout, 1, rng),
        ]
    };
    ResNet {
        conv1: conv(3, 64, 7, 2, 3, rng),
        bn1: BatchNorm2d::new(64),
        maxpool: MaxPool2d::new(3).stride(2).padding(1),
        layer1: stage(64, 64, 1, rng),
        layer2: stage(64, 128, 2, rng),
        layer3: stage(128, 256, 2, rng),
        layer4: stage(256, 512, 2, rng),
        avgpool: AdaptiveAvgPool2d::new(1),
        fc: Linear::new(512, num_classes, rng),
    }
}

impl<E: Float> Forward<Tensor<E>> for ResNet<E> {
    type Output = Tensor<E>;

    /// # Panics
    /// When the input is not `[N, 3, H, W]`.
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        assert!(
            x.rank() == 4 && x.shape()[1] == 3,
            "ResNet: expected images [N, 3, H, W], got {:?}",
            x.shape()
        );
        let x = conv_bn_act(&self.conv1, &self.bn1, x, None, true);
        let mut x = self.maxpool.forward(x);
        for block in self
            .layer1
            .iter()
            .chain(&self.layer2)
            .chain(&self.layer3)
            .chain(&self.layer4)
        {
            x = block.forward(x);
        }
        let x = self.avgpool.forward(x);
        let n = x.shape()[0] as isize;
        record_output(self, self.fc.forward(x.reshape(&[n, -1])))
    }
}
