//! Small networks for 28x28 digit images (MNIST): [`LeNet5`] and the
//! [`MnistMlp`]. Both take images `[N, 1, 28, 28]` and return logits
//! `[N, 10]`.

use crate::nn::record_output;
use crate::nn::{Activation, Conv2d, Flatten, Forward, Layer, Linear, MaxPool2d};
use crate::{Float, Rng, Tensor};

/// LeNet-5 as in PyTorch's tutorials: conv 1→6 (5x5, padding 2), ReLU,
/// max-pool 2, conv 6→16 (5x5), ReLU, max-pool 2, flatten, 400→120→84→10
/// with ReLU. 61,706 parameters.
///
/// ```
/// use forge::models::mnist::LeNet5;
/// use forge::nn::{Forward, Layer};
/// let net = LeNet5::new(&mut forge::Rng::new(0));
/// assert_eq!(net.num_parameters(), 61_706);
/// let y = net.forward(forge::Tensor::zeros(&[2, 1, 28, 28]));
/// assert_eq!(y.shape(), &[2, 10]);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct LeNet5 {
    /// 1→6 channels, 5x5, padding 2.
    pub conv1: Conv2d,
    /// 6→16 channels, 5x5.
    pub conv2: Conv2d,
    /// 400→120.
    pub fc1: Linear,
    /// 120→84.
    pub fc2: Linear,
    /// 84→10.
    pub fc3: Linear,
}

impl LeNet5 {
    /// A LeNet-5 with PyTorch's default initialisation drawn from `rng`.
    ///
    /// ```
    /// let a = forge::models::mnist::LeNet5::new(&mut forge::Rng::new(3));
    /// let b = forge::models::mnist::LeNet5::new(&mut forge::Rng::new(3));
    /// assert_eq!(a.fc1.weight.to_vec(), b.fc1.weight.to_vec());
    /// ```
    pub fn new(rng: &mut Rng) -> Self {
        LeNet5 {
            conv1: Conv2d::new(1, 6, 5, rng).padding(2),
            conv2: Conv2d::new(6, 16, 5, rng),
            fc1: Linear::new(400, 120, rng),
            fc2: Linear::new(120, 84, rng),
            fc3: Linear::new(84, 10, rng),
        }
    }
}

impl Forward<Tensor> for LeNet5 {
    type Output = Tensor;

    fn forward(&self, x: Tensor) -> Tensor {
        let pool = MaxPool2d::new(2);
        let x = pool.forward(self.conv1.forward(x).relu());
        let x = pool.forward(self.conv2.forward(x).relu());
        let x = Flatten.forward(x);
        let x = relu_after(&self.fc1, x);
        let x = relu_after(&self.fc2, x);
        record_output(self, self.fc3.forward(x))
    }
}

/// A 784→512→256→10 ReLU perceptron over flattened images. 535,818
/// parameters.
///
/// ```
/// use forge::models::mnist::MnistMlp;
/// use forge::nn::{Forward, Layer};
/// let net = MnistMlp::new(&mut forge::Rng::new(0));
/// assert_eq!(net.num_parameters(), 535_818);
/// assert_eq!(net.forward(forge::Tensor::zeros(&[3, 1, 28, 28])).shape(), &[3, 10]);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct MnistMlp {
    /// 784→512.
    pub fc1: Linear,
    /// 512→256.
    pub fc2: Linear,
    /// 256→10.
    pub fc3: Linear,
}

impl MnistMlp {
    /// An MLP with PyTorch's default initialisation drawn from `rng`.
    ///
    /// ```
    /// let m = forge::models::mnist::MnistMlp::new(&mut forge::Rng::new(0));
    /// assert_eq!(m.fc1.weight.shape(), &[512, 784]);
    /// ```
    pub fn new(rng: &mut Rng) -> Self {
        MnistMlp {
            fc1: Linear::new(784, 512, rng),
            fc2: Linear::new(512, 256, rng),
            fc3: Linear::new(256, 10, rng),
        }
    }
}

impl Forward<Tensor> for MnistMlp {
    type Output = Tensor;

    fn forward(&self, x: Tensor) -> Tensor {
        let x = Flatten.forward(x);
        let x = relu_after(&self.fc1, x);
        let x = relu_after(&self.fc2, x);
        record_output(self, self.fc3.forward(x))
    }
}

/// `fc.forward(x).relu()`, the ReLU in the product's epilogue when `fc`
/// holds an int8 weight (the same bits, one pass and one op fewer). An f32
/// layer keeps the two ops: its fused form (`Tensor::linear_then`) has not
/// been timed on this model (a first reading of `bench --modes infer` at
/// batch 128, load 4, moved by less than its noise of about 5%).
fn relu_after(fc: &Linear, x: Tensor) -> Tensor {
    if fc.int8().is_some() {
        fc.forward_activated(x, Activation::Relu)
    } else {
        fc.forward(x).relu()
    }
}

/// The index of the largest value of every row of `[N, C]` scores (the
/// first one on ties), e.g. predicted classes from logits.
///
/// # Panics
/// When `scores` is not 2-d.
///
/// ```
/// use forge::models::mnist::argmax_rows;
/// let s = forge::Tensor::<f32>::from_vec(vec![0.1, 0.9, 0.5, 0.2], &[2, 2]);
/// assert_eq!(argmax_rows(&s), vec![1, 0]);
/// ```
pub fn argmax_rows<E: Float>(scores: &Tensor<E>) -> Vec<usize> {
    assert!(
        scores.rank() == 2,
        "argmax_rows: scores {:?} are not [N, C]",
        scores.shape()
    );
    let c = scores.dim(1).max(1);
    scores
        .as_slice()
        .chunks(c)
        .map(|row| {
            let mut best = 0;
            for (i, v) in row.iter().enumerate() {
                if *v > row[best] {
                    best = i;
                }
            }
            best
        })
        .collect()
}
