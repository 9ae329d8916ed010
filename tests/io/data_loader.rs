//! DataLoader: batching, shuffling determinism, drop_last.

use forge::data::{DataLoader, Dataset, InMemoryDataset};
use forge::Tensor;

fn numbered(n: usize) -> InMemoryDataset<f32> {
    // Sample i is [i, i + 0.5] with label i.
    let x = Tensor::<f32>::from_fn(&[n, 2], |k| (k / 2) as f32 + 0.5 * (k % 2) as f32);
    InMemoryDataset::new(x, (0..n as i64).collect()).unwrap()
}

#[test]
fn batches_cover_every_sample_once_in_order() {
    let ds = numbered(10);
    let loader = DataLoader::new(&ds, 4);
    let batches: Vec<_> = loader.iter().collect();
    assert_eq!(batches.len(), 3);
    let shapes: Vec<Vec<usize>> = batches.iter().map(|(x, _)| x.shape().to_vec()).collect();
    assert_eq!(shapes, vec![vec![4, 2], vec![4, 2], vec![2, 2]]);
    let labels: Vec<i64> = batches.iter().flat_map(|(_, y)| y.to_vec()).collect();
    assert_eq!(labels, (0..10).collect::<Vec<_>>());
    // Inputs travel with their labels.
    for (x, y) in &batches {
        for (row, &label) in x.as_slice().chunks(2).zip(y.as_slice()) {
            assert_eq!(row, &[label as f32, label as f32 + 0.5]);
        }
    }
}

#[test]
fn drop_last_drops_only_the_partial_batch() {
    let ds = numbered(10);
    let keep = DataLoader::new(&ds, 3);
    let drop = DataLoader::new(&ds, 3).drop_last(true);
    assert_eq!(keep.num_batches(), 4);
    assert_eq!(drop.num_batches(), 3);
    assert_eq!(
        keep.iter().map(|(x, _)| x.dim(0)).collect::<Vec<_>>(),
        vec![3, 3, 3, 1]
    );
    assert_eq!(
        drop.iter().map(|(x, _)| x.dim(0)).collect::<Vec<_>>(),
        vec![3, 3, 3]
    );
    // A batch size that divides the set: nothing is dropped.
    let exact = DataLoader::new(&ds, 5).drop_last(true);
    assert_eq!(exact.iter().count(), 2);
    // Shuffled and dropped: the dropped samples differ per epoch, the count does not.
    let shuffled = DataLoader::new(&ds, 4).shuffle(1).drop_last(true);
    for _ in 0..3 {
        let n: usize = shuffled.iter().map(|(_, y)| y.numel()).sum();
        assert_eq!(n, 8);
    }
}

#[test]
fn shuffling_is_a_permutation_and_deterministic_per_seed() {
    let ds = numbered(100);
    let epochs = |seed: u64| -> Vec<Vec<i64>> {
        let loader = DataLoader::new(&ds, 16).shuffle(seed);
        (0..3)
            .map(|_| loader.iter().flat_map(|(_, y)| y.to_vec()).collect())
            .collect()
    };
    let a = epochs(7);
    assert_eq!(a, epochs(7), "same seed, same order");
    assert_ne!(a, epochs(8), "another seed, another order");
    assert_ne!(a[0], a[1], "each epoch draws a new order");
    for e in &a {
        assert_ne!(e, &(0..100).collect::<Vec<_>>());
        let mut s = e.clone();
        s.sort();
        assert_eq!(s, (0..100).collect::<Vec<_>>());
    }
}

