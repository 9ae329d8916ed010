//! [`lstm_layer`] against the composed ops it replaces (`matmul_t` by
//! `W_ih`, then [`lstm_sequence`]): the outputs and the gradients of the
//! input, the states, the bias and `W_ih` bit for bit; `dW_hh` bit for
//! bit against one product of the gate gradients by the stacked
//! `h_prev` (its new order of summation), and within rounding of the
//! composed ops' two products. Odd shapes (`N` off the tiles' 12 rows and
//! the time loop's blocks, `H` and `I` off 16 lanes, `T = 1`), with and
//! without bias, both directions, 1 and 2 threads (the same bits), `f32`
//! and `f64`.

use super::{lstm_layer, lstm_sequence};
use crate::cpu::gemm::{gemm, Mat};
use crate::runtime::Executor;
use crate::tensor::{Float, Tensor};
use crate::Rng;

/// `(t, n, i, h)`: the bench's row, and odd shapes.
const SHAPES: [(usize, usize, usize, usize); 5] = [
    (32, 64, 128, 128),
    (5, 13, 20, 7),
    (1, 5, 9, 24),
    (4, 17, 33, 19),
    (3, 2, 40, 40),
];

/// Outputs `[out, h_n, c_n]`, the gradients `[x, h0, c0, w_ih, bias]`,
/// `dW_hh`, and the gradient of `xp` (the composed ops only).
struct Run {
    outs: Vec<Vec<f64>>,
    grads: Vec<Vec<f64>>,
    dw_hh: Vec<f64>,
    dxp: Vec<f64>,
}

fn run<E: Float>(
    shape: (usize, usize, usize, usize),
    bias: bool,
    reverse: bool,
    fused: bool,
) -> Run {
    let (t, n, i, h) = shape;
    let mut rng = Rng::new((t * 1000 + n * 10 + h) as u64);
    let mut u = |s: &[usize]| Tensor::<E>::uniform(s, -1.0, 1.0, &mut rng);
    let x = u(&[t, n, i]).requires_grad();
    let w_ih = u(&[4 * h, i]).requires_grad();
    let w_hh = u(&[4 * h, h]).requires_grad();
    let b = u(&[4 * h]).requires_grad();
    let (h0, c0) = (u(&[n, h]).requires_grad(), u(&[n, h]).requires_grad());
    let (wy, wc) = (u(&[t, n, h]), u(&[n, h]));
    let bias_t = bias.then_some(&b);
    let mut xp_t = None;
    let (out, h_n, c_n) = if fused {
        lstm_layer(&x, &w_ih, &h0, &c0, &w_hh, bias_t, reverse)
    } else {
        let xp = x.view(&[t * n, i]).matmul_t(&w_ih).view(&[t, n, 4 * h]);
        xp_t = Some(xp.clone());
        lstm_sequence(&xp, &h0, &c0, &w_hh, bias_t, reverse)
    };
    let loss = |out: &Tensor<E>, c_n: &Tensor<E>| (out * &wy).sum().add(&(c_n * &wc).sum());
    let g = loss(&out, &c_n).backward();
    let f = |t: &Tensor<E>| {
        t.to_vec()
            .iter()
            .map(|v| crate::Element::to_f64(*v))
            .collect::<Vec<f64>>()
    };
    let mut grads: Vec<Vec<f64>> = [&x, &h0, &c0, &w_ih]
        .iter()
        .map(|p| f(g.get(p).unwrap()))
        .collect();
    if bias {
        grads.push(f(g.get(&b).unwrap()));
    }
    Run {
        outs: vec![f(&out), f(&h_n), f(&c_n)],
        grads,
        dw_hh: f(g.get(&w_hh).unwrap()),
        // the gradient of xp: the composed ops again from xp as a leaf
        dxp: xp_t
            .map(|xp| {
                let xp = xp.detach().requires_grad();
                let (out, _, c_n) = lstm_sequence(&xp, &h0, &c0, &w_hh, bias_t, reverse);
                f(loss(&out, &c_n).backward().get(&xp).unwrap())
            })
            .unwrap_or_default(),
    }
}

/// `dW_hh` as one product over the `T N` rows in time order: `da^T`
/// times `h_prev` stacked (`[h0; out[..T-1]]`, `[out[1..]; h0]` in
/// reverse), in `E`.
fn stacked_dw_hh<E: Float>(
    shape: (usize, usize, usize, usize),
    reverse: bool,
    r: &Run,
    h0: &[f64],
) -> Vec<f64> {
    let (t, n, _, h) = shape;
    let out = &r.outs[0];
    let mut prev: Vec<f64> = Vec::with_capacity(t * n * h);
    if reverse {
        prev.extend(&out[n * h..]);
        prev.extend(h0);
    } else {
        prev.extend(h0);
        prev.extend(&out[..(t - 1) * n * h]);
    }
    let e = |v: &[f64]| {
        v.iter()
            .map(|&x| <E as crate::Element>::from_f64(x))
            .collect::<Vec<E>>()
    };
    let (da, prev) = (e(&r.dxp), e(&prev));
    let mut dw = vec![E::zero(); 4 * h * h];
    gemm(
        4 * h,
        t * n,
        h,
        Mat::transposed(&da, 4 * h),
        Mat::row_major(&prev, h),
        E::zero(),
        &mut dw,
    );
    dw.iter().map(|v| crate::Element::to_f64(*v)).collect()
}

