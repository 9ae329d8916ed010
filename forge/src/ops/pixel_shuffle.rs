//! `pixel_shuffle` / `pixel_unshuffle` (sub-pixel convolution layouts):
//! a view, a permutation and a reshape, so the gradient of each is the
//! other.

use crate::tensor::{Device, Float, Tensor};

/// The permutation `tail` of the last 5 axes after `lead` fixed ones.
fn with_lead(lead: usize, tail: [usize; 5]) -> Vec<isize> {
    (0..lead)
        .chain(tail.iter().map(|&a| a + lead))
        .map(|a| a as isize)
        .collect()
}

impl<E: Float, D: Device> Tensor<E, D> {
    /// Rearranges `[*, C r^2, H, W]` into `[*, C, H r, W r]`
    /// (`F.pixel_shuffle(input, upscale_factor)`): output pixel
    /// `(c, h r + i, w r + j)` is input `(c r^2 + i r + j, h, w)`.
    ///
    /// # Panics
    /// When the rank is below 3, `r` is 0 or the channels are not a
    /// multiple of `r^2`.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[1, 4, 1, 1]);
    /// let y = x.pixel_shuffle(2);
    /// assert_eq!(y.shape(), &[1, 1, 2, 2]);
    /// assert_eq!(y.to_vec(), vec![1.0, 2.0, 3.0, 4.0]);
    /// ```
    #[track_caller]
    pub fn pixel_shuffle(&self, upscale_factor: usize) -> Self {
        let r = upscale_factor;
        let s = self.shape();
        shape_assert!(
            s.len() >= 3 && r > 0 && s[s.len() - 3].is_multiple_of(r * r),
            "pixel_shuffle: input of shape {s:?} with upscale_factor {r} \
             (need [*, C*r^2, H, W])"
        );
        let lead = s.len() - 3;
        let (c, h, w) = (s[lead] / (r * r), s[lead + 1], s[lead + 2]);
        let mut split = s[..lead].to_vec();
        split.extend([c, r, r, h, w]);
        let mut out = s[..lead].to_vec();
        out.extend([c, h * r, w * r]);
        // [*, c, i, j, h, w] -> [*, c, h, i, w, j]
        self.view(&split)
            .permute(&with_lead(lead, [0, 3, 1, 4, 2]))
            .view(&out)
    }

    /// Rearranges `[*, C, H r, W r]` into `[*, C r^2, H, W]`
    /// (`F.pixel_unshuffle(input, downscale_factor)`), the inverse of
    /// [`Tensor::pixel_shuffle`].
    ///
    /// # Panics
    /// When the rank is below 3, `r` is 0 or the height or width is not a
    /// multiple of `r`.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[1, 1, 2, 2]);
    /// let y = x.pixel_unshuffle(2);
    /// assert_eq!(y.shape(), &[1, 4, 1, 1]);
    /// assert_eq!(y.pixel_shuffle(2).to_vec(), x.to_vec());
    /// ```
    #[track_caller]
    pub fn pixel_unshuffle(&self, downscale_factor: usize) -> Self {
        let r = downscale_factor;
        let s = self.shape();
        shape_assert!(
            s.len() >= 3
                && r > 0
                && s[s.len() - 2].is_multiple_of(r)
                && s[s.len() - 1].is_multiple_of(r),
            "pixel_unshuffle: input of shape {s:?} with downscale_factor {r} \
             (need [*, C, H*r, W*r])"
        );
        let lead = s.len() - 3;
        let (c, h, w) = (s[lead], s[lead + 1] / r, s[lead + 2] / r);
        let mut split = s[..lead].to_vec();
        split.extend([c, h, r, w, r]);
        let mut out = s[..lead].to_vec();
        out.extend([c * r * r, h, w]);
        // [*, c, h, i, w, j] -> [*, c, i, j, h, w]
        self.view(&split)
            .permute(&with_lead(lead, [0, 2, 4, 1, 3]))
            .view(&out)
    }
}
