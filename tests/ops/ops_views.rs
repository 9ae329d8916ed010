//! Views that share storage: every view op returns a handle on its input's
//! storage (checked by pointer, offset and strides, against the values
//! PyTorch gives for the same views), views of views compose, gradients
//! flow through views to their base (f64 gradient checks), writes never
//! reach another handle, and kernels given non-contiguous views compute the
//! same bits as on contiguous copies, at 1 and 2 threads.

use crate::common::lock_thread_count;
use forge::optim::{Adam, Sgd};
use forge::runtime::{memory_stats, set_num_threads};
use forge::{gradcheck, Rng, Tensor};

/// `0, 1, 2, ...` in `shape`.
fn iota(shape: &[usize]) -> Tensor<f32> {
    Tensor::from_fn(shape, |i| i as f32)
}

/// A plain copy of `t`'s values (no view, no shared storage).
fn copy(t: &Tensor<f32>) -> Tensor<f32> {
    Tensor::from_vec(t.to_vec(), t.shape())
}

#[test]
fn each_view_op_shares_storage_with_pytorch_strides_and_offsets() {
    let x = iota(&[2, 3, 4]);
    // (name, view, strides, storage offset) as torch reports them for a
    // contiguous [2, 3, 4] tensor
    let views: Vec<(&str, Tensor<f32>, Vec<usize>, usize)> = vec![
        ("slice", x.slice(2, 1, 4, 2), vec![12, 4, 2], 1),
        ("narrow", x.narrow(1, 1, 2), vec![12, 4, 1], 4),
        ("select", x.select(1, 2), vec![12, 1], 8),
        ("permute", x.permute(&[2, 0, 1]), vec![1, 12, 4], 0),
        ("transpose", x.transpose(0, 2), vec![1, 4, 12], 0),
        ("t", x.select(0, 1).t(), vec![1, 4], 12),
        (
            "expand",
            x.narrow(0, 0, 1).expand(&[3, 3, 4]),
            vec![0, 4, 1],
            0,
        ),
        (
            "unsqueeze",
            x.narrow(2, 1, 2).unsqueeze(1),
            vec![12, 2, 4, 1],
            1,
        ),
        ("diagonal", x.diagonal(1, 1, 2), vec![12, 5], 1),
    ];
    for (name, v, strides, offset) in views {
        assert!(v.shares_data(&x), "{name} copied");
        assert_eq!(v.storage_offset(), offset, "{name} offset");
        // strides of size-1 dimensions are never used; torch's are arbitrary
        let used: Vec<usize> = (0..v.rank())
            .map(|d| if v.shape()[d] == 1 { 0 } else { v.stride()[d] })
            .collect();
        let want: Vec<usize> = (0..v.rank())
            .map(|d| if v.shape()[d] == 1 { 0 } else { strides[d] })
            .collect();
        assert_eq!(used, want, "{name} strides");
    }
    // and the values are those of the index arithmetic
    assert_eq!(
        x.diagonal(1, 1, 2).to_vec(),
        vec![1., 6., 11., 13., 18., 23.]
    );
    assert_eq!(
        x.select(0, 1).t().select(0, 3).to_vec(),
        vec![15., 19., 23.]
    );
    assert!(x.is_contiguous() && x.narrow(0, 1, 1).is_contiguous());
    assert!(!x.transpose(-2, -1).is_contiguous());
}

#[test]
fn int_tensors_view_too() {
    let x = Tensor::<i64>::from_fn(&[3, 4], |i| i as i64);
    let v = x.transpose(0, 1).narrow(0, 1, 2);
    assert!(v.shares_data(&x));
    assert_eq!(v.to_vec(), vec![1, 5, 9, 2, 6, 10]);
    assert_eq!(x.expand(&[2, 3, 4]).stride(), vec![0, 4, 1]);
}

