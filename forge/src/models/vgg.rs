//! VGG-11/13/16/19, with and without batch norm, as torchvision defines
//! them (`torchvision.models.vgg16_bn`, ...): state-dict names
//! `features.{i}.weight` (indices counting every layer, ReLUs and pools
//! included, as in torchvision's `nn.Sequential`) and
//! `classifier.{0,3,6}.weight`.
//!
//! [`Stage`] is the heterogeneous layer those sequences are made of (also
//! used by [`alexnet`](super::alexnet)).

use crate::nn::init::{kaiming_normal, FanMode, Nonlinearity};
use crate::nn::{record_output, summary_running, Activation};
use crate::nn::{
    AdaptiveAvgPool2d, BatchNorm2d, Conv2d, Dropout, Forward, Layer, Linear, MaxPool2d,
    TensorVisitor, TensorVisitorMut, Visit, Visitable,
};
use crate::tensor::{Float, Rng, Tensor};

/// One element of a torchvision `nn.Sequential` of a classic CNN. A layer
/// without tensors still takes its index, so the paths of the others are
/// torchvision's.
///
/// ```
/// use forge::models::vgg::Stage;
/// use forge::prelude::*;
/// let s = Stage::<f32>::Relu;
/// assert_eq!(s.forward(Tensor::from_vec(vec![-1.0, 2.0], &[2])).to_vec(), vec![0.0, 2.0]);
/// ```
#[derive(Clone, Debug)]
pub enum Stage<E: Float = f32> {
    /// A convolution (`{i}.weight`, `{i}.bias`).
    Conv(Conv2d<E>),
    /// Batch norm (`{i}.weight`, `{i}.bias`, `{i}.running_mean`, ...).
    Norm(BatchNorm2d<E>),
    /// ReLU (no tensors).
    Relu,
    /// Max pooling (no tensors).
    MaxPool(MaxPool2d),
    /// A fully connected layer.
    Linear(Linear<E>),
    /// Dropout (no tensors; follows `train()` / `eval()`).
    Dropout(Dropout),
}

// Not listed in "other types implement Visitable" diagnostics (as forge's own impls).
#[diagnostic::do_not_recommend]
impl<E: Float> Visitable for Stage<E> {}

impl<E: Float> Visit<E> for Stage<E> {
    fn visit(&self, name: &str, v: &mut dyn TensorVisitor<E>) {
        match self {
            Stage::Conv(l) => l.visit(name, v),
            Stage::Norm(l) => l.visit(name, v),
            Stage::MaxPool(l) => Visit::<E>::visit(l, name, v),
            Stage::Linear(l) => l.visit(name, v),
            Stage::Dropout(l) => Visit::<E>::visit(l, name, v),
            Stage::Relu => {}
        }
    }
    fn visit_mut(&mut self, name: &str, v: &mut dyn TensorVisitorMut<E>) {
        match self {
            Stage::Conv(l) => l.visit_mut(name, v),
            Stage::Norm(l) => l.visit_mut(name, v),
            Stage::MaxPool(l) => Visit::<E>::visit_mut(l, name, v),
            Stage::Linear(l) => l.visit_mut(name, v),
            Stage::Dropout(l) => Visit::<E>::visit_mut(l, name, v),
            Stage::Relu => {}
        }
    }
}

impl<E: Float> Forward<Tensor<E>> for Stage<E> {
    type Output = Tensor<E>;
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let y = match self {
            Stage::Conv(l) => l.forward(x),
            Stage::Norm(l) => l.forward(x),
            Stage::Relu => x.relu(),
            Stage::MaxPool(l) => l.forward(x),
            Stage::Linear(l) => l.forward(x),
            Stage::Dropout(l) => l.forward(x),
        };
        record_output(self, y)
    }
}