fn h0_of<E: Float>(shape: (usize, usize, usize, usize)) -> Vec<f64> {
    // the same draws as `run`: x, w_ih, w_hh, b, then h0
    let (t, n, i, h) = shape;
    let mut rng = Rng::new((t * 1000 + n * 10 + h) as u64);
    let mut u = |s: &[usize]| Tensor::<E>::uniform(s, -1.0, 1.0, &mut rng);
    for s in [vec![t, n, i], vec![4 * h, i], vec![4 * h, h], vec![4 * h]] {
        u(&s);
    }
    u(&[n, h])
        .to_vec()
        .iter()
        .map(|v| crate::Element::to_f64(*v))
        .collect()
}

fn layer_equals_the_composed_ops<E: Float>(tol: f64) {
    for shape in SHAPES {
        for (bias, reverse) in [(true, false), (false, true), (true, true)] {
            let what = format!("{shape:?} bias {bias} reverse {reverse}");
            let on = |threads: usize, fused: bool| {
                Executor::new(threads).run(|| run::<E>(shape, bias, reverse, fused))
            };
            let old = on(1, false);
            let want_dw = stacked_dw_hh::<E>(shape, reverse, &old, &h0_of::<E>(shape));
            for threads in [1, 2] {
                let new = on(threads, true);
                assert!(new.outs == old.outs, "outputs, {what}, {threads} threads");
                for (k, (a, b)) in new.grads.iter().zip(&old.grads).enumerate() {
                    assert!(
                        a == b,
                        "gradient {k} (x h0 c0 w_ih b), {what}, {threads} threads"
                    );
                }
                assert!(
                    new.dw_hh == want_dw,
                    "dW_hh against the stacked product, {what}, {threads} threads"
                );
                let scale = old.dw_hh.iter().fold(1.0f64, |m, v| m.max(v.abs()));
                for (a, b) in new.dw_hh.iter().zip(&old.dw_hh) {
                    assert!((a - b).abs() <= tol * scale, "dW_hh {a} vs {b}, {what}");
                }
            }
        }
    }
}

#[test]
fn layer_op_equals_matmul_t_and_lstm_sequence_f32() {
    layer_equals_the_composed_ops::<f32>(1e-5);
}

#[test]
fn layer_op_equals_matmul_t_and_lstm_sequence_f64() {
    layer_equals_the_composed_ops::<f64>(1e-12);
}

/// Gradients of gradients flow through the layer op as through the
/// composed ops (the rule under `backward_with_graph` recomputes the
/// projection on the tape): the same second-order gradients of `x`,
/// `W_ih` and `W_hh` (the projection op's own rule, reached by the second
/// pass, would add a wrong `dW_hh` term).
#[test]
fn layer_op_has_gradients_of_gradients() {
    let (t, n, i, h) = (3, 2, 4, 3);
    let second = |fused: bool| {
        let mut rng = Rng::new(5);
        let mut u = |s: &[usize]| Tensor::<f64>::uniform(s, -1.0, 1.0, &mut rng);
        let x = u(&[t, n, i]).requires_grad();
        let w_ih = u(&[4 * h, i]).requires_grad();
        let w_hh = u(&[4 * h, h]).requires_grad();
        let b = u(&[4 * h]);
        let (h0, c0) = (u(&[n, h]), u(&[n, h]));
        let (out, _, _) = if fused {
            lstm_layer(&x, &w_ih, &h0, &c0, &w_hh, Some(&b), false)
        } else {
            let xp = x.view(&[t * n, i]).matmul_t(&w_ih).view(&[t, n, 4 * h]);
            lstm_sequence(&xp, &h0, &c0, &w_hh, Some(&b), false)
        };
        let g = out.square().sum().backward_with_graph();
        let gx = g.get(&x).unwrap();
        let g2 = gx.square().sum().backward();
        [&x, &w_ih, &w_hh]
            .map(|p| g2.get(p).unwrap().to_vec())
            .concat()
    };
    let (a, b) = (second(true), second(false));
    for (x, y) in a.iter().zip(&b) {
        assert!((x - y).abs() <= 1e-10 * (1.0 + y.abs()), "{x} vs {y}");
    }
}
