//! `Tensor::linear` (`x W^T + b` as one product with the bias accumulated
//! onto, PyTorch's `addmm`): f64 gradchecks in all three inputs for inputs
//! of rank 1, 2 and 3 with and without a bias, agreement with the composed
//! `matmul_t` + broadcast add (values and gradients), gradients of
//! gradients through it, and the shape errors.
//!
//! Tolerances: gradcheck's central differences (eps 1e-6, atol = rtol =
//! 1e-6, the project's standard for f64); against the composed form, the
//! two differ only in where the bias is added to the dot product (first
//! here, last there), a rounding of one addition per element: rtol 1e-13
//! in f64, 1e-5 in f32 (the f32 sums over 300 terms, two blocks of the
//! product, so one rounding of the partial sums differs).

use crate::composed_loss;

use composed_loss::randn;
use forge::{gradcheck, Tensor};

/// Input shapes: a vector, a matrix, a batch of matrices; `in` = 300 spans
/// two blocks of the packed product's inner dimension.
const SHAPES: [&[usize]; 3] = [&[300], &[7, 300], &[2, 5, 300]];

fn close(a: &[f64], b: &[f64], rtol: f64) -> Result<(), String> {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        if (x - y).abs() > rtol * (1.0 + y.abs()) {
            return Err(format!("element {i}: {x} vs {y}"));
        }
    }
    Ok(())
}

#[test]
fn linear_passes_gradcheck() {
    for (s, shape) in SHAPES.iter().enumerate() {
        // a small inner dimension keeps the finite differences cheap
        let mut shape = shape.to_vec();
        *shape.last_mut().unwrap() = 6;
        let x = randn(&shape, 10 + s as u64);
        let w = randn(&[4, 6], 20 + s as u64);
        let b = randn(&[4], 30 + s as u64);
        gradcheck(
            |v| v[0].linear(&v[1], Some(&v[2])),
            &[x.clone(), w.clone(), b],
            1e-6,
            1e-6,
            1e-6,
        )
        .unwrap_or_else(|e| panic!("{shape:?} with bias: {e}"));
        gradcheck(|v| v[0].linear(&v[1], None), &[x, w], 1e-6, 1e-6, 1e-6)
            .unwrap_or_else(|e| panic!("{shape:?} without bias: {e}"));
    }
}

#[test]
fn linear_agrees_with_matmul_t_plus_bias() {
    for (s, shape) in SHAPES.iter().enumerate() {
        let x = randn(shape, 40 + s as u64);
        let w = randn(&[33, 300], 50 + s as u64);
        let b = randn(&[33], 60 + s as u64);
        let mut out_shape = shape.to_vec();
        *out_shape.last_mut().unwrap() = 33;
        let u = randn(&out_shape, 70 + s as u64);
        for with_bias in [true, false] {
            let (xt, wt, bt) = (x.requires_grad(), w.requires_grad(), b.requires_grad());
            let fused = xt.linear(&wt, with_bias.then_some(&bt));
            let composed = if with_bias {
                xt.matmul(&wt.transpose(0, 1)) + &bt
            } else {
                xt.matmul(&wt.transpose(0, 1))
            };
            assert_eq!(fused.shape(), composed.shape());
            close(&fused.to_vec(), &composed.to_vec(), 1e-13).unwrap();
            let gf = fused.backward_with(&u, false);
            let gc = composed.backward_with(&u, false);
            let mut ins = vec![&xt, &wt];
            if with_bias {
                ins.push(&bt);
            }
            for (i, t) in ins.into_iter().enumerate() {
                let (a, c) = (gf.get(t).unwrap().to_vec(), gc.get(t).unwrap().to_vec());
                close(&a, &c, 1e-13).unwrap_or_else(|e| panic!("{shape:?} grad {i}: {e}"));
            }
            // f32, the packed kernel's path on x86-64
            let (x32, w32, b32) = (x.cast::<f32>(), w.cast::<f32>(), b.cast::<f32>());
            let f32_fused = x32
                .linear(&w32, with_bias.then_some(&b32))
                .cast::<f64>()
                .to_vec();
            let f32_composed = x32.matmul(&w32.transpose(0, 1));
            let f32_composed = if with_bias {
                f32_composed + &b32
            } else {
                f32_composed
            };
            close(&f32_fused, &f32_composed.cast::<f64>().to_vec(), 1e-5).unwrap();
        }
    }
}

#[test]
fn gradients_of_gradients_through_linear_match_the_composed_form() {
    let x = randn(&[3, 5], 80);
    let w = randn(&[4, 5], 81);
    let b = randn(&[4], 82);
    let u = randn(&[3, 4], 83);
    // d/dx of sum(grad_w (f) * v), through backward_with_graph, fused vs composed
    let v = randn(&[4, 5], 84);
    let second = |fused: bool| {
        let (xt, wt) = (x.requires_grad(), w.requires_grad());
        let y = if fused {
            xt.linear(&wt, Some(&b))
        } else {
            xt.matmul_t(&wt) + &b
        };
        let y = (y.tanh() * &u).sum();
        let g = y.backward_with_graph();
        let gw = g.get(&wt).unwrap().clone();
        assert!(gw.is_tracked(), "the weight gradient must be on the tape");
        let h = (gw * &v).sum().backward();
        (h.get(&xt).unwrap().to_vec(), h.get(&wt).unwrap().to_vec())
    };
    let (fx, fw) = second(true);
    let (cx, cw) = second(false);
    close(&fx, &cx, 1e-13).unwrap();
    close(&fw, &cw, 1e-13).unwrap();
}

#[test]
#[should_panic(expected = "linear: input [2, 3] x weight [4, 5]: expected [.., in] and [out, in]")]
fn inner_dimension_mismatch_names_the_shapes() {
    let _ = Tensor::<f32>::zeros(&[2, 3]).linear(&Tensor::zeros(&[4, 5]), None);
}

#[test]
#[should_panic(expected = "linear: bias [5] for weight [4, 3]: expected [4]")]
fn bias_of_the_wrong_length_names_the_shapes() {
    let _ =
        Tensor::<f32>::zeros(&[2, 3]).linear(&Tensor::zeros(&[4, 3]), Some(&Tensor::zeros(&[5])));
}