#[test]
fn views_of_views_compose_to_the_same_values_as_copies() {
    let x = iota(&[4, 5, 6]);
    let chains: Vec<(Tensor<f32>, Tensor<f32>)> = vec![
        (
            x.permute(&[2, 0, 1]).narrow(1, 1, 2).slice(2, 0, 5, 2),
            copy(&copy(&copy(&x.permute(&[2, 0, 1])).narrow(1, 1, 2)).slice(2, 0, 5, 2)),
        ),
        (
            x.transpose(-2, -1).diagonal(0, 1, 2).select(0, 3),
            copy(&copy(&x.transpose(-2, -1)).diagonal(0, 1, 2)).select(0, 3),
        ),
        (
            x.narrow(0, 1, 1)
                .expand(&[3, 5, 6])
                .transpose(0, 2)
                .slice(1, 1, 5, 3),
            copy(&copy(&x.narrow(0, 1, 1).expand(&[3, 5, 6])).transpose(0, 2)).slice(1, 1, 5, 3),
        ),
        // a reshape that a view's strides allow, and one that needs a copy
        (
            x.narrow(0, 1, 2).reshape(&[10, 6]).t(),
            copy(&x.narrow(0, 1, 2)).reshape(&[10, 6]).t(),
        ),
        (
            x.transpose(-2, -1).reshape(&[4, 30]),
            copy(&x.transpose(-2, -1)).reshape(&[4, 30]),
        ),
    ];
    for (i, (view, want)) in chains.iter().enumerate() {
        assert_eq!(view.shape(), want.shape(), "chain {i}");
        assert_eq!(view.to_vec(), want.to_vec(), "chain {i}");
    }
    assert!(chains[0].0.shares_data(&x) && chains[1].0.shares_data(&x));
    assert!(
        chains[3].0.shares_data(&x),
        "a view's allowed reshape is a view"
    );
}

#[test]
fn a_non_contiguous_view_is_copied_once() {
    let x = iota(&[64, 48]);
    let v = x.t();
    let (a, b) = (v.as_slice().as_ptr(), v.clone().as_slice().as_ptr());
    assert_eq!(a, b, "the clone reads the copy the first read made");
    let c = v.contiguous();
    assert!(c.is_contiguous() && !c.shares_data(&x));
    assert_eq!(
        c.as_slice().as_ptr(),
        a,
        "contiguous() hands over that copy"
    );
    // a contiguous view is read in place
    let n = x.narrow(0, 3, 2);
    assert_eq!(n.as_slice().as_ptr(), x.as_slice()[3 * 48..].as_ptr());
}

/// A function of the gradient checks below.
type ViewFn = dyn Fn(&[Tensor<f64>]) -> Tensor<f64>;

#[test]
fn gradients_flow_through_views_to_the_base() {
    let mut rng = Rng::new(7);
    let x = Tensor::<f64>::normal(&[3, 4, 5], 0.0, 1.0, &mut rng);
    let fs: Vec<(&str, Box<ViewFn>)> = vec![
        ("slice", Box::new(|v| v[0].slice(2, 1, 5, 2).exp())),
        (
            "narrow.select",
            Box::new(|v| v[0].narrow(1, 1, 3).select(0, -1).tanh()),
        ),
        (
            "permute.t",
            Box::new(|v| v[0].permute(&[2, 0, 1]).select(2, 1).t().sin()),
        ),
        (
            "expand",
            Box::new(|v| &v[0].narrow(0, 0, 1).expand(&[4, 4, 5]) * &v[0].select(0, 2)),
        ),
        (
            "unsqueeze",
            Box::new(|v| v[0].unsqueeze(1).transpose(0, 1).sum_dim(&[2], false)),
        ),
        ("diagonal", Box::new(|v| v[0].diagonal(-1, 1, 2).square())),
        (
            "reshape of a view",
            Box::new(|v| v[0].transpose(0, 2).reshape(&[-1]).narrow(0, 7, 20).exp()),
        ),
        (
            "matmul of transposed views",
            Box::new(|v| v[0].select(2, 0).t().matmul(&v[0].select(1, 2))),
        ),
        (
            "contiguous",
            Box::new(|v| v[0].transpose(-2, -1).contiguous().square()),
        ),
    ];
    for (name, f) in &fs {
        let r = gradcheck(f, std::slice::from_ref(&x), 1e-6, 1e-6, 1e-6);
        assert!(r.is_ok(), "{name}: {r:?}");
    }
    // the base gets the gradient: ones where a slice read, zeros elsewhere
    let b = Tensor::<f64>::zeros(&[2, 3]).requires_grad();
    let g = b.t().narrow(0, 1, 2).sum().backward();
    assert_eq!(g.get(&b).unwrap().to_vec(), vec![0., 1., 1., 0., 1., 1.]);
}

