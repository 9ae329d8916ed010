//! AlexNet as torchvision defines it (`torchvision.models.alexnet`, the
//! "one weird trick" variant): state-dict names `features.{0,3,6,8,10}.*`
//! and `classifier.{1,4,6}.*`.

use super::vgg::{run, Stage};
use crate::nn::record_output;
use crate::nn::{AdaptiveAvgPool2d, Conv2d, Dropout, Forward, Layer, Linear, MaxPool2d};
use crate::tensor::{Float, Rng, Tensor};

/// AlexNet: five convolutions (11x11 stride 4, 5x5, three 3x3) with ReLU
/// and three 3x3 stride-2 max poolings, adaptive average pooling to 6x6,
/// and a classifier 9216 -> 4096 -> 4096 -> `num_classes` with dropout 0.5
/// before the first two linear layers.
///
/// # Shapes
/// `[N, 3, H, W]` (H, W >= 63) to logits `[N, num_classes]`.
///
/// ```
/// use forge::models::alexnet::alexnet;
/// use forge::prelude::*;
/// let m = alexnet::<f32>(1000, &mut Rng::new(0));
/// assert_eq!(m.num_parameters(), 61_100_840); // torchvision's count
/// assert!(m.state_dict().contains_key("classifier.4.weight"));
/// ```
#[derive(Layer, Clone, Debug)]
pub struct AlexNet<E: Float = f32> {
    /// The convolutional part.
    pub features: Vec<Stage<E>>,
    /// To 6x6.
    #[skip]
    pub avgpool: AdaptiveAvgPool2d,
    /// The fully connected part.
    pub classifier: Vec<Stage<E>>,
}

/// AlexNet with `num_classes` outputs and PyTorch's default
/// initialisation of every layer.
///
/// ```
/// use forge::models::alexnet::alexnet;
/// use forge::prelude::*;
/// let m = alexnet::<f32>(10, &mut Rng::new(0));
/// let y = no_grad(|| m.forward(Tensor::zeros(&[1, 3, 63, 63])));
/// assert_eq!(y.shape(), &[1, 10]);
/// ```
pub fn alexnet<E: Float>(num_classes: usize, rng: &mut Rng) -> AlexNet<E> {
    let pool = || Stage::MaxPool(MaxPool2d::new(3).stride(2));
    let features = vec![
        Stage::Conv(Conv2d::new(3, 64, 11, rng).stride(4).padding(2)),
        Stage::Relu,
        pool(),
        Stage::Conv(Conv2d::new(64, 192, 5, rng).padding(2)),
        Stage::Relu,
        pool(),
        Stage::Conv(Conv2d::new(192, 384, 3, rng).padding(1)),
        Stage::Relu,
        Stage::Conv(Conv2d::new(384, 256, 3, rng).padding(1)),
        Stage::Relu,
        Stage::Conv(Conv2d::new(256, 256, 3, rng).padding(1)),
        Stage::Relu,
        pool(),
    ];
    let classifier = vec![
        Stage::Dropout(Dropout::from_rng(0.5, rng)),
        Stage::Linear(Linear::new(256 * 6 * 6, 4096, rng)),
        Stage::Relu,
        Stage::Dropout(Dropout::from_rng(0.5, rng)),
        Stage::Linear(Linear::new(4096, 4096, rng)),
        Stage::Relu,
        Stage::Linear(Linear::new(4096, num_classes, rng)),
    ];
    AlexNet {
        features,
        avgpool: AdaptiveAvgPool2d::new(6),
        classifier,
    }
}

impl<E: Float> Forward<Tensor<E>> for AlexNet<E> {
    type Output = Tensor<E>;

    /// # Panics
    /// When the input is not `[N, 3, H, W]`.
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        assert!(
            x.rank() == 4 && x.shape()[1] == 3,
            "AlexNet: expected images [N, 3, H, W], got {:?}",
            x.shape()
        );
        let x = self.avgpool.forward(run(&self.features, x));
        let n = x.shape()[0] as isize;
        record_output(self, run(&self.classifier, x.reshape(&[n, -1])))
    }
}
