//! Comparisons, boolean logic and one-hot encoding. None of these is
//! differentiable: results are detached `Tensor<bool>` (or, for
//! [`Tensor::one_hot`], an untracked tensor of any element type).

use crate::tensor::{Device, Element, Tensor};

macro_rules! comparisons {
    ($($name:ident, $scalar:ident, $sym:tt, $what:literal, $want:literal;)*) => {
        impl<E: Element, D: Device> Tensor<E, D> {
            $(
                #[doc = concat!("Elementwise `self ", stringify!($sym), " other` (", $what, ") with broadcasting, as a detached boolean tensor.")]
                ///
                /// # Panics
                /// When the shapes cannot be broadcast together.
                ///
                /// ```
                /// use forge::Tensor;
                /// let a = Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0], &[3]);
                /// let b = Tensor::<f32>::scalar(2.0);
                #[doc = concat!("let r = a.", stringify!($name), "(&b);")]
                #[doc = concat!("assert_eq!(r.to_vec(), vec!", $want, ");")]
                /// ```
                #[track_caller]
                pub fn $name(&self, other: &Self) -> Tensor<bool, D> {
                    self.broadcast_op(other, stringify!($name), |x, y| x $sym y)
                }

                #[doc = concat!("Elementwise `self ", stringify!($sym), " value` (", $what, "), as a detached boolean tensor.")]
                ///
                /// ```
                /// use forge::Tensor;
                /// let a = Tensor::<i64>::from_vec(vec![1, 2, 3], &[3]);
                #[doc = concat!("assert_eq!(a.", stringify!($scalar), "(2).to_vec(), vec!", $want, ");")]
                /// ```
                pub fn $scalar(&self, value: E) -> Tensor<bool, D> {
                    let data = D::map(self.as_slice(), |x| x $sym value);
                    Tensor::from_parts(data, self.shape.clone(), None)
                }
            )*
        }
    };
}

comparisons! {
    eq, eq_scalar, ==, "equal", "[false, true, false]";
    ne, ne_scalar, !=, "not equal", "[true, false, true]";
    lt, lt_scalar, <, "less than", "[true, false, false]";
    le, le_scalar, <=, "less or equal", "[true, true, false]";
    gt, gt_scalar, >, "greater than", "[false, false, true]";
    ge, ge_scalar, >=, "greater or equal", "[false, true, true]";
}

impl<E: Element, D: Device> Tensor<E, D> {
    /// One-hot encoding: for class indices of any shape, a tensor with a
    /// new trailing dimension of size `classes` holding one at the index
    /// and zero elsewhere. Not differentiable.
    ///
    /// # Panics
    /// When an index is negative or not below `classes`.
    ///
    /// ```
    /// use forge::Tensor;
    /// let labels = Tensor::<i64>::from_vec(vec![2, 0], &[2]);
    /// let h = Tensor::<f32>::one_hot(&labels, 3);
    /// assert_eq!(h.shape(), &[2, 3]);
    /// assert_eq!(h.to_vec(), vec![0.0, 0.0, 1.0, 1.0, 0.0, 0.0]);
    /// ```
    #[track_caller]
    pub fn one_hot(idx: &Tensor<i64, D>, classes: usize) -> Self {
        let mut data = vec![E::ZERO; idx.numel() * classes];
        for (row, &c) in idx.as_slice().iter().enumerate() {
            if c < 0 || c as u64 >= classes as u64 {
                shape_panic!("one_hot: index {c} is out of range for {classes} classes");
            }
            data[row * classes + c as usize] = E::ONE;
        }
        let mut shape = idx.shape().to_vec();
        shape.push(classes);
        Tensor::from_parts(data, shape.into(), None)
    }
}

impl<D: Device> Tensor<bool, D> {
    /// Elementwise not.
    ///
    /// ```
    /// let m = forge::Tensor::<bool>::from_vec(vec![true, false], &[2]);
    /// assert_eq!(m.logical_not().to_vec(), vec![false, true]);
    /// ```
    #[track_caller]
    pub fn logical_not(&self) -> Self {
        Tensor::from_parts(
            D::map(self.as_slice(), |x: bool| !x),
            self.shape.clone(),
            None,
        )
    }

    /// Elementwise and, with broadcasting.
    ///
    /// # Panics
    /// When the shapes cannot be broadcast together.
    ///
    /// ```
    /// use forge::Tensor;
    /// let a = Tensor::<bool>::from_vec(vec![true, true, false], &[3]);
    /// let b = Tensor::<bool>::from_vec(vec![true, false, true], &[3]);
    /// assert_eq!(a.logical_and(&b).to_vec(), vec![true, false, false]);
    /// ```
    #[track_caller]
    pub fn logical_and(&self, other: &Self) -> Self {
        self.broadcast_op(other, "logical_and", |x, y| x && y)
    }

    /// Elementwise or, with broadcasting.
    ///
    /// # Panics
    /// When the shapes cannot be broadcast together.
    ///
    /// ```
    /// use forge::Tensor;
    /// let a = Tensor::<bool>::from_vec(vec![true, false], &[2]);
    /// assert_eq!(a.logical_or(&Tensor::scalar(false)).to_vec(), vec![true, false]);
    /// ```
    #[track_caller]
    pub fn logical_or(&self, other: &Self) -> Self {
        self.broadcast_op(other, "logical_or", |x, y| x || y)
    }

    /// Whether any element is true (false for an empty tensor).
    ///
    /// ```
    /// let m = forge::Tensor::<bool>::from_vec(vec![false, true], &[2]);
    /// assert!(m.any());
    /// ```
    pub fn any(&self) -> bool {
        self.as_slice().iter().any(|&x| x)
    }

    /// Whether every element is true (true for an empty tensor).
    ///
    /// ```
    /// let m = forge::Tensor::<bool>::from_vec(vec![false, true], &[2]);
    /// assert!(!m.all());
    /// ```
    pub fn all(&self) -> bool {
        self.as_slice().iter().all(|&x| x)
    }

    /// The number of true elements.
    ///
    /// ```
    /// let m = forge::Tensor::<bool>::from_vec(vec![true, false, true], &[3]);
    /// assert_eq!(m.count_true(), 2);
    /// ```
    pub fn count_true(&self) -> usize {
        self.as_slice().iter().filter(|&&x| x).count()
    }
}
