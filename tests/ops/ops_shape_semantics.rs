//! PyTorch semantics of the shape and indexing ops that the fixtures do not
//! cover (edge cases, exact values), and their error messages: index errors
//! name the op, the index and the size; shape errors name the op and the
//! shapes.

use forge::Tensor;

fn ar(shape: &[usize]) -> Tensor<f64> {
    Tensor::from_fn(shape, |i| i as f64)
}

#[test]
fn squeeze_is_a_no_op_on_other_sizes() {
    let x = ar(&[2, 1, 3]);
    assert_eq!(x.squeeze(0).shape(), &[2, 1, 3]);
    assert_eq!(x.squeeze(-2).shape(), &[2, 3]);
    assert_eq!(ar(&[1, 1]).squeeze_all().shape(), &[] as &[usize]);
    assert_eq!(Tensor::<f64>::scalar(1.0).flatten(0, 0).shape(), &[1]);
}

#[test]
fn slices_follow_python() {
    let x = ar(&[10]);
    assert_eq!(x.slice(0, -3, 10, 1).to_vec(), vec![7.0, 8.0, 9.0]);
    assert_eq!(x.slice(0, 2, -2, 3).to_vec(), vec![2.0, 5.0]);
    assert_eq!(x.slice(0, -100, 3, 2).to_vec(), vec![0.0, 2.0]);
    assert_eq!(x.slice(0, 7, 3, 1).shape(), &[0]);
    assert_eq!(x.slice(0, 12, 20, 1).shape(), &[0]);
    // Gradient of an empty slice is zero, not an error.
    let xt = x.requires_grad();
    let g = (xt.slice(0, 5, 5, 1).sum() + xt.sum()).backward();
    assert_eq!(g.get(&xt).unwrap().to_vec(), vec![1.0; 10]);
}

#[test]
fn split_and_chunk_sizes_match_torch() {
    let x = ar(&[7, 2]);
    let dims = |v: Vec<Tensor<f64>>| v.iter().map(|p| p.dim(0)).collect::<Vec<_>>();
    assert_eq!(dims(x.split(3, 0)), vec![3, 3, 1]);
    assert_eq!(dims(x.split(7, 0)), vec![7]);
    assert_eq!(dims(x.chunk(3, 0)), vec![3, 3, 1]);
    assert_eq!(dims(ar(&[6]).chunk(4, 0)), vec![2, 2, 2]);
    assert_eq!(dims(x.split_sizes(&[0, 5, 2], 0)), vec![0, 5, 2]);
    let back: Vec<Tensor<f64>> = x.chunk(3, 0);
    let refs: Vec<&Tensor<f64>> = back.iter().collect();
    assert_eq!(Tensor::cat(&refs, 0).to_vec(), x.to_vec());
}

#[test]
fn diagonal_and_triangles_match_torch() {
    let x = ar(&[2, 3, 4]);
    // torch.arange(24.).reshape(2,3,4).diagonal(1, 0, 2): x[d, j, d + 1]
    let d = x.diagonal(1, 0, 2);
    assert_eq!(d.shape(), &[3, 2]);
    assert_eq!(d.to_vec(), vec![1.0, 14.0, 5.0, 18.0, 9.0, 22.0]);
    let d = x.diagonal(0, -1, -2);
    assert_eq!(d.shape(), &[2, 3]);
    assert_eq!(d.to_vec(), vec![0.0, 5.0, 10.0, 12.0, 17.0, 22.0]);
    assert_eq!(x.diagonal(5, 1, 2).shape(), &[2, 0]);
    let m = Tensor::<f64>::ones(&[3, 3]);
    assert_eq!(
        m.tril(-1).to_vec(),
        vec![0., 0., 0., 1., 0., 0., 1., 1., 0.]
    );
    assert_eq!(m.triu(0).to_vec(), vec![1., 1., 1., 0., 1., 1., 0., 0., 1.]);
    // tril keeps infinities in the kept part and zeroes the rest exactly.
    let inf = Tensor::<f64>::full(&[2, 2], f64::INFINITY);
    assert_eq!(
        inf.tril(0).to_vec(),
        vec![f64::INFINITY, 0.0, f64::INFINITY, f64::INFINITY]
    );
}

