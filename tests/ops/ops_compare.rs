//! Comparisons, boolean helpers and one_hot: exact results (these ops
//! compute booleans, so `==` everywhere), broadcasting, NaN behaviour as in
//! PyTorch/IEEE, and detached results.

use forge::Tensor;

fn t(v: &[f64], shape: &[usize]) -> Tensor<f64> {
    Tensor::from_vec(v.to_vec(), shape)
}

#[test]
fn comparisons_broadcast() {
    let a = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let b = t(&[2.0, 5.0], &[2, 1]);
    let tf = |s: &str| -> Vec<bool> { s.chars().map(|c| c == '1').collect() };
    assert_eq!(a.eq(&b).shape(), &[2, 3]);
    assert_eq!(a.eq(&b).to_vec(), tf("010010"));
    assert_eq!(a.ne(&b).to_vec(), tf("101101"));
    assert_eq!(a.lt(&b).to_vec(), tf("100100"));
    assert_eq!(a.le(&b).to_vec(), tf("110110"));
    assert_eq!(a.gt(&b).to_vec(), tf("001001"));
    assert_eq!(a.ge(&b).to_vec(), tf("011011"));
    // Broadcasting both ways: [3] against [2, 1].
    let c = t(&[1.0, 2.0, 3.0], &[3]);
    assert_eq!(b.lt(&c).to_vec(), tf("001000"));
}

#[test]
fn scalar_comparisons() {
    let a = t(&[-1.0, 0.0, 1.0], &[3]);
    assert_eq!(a.gt_scalar(0.0).to_vec(), vec![false, false, true]);
    assert_eq!(a.ge_scalar(0.0).to_vec(), vec![false, true, true]);
    assert_eq!(a.lt_scalar(0.0).to_vec(), vec![true, false, false]);
    assert_eq!(a.le_scalar(0.0).to_vec(), vec![true, true, false]);
    assert_eq!(a.eq_scalar(0.0).to_vec(), vec![false, true, false]);
    assert_eq!(a.ne_scalar(0.0).to_vec(), vec![true, false, true]);
}

#[test]
fn nan_compares_false_except_ne() {
    let a = t(&[f64::NAN], &[1]);
    let b = t(&[f64::NAN], &[1]);
    assert_eq!(a.eq(&b).to_vec(), vec![false]);
    assert_eq!(a.ne(&b).to_vec(), vec![true]);
    assert_eq!(a.lt(&b).to_vec(), vec![false]);
    assert_eq!(a.ge_scalar(0.0).to_vec(), vec![false]);
}

#[test]
fn comparisons_work_for_integers_and_are_detached() {
    let i = Tensor::<i64>::from_vec(vec![3, -1, 7], &[3]);
    let j = Tensor::<i64>::from_vec(vec![3, 0, 5], &[3]);
    assert_eq!(i.ge(&j).to_vec(), vec![true, false, true]);
    let x = t(&[1.0, 2.0], &[2]).requires_grad();
    let m = x.gt_scalar(1.5);
    assert!(!m.is_tracked());
    // A mask turned into floats is a constant.
    assert_eq!(m.cast::<f64>().to_vec(), vec![0.0, 1.0]);
}

#[test]
#[should_panic(expected = "lt: shapes [2] and [3] cannot be broadcast together")]
fn comparison_shape_error_names_op_and_shapes() {
    t(&[1.0, 2.0], &[2]).lt(&t(&[1.0, 2.0, 3.0], &[3]));
}

#[test]
fn boolean_helpers() {
    let a = Tensor::<bool>::from_vec(vec![true, false, true, false], &[2, 2]);
    let b = Tensor::<bool>::from_vec(vec![true, false], &[2]);
    assert_eq!(a.logical_not().to_vec(), vec![false, true, false, true]);
    assert_eq!(a.logical_and(&b).to_vec(), vec![true, false, true, false]);
    assert_eq!(
        a.logical_or(&b.logical_not()).to_vec(),
        vec![true, true, true, true]
    );
    assert!(a.any() && !a.all() && b.logical_or(&Tensor::scalar(true)).all());
    assert_eq!(a.count_true(), 2);
}

#[test]
fn one_hot_adds_a_trailing_dim() {
    let labels = Tensor::<i64>::from_vec(vec![0, 3, 1, 3], &[2, 2]);
    let h = Tensor::<f64>::one_hot(&labels, 4);
    assert_eq!(h.shape(), &[2, 2, 4]);
    #[rustfmt::skip]
    let want = vec![
        1.0, 0.0, 0.0, 0.0,   0.0, 0.0, 0.0, 1.0,
        0.0, 1.0, 0.0, 0.0,   0.0, 0.0, 0.0, 1.0,
    ];
    assert_eq!(h.to_vec(), want);
    // Any element type; a 0-d label gives a 1-d row.
    let b = Tensor::<bool>::one_hot(&Tensor::scalar(1), 3);
    assert_eq!(
        (b.shape(), b.to_vec()),
        (&[3usize][..], vec![false, true, false])
    );
    assert_eq!(Tensor::<i64>::one_hot(&labels, 4).sum_i64(), 4);
}

trait SumI64 {
    fn sum_i64(&self) -> i64;
}

impl SumI64 for Tensor<i64> {
    fn sum_i64(&self) -> i64 {
        self.as_slice().iter().sum()
    }
}

#[test]
#[should_panic(expected = "one_hot: index 4 is out of range for 4 classes")]
fn one_hot_rejects_out_of_range() {
    Tensor::<f32>::one_hot(&Tensor::from_vec(vec![1, 4], &[2]), 4);
}

#[test]
#[should_panic(expected = "one_hot: index -1 is out of range for 4 classes")]
fn one_hot_rejects_negative() {
    Tensor::<f32>::one_hot(&Tensor::from_vec(vec![-1], &[1]), 4);
}
