//! `F.pad`'s modes: constant, reflect, replicate and circular. The
//! non-constant modes are one `index_select` per padded axis (each output
//! position reads the input position its mode names), so the backward rule
//! is `index_add` and gradients of every order come with them.

use crate::tensor::{Device, Float, Tensor};

/// How [`Tensor::pad_with`] fills the border (`F.pad`'s `mode`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PadMode {
    /// Every new element holds the value (`mode='constant', value=v`).
    Constant(f64),
    /// The input mirrored at its edge, the edge itself not repeated
    /// (`[1, 2, 3]` padded by 2 gives `[3, 2, 1, 2, 3, 2, 1]`).
    Reflect,
    /// The edge element repeated (`[1, 2, 3]` by 2: `[1, 1, 1, 2, 3, 3, 3]`).
    Replicate,
    /// The input wrapped around (`[1, 2, 3]` by 2: `[2, 3, 1, 2, 3, 1, 2]`).
    Circular,
}

impl PadMode {
    /// The mode from PyTorch's spelling (`"constant"` gives value 0).
    ///
    /// ```
    /// use forge::ops::PadMode;
    /// assert_eq!(PadMode::from_name("reflect"), Some(PadMode::Reflect));
    /// assert_eq!(PadMode::from_name("mirror"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "constant" => PadMode::Constant(0.0),
            "reflect" => PadMode::Reflect,
            "replicate" => PadMode::Replicate,
            "circular" => PadMode::Circular,
            _ => return None,
        })
    }

    /// PyTorch's spelling of the mode.
    ///
    /// ```
    /// assert_eq!(forge::ops::PadMode::Circular.name(), "circular");
    /// ```
    pub fn name(&self) -> &'static str {
        match self {
            PadMode::Constant(_) => "constant",
            PadMode::Reflect => "reflect",
            PadMode::Replicate => "replicate",
            PadMode::Circular => "circular",
        }
    }

    /// The input position read by output position `j` of an axis of size
    /// `n` padded by `lo` in front.
    fn source(self, j: usize, lo: usize, n: usize) -> usize {
        let (s, n) = (j as isize - lo as isize, n as isize);
        let s = match self {
            PadMode::Reflect => {
                if s < 0 {
                    -s
                } else if s >= n {
                    2 * (n - 1) - s
                } else {
                    s
                }
            }
            PadMode::Replicate => s.clamp(0, n - 1),
            PadMode::Circular | PadMode::Constant(_) => s.rem_euclid(n),
        };
        s as usize
    }
}

impl<E: Float, D: Device> Tensor<E, D> {
    /// `F.pad(x, pad, mode)`: `pads[k]` is the `(before, after)` padding of
    /// dimension `rank - 1 - k` (the last dimension first, as `F.pad`'s flat
    /// list pairs them). [`PadMode::Constant`] pads any dimensions (as
    /// [`pad`](Self::pad)); the other modes pad the last 1, 2 or 3
    /// dimensions of an input with one or two more (batch and channel),
    /// as PyTorch allows. Reflect needs each padding below the dimension's
    /// size, circular at most the size, replicate a non-empty dimension.
    /// Differentiable (the border's gradient adds onto the elements it
    /// copies), to any order.
    ///
    /// # Panics
    /// When the rank or a padding does not fit the mode (naming the mode,
    /// the padding and the shape).
    ///
    /// ```
    /// use forge::{ops::PadMode, Tensor};
    /// let x = Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0], &[1, 3]);
    /// assert_eq!(x.pad_with(&[(2, 1)], PadMode::Reflect).to_vec(), vec![3.0, 2.0, 1.0, 2.0, 3.0, 2.0]);
    /// assert_eq!(x.pad_with(&[(1, 2)], PadMode::Replicate).to_vec(), vec![1.0, 1.0, 2.0, 3.0, 3.0, 3.0]);
    /// assert_eq!(x.pad_with(&[(2, 0)], PadMode::Circular).to_vec(), vec![2.0, 3.0, 1.0, 2.0, 3.0]);
    /// ```
    #[track_caller]
    pub fn pad_with(&self, pads: &[(usize, usize)], mode: PadMode) -> Self {
        if let PadMode::Constant(v) = mode {
            return self.pad(pads, v);
        }
        let rank = self.rank();
        let k = pads.len();
        assert!(
            (1..=3).contains(&k) && (rank == k + 1 || rank == k + 2),
            "pad: {} padding of {k} dimensions {pads:?} needs an input of rank {} or {}, got shape {:?}",
            mode.name(),
            k + 1,
            k + 2,
            self.shape()
        );
        let mut out = self.clone();
        for (i, &(lo, hi)) in pads.iter().enumerate() {
            let axis = rank - 1 - i;
            let n = self.shape()[axis];
            let fits = match mode {
                PadMode::Reflect => lo < n && hi < n,
                PadMode::Circular => lo <= n && hi <= n,
                _ => n > 0,
            };
            assert!(
                fits,
                "pad: {} padding {pads:?} does not fit dimension {axis} of shape {:?}{}",
                mode.name(),
                self.shape(),
                match mode {
                    PadMode::Reflect => " (each padding must be below the size)",
                    PadMode::Circular => " (each padding must be at most the size)",
                    _ => " (the dimension is empty)",
                }
            );
            if lo == 0 && hi == 0 {
                continue;
            }
            let idx: Vec<i64> = (0..n + lo + hi)
                .map(|j| mode.source(j, lo, n) as i64)
                .collect();
            let len = idx.len();
            out = out.index_select(axis as isize, &Tensor::<i64, D>::from_vec(idx, &[len]));
        }
        out
    }
}