#[test]
fn flip_repeat_pad_values() {
    let x = ar(&[2, 3]);
    assert_eq!(x.flip(&[]).to_vec(), x.to_vec());
    assert_eq!(x.flip(&[-1]).to_vec(), vec![2., 1., 0., 5., 4., 3.]);
    let r = x.repeat(&[2, 1]);
    assert_eq!(r.shape(), &[4, 3]);
    assert_eq!(r.to_vec(), [x.to_vec(), x.to_vec()].concat());
    let p = ar(&[2]).pad(&[(2, 1)], -1.0);
    assert_eq!(p.to_vec(), vec![-1.0, -1.0, 0.0, 1.0, -1.0]);
}

#[test]
fn masked_fill_and_where_values() {
    let x = ar(&[2, 2]);
    let m = Tensor::<bool>::from_vec(vec![true, false], &[2, 1]);
    assert_eq!(
        x.masked_fill(&m, f64::NEG_INFINITY).to_vec(),
        vec![f64::NEG_INFINITY, f64::NEG_INFINITY, 2.0, 3.0]
    );
    let w = Tensor::where_cond(&m, &Tensor::scalar(7.0), &ar(&[2]));
    assert_eq!(w.to_vec(), vec![7.0, 7.0, 0.0, 1.0]);
}

#[test]
fn stack_inserts_the_new_axis_last_with_minus_one() {
    let (a, b) = (ar(&[2]), ar(&[2]) + 10.0);
    let s = Tensor::stack(&[&a, &b], -1);
    assert_eq!(s.shape(), &[2, 2]);
    assert_eq!(s.to_vec(), vec![0.0, 10.0, 1.0, 11.0]);
}

#[test]
#[should_panic(expected = "gather: index 5 is out of range for dimension 1 of size 5")]
fn gather_index_error() {
    ar(&[2, 5]).gather(1, &Tensor::from_vec(vec![0, 5], &[2, 1]));
}

#[test]
#[should_panic(expected = "index_select: index -1 is out of range for dimension 0 of size 3")]
fn index_select_index_error() {
    ar(&[3]).index_select(0, &Tensor::from_vec(vec![-1], &[1]));
}

#[test]
#[should_panic(expected = "scatter_add: index 4 is out of range for dimension 0 of size 4")]
fn scatter_add_index_error() {
    ar(&[4]).scatter_add(0, &Tensor::from_vec(vec![4], &[1]), &ar(&[1]));
}

#[test]
#[should_panic(expected = "narrow: start 2 + length 4 exceeds size 5 of dimension 1")]
fn narrow_range_error() {
    ar(&[2, 5]).narrow(1, 2, 4);
}

#[test]
#[should_panic(expected = "cat: shapes [2, 3] and [3, 3] differ outside axis 1")]
fn cat_shape_error() {
    Tensor::cat(&[&ar(&[2, 3]), &ar(&[3, 3])], 1);
}

#[test]
#[should_panic(expected = "masked_fill: mask of shape [3] does not broadcast to shape [2, 2]")]
fn masked_fill_shape_error() {
    ar(&[2, 2]).masked_fill(&Tensor::from_vec(vec![true; 3], &[3]), 0.0);
}

#[test]
#[should_panic(expected = "split_sizes: sizes [1, 1] do not add up to size 3 of dimension 0")]
fn split_sizes_error() {
    ar(&[3]).split_sizes(&[1, 1], 0);
}

#[test]
#[should_panic(expected = "unsqueeze: axis 3 is out of range -3..=2 for a tensor of rank 2")]
fn unsqueeze_axis_error() {
    ar(&[2, 3]).unsqueeze(3);
}
