//! The fused kernels (cross-entropy, softmax and log-softmax over the last
//! axis, layer norm, batch norm in training and evaluation): f64 gradchecks of the fused backward passes, agreement
//! with the composed formulas, and gradients of gradients (the
//! `create_graph` fallbacks), checked by a gradcheck of the gradient itself.

use crate::composed_loss;

use composed_loss::randn;
use forge::nn::functional::{cross_entropy_with, CrossEntropyOptions, Reduction};
use forge::{gradcheck, Tensor};

/// Checks the Hessian-vector product `d(grad f . v)/dx`, computed through
/// `backward_with_graph` (the rules' `create_graph` fallbacks), against
/// central differences of the plain gradient (the fused raw rules) along
/// `v`: `(grad f(x + eps v) - grad f(x - eps v)) / (2 eps)`.
fn hvp_check(
    f: impl Fn(&Tensor<f64>) -> Tensor<f64>,
    x: &Tensor<f64>,
    seed: u64,
) -> Result<(), String> {
    let v = randn(x.shape(), seed);
    let xt = x.detach().requires_grad();
    let g = f(&xt).backward_with_graph();
    let g = g.get(&xt).expect("gradient").clone();
    assert!(g.is_tracked(), "the gradient must be on the tape");
    let hv = (g * &v).sum().backward();
    let hv = hv
        .get(&xt)
        .map(|t| t.to_vec())
        .unwrap_or(vec![0.0; x.numel()]);
    let grad_at = |sign: f64| {
        let xs = x.add(&v.mul_scalar(sign * 1e-6)).requires_grad();
        let g = f(&xs).backward();
        g.get(&xs).expect("gradient").to_vec()
    };
    let (gp, gm) = (grad_at(1.0), grad_at(-1.0));
    for (j, ((a, p), m)) in hv.iter().zip(&gp).zip(&gm).enumerate() {
        let numeric = (p - m) / 2e-6;
        if (a - numeric).abs() > 1e-6 + 1e-6 * numeric.abs() {
            return Err(format!("element {j}: hvp {a} vs numeric {numeric}"));
        }
    }
    Ok(())
}

fn ce_options(w: Option<&Tensor<f64>>, ls: f64, r: Reduction) -> CrossEntropyOptions<f64> {
    CrossEntropyOptions {
        weight: w.cloned(),
        ignore_index: -1,
        label_smoothing: ls,
        reduction: r,
    }
}

#[test]
fn cross_entropy_fused_gradcheck_and_second_order() {
    let x = randn(&[5, 4], 1);
    let t = Tensor::<i64>::from_vec(vec![2, 0, -1, 3, 1], &[5]);
    let w = Tensor::<f64>::from_vec(vec![0.5, 2.0, 1.5, 1.0], &[4]);
    for weight in [None, Some(&w)] {
        for ls in [0.0, 0.2] {
            for r in [Reduction::Mean, Reduction::Sum, Reduction::None] {
                let f = |v: &Tensor<f64>| cross_entropy_with(v, &t, ce_options(weight, ls, r));
                let case = format!("weight {} ls {ls} {r:?}", weight.is_some());
                gradcheck(|v| f(&v[0]), std::slice::from_ref(&x), 1e-6, 1e-6, 1e-6)
                    .unwrap_or_else(|e| panic!("{case}: {e}"));
                hvp_check(|v| f(v).sum(), &x, 7)
                    .unwrap_or_else(|e| panic!("{case}, second order: {e}"));
            }
        }
    }
}

/// The fused op against the composed tensor ops (`composed_loss`): loss
/// and logit gradient with a constant weight, every reduction.
#[test]
fn cross_entropy_fused_matches_composed() {
    let x = randn(&[6, 5], 2).requires_grad();
    let t = Tensor::<i64>::from_vec(vec![4, 0, -1, 3, 1, 2], &[6]);
    let w = Tensor::<f64>::from_vec(vec![0.5, 2.0, 1.5, 1.0, 0.25], &[5]);
    for r in [Reduction::Mean, Reduction::Sum, Reduction::None] {
        let fused = cross_entropy_with(&x, &t, ce_options(Some(&w), 0.1, r));
        let composed = composed_loss::class_loss(&x, &t, Some(&w), -1, 0.1, r, true);
        for (a, b) in fused.to_vec().iter().zip(composed.to_vec()) {
            assert!((a - b).abs() < 1e-13, "{r:?}: {a} vs {b}");
        }
        let ga = fused.sum().backward();
        let gb = composed.sum().backward();
        let (ga, gb) = (ga.get(&x).unwrap().to_vec(), gb.get(&x).unwrap().to_vec());
        for (a, b) in ga.iter().zip(&gb) {
            assert!((a - b).abs() < 1e-13, "{r:?}: grad {a} vs {b}");
        }
    }
}

