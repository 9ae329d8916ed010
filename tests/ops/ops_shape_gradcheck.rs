//! Finite-difference checks in f64 of every shape and indexing op's
//! backward rule (first order, with `forge::gradcheck`), and of its
//! gradient's own gradient (a Hessian-vector product against central
//! differences of the gradient), since every rule is written in tensor ops.
//!
//! Tolerances: gradcheck's eps 1e-6, atol = rtol = 1e-6 (see its docs).
//! The second-order check uses the same eps and 1e-6 bounds: the cubic loss
//! has third derivatives of order one, so central differences err by ~1e-12.

use forge::{gradcheck, Rng, Tensor};
use std::slice::from_ref;

type Op = dyn Fn(&[Tensor<f64>]) -> Tensor<f64>;

fn randn(shape: &[usize], seed: u64) -> Tensor<f64> {
    Tensor::normal(shape, 0.0, 1.0, &mut Rng::new(seed))
}

/// The gradient of `sum(op(xs)^3 * w)` with respect to every input, with
/// the graph kept when `graph` (missing gradients are zeros).
fn grads(op: &Op, xs: &[Tensor<f64>], w: &Tensor<f64>, graph: bool) -> Vec<Tensor<f64>> {
    let y = op(xs);
    let loss = (&y * &y * &y * w).sum();
    let g = if graph {
        loss.backward_with_graph()
    } else {
        loss.backward()
    };
    xs.iter()
        .map(|x| {
            g.get(x)
                .cloned()
                .unwrap_or_else(|| Tensor::zeros(x.shape()))
        })
        .collect()
}

/// Checks the op's first derivative with gradcheck and its second
/// derivative (through the recorded backward rules) with a Hessian-vector
/// product against central differences of the gradient.
fn check(name: &str, op: &Op, inputs: &[Tensor<f64>]) {
    gradcheck(op, inputs, 1e-6, 1e-6, 1e-6).unwrap_or_else(|e| panic!("{name}: {e}"));

    let w = randn(op(inputs).shape(), 7);
    let vs: Vec<Tensor<f64>> = inputs
        .iter()
        .enumerate()
        .map(|(i, x)| randn(x.shape(), 100 + i as u64))
        .collect();
    let xs: Vec<Tensor<f64>> = inputs.iter().map(|x| x.requires_grad()).collect();
    let gs = grads(op, &xs, &w, true);
    let s = gs
        .iter()
        .zip(&vs)
        .map(|(g, v)| (g * v).sum())
        .reduce(|a, b| a + b)
        .unwrap();
    assert!(s.is_tracked(), "{name}: gradient is not differentiable");
    let h = s.backward();
    let eps = 1e-6;
    let shifted = |sign: f64| -> Vec<Tensor<f64>> {
        let xs: Vec<Tensor<f64>> = inputs
            .iter()
            .zip(&vs)
            .map(|(x, v)| (x + &(v * (sign * eps))).requires_grad())
            .collect();
        grads(op, &xs, &w, false)
    };
    let (gp, gm) = (shifted(1.0), shifted(-1.0));
    for (i, x) in xs.iter().enumerate() {
        let analytic = h
            .get(x)
            .map(|t| t.to_vec())
            .unwrap_or_else(|| vec![0.0; x.numel()]);
        for (j, a) in analytic.iter().enumerate() {
            let numeric = (gp[i].as_slice()[j] - gm[i].as_slice()[j]) / (2.0 * eps);
            assert!(
                (a - numeric).abs() <= 1e-6 + 1e-6 * numeric.abs(),
                "{name}: second order, input {i}, element {j}: {a} vs {numeric}"
            );
        }
    }
}

fn idx(v: Vec<i64>, shape: &[usize]) -> Tensor<i64> {
    Tensor::from_vec(v, shape)
}

#[test]
fn squeeze_unsqueeze_flatten() {
    let x = randn(&[2, 1, 3, 1], 1);
    check("squeeze", &|v| v[0].squeeze(1), from_ref(&x));
    check("squeeze_neg", &|v| v[0].squeeze(-1), from_ref(&x));
    check("squeeze_all", &|v| v[0].squeeze_all(), from_ref(&x));
    check("unsqueeze", &|v| v[0].unsqueeze(2), from_ref(&x));
    check("unsqueeze_end", &|v| v[0].unsqueeze(-1), from_ref(&x));
    check("flatten", &|v| v[0].flatten(1, 2), from_ref(&x));
    check("flatten_all", &|v| v[0].flatten(0, -1), &[x]);
}

