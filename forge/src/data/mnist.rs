//! The MNIST handwritten digits, read from IDX files (plain or gzip).

use super::InMemoryDataset;
use crate::io::{read_idx, IdxArray};
use crate::{ForgeError, Result, Tensor};
use std::path::{Path, PathBuf};

/// The mean of MNIST's training pixels on the `[0, 1]` scale.
pub const MNIST_MEAN: f32 = 0.1307;
/// The standard deviation of MNIST's training pixels on the `[0, 1]` scale.
pub const MNIST_STD: f32 = 0.3081;

/// How [`Mnist::load_with`] turns pixels into values.
///
/// ```
/// let opts = forge::data::mnist::MnistOptions { normalize: true };
/// assert!(opts.normalize);
/// assert!(!forge::data::mnist::MnistOptions::default().normalize);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MnistOptions {
    /// Subtract [`MNIST_MEAN`] and divide by [`MNIST_STD`] after scaling
    /// pixels to `[0, 1]`, as torchvision's usual `Normalize` does.
    pub normalize: bool,
}

/// MNIST's training and test splits, in memory.
///
/// Images are `f32` tensors `[N, 1, 28, 28]` with values in `[0, 1]`
/// (or normalised, see [`MnistOptions`]); labels are `0..=9`.
///
/// ```
/// use forge::data::{mnist::Mnist, Dataset};
/// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../data/mnist");
/// let m = Mnist::load(dir).unwrap();
/// assert_eq!(m.train.len() + m.test.len(), 10_000);
/// assert_eq!(m.test.item_shape(), &[1, 28, 28]);
/// ```
#[derive(Clone, Debug)]
pub struct Mnist {
    /// The training split.
    pub train: InMemoryDataset<f32>,
    /// The test split.
    pub test: InMemoryDataset<f32>,
}

impl Mnist {
    /// Reads `train-images-idx3-ubyte`, `train-labels-idx1-ubyte`,
    /// `t10k-` or `test-images-idx3-ubyte` and the test labels from `dir`,
    /// each plain or with a `.gz` suffix. Pixels are scaled to `[0, 1]`.
    ///
    /// # Errors
    /// [`ForgeError::Io`] when a file is missing or unreadable,
    /// [`ForgeError::Format`] when a file is not valid IDX, is not
    /// `[N, 28, 28]` images / `[N]` labels, the counts differ or a label
    /// is above 9.
    ///
    /// ```
    /// assert!(forge::data::mnist::Mnist::load("/no/such/dir").is_err());
    /// ```
    pub fn load(dir: impl AsRef<Path>) -> Result<Self> {
        Self::load_with(dir, MnistOptions::default())
    }

    /// As [`load`](Mnist::load), with options.
    ///
    /// # Errors
    /// As [`load`](Mnist::load).
    ///
    /// ```
    /// use forge::data::mnist::{Mnist, MnistOptions};
    /// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../data/mnist");
    /// let m = Mnist::load_with(dir, MnistOptions { normalize: true }).unwrap();
    /// let min = m.test.inputs().as_slice().iter().cloned().fold(f32::MAX, f32::min);
    /// assert!((min - (-0.1307 / 0.3081)).abs() < 1e-6);
    /// ```
    pub fn load_with(dir: impl AsRef<Path>, opts: MnistOptions) -> Result<Self> {
        let dir = dir.as_ref();
        let train = load_split(dir, &["train"], opts)?;
        let test = load_split(dir, &["test", "t10k"], opts)?;
        Ok(Mnist { train, test })
    }
}

/// The first of `{prefix}-{kind}` and `{prefix}-{kind}.gz` that exists.
fn find_file(dir: &Path, prefixes: &[&str], kind: &str) -> Result<PathBuf> {
    for prefix in prefixes {
        for suffix in ["", ".gz"] {
            let p = dir.join(format!("{prefix}-{kind}{suffix}"));
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    let wanted = dir.join(format!("{}-{kind}[.gz]", prefixes[0]));
    Err(ForgeError::io(
        wanted,
        std::io::Error::new(std::io::ErrorKind::NotFound, "MNIST file not found"),
    ))
}

fn load_split(dir: &Path, prefixes: &[&str], opts: MnistOptions) -> Result<InMemoryDataset<f32>> {
    let images_path = find_file(dir, prefixes, "images-idx3-ubyte")?;
    let labels_path = find_file(dir, prefixes, "labels-idx1-ubyte")?;
    let images = read_idx(&images_path)?;
    let labels = read_idx(&labels_path)?;
    images_to_dataset(images, labels, opts).map_err(|e| e.in_file(&images_path))
}

/// Checks shapes and labels and builds the dataset.
fn images_to_dataset(
    images: IdxArray,
    labels: IdxArray,
    opts: MnistOptions,
) -> Result<InMemoryDataset<f32>> {
    let &[n, h, w] = images.dims.as_slice() else {
        return Err(ForgeError::format(
            "MNIST",
            format!("MNIST images must be [N, 28, 28], found {:?}", images.dims),
        ));
    };
    if (h, w) != (28, 28) {
        return Err(ForgeError::format(
            "MNIST",
            format!("MNIST images must be [N, 28, 28], found {:?}", images.dims),
        ));
    }
    if labels.dims.as_slice() != [n] {
        return Err(ForgeError::format(
            "MNIST",
            format!("{n} MNIST images but labels of shape {:?}", labels.dims),
        ));
    }
    if let Some(bad) = labels.data.iter().find(|&&l| l > 9) {
        return Err(ForgeError::format(
            "MNIST",
            format!("MNIST label {bad} is not a digit"),
        ));
    }
    let (shift, scale) = if opts.normalize {
        (MNIST_MEAN, 1.0 / MNIST_STD)
    } else {
        (0.0, 1.0)
    };
    let pixels: Vec<f32> = images
        .data
        .iter()
        .map(|&p| (p as f32 / 255.0 - shift) * scale)
        .collect();
    let inputs = Tensor::from_vec(pixels, &[n, 1, 28, 28]);
    InMemoryDataset::new(inputs, labels.data.iter().map(|&l| l as i64).collect())
}
