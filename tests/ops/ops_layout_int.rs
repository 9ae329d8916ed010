//! The untracked layout ops on `i64` and `bool` tensors agree exactly with
//! the float versions on the same values (shapes and data, `==`).

use forge::Tensor;

/// Runs `f_int`, `f_bool` and `f_float` on the same values and compares.
fn agree(
    shape: &[usize],
    f_int: impl Fn(&Tensor<i64>) -> Tensor<i64>,
    f_bool: impl Fn(&Tensor<bool>) -> Tensor<bool>,
    f_float: impl Fn(&Tensor<f64>) -> Tensor<f64>,
) {
    let x = Tensor::<f64>::from_fn(shape, |i| ((i * 7) % 11) as f64);
    let want = f_float(&x);
    let got = f_int(&x.cast::<i64>());
    assert_eq!(got.shape(), want.shape());
    assert_eq!(got.cast::<f64>().to_vec(), want.to_vec());
    let b = f_bool(&x.gt_scalar(4.0));
    assert_eq!(b.shape(), want.shape());
    assert_eq!(b.to_vec(), want.gt_scalar(4.0).to_vec());
}

macro_rules! same {
    ($shape:expr, |$x:ident| $body:expr) => {
        agree($shape, |$x| $body, |$x| $body, |$x| $body)
    };
}

#[test]
fn int_and_bool_layout_match_float() {
    same!(&[2, 6], |x| x.reshape(&[3, -1]));
    same!(&[2, 6], |x| x.view(&[4, 3]));
    same!(&[2, 1, 3], |x| x.squeeze(1));
    same!(&[2, 3], |x| x.unsqueeze(-1));
    same!(&[2, 3, 4], |x| x.flatten(1, 2));
    same!(&[3, 1], |x| x.expand(&[2, 3, 4]));
    same!(&[2, 3, 4], |x| x.permute(&[2, 0, 1]));
    same!(&[2, 3, 4], |x| x.transpose(0, -1));
    same!(&[3, 9], |x| x.slice(1, -8, 8, 3));
    same!(&[3, 9], |x| x.narrow(0, 1, 2));
    let i = Tensor::<i64>::from_vec(vec![2, 0, 2, 1], &[4]);
    same!(&[3, 4], |x| x.index_select(0, &i));
}

#[test]
fn key_padding_mask_reshapes() {
    // [B, T] mask to [B, 1, 1, T], then broadcast against scores.
    let m = Tensor::<bool>::from_vec(vec![false, false, true, false, true, true], &[2, 3]);
    let m4 = m.unsqueeze(1).unsqueeze(1);
    assert_eq!(m4.shape(), &[2, 1, 1, 3]);
    let scores = Tensor::<f64>::zeros(&[2, 2, 3, 3]);
    let s = scores.masked_fill(&m4, f64::NEG_INFINITY);
    assert_eq!(
        s.to_vec().iter().filter(|v| v.is_infinite()).count(),
        (1 + 2) * 2 * 3
    );
}

#[test]
#[should_panic(expected = "index_select: index 3 is out of range for dimension 0 of size 3")]
fn int_index_error_matches_float() {
    Tensor::<i64>::zeros(&[3]).index_select(0, &Tensor::from_vec(vec![3], &[1]));
}

#[test]
#[should_panic(expected = "reshape: cannot view shape [2, 3] (6 elements) as [4, -1]")]
fn bool_reshape_error() {
    Tensor::<bool>::zeros(&[2, 3]).reshape(&[4, -1]);
}