#[test]
fn flip_repeat_pad() {
    let x = randn(&[3, 4, 2], 2);
    check("flip", &|v| v[0].flip(&[0, -1]), from_ref(&x));
    check("repeat", &|v| v[0].repeat(&[2, 1, 3, 2]), from_ref(&x));
    check("pad", &|v| v[0].pad(&[(1, 2), (0, 3)], -0.5), from_ref(&x));
    check(
        "pad_all",
        &|v| v[0].pad(&[(1, 0), (2, 1), (1, 1)], 0.0),
        &[x],
    );
}

#[test]
fn triangles_and_diagonals() {
    let x = randn(&[2, 4, 5], 3);
    for k in [-2, 0, 1, 6] {
        check(&format!("tril({k})"), &move |v| v[0].tril(k), from_ref(&x));
        check(&format!("triu({k})"), &move |v| v[0].triu(k), from_ref(&x));
    }
    for (off, a, b) in [(0, 1, 2), (2, -1, -2), (-1, 0, 2), (1, 2, 0)] {
        check(
            &format!("diagonal({off}, {a}, {b})"),
            &move |v| v[0].diagonal(off, a, b),
            from_ref(&x),
        );
    }
}

#[test]
fn slices() {
    let x = randn(&[3, 9, 2], 4);
    check("slice_step", &|v| v[0].slice(1, 1, 7, 2), from_ref(&x));
    check("slice_neg", &|v| v[0].slice(1, -5, -1, 3), from_ref(&x));
    check(
        "slice_clamped",
        &|v| v[0].slice(0, -10, 10, 2),
        from_ref(&x),
    );
    check("narrow", &|v| v[0].narrow(-1, 1, 1), from_ref(&x));
    check(
        "split",
        &|v| {
            let p = v[0].split(4, 1);
            assert_eq!(p.len(), 3);
            &(&p[0] * 2.0) + &p[1].pad(&[(0, 0), (0, 0)], 0.0) - p[2].repeat(&[1, 4, 1])
        },
        from_ref(&x),
    );
    check(
        "split_sizes",
        &|v| {
            let p = v[0].split_sizes(&[2, 3, 4], 1);
            Tensor::cat(&[&p[2], &(&p[0] * 3.0)], 1)
        },
        from_ref(&x),
    );
    check(
        "chunk",
        &|v| {
            let p = v[0].chunk(2, 0);
            assert_eq!((p.len(), p[1].dim(0)), (2, 1));
            &p[0] * &p[1]
        },
        &[x],
    );
}

#[test]
fn selects_and_gathers() {
    let x = randn(&[4, 5, 3], 5);
    let i1 = idx(vec![4, 0, 4, 2, 4], &[5]);
    check(
        "index_select",
        &move |v| v[0].index_select(1, &i1),
        from_ref(&x),
    );
    let i2 = idx(vec![1, 1, 0], &[3]);
    let src = randn(&[4, 5, 3], 6);
    check(
        "index_add",
        &move |v| v[0].index_add(-1, &i2, &v[1]),
        &[x.clone(), src],
    );
    let gi = idx(
        (0..4 * 6 * 2).map(|k| (k * 7 % 5) as i64).collect(),
        &[4, 6, 2],
    );
    check("gather", &move |v| v[0].gather(1, &gi), from_ref(&x));
    // scatter_add: src larger than the index, repeated targets.
    let si = idx(
        (0..3 * 4 * 2).map(|k| (k * 3 % 4) as i64).collect(),
        &[3, 4, 2],
    );
    let src = randn(&[3, 5, 3], 8);
    check(
        "scatter_add",
        &move |v| v[0].scatter_add(1, &si, &v[1]),
        &[x.slice(0, 0, 3, 1).slice(1, 0, 4, 1), src],
    );
}

#[test]
fn masks_and_where() {
    let x = randn(&[3, 4], 9);
    let m = Tensor::<bool>::from_vec(vec![true, false, false, true], &[4]);
    check(
        "masked_fill",
        &move |v| v[0].masked_fill(&m, 2.5),
        from_ref(&x),
    );
    let c = randn(&[3, 1], 10).gt_scalar(0.0);
    check(
        "where_cond",
        &move |v| Tensor::where_cond(&c, &v[0], &v[1]),
        &[x, randn(&[4], 11)],
    );
}

#[test]
fn cat_and_stack() {
    let (a, b, c) = (
        randn(&[2, 3, 2], 12),
        randn(&[2, 1, 2], 13),
        randn(&[2, 4, 2], 14),
    );
    check(
        "cat",
        &|v| Tensor::cat(&[&v[0], &v[1], &v[2]], -2),
        &[a.clone(), b, c],
    );
    check(
        "stack",
        &|v| Tensor::stack(&[&v[0], &v[1]], -1),
        &[a.clone(), randn(&[2, 3, 2], 15)],
    );
    check("cat_self", &|v| Tensor::cat(&[&v[0], &v[0]], 0), &[a]);
}