#[test]
fn an_optimizer_step_never_writes_through_a_view() {
    // a view of a parameter keeps the values it was made from
    let mut w = Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]).requires_grad();
    let seen = w.detach().t();
    let cow = memory_stats().copies_on_write;
    let grads = w.sum().backward();
    Sgd::new(0.5)
        .step_params(vec![("w", &mut w)], &grads)
        .unwrap();
    assert_eq!(w.to_vec(), vec![0.5, 1.5, 2.5, 3.5]);
    assert_eq!(
        seen.to_vec(),
        vec![1.0, 3.0, 2.0, 4.0],
        "the view saw the write"
    );
    assert!(!w.shares_data(&seen), "the step copied on write");
    assert!(memory_stats().copies_on_write > cow);

    // a parameter that is a view is updated as a copy; its base is untouched
    let base = Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]);
    let mut p = base.narrow(0, 1, 2).requires_grad();
    let grads = (&p * 2.0).sum().backward();
    Adam::new(0.1)
        .step_params(vec![("p", &mut p)], &grads)
        .unwrap();
    assert_eq!(base.to_vec(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert!(p.is_contiguous() && !p.shares_data(&base));
    for (after, before) in p.to_vec().iter().zip([3.0f32, 4.0, 5.0, 6.0]) {
        // Adam's first step moves every element by lr against the sign
        assert!(
            (after - (before - 0.1)).abs() < 1e-6,
            "{after} from {before}"
        );
    }
}

#[test]
fn gradient_accumulation_never_writes_into_a_view() {
    // the gradient of `w` arrives as a transposed view (the backward of
    // `t`) and then accumulates a second use: the sum is a new tensor, and
    // the view's storage (the upstream gradient) is left as it was
    let w = Tensor::<f64>::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).requires_grad();
    let u = Tensor::<f64>::from_vec(vec![1.0, 10.0, 100.0, 1e3, 1e4, 1e5], &[3, 2]);
    let loss = (&w.t() * &u).sum() + (&w * 2.0).sum() + (&w.t() * &u).sum();
    let g = loss.backward();
    assert_eq!(
        g.get(&w).unwrap().to_vec(),
        vec![4.0, 202.0, 2e4 + 2.0, 22.0, 2002.0, 2e5 + 2.0]
    );
    assert_eq!(u.to_vec(), vec![1.0, 10.0, 100.0, 1e3, 1e4, 1e5]);
}

/// Runs `f` at 1 and 2 threads on the inputs and on contiguous copies of
/// them and checks all four results are bit-identical.
fn same_bits(name: &str, inputs: &[Tensor<f32>], f: impl Fn(&[Tensor<f32>]) -> Tensor<f32>) {
    assert!(inputs.iter().any(|t| !t.is_contiguous()), "{name}: no view");
    let copies: Vec<Tensor<f32>> = inputs.iter().map(copy).collect();
    let mut outs = Vec::new();
    for threads in [1, 2] {
        set_num_threads(threads);
        outs.push(f(inputs).to_vec());
        outs.push(f(&copies).to_vec());
    }
    set_num_threads(1);
    let bits = |v: &Vec<f32>| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
    for o in &outs[1..] {
        assert!(bits(o) == bits(&outs[0]), "{name}: bits differ");
    }
}

#[test]
fn kernels_on_views_give_the_bits_of_contiguous_copies() {
    let _threads = lock_thread_count();
    let mut rng = Rng::new(3);
    let mut normal = |s: &[usize]| Tensor::<f32>::normal(s, 0.0, 1.0, &mut rng);
    // matmul: transposed operands on the general path (read in place), a
    // thin product (copied), batched transposes, a sliced operand
    let (a, b) = (normal(&[70, 90]), normal(&[80, 70]));
    same_bits("matmul t", &[a.t(), b.t()], |v| v[0].matmul(&v[1]));
    same_bits("matmul thin", &[a.t().narrow(0, 0, 1), a.clone()], |v| {
        v[0].matmul(&v[1])
    });
    let (p, q) = (normal(&[3, 40, 33]), normal(&[3, 40, 50]));
    same_bits("bmm", &[p.transpose(1, 2), q.clone()], |v| {
        v[0].matmul(&v[1])
    });
    same_bits("matmul_t", &[q.transpose(1, 2), normal(&[20, 40])], |v| {
        v[0].matmul_t(&v[1])
    });
    same_bits(
        "linear slice",
        &[normal(&[8, 64]).slice(1, 0, 64, 2), normal(&[32, 17])],
        |v| v[0].matmul(&v[1]),
    );
    // conv on a permuted input and a sliced weight
    let x = normal(&[2, 9, 9, 3]).permute(&[0, 3, 1, 2]);
    let w = normal(&[8, 6, 3, 3]).narrow(1, 1, 3);
    same_bits("conv2d", &[x, w], |v| {
        v[0].conv2d(&v[1], None, [1, 1], [1, 1], [1, 1], 1)
    });
    let s = normal(&[30, 50]);
    same_bits("softmax", &[s.t()], |v| v[0].softmax(-1));
    same_bits("sum", &[s.t().slice(0, 1, 50, 3)], |v| {
        v[0].sum_dim(&[1], false)
    });
    same_bits(
        "elementwise",
        &[s.t(), normal(&[50, 1]).expand(&[50, 30])],
        |v| (&v[0] * &v[1]).exp(),
    );
    same_bits("cat", &[s.t(), s.narrow(0, 5, 20).t()], |v| {
        Tensor::cat(&[&v[0], &v[1]], 1)
    });
}
