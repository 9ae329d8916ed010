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
    let mut loader = DataLoader::new(&ds, 4);
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
    let mut keep = DataLoader::new(&ds, 3);
    let mut drop = DataLoader::new(&ds, 3).drop_last(true);
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
    let mut exact = DataLoader::new(&ds, 5).drop_last(true);
    assert_eq!(exact.iter().count(), 2);
    // Shuffled and dropped: the dropped samples differ per epoch, the count does not.
    let mut shuffled = DataLoader::new(&ds, 4).shuffle(1).drop_last(true);
    for _ in 0..3 {
        let n: usize = shuffled.iter().map(|(_, y)| y.numel()).sum();
        assert_eq!(n, 8);
    }
}

#[test]
fn shuffling_is_a_permutation_and_deterministic_per_seed() {
    let ds = numbered(100);
    let epochs = |seed: u64| -> Vec<Vec<i64>> {
        let mut loader = DataLoader::new(&ds, 16).shuffle(seed);
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
