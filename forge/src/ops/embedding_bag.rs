//! `F.embedding_bag`: the rows of an embedding table looked up per bag and
//! reduced (sum, mean or max), composed of `index_select`, `index_add`,
//! `narrow` and `max_dim`, so gradients of every order come from theirs.

use crate::tensor::{Device, Float, Tensor};

/// How [`embedding_bag`] reduces a bag (`F.embedding_bag`'s `mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BagMode {
    /// The sum of the bag's rows (each scaled by its per-sample weight,
    /// when given).
    Sum,
    /// The mean of the bag's rows (PyTorch's default).
    #[default]
    Mean,
    /// The elementwise maximum of the bag's rows.
    Max,
}

impl BagMode {
    /// The mode from PyTorch's spelling.
    ///
    /// ```
    /// use forge::nn::functional::BagMode;
    /// assert_eq!(BagMode::from_name("max"), Some(BagMode::Max));
    /// ```
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "sum" => BagMode::Sum,
            "mean" => BagMode::Mean,
            "max" => BagMode::Max,
            _ => return None,
        })
    }
}

/// The bags of `input`: per bag, the range of entries it holds.
#[track_caller]
fn bags<D: Device>(
    input: &Tensor<i64, D>,
    offsets: Option<&Tensor<i64, D>>,
    include_last_offset: bool,
) -> Vec<(usize, usize)> {
    let n = input.numel();
    match (input.rank(), offsets) {
        (2, None) => {
            let (b, l) = (input.shape()[0], input.shape()[1]);
            (0..b).map(|i| (i * l, (i + 1) * l)).collect()
        }
        (1, Some(o)) => {
            let o = o.as_slice();
            assert!(
                !o.is_empty() && o[0] == 0 && o.windows(2).all(|w| w[0] <= w[1]) && o[o.len() - 1] as usize <= n,
                "embedding_bag: offsets {o:?} must start at 0, not decrease and stay within the {n} indices"
            );
            let mut ends: Vec<usize> = o.iter().map(|&v| v as usize).collect();
            if !include_last_offset {
                ends.push(n);
            }
            ends.windows(2).map(|w| (w[0], w[1])).collect()
        }
        _ => panic!(
            "embedding_bag: input {:?} needs offsets when 1-d and none when 2-d (offsets given: {})",
            input.shape(),
            offsets.is_some()
        ),
    }
}

/// `F.embedding_bag(input, weight, offsets, mode, per_sample_weights,
/// include_last_offset, padding_idx)`: output `[bags, dim]`, bag `b`
/// reducing the rows `weight[input[j]]` of its entries. `input` is `[B, L]`
/// (one bag per row, no offsets) or 1-d with `offsets` (bag `b` holds
/// entries `offsets[b]..offsets[b + 1]`, the last running to the end, or
/// ending at the last offset when `include_last_offset`). Entries equal to
/// `padding_idx` are left out (also from a mean's count); an empty bag
/// gives zeros. `per_sample_weights` (the input's shape, `Sum` only)
/// scales each row. Differentiable in `weight` and `per_sample_weights`.
///
/// # Panics
/// When the shapes or offsets do not fit, an index is out of range, or
/// per-sample weights come with a mode other than `Sum`.
///
/// ```
/// use forge::nn::functional::{embedding_bag, BagMode};
/// use forge::Tensor;
/// let w = Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]);
/// let input = Tensor::<i64>::from_vec(vec![0, 2, 1], &[3]);
/// let offsets = Tensor::<i64>::from_vec(vec![0, 2], &[2]);
/// let y = embedding_bag(&input, &w, Some(&offsets), BagMode::Sum, None, false, None);
/// assert_eq!(y.to_vec(), vec![6.0, 8.0, 3.0, 4.0]);
/// ```
#[allow(clippy::too_many_arguments)]
#[track_caller]
pub fn embedding_bag<E: Float, D: Device>(
    input: &Tensor<i64, D>,
    weight: &Tensor<E, D>,
    offsets: Option<&Tensor<i64, D>>,
    mode: BagMode,
    per_sample_weights: Option<&Tensor<E, D>>,
    include_last_offset: bool,
    padding_idx: Option<usize>,
) -> Tensor<E, D> {
    assert!(
        weight.rank() == 2,
        "embedding_bag: weight must be 2-d (num_embeddings, dim), got shape {:?}",
        weight.shape()
    );
    let (rows, dim) = (weight.shape()[0], weight.shape()[1]);
    if let Some(p) = per_sample_weights {
        assert!(
            mode == BagMode::Sum && p.shape() == input.shape(),
            "embedding_bag: per_sample_weights of shape {:?} need mode Sum and the input's shape {:?} (mode {mode:?})",
            p.shape(),
            input.shape()
        );
    }
    let ranges = bags(input, offsets, include_last_offset);
    let idx = input.as_slice();
    // The entries kept (not padding), grouped by bag in order.
    let (mut kept, mut rows_of, mut bag_of) = (Vec::new(), Vec::new(), Vec::new());
    let mut counts = Vec::with_capacity(ranges.len());
    for (b, &(s, e)) in ranges.iter().enumerate() {
        let before = kept.len();
        for (j, &i) in idx.iter().enumerate().take(e).skip(s) {
            assert!(
                (0..rows as i64).contains(&i),
                "embedding_bag: index {i} is out of range for {rows} embeddings"
            );
            if padding_idx != Some(i as usize) {
                kept.push(j as i64);
                rows_of.push(i);
                bag_of.push(b as i64);
            }
        }
        counts.push(kept.len() - before);
    }
    let m = kept.len();
    let nb = ranges.len();
    let mut picked = weight.index_select(0, &Tensor::from_vec(rows_of, &[m]));
    if let Some(p) = per_sample_weights {
        let w = p
            .reshape(&[-1])
            .index_select(0, &Tensor::from_vec(kept, &[m]))
            .unsqueeze(1);
        picked = picked.mul(&w);
    }
    match mode {
        BagMode::Sum | BagMode::Mean => {
            let sum =
                Tensor::zeros(&[nb, dim]).index_add(0, &Tensor::from_vec(bag_of, &[m]), &picked);
            if mode == BagMode::Sum {
                return sum;
            }
            let scale: Vec<E> = counts
                .iter()
                .map(|&c| E::from_f64(1.0 / c.max(1) as f64))
                .collect();
            sum.mul(&Tensor::from_vec(scale, &[nb, 1]))
        }
        BagMode::Max => {
            let mut start = 0;
            let maxes: Vec<Tensor<E, D>> = counts
                .iter()
                .map(|&c| {
                    let r = if c == 0 {
                        Tensor::zeros(&[dim])
                    } else {
                        picked.narrow(0, start, c).max_dim(&[0], false)
                    };
                    start += c;
                    r
                })
                .collect();
            let refs: Vec<&Tensor<E, D>> = maxes.iter().collect();
            if refs.is_empty() {
                return Tensor::zeros(&[0, dim]);
            }
            Tensor::stack(&refs, 0)
        }
    }
}
