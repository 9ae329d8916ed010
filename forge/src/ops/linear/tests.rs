use crate::cpu::gemm::packed_f32_applies;
use crate::nn::{Forward, Linear};
use crate::tensor::{Rng, Tensor};

fn bits(t: &Tensor<f32>) -> Vec<u32> {
    t.to_vec().iter().map(|v| v.to_bits()).collect()
}

/// Panics naming `what` and the first differing element unless `a` and
/// `b` hold the same bits.
fn same(a: &Tensor<f32>, b: &Tensor<f32>, what: &str) {
    assert_eq!(a.shape(), b.shape(), "{what}: shapes");
    let (x, y) = (bits(a), bits(b));
    if let Some(i) = x.iter().zip(&y).position(|(p, q)| p != q) {
        panic!(
            "{what}: element {i} differs: {:e} (fused) != {:e} (two ops)",
            f32::from_bits(x[i]),
            f32::from_bits(y[i])
        );
    }
}

/// The fused node (`linear_gelu_tanh`) against `linear` then `gelu_tanh`:
/// the values and the gradients of the input, the weight and the bias
/// bit for bit, for rows not a multiple of the 12-row tile, outputs not
/// a multiple of the 32-column tile, inner sizes of one and of several
/// 256-wide `k` blocks, with and without a bias and leading dimensions,
/// at 1 and 2 threads (GPT's `[1024, 128] -> 512` included, which splits
/// across threads). The node applies exactly where the packed kernel
/// runs (not in the CPU class `portable`).
#[test]
fn fused_node_equals_linear_then_gelu_tanh() {
    let _threads = crate::cpu::threads::lock_thread_count();
    let mut rng = Rng::new(41);
    let shapes: [(&[usize], usize, usize); 6] = [
        (&[37], 19, 45),
        (&[2, 35], 64, 100),
        (&[13], 600, 33),
        (&[130], 300, 300),
        (&[1024], 128, 512),
        (&[5, 7], 17, 17),
    ];
    for (lead, fan_in, out) in shapes {
        for with_bias in [true, false] {
            let w = Tensor::<f32>::normal(&[out, fan_in], 0.0, 0.3, &mut rng).requires_grad();
            let b = with_bias
                .then(|| Tensor::<f32>::normal(&[out], 0.0, 0.5, &mut rng).requires_grad());
            let mut shape = lead.to_vec();
            shape.push(fan_in);
            let x = Tensor::<f32>::normal(&shape, 0.0, 1.0, &mut rng).requires_grad();
            let mut oshape = lead.to_vec();
            oshape.push(out);
            let gout = Tensor::<f32>::normal(&oshape, 0.0, 1.0, &mut rng);
            for threads in [1, 2] {
                crate::cpu::set_num_threads(threads);
                let what = format!("{shape:?} -> {out} bias {with_bias} {threads} thr");
                let rows = lead.iter().product();
                let applies = packed_f32_applies::<f32>(rows, fan_in, out);
                let Some(fused) = x.linear_gelu_tanh(&w, b.as_ref()) else {
                    assert!(!applies, "{what}: the fused node does not apply");
                    continue;
                };
                assert!(applies, "{what}: fused without the packed kernel");
                assert_eq!(
                    fused.node.as_ref().map(|n| n.name),
                    Some("linear_gelu_tanh")
                );
                let two = x.linear(&w, b.as_ref()).gelu_tanh();
                same(&fused, &two, &format!("{what}: values"));
                let (gf, gt) = (
                    fused.backward_with(&gout, false),
                    two.backward_with(&gout, false),
                );
                let mut params = vec![("x", &x), ("weight", &w)];
                params.extend(b.as_ref().map(|b| ("bias", b)));
                for (name, p) in params {
                    same(
                        gf.get(p).expect("a gradient"),
                        gt.get(p).expect("a gradient"),
                        &format!("{what}: gradient of {name}"),
                    );
                }
            }
        }
    }
    crate::cpu::set_num_threads(1);
}

