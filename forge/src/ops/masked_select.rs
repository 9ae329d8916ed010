//! `masked_select`: the elements where a boolean mask is true, as a 1-D
//! tensor (an `index_select` of the flattened input, so its gradient is an
//! `index_add` back into place).

use crate::tensor::{broadcast_shapes, Device, Float, Tensor};

impl<E: Float, D: Device> Tensor<E, D> {
    /// The elements of `self` where `mask` is true, in row-major order, as
    /// a 1-D tensor (`torch.masked_select(input, mask)`); `self` and `mask`
    /// are broadcast together first. Differentiable in `self`.
    ///
    /// # Panics
    /// When the shapes cannot be broadcast together.
    ///
    /// ```
    /// use forge::Tensor;
    /// let t = Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]);
    /// let m = Tensor::<bool>::from_vec(vec![true, false, false, true], &[2, 2]);
    /// assert_eq!(t.masked_select(&m).to_vec(), vec![1.0, 4.0]);
    /// let col = Tensor::<bool>::from_vec(vec![false, true], &[2]);
    /// assert_eq!(t.masked_select(&col).to_vec(), vec![2.0, 4.0]);
    /// ```
    #[track_caller]
    pub fn masked_select(&self, mask: &Tensor<bool, D>) -> Self {
        let shape = broadcast_shapes(self.shape(), mask.shape()).unwrap_or_else(|| {
            shape_panic!(
                "masked_select: input of shape {:?} and mask of shape {:?} cannot be broadcast together",
                self.shape(),
                mask.shape()
            )
        });
        let x = if self.shape() == shape.as_slice() {
            self.clone()
        } else {
            self.expand(&shape)
        };
        let m = if mask.shape() == shape.as_slice() {
            mask.clone()
        } else {
            mask.expand(&shape)
        };
        let idx: Vec<i64> = m
            .as_slice()
            .iter()
            .enumerate()
            .filter(|(_, b)| **b)
            .map(|(i, _)| i as i64)
            .collect();
        let n = idx.len();
        x.view(&[x.numel()])
            .index_select(0, &Tensor::from_vec(idx, &[n]))
    }
}
