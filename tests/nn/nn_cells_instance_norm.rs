//! `RnnCell` / `LstmCell` / `GruCell`, `InstanceNorm1d/2d` (`instance_norm`)
//! and `masked_select` against PyTorch fixtures (`nn/cell_*`,
//! `nn/instance_norm_*`, `ops/masked_select_*`, written by
//! tests/fixtures/gen/gen_ops2.py) in f64 and f32, and an f64 gradient
//! check of each.
//!
//! Every option is read from the fixture's metadata. Tolerances: each
//! fixture's own `rtol`/`atol` (1e-10 / 1e-12 in f64) and
//! `f32_rtol`/`f32_atol` in f32 (tests/fixtures/README.md); gradcheck with
//! eps 1e-6 and atol = rtol = 1e-6 (the project's standard).

use crate::common;
use common::Fixture;
use forge::nn::functional::instance_norm;
use forge::nn::{GruCell, InstanceNorm1d, InstanceNorm2d, LstmCell, RnnCell, RnnNonlinearity};
use forge::{gradcheck, Float, Forward, Rng, Tensor};

fn names(f: &Fixture) -> Vec<String> {
    f.meta_list("inputs")
}

/// Every output of the fixture's op, in the metadata's `outputs` order,
/// from its inputs `t` (in the `inputs` order).
fn run<E: Float>(f: &Fixture, t: &[Tensor<E>]) -> Vec<Tensor<E>> {
    let n = names(f);
    let get = |k: &str| n.iter().position(|s| s == k).map(|i| t[i].clone());
    match f.meta("op") {
        "instance_norm" => vec![instance_norm(
            &t[0],
            get("weight").as_ref(),
            get("bias").as_ref(),
            f.meta_f64("eps"),
        )],
        "masked_select" => {
            let mask = f.i("mask").to_vec().iter().map(|&v| v != 0).collect();
            let mask = Tensor::<bool>::from_vec(mask, f.i("mask").shape());
            vec![t[0].masked_select(&mask)]
        }
        cell => {
            let (i, h) = (f.parse("input_size"), f.parse("hidden_size"));
            let bias = f.flag("bias");
            let mut rng = Rng::new(0);
            let set = |w: &mut Tensor<E>, b: &mut Option<Tensor<E>>, wn: &str, bn: &str| {
                *w = get(wn).unwrap();
                *b = if bias { get(bn) } else { None };
            };
            match cell {
                "RNNCell" => {
                    let nl = match f.meta("nonlinearity") {
                        "relu" => RnnNonlinearity::Relu,
                        _ => RnnNonlinearity::Tanh,
                    };
                    let mut c = RnnCell::<E>::with_options(i, h, bias, nl, &mut rng);
                    set(&mut c.weight_ih, &mut c.bias_ih, "weight_ih", "bias_ih");
                    set(&mut c.weight_hh, &mut c.bias_hh, "weight_hh", "bias_hh");
                    vec![c.step(&t[0], get("hx").as_ref())]
                }
                "GRUCell" => {
                    let mut c = GruCell::<E>::with_bias(i, h, bias, &mut rng);
                    set(&mut c.weight_ih, &mut c.bias_ih, "weight_ih", "bias_ih");
                    set(&mut c.weight_hh, &mut c.bias_hh, "weight_hh", "bias_hh");
                    vec![c.step(&t[0], get("hx").as_ref())]
                }
                "LSTMCell" => {
                    let mut c = LstmCell::<E>::with_bias(i, h, bias, &mut rng);
                    set(&mut c.weight_ih, &mut c.bias_ih, "weight_ih", "bias_ih");
                    set(&mut c.weight_hh, &mut c.bias_hh, "weight_hh", "bias_hh");
                    let (hx, cx) = (get("hx").unwrap(), get("cx").unwrap());
                    let (h1, c1) = c.step(&t[0], Some((&hx, &cx)));
                    vec![h1, c1]
                }
                other => panic!("{}: op {other}", f.name),
            }
        }
    }
}

fn files() -> Vec<Fixture> {
    let mut v = common::fixtures_with_prefix("nn", "cell_");
    v.extend(common::fixtures_with_prefix("nn", "instance_norm_"));
    v.extend(common::fixtures_with_prefix("ops", "masked_select_"));
    assert!(v.len() >= 12, "{v:?}");
    v.iter().map(|p| Fixture::load(p)).collect()
}

fn float_inputs<E: Float>(f: &Fixture) -> Vec<Tensor<E>> {
    names(f)
        .iter()
        .filter(|k| f.floats.contains_key(k.as_str()))
        .map(|k| f.input::<E>(k).requires_grad())
        .collect()
}

fn check<E: Float>(f: &Fixture) {
    let xs = float_inputs::<E>(f);
    let outs = run(f, &xs);
    let out_names = f.meta_list("outputs");
    let mut loss = Tensor::<E>::scalar(E::zero());
    for (o, name) in outs.iter().zip(&out_names) {
        f.check_as(name, o);
        let gname = if name == "out" {
            "gout".to_string()
        } else {
            format!("gout_{name}")
        };
        loss = loss.add(&o.mul(&f.input::<E>(&gname)).sum());
    }
    let g = loss.backward();
    for k in f.meta_list("grads") {
        let i = names(f).iter().position(|s| *s == k).unwrap();
        f.check_as(&format!("grad_{k}"), g.get(&xs[i]).unwrap());
    }
}

#[test]
fn cells_instance_norm_and_masked_select_match_pytorch_in_f64_and_f32() {
    for f in files() {
        check::<f64>(&f);
        check::<f32>(&f);
    }
}

#[test]
fn cells_instance_norm_and_masked_select_pass_gradcheck() {
    for f in files() {
        let xs: Vec<Tensor<f64>> = float_inputs::<f64>(&f).iter().map(|t| t.detach()).collect();
        gradcheck(
            |v| {
                let outs = run(&f, v);
                // One scalar-weighted sum of every output.
                outs.iter()
                    .enumerate()
                    .map(|(k, o)| o.mul_scalar(1.0 + k as f64).sum())
                    .reduce(|a, b| a.add(&b))
                    .unwrap()
            },
            &xs,
            1e-6,
            1e-6,
            1e-6,
        )
        .unwrap_or_else(|e| panic!("{}: {e}", f.name));
    }
}

#[test]
fn instance_norm_layers_and_cells_as_layers() {
    use forge::Layer;
    let x = Tensor::<f64>::normal(&[2, 3, 4, 5], 0.0, 1.0, &mut Rng::new(1));
    let n = InstanceNorm2d::<f64>::new(3);
    assert_eq!(n.parameters().len(), 0);
    assert_eq!(
        n.forward(x.clone()).to_vec(),
        instance_norm(&x, None, None, 1e-5).to_vec()
    );
    let n1 = InstanceNorm1d::<f64>::new(3).affine();
    assert_eq!(n1.parameters().len(), 2);
    assert_eq!(n1.forward(x.view(&[2, 3, 20])).shape(), &[2, 3, 20]);
    // The cells' parameters carry PyTorch's state_dict names.
    let cell = LstmCell::<f32>::new(3, 4, &mut Rng::new(2));
    let names: Vec<String> = cell
        .named_parameters()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, vec!["weight_ih", "weight_hh", "bias_ih", "bias_hh"]);
    let (h, c) = cell.forward(Tensor::ones(&[2, 3]));
    assert_eq!((h.shape(), c.shape()), (&[2, 4][..], &[2, 4][..]));
}