/// `Linear::forward_gelu_tanh` (GPT's `Mlp`) records the fused node under
/// autograd, the two ops' values; only the weight tracked (a frozen
/// input) still gives the weight's gradient of the two ops, and the
/// input's is not computed.
#[test]
fn linear_layer_uses_the_fused_node() {
    let mut rng = Rng::new(7);
    let fc = Linear::<f32>::new(24, 70, &mut rng);
    let x = Tensor::<f32>::normal(&[3, 11, 24], 0.0, 1.0, &mut rng);
    let y = fc.forward_gelu_tanh(x.clone());
    let name = if packed_f32_applies::<f32>(33, 24, 70) {
        "linear_gelu_tanh"
    } else {
        "gelu_tanh"
    };
    assert_eq!(y.node.as_ref().map(|n| n.name), Some(name));
    let two = fc.forward(x.clone()).gelu_tanh();
    same(&y, &two, "values");
    let (gf, gt) = (y.sum().backward(), two.sum().backward());
    same(
        gf.get(&fc.weight).expect("weight gradient"),
        gt.get(&fc.weight).expect("weight gradient"),
        "weight gradient",
    );
    assert!(gf.get(&x).is_none());
    // outside autograd: the no-grad epilogue, not a node
    let plain = crate::no_grad(|| fc.forward_gelu_tanh(x.clone()));
    assert!(plain.node.is_none());
    same(&plain, &two, "no-grad values");
    // f64: the two ops
    let fc64 = Linear::<f64>::new(24, 70, &mut rng);
    let x64 = Tensor::<f64>::normal(&[4, 24], 0.0, 1.0, &mut rng);
    assert!(x64
        .linear_gelu_tanh(&fc64.weight, fc64.bias.as_ref())
        .is_none());
}

/// Gradients of gradients through the fused node: under `create_graph`
/// its rule differentiates the two ops' composed rules, so the first
/// gradients and the gradients of a function of them equal the two ops'
/// (where the packed kernel runs and so the node applies).
#[test]
fn create_graph_through_the_fused_node() {
    if !packed_f32_applies::<f32>(14, 9, 40) {
        return;
    }
    let mut rng = Rng::new(3);
    let w = Tensor::<f32>::normal(&[40, 9], 0.0, 0.4, &mut rng).requires_grad();
    let b = Tensor::<f32>::normal(&[40], 0.0, 0.4, &mut rng).requires_grad();
    let x = Tensor::<f32>::normal(&[14, 9], 0.0, 1.0, &mut rng).requires_grad();
    let gout = Tensor::<f32>::normal(&[14, 40], 0.0, 1.0, &mut rng);
    let fused = x.linear_gelu_tanh(&w, Some(&b)).expect("applies");
    let two = x.linear(&w, Some(&b)).gelu_tanh();
    let (gf, gt) = (
        fused.backward_with(&gout, true),
        two.backward_with(&gout, true),
    );
    for (name, p) in [("x", &x), ("weight", &w), ("bias", &b)] {
        let (a, c) = (gf.get(p).expect("grad"), gt.get(p).expect("grad"));
        assert!(a.is_tracked(), "{name}: the gradient is differentiable");
        same(a, c, &format!("first gradient of {name}"));
    }
    // d/d(w, b, x) of sum(dL/dx ^ 2)
    let second =
        |g: &crate::autograd::Gradients<f32>| g.get(&x).expect("grad").square().sum().backward();
    let (sf, st) = (second(&gf), second(&gt));
    for (name, p) in [("x", &x), ("weight", &w), ("bias", &b)] {
        same(
            sf.get(p).expect("second gradient"),
            st.get(p).expect("second gradient"),
            &format!("second gradient of {name}"),
        );
    }
    // and against finite differences of the first gradient in one weight
    let eps = 1e-2f32;
    let bumped = |d: f32| {
        let mut wv = w.to_vec();
        wv[5] += d;
        let w2 = Tensor::<f32>::from_vec(wv, &[40, 9]);
        let x2 = x.detach().requires_grad();
        let y = x2.linear(&w2, Some(&b.detach())).gelu_tanh();
        let g = y.backward_with(&gout, false);
        g.get(&x2).expect("grad").square().sum().item()
    };
    let fd = (bumped(eps) - bumped(-eps)) / (2.0 * eps);
    let got = sf.get(&w).expect("second gradient").to_vec()[5];
    assert!(
        (got - fd).abs() <= 2e-2 * fd.abs().max(1.0),
        "second gradient {got} against finite differences {fd}"
    );
}