/// Applies `stages` in order. Outside autograd, a convolution or a linear
/// layer followed by [`Stage::Relu`] runs as one step
/// ([`Conv2d::forward_activated`], [`Linear::forward_activated`]: the ReLU
/// in the layer's output pass, the same values), unless a
/// [`summary`](crate::nn::summary) is recording each stage's output.
///
/// ```
/// use forge::models::vgg::{run, Stage};
/// use forge::nn::{Conv2d, Forward};
/// use forge::prelude::*;
/// let mut rng = Rng::new(0);
/// let stages = vec![Stage::Conv(Conv2d::<f32>::new(3, 4, 3, &mut rng)), Stage::Relu];
/// let x = Tensor::<f32>::normal(&[1, 3, 6, 6], 0.0, 1.0, &mut rng);
/// let y = no_grad(|| run(&stages, x.clone()));
/// assert_eq!(y.to_vec(), stages[1].forward(stages[0].forward(x)).to_vec());
/// ```
pub fn run<E: Float>(stages: &[Stage<E>], mut x: Tensor<E>) -> Tensor<E> {
    let fuse = !crate::autograd::is_grad_enabled() && !summary_running();
    let mut i = 0;
    while i < stages.len() {
        let relu_next = matches!(stages.get(i + 1), Some(Stage::Relu));
        x = match &stages[i] {
            Stage::Conv(c) if fuse && relu_next => c.forward_activated(x, Activation::Relu),
            Stage::Linear(l) if fuse && relu_next => l.forward_activated(x, Activation::Relu),
            s => {
                i += 1;
                x = s.forward(x);
                continue;
            }
        };
        i += 2;
    }
    x
}

/// A VGG network: `features` (3x3 convolutions, optional batch norm,
/// ReLU, 2x2 max pooling), adaptive average pooling to 7x7, and
/// `classifier` (25088 -> 4096 -> 4096 -> `num_classes` with ReLU and
/// dropout 0.5).
///
/// # Shapes
/// `[N, 3, H, W]` (H, W >= 32) to logits `[N, num_classes]`.
///
/// ```
/// use forge::models::vgg::vgg11;
/// use forge::prelude::*;
/// let m = vgg11::<f32>(10, false, &mut Rng::new(0));
/// assert!(m.state_dict().contains_key("features.18.weight"));
/// assert!(m.state_dict().contains_key("classifier.6.bias"));
/// ```
#[derive(Layer, Clone, Debug)]
pub struct Vgg<E: Float = f32> {
    /// The convolutional part.
    pub features: Vec<Stage<E>>,
    /// To 7x7.
    #[skip]
    pub avgpool: AdaptiveAvgPool2d,
    /// The fully connected part.
    pub classifier: Vec<Stage<E>>,
}

impl<E: Float> Forward<Tensor<E>> for Vgg<E> {
    type Output = Tensor<E>;

    /// # Panics
    /// When the input is not `[N, 3, H, W]`.
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        assert!(
            x.rank() == 4 && x.shape()[1] == 3,
            "Vgg: expected images [N, 3, H, W], got {:?}",
            x.shape()
        );
        let x = self.avgpool.forward(run(&self.features, x));
        let n = x.shape()[0] as isize;
        record_output(self, run(&self.classifier, x.reshape(&[n, -1])))
    }
}

/// torchvision's configurations "A", "B", "D", "E": channel counts, 0 =
/// max pooling.
const CFG_A: &[usize] = &[64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0];
const CFG_B: &[usize] = &[
    64, 64, 0, 128, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0,
];
const CFG_D: &[usize] = &[
    64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0,
];
const CFG_E: &[usize] = &[
    64, 64, 0, 128, 128, 0, 256, 256, 256, 256, 0, 512, 512, 512, 512, 0, 512, 512, 512, 512, 0,
];

