//! Reference architectures.
//!
//! - [`gpt`]: a GPT-2 style language model with nanoGPT's names (checked
//!   against a trained PyTorch model: logits, loss, gradients, an AdamW
//!   step and greedy generation), greedy decoding and top-k sampling.
//! - [`transformer`]: an encoder-decoder transformer with a shared, tied
//!   embedding, sinusoidal positions and greedy decoding.
//! - [`resnet`], [`vgg`], [`alexnet`]: torchvision's ResNet-18,
//!   VGG-11/13/16/19 (with and without batch norm) and AlexNet, with
//!   torchvision's state-dict names and parameter counts.
//! - [`precision`]: half-precision (f16 / bf16) weights and checkpoints for
//!   any model.
//! - [`mnist`]: LeNet-5 and a 784-512-256-10 MLP for 28x28 digits.

pub mod alexnet;
mod display;
pub mod gpt;
pub mod mnist;
pub mod precision;
pub mod resnet;
pub mod transformer;
pub mod vgg;