#[test]
fn softmax_last_axis_gradcheck_and_second_order() {
    let x = randn(&[3, 4, 7], 3);
    for f in [
        (|v: &Tensor<f64>| v.softmax(-1)) as fn(&Tensor<f64>) -> Tensor<f64>,
        |v| v.log_softmax(-1),
        |v| v.log_softmax(2).softmax(1),
    ] {
        gradcheck(|v| f(&v[0]), std::slice::from_ref(&x), 1e-6, 1e-6, 1e-6).unwrap();
        let u = randn(&[3, 4, 7], 4);
        hvp_check(|v| (f(v) * &u).sum(), &x, 8).unwrap();
    }
}

#[test]
fn layer_norm_fused_gradcheck_and_second_order() {
    use forge::nn::functional::layer_norm;
    let x = randn(&[3, 2, 5], 11);
    let w = randn(&[2, 5], 12);
    let b = randn(&[2, 5], 13);
    let inputs = [x.clone(), w.clone(), b.clone()];
    gradcheck(
        |v| layer_norm(&v[0], &[2, 5], Some(&v[1]), Some(&v[2]), 1e-5),
        &inputs,
        1e-6,
        1e-6,
        1e-6,
    )
    .unwrap();
    gradcheck(
        |v| layer_norm(&v[0], &[5], None, None, 1e-5),
        std::slice::from_ref(&x),
        1e-6,
        1e-6,
        1e-6,
    )
    .unwrap();
    let u = randn(&[3, 2, 5], 14);
    hvp_check(
        |v| (layer_norm(v, &[2, 5], Some(&w), Some(&b), 1e-5) * &u).sum(),
        &x,
        15,
    )
    .unwrap();
    // Second order through the weight as well: d/dw of (d loss/dx . v).
    let (xt, wt) = (x.requires_grad(), w.requires_grad());
    let loss = (layer_norm(&xt, &[2, 5], Some(&wt), None, 1e-5) * &u).sum();
    let g = loss.backward_with_graph();
    let gx = g.get(&xt).unwrap().clone();
    let hw = (gx * &u).sum().backward();
    assert!(
        hw.get(&wt).is_some(),
        "mixed second derivative reaches the weight"
    );
}

#[test]
fn batch_norm_fused_gradcheck_and_second_order() {
    use forge::nn::functional::batch_norm;
    let x = randn(&[3, 2, 2, 3], 21);
    let w = randn(&[2], 22);
    let b = randn(&[2], 23);
    let bn = |x: &Tensor<f64>, w: Option<&Tensor<f64>>, b: Option<&Tensor<f64>>| {
        batch_norm(x, None, None, w, b, true, 0.1, 1e-5).0
    };
    let inputs = [x.clone(), w.clone(), b.clone()];
    gradcheck(
        |v| bn(&v[0], Some(&v[1]), Some(&v[2])),
        &inputs,
        1e-6,
        1e-6,
        1e-6,
    )
    .unwrap();
    gradcheck(
        |v| bn(&v[0], None, None),
        std::slice::from_ref(&x),
        1e-6,
        1e-6,
        1e-6,
    )
    .unwrap();
    let u = randn(&[3, 2, 2, 3], 24);
    hvp_check(|v| (bn(v, Some(&w), Some(&b)) * &u).sum(), &x, 25).unwrap();
    // The statistics returned for the running averages: biased batch
    // variance made unbiased, as in PyTorch.
    let (rm, rv) = (Tensor::<f64>::zeros(&[2]), Tensor::<f64>::ones(&[2]));
    let (_, m, v) = batch_norm(&x, Some(&rm), Some(&rv), None, None, true, 1.0, 1e-5);
    let axes = [0, 2, 3];
    let mean = x.mean_dim(&axes, false).to_vec();
    let var = x
        .sub(&x.mean_dim(&axes, true))
        .square()
        .sum_dim(&axes, false)
        .div_scalar(17.0);
    for (a, b) in m.unwrap().to_vec().iter().zip(&mean) {
        assert!((a - b).abs() < 1e-14);
    }
    for (a, b) in v.unwrap().to_vec().iter().zip(&var.to_vec()) {
        assert!((a - b).abs() < 1e-14);
    }
}

