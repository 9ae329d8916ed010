//! `Display` for the reference models, in the layout of PyTorch's
//! `print(model)`: `Name(`, one `(child): layer` line per child (the child's
//! own lines indented), then `)`. Functions the models apply without a
//! layer of their own (ReLU, GELU, max pooling in LeNet-5, flattening) are
//! listed where PyTorch's module tree has them, so the text reads as the
//! architecture; no weights are printed.

use super::alexnet::AlexNet;
use super::gpt::{Block, CausalSelfAttention, Gpt, GptTransformer, Mlp};
use super::mnist::{LeNet5, MnistMlp};
use super::resnet::{BasicBlock, Downsample, ResNet};
use super::transformer::Seq2SeqTransformer;
use super::vgg::{Stage, Vgg};
use crate::nn::{
    nested, AdaptiveAvgPool2d, Flatten, GeluTanh, MaxPool2d, ModuleList, Relu, SequentialList,
};
use crate::tensor::Float;
use std::fmt;

impl<E: Float> fmt::Display for Stage<E> {
    /// The stage's layer (`ReLU()` for the stateless ReLU).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stage::Conv(l) => l.fmt(f),
            Stage::Norm(l) => l.fmt(f),
            Stage::Relu => Relu.fmt(f),
            Stage::MaxPool(l) => l.fmt(f),
            Stage::Linear(l) => l.fmt(f),
            Stage::Dropout(l) => l.fmt(f),
        }
    }
}

/// torchvision's layout of VGG and AlexNet: `features` and `classifier`
/// as `Sequential`s around the adaptive average pool.
fn write_features_classifier<E: Float>(
    f: &mut fmt::Formatter<'_>,
    name: &str,
    features: &[Stage<E>],
    avgpool: &AdaptiveAvgPool2d,
    classifier: &[Stage<E>],
) -> fmt::Result {
    nested(
        f,
        name,
        None,
        &[
            ("features", &SequentialList(features)),
            ("avgpool", avgpool),
            ("classifier", &SequentialList(classifier)),
        ],
    )
}

impl<E: Float> fmt::Display for Vgg<E> {
    /// `VGG(features: Sequential(..), avgpool, classifier: Sequential(..))`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_features_classifier(f, "VGG", &self.features, &self.avgpool, &self.classifier)
    }
}

impl<E: Float> fmt::Display for AlexNet<E> {
    /// As torchvision's `AlexNet`: features, avgpool, classifier.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_features_classifier(
            f,
            "AlexNet",
            &self.features,
            &self.avgpool,
            &self.classifier,
        )
    }
}

impl<E: Float> fmt::Display for Downsample<E> {
    /// `Sequential((0): Conv2d(..), (1): BatchNorm2d(..))`, as torchvision.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        nested(f, "Sequential", None, &[("0", &self.0), ("1", &self.1)])
    }
}

impl<E: Float> fmt::Display for BasicBlock<E> {
    /// conv1, bn1, relu, conv2, bn2 and the downsample path when present.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut children: Vec<(&str, &dyn fmt::Display)> = vec![
            ("conv1", &self.conv1),
            ("bn1", &self.bn1),
            ("relu", &Relu),
            ("conv2", &self.conv2),
            ("bn2", &self.bn2),
        ];
        if let Some(d) = &self.downsample {
            children.push(("downsample", d));
        }
        nested(f, "BasicBlock", None, &children)
    }
}

impl<E: Float> fmt::Display for ResNet<E> {
    /// torchvision's layout: the stem, `layer1`..`layer4` as `Sequential`s
    /// of blocks, avgpool, fc.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        nested(
            f,
            "ResNet",
            None,
            &[
                ("conv1", &self.conv1),
                ("bn1", &self.bn1),
                ("relu", &Relu),
                ("maxpool", &self.maxpool),
                ("layer1", &SequentialList(&self.layer1)),
                ("layer2", &SequentialList(&self.layer2)),
                ("layer3", &SequentialList(&self.layer3)),
                ("layer4", &SequentialList(&self.layer4)),
                ("avgpool", &self.avgpool),
                ("fc", &self.fc),
            ],
        )
    }
}