#[test]
fn get_batch_default_matches_the_fast_path() {
    struct Slow<'a>(&'a InMemoryDataset<f32>);
    impl Dataset for Slow<'_> {
        type Item = (Tensor<f32>, i64);
        fn len(&self) -> usize {
            self.0.len()
        }
        fn get(&self, i: usize) -> Self::Item {
            self.0.get(i)
        }
    }
    let ds = numbered(9);
    let idx = [8, 0, 3, 3];
    let (xa, ya) = ds.get_batch(&idx);
    let (xb, yb) = Slow(&ds).get_batch(&idx);
    assert_eq!(xa.shape(), xb.shape());
    assert_eq!(xa.to_vec(), xb.to_vec());
    assert_eq!(ya.to_vec(), yb.to_vec());
}

#[test]
fn mismatched_labels_are_an_error() {
    let x = Tensor::<f32>::zeros(&[3, 2]);
    assert!(InMemoryDataset::new(x.clone(), vec![0, 1]).is_err());
    assert!(InMemoryDataset::new(Tensor::<f32>::scalar(1.0), vec![0]).is_err());
    assert!(InMemoryDataset::new(x, vec![0, 1, 2]).is_ok());
}

mod mnist {
    use forge::data::mnist::{Mnist, MnistOptions, MNIST_MEAN, MNIST_STD};
    use forge::data::{DataLoader, Dataset};
    use forge::ForgeError;

    const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/mnist");

    #[test]
    fn bundled_files_have_the_documented_counts_and_labels() {
        let m = Mnist::load(DIR).unwrap();
        assert_eq!(m.train.len(), 8_004);
        assert_eq!(m.test.len(), 1_996);
        for split in [&m.train, &m.test] {
            assert_eq!(split.inputs().shape()[1..], [1, 28, 28]);
            assert!(split.labels().iter().all(|l| (0..10).contains(l)));
            // Every digit occurs (the split is stratified).
            for d in 0..10 {
                assert!(split.labels().contains(&d), "digit {d} missing");
            }
            let px = split.inputs().as_slice();
            assert!(px.iter().all(|v| (0.0..=1.0).contains(v)));
            assert!(px.contains(&0.0) && px.contains(&1.0));
        }
        // Pixel mean near MNIST's 0.1307.
        let px = m.train.inputs().as_slice();
        let mean = px.iter().map(|&v| v as f64).sum::<f64>() / px.len() as f64;
        assert!((mean - 0.1307).abs() < 0.01, "mean {mean}");
        // A loader over it yields [B, 1, 28, 28] and [B].
        let (x, y) = DataLoader::new(&m.test, 64).iter().next().unwrap();
        assert_eq!((x.shape(), y.shape()), (&[64, 1, 28, 28][..], &[64][..]));
    }

    #[test]
    fn normalisation_is_an_affine_map_of_the_raw_pixels() {
        let raw = Mnist::load(DIR).unwrap();
        let norm = Mnist::load_with(DIR, MnistOptions { normalize: true }).unwrap();
        assert_eq!(raw.test.labels(), norm.test.labels());
        for (&r, &n) in raw
            .test
            .inputs()
            .as_slice()
            .iter()
            .zip(norm.test.inputs().as_slice())
        {
            assert!((n - (r - MNIST_MEAN) / MNIST_STD).abs() < 1e-5);
        }
    }

    #[test]
    fn missing_or_foreign_files_are_errors() {
        assert!(matches!(
            Mnist::load("/definitely/not/here"),
            Err(ForgeError::Io { .. })
        ));
        // A folder whose "images" are the label file: wrong rank, an error.
        let dir = std::env::temp_dir().join(format!("forge-mnist-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let labels = std::path::Path::new(DIR).join("test-labels-idx1-ubyte.gz");
        for name in ["train-images-idx3-ubyte.gz", "test-images-idx3-ubyte.gz"] {
            std::fs::copy(&labels, dir.join(name)).unwrap();
        }
        for name in ["train-labels-idx1-ubyte.gz", "test-labels-idx1-ubyte.gz"] {
            std::fs::copy(&labels, dir.join(name)).unwrap();
        }
        let err = Mnist::load(&dir).unwrap_err();
        assert!(matches!(err, ForgeError::Format { .. }), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