/// Builds a VGG from a configuration with torchvision's initialisation:
/// convolutions kaiming-normal (`fan_out`, ReLU) with zero bias, batch
/// norms weight 1 and bias 0, linear layers N(0, 0.01) with zero bias.
/// With `rng` `None`, every weight is zero (no random draws).
fn vgg<E: Float>(
    cfg: &[usize],
    batch_norm: bool,
    num_classes: usize,
    mut rng: Option<&mut Rng>,
) -> Vgg<E> {
    let mut features = Vec::new();
    let mut cin = 3;
    for &c in cfg {
        if c == 0 {
            features.push(Stage::MaxPool(MaxPool2d::new(2).stride(2)));
            continue;
        }
        let shape = [c, cin, 3, 3];
        let w = match rng.as_deref_mut() {
            Some(rng) => kaiming_normal::<E>(&shape, 0.0, FanMode::FanOut, Nonlinearity::Relu, rng),
            None => Tensor::zeros(&shape),
        };
        let conv =
            Conv2d::from_weights(w.requires_grad(), Some(Tensor::zeros(&[c]).requires_grad()))
                .expect("a 4-d weight")
                .padding(1);
        features.push(Stage::Conv(conv));
        if batch_norm {
            features.push(Stage::Norm(BatchNorm2d::new(c)));
        }
        features.push(Stage::Relu);
        cin = c;
    }
    let linear = |i: usize, o: usize, rng: &mut Option<&mut Rng>| {
        let w = match rng.as_deref_mut() {
            Some(rng) => Tensor::normal(&[o, i], 0.0, 0.01, rng),
            None => Tensor::zeros(&[o, i]),
        }
        .requires_grad();
        Stage::Linear(
            Linear::from_weights(w, Some(Tensor::zeros(&[o]).requires_grad()))
                .expect("a 2-d weight"),
        )
    };
    let classifier = vec![
        linear(512 * 7 * 7, 4096, &mut rng),
        Stage::Relu,
        Stage::Dropout(Dropout::new(
            0.5,
            rng.as_deref_mut().map_or(1, Rng::next_u64),
        )),
        linear(4096, 4096, &mut rng),
        Stage::Relu,
        Stage::Dropout(Dropout::new(
            0.5,
            rng.as_deref_mut().map_or(2, Rng::next_u64),
        )),
        linear(4096, num_classes, &mut rng),
    ];
    Vgg {
        features,
        avgpool: AdaptiveAvgPool2d::new(7),
        classifier,
    }
}

macro_rules! vgg_fn {
    ($name:ident, $cfg:ident, $layers:literal, $count:literal) => {
        #[doc = concat!("VGG-", $layers, " (torchvision's `", stringify!($name), "`, or `", stringify!($name), "_bn` with `batch_norm`) with `num_classes` outputs.")]
        ///
        /// Allocates the full network (over 100 million parameters with
        /// 1000 classes).
        ///
        /// ```no_run
        #[doc = concat!("let m = forge::models::vgg::", stringify!($name), "::<f32>(1000, false, &mut forge::Rng::new(0));")]
        #[doc = concat!("assert_eq!(forge::nn::Layer::num_parameters(&m), ", $count, ");")]
        /// ```
        pub fn $name<E: Float>(num_classes: usize, batch_norm: bool, rng: &mut Rng) -> Vgg<E> {
            vgg($cfg, batch_norm, num_classes, Some(rng))
        }
    };
}

vgg_fn!(vgg11, CFG_A, "11", "132_863_336");
vgg_fn!(vgg13, CFG_B, "13", "133_047_848");
vgg_fn!(vgg16, CFG_D, "16", "138_357_544");
vgg_fn!(vgg19, CFG_E, "19", "143_667_240");

impl<E: Float> Vgg<E> {
    /// VGG-`depth` (11, 13, 16 or 19) with every weight zero: the network
    /// to load a checkpoint into, without the cost of drawing 130-140
    /// million random numbers. Same structure, names and shapes as
    /// [`vgg11`] ... [`vgg19`].
    ///
    /// # Panics
    /// When `depth` is not 11, 13, 16 or 19.
    ///
    /// ```no_run
    /// use forge::models::vgg::Vgg;
    /// let m = Vgg::<f32>::for_loading(16, true, 1000);
    /// assert_eq!(forge::nn::Layer::num_parameters(&m), 138_365_992);
    /// ```
    pub fn for_loading(depth: usize, batch_norm: bool, num_classes: usize) -> Self {
        let cfg = match depth {
            11 => CFG_A,
            13 => CFG_B,
            16 => CFG_D,
            19 => CFG_E,
            d => panic!("Vgg::for_loading: depth {d} is not 11, 13, 16 or 19"),
        };
        vgg(cfg, batch_norm, num_classes, None)
    }
}