impl<E: Float> fmt::Display for CausalSelfAttention<E> {
    /// `n_head=..`, then the two projections.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        nested(
            f,
            "CausalSelfAttention",
            Some(format!("n_head={}", self.n_head)),
            &[("c_attn", &self.c_attn), ("c_proj", &self.c_proj)],
        )
    }
}

impl<E: Float> fmt::Display for Mlp<E> {
    /// `c_fc`, the tanh-form GELU, `c_proj`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        nested(
            f,
            "MLP",
            None,
            &[
                ("c_fc", &self.c_fc),
                ("gelu", &GeluTanh),
                ("c_proj", &self.c_proj),
            ],
        )
    }
}

impl<E: Float> fmt::Display for Block<E> {
    /// `ln_1`, `attn`, `ln_2`, `mlp`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        nested(
            f,
            "Block",
            None,
            &[
                ("ln_1", &self.ln_1),
                ("attn", &self.attn),
                ("ln_2", &self.ln_2),
                ("mlp", &self.mlp),
            ],
        )
    }
}

impl<E: Float> fmt::Display for GptTransformer<E> {
    /// nanoGPT's `ModuleDict`: `wte`, `wpe`, the blocks `h`, `ln_f`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        nested(
            f,
            "ModuleDict",
            None,
            &[
                ("wte", &self.wte),
                ("wpe", &self.wpe),
                ("h", &ModuleList(&self.h)),
                ("ln_f", &self.ln_f),
            ],
        )
    }
}

/// The GPT's output layer, which has no weight of its own.
struct TiedHead {
    n_embd: usize,
    vocab_size: usize,
}

impl fmt::Display for TiedHead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Linear(in_features={}, out_features={}, bias=false, weight=transformer.wte.weight)",
            self.n_embd, self.vocab_size
        )
    }
}

impl<E: Float> fmt::Display for Gpt<E> {
    /// nanoGPT's `print(model)`: `transformer` and `lm_head`, whose weight
    /// is the token embedding's (tied).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let head = TiedHead {
            n_embd: self.config.n_embd,
            vocab_size: self.config.vocab_size,
        };
        nested(
            f,
            "GPT",
            None,
            &[("transformer", &self.transformer), ("lm_head", &head)],
        )
    }
}

impl<E: Float> fmt::Display for Seq2SeqTransformer<E> {
    /// The shared embedding (also the output projection), the positional
    /// encoding, the encoder and the decoder stacks.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        nested(
            f,
            "Seq2SeqTransformer",
            None,
            &[
                ("embedding", &self.embedding),
                ("positions", &self.positions),
                ("encoder", &self.encoder),
                ("decoder", &self.decoder),
            ],
        )
    }
}

impl fmt::Display for LeNet5 {
    /// The two convolutions (each followed by ReLU and 2x2 max pooling),
    /// the flatten and the three linear layers.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        nested(
            f,
            "LeNet5",
            None,
            &[
                ("conv1", &self.conv1),
                ("relu", &Relu),
                ("pool", &MaxPool2d::new(2)),
                ("conv2", &self.conv2),
                ("flatten", &Flatten),
                ("fc1", &self.fc1),
                ("fc2", &self.fc2),
                ("fc3", &self.fc3),
            ],
        )
    }
}

impl fmt::Display for MnistMlp {
    /// The flatten and the three linear layers (ReLU between them).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        nested(
            f,
            "MnistMlp",
            None,
            &[
                ("flatten", &Flatten),
                ("fc1", &self.fc1),
                ("relu", &Relu),
                ("fc2", &self.fc2),
                ("fc3", &self.fc3),
            ],
        )
    }
}