/// Eval-mode batch norm with constant running statistics is one fused op:
/// `y = (x - rm) * w / sqrt(rv + eps) + b`, so `dy/dx = g w rstd`,
/// `dy/dw = sum(g (x - rm) rstd)`, `dy/db = sum(g)` per channel. Checked:
/// an f64 gradcheck (1e-6) in x, w and b; agreement within 1e-12 with the
/// composed ops (`tensor_ops`, the same formula in tensor ops) for the output
/// and every gradient; and the `create_graph` rule: the mixed second
/// derivative `d(dL/dx . v)/dw = sum(u v rstd)` equal to the composed one.
#[test]
fn batch_norm_eval_fused_gradcheck_matches_composed() {
    use forge::nn::functional::batch_norm;
    let x = randn(&[3, 2, 2, 3], 31);
    let w = randn(&[2], 32);
    let b = randn(&[2], 33);
    let rm = randn(&[2], 34);
    let rv = randn(&[2], 35).square().add_scalar(0.5);
    let bn = |x: &Tensor<f64>, rm: &Tensor<f64>, w: &Tensor<f64>, b: &Tensor<f64>| {
        batch_norm(x, Some(rm), Some(&rv), Some(w), Some(b), false, 0.1, 1e-5).0
    };
    let pc = |t: &Tensor<f64>| t.view(&[1, 2, 1, 1]);
    let tensor_ops = |x: &Tensor<f64>, rm: &Tensor<f64>, w: &Tensor<f64>, b: &Tensor<f64>| {
        let k = pc(&rv).add_scalar(1e-5).rsqrt().mul(&pc(w));
        x.sub(&pc(rm)).mul(&k).add(&pc(b))
    };
    gradcheck(
        |v| bn(&v[0], &rm, &v[1], &v[2]),
        &[x.clone(), w.clone(), b.clone()],
        1e-6,
        1e-6,
        1e-6,
    )
    .unwrap();
    let close = |a: &Tensor<f64>, c: &Tensor<f64>, what: &str| {
        for (p, q) in a.to_vec().iter().zip(c.to_vec()) {
            assert!(
                (p - q).abs() <= 1e-12 * (1.0 + q.abs()),
                "{what}: {p} vs {q}"
            );
        }
    };
    let u = randn(&[3, 2, 2, 3], 36);
    let (xt, wt, bt) = (x.requires_grad(), w.requires_grad(), b.requires_grad());
    let fused = bn(&xt, &rm, &wt, &bt);
    let composed = tensor_ops(&xt, &rm, &wt, &bt);
    close(&fused, &composed, "output");
    let (gf, gc) = (
        (&fused * &u).sum().backward(),
        (&composed * &u).sum().backward(),
    );
    for (t, what) in [(&xt, "x"), (&wt, "weight"), (&bt, "bias")] {
        close(gf.get(t).unwrap(), gc.get(t).unwrap(), what);
    }
    // Second order through the create_graph rule.
    let v = randn(&[3, 2, 2, 3], 37);
    let mixed = |y: Tensor<f64>| {
        let g = (y * &u).sum().backward_with_graph();
        let gx = g.get(&xt).unwrap().clone();
        (gx * &v).sum().backward().get(&wt).unwrap().clone()
    };
    close(
        &mixed(bn(&xt, &rm, &wt, &bt)),
        &mixed(tensor_ops(&xt, &rm, &wt, &bt)),
        "d(dL/dx . v)/dw",
    );
}

/// Causal attention applies its mask inside the softmax kernel; it must
/// equal attention with the same mask given explicitly (the composed path),
/// pass gradcheck in q, k and v, and give Hessian-vector products.
#[test]
fn causal_attention_fused_mask() {
    use forge::nn::functional::scaled_dot_product_attention as sdpa;
    let (q, k, v) = (
        randn(&[2, 4, 3], 31),
        randn(&[2, 5, 3], 32),
        randn(&[2, 5, 2], 33),
    );
    let tril: Vec<bool> = (0..4 * 5).map(|i| i % 5 <= i / 5).collect();
    let mask = Tensor::<bool>::from_vec(tril, &[4, 5]);
    let fused = sdpa(&q, &k, &v, None, true).to_vec();
    let composed = sdpa(&q, &k, &v, Some(&mask), false).to_vec();
    for (a, b) in fused.iter().zip(&composed) {
        assert!((a - b).abs() < 1e-14, "{a} vs {b}");
    }
    let inputs = [q.clone(), k.clone(), v.clone()];
    gradcheck(
        |t| sdpa(&t[0], &t[1], &t[2], None, true),
        &inputs,
        1e-6,
        1e-6,
        1e-6,
    )
    .unwrap();
    let u = randn(&[2, 4, 2], 34);
    hvp_check(|t| (sdpa(t, &k, &v, None, true) * &u).sum(), &q, 35).unwrap();
    hvp_check(|t| (sdpa(&q, t, &v, None, true) * &u).sum(), &k, 36).unwrap();
}
