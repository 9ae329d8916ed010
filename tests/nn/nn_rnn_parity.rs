//! The recurrent layers against PyTorch: every fixture in
//! `tests/fixtures/rnn/` (outputs, final states, and the gradients of the
//! input, the initial states and every weight, with the file's tolerances;
//! weights loaded by their PyTorch names through `load_state_dict`), first-
//! and second-order finite-difference checks in f64, and state-dict round
//! trips.
//!
//! Gradcheck tolerances: eps 1e-6, atol = rtol = 1e-6 (see its docs).

use crate::common;

use common::{fixtures_with_prefix, Fixture};
use forge::nn::{Gru, Lstm, Rnn, RnnConfig, RnnNonlinearity, TensorKind};
use forge::prelude::*;
use forge::{gradcheck, Float, Gradients};
use std::collections::BTreeMap;

enum Model<E: Float> {
    Rnn(Rnn<E>),
    Lstm(Lstm<E>),
    Gru(Gru<E>),
}

impl<E: Float> Model<E> {
    fn layer_mut(&mut self) -> &mut dyn Layer<E> {
        match self {
            Model::Rnn(m) => m,
            Model::Lstm(m) => m,
            Model::Gru(m) => m,
        }
    }

    fn layer(&self) -> &dyn Layer<E> {
        match self {
            Model::Rnn(m) => m,
            Model::Lstm(m) => m,
            Model::Gru(m) => m,
        }
    }

    /// Runs the layer on `x` and the initial states (`h0`, and `c0` for an
    /// LSTM); returns the outputs by their fixture names.
    fn run(&self, x: Tensor<E>, states: &[Tensor<E>]) -> BTreeMap<&'static str, Tensor<E>> {
        let mut out = BTreeMap::new();
        match self {
            Model::Rnn(m) => {
                let (o, h) = m.forward((x, states[0].clone()));
                out.insert("out", o);
                out.insert("h_n", h);
            }
            Model::Gru(m) => {
                let (o, h) = m.forward((x, states[0].clone()));
                out.insert("out", o);
                out.insert("h_n", h);
            }
            Model::Lstm(m) => {
                let (o, (h, c)) = m.forward((x, (states[0].clone(), states[1].clone())));
                out.insert("out", o);
                out.insert("h_n", h);
                out.insert("c_n", c);
            }
        }
        out
    }
}

fn config_of(f: &Fixture) -> RnnConfig {
    let flag = |k: &str| match f.meta(k) {
        "true" => true,
        "false" => false,
        other => panic!("{}: {k} = {other}", f.name),
    };
    let size = |k: &str| f.meta(k).parse::<usize>().unwrap();
    RnnConfig::new(size("input_size"), size("hidden_size"))
        .num_layers(size("num_layers"))
        .bias(flag("bias"))
        .batch_first(flag("batch_first"))
        .bidirectional(flag("bidirectional"))
}

/// A freshly initialised model of the fixture's kind and hyperparameters.
fn model_of<E: Float>(f: &Fixture) -> Model<E> {
    let cfg = config_of(f);
    let mut rng = Rng::new(0);
    match f.meta("op") {
        "RNN" => {
            let nl = match f.meta("nonlinearity") {
                "tanh" => RnnNonlinearity::Tanh,
                "relu" => RnnNonlinearity::Relu,
                other => panic!("{}: nonlinearity {other}", f.name),
            };
            Model::Rnn(Rnn::with_nonlinearity(cfg, nl, &mut rng))
        }
        "LSTM" => Model::Lstm(Lstm::new(cfg, &mut rng)),
        "GRU" => Model::Gru(Gru::new(cfg, &mut rng)),
        other => panic!("{}: unknown op {other}", f.name),
    }
}

/// Loads the fixture's weights by name, runs it, and checks every output
/// and every listed gradient.
fn check_fixture<E: Float>(path: &str) {
    let f = Fixture::load(path);
    let mut model = model_of::<E>(&f);
    let params = f.meta_list("params");
    let dict: BTreeMap<String, Tensor<E>> = params
        .iter()
        .map(|p| (p.clone(), f.input::<E>(p)))
        .collect();
    model
        .layer_mut()
        .load_state_dict(&dict)
        .unwrap_or_else(|e| panic!("{path}: {e}"));

    let x = f.input::<E>("x").requires_grad();
    let state_names: Vec<String> = f
        .meta_list("inputs")
        .into_iter()
        .filter(|n| n == "h0" || n == "c0")
        .collect();
    let states: Vec<Tensor<E>> = state_names
        .iter()
        .map(|n| f.input::<E>(n).requires_grad())
        .collect();
    let outs = model.run(x.clone(), &states);

    let out_names = f.meta_list("outputs");
    assert_eq!(out_names.len(), outs.len(), "{path}: outputs");
    for name in &out_names {
        f.check_as(name, &outs[name.as_str()]);
    }

    // sum_k <out_k, gout_k>: its gradient is the fixture's vector-Jacobian product
    let loss = f
        .meta_list("gouts")
        .iter()
        .map(|g| {
            let out = if g == "gout" {
                "out"
            } else {
                g.strip_prefix("gout_").unwrap()
            };
            outs[out].mul(&f.input::<E>(g)).sum()
        })
        .reduce(|a, b| a.add(&b))
        .unwrap();
    let grads = loss.backward();
    let weights: BTreeMap<String, Tensor<E>> =
        model.layer().named_parameters().into_iter().collect();
    let grad_names = f.meta_list("grads");
    assert_eq!(grad_names.len(), 1 + states.len() + params.len(), "{path}");
    for name in &grad_names {
        let t = if name == "x" {
            x.clone()
        } else if let Some(i) = state_names.iter().position(|s| s == name) {
            states[i].clone()
        } else {
            weights[name].clone()
        };
        let g = grads
            .get(&t)
            .unwrap_or_else(|| panic!("{path}: no gradient for {name}"));
        f.check_as(&format!("grad_{name}"), g);
    }
}

#[test]
fn every_rnn_fixture_matches_pytorch() {
    let files = fixtures_with_prefix("rnn", "");
    assert!(files.len() >= 11, "{files:?}");
    for file in &files {
        check_fixture::<f64>(file);
        check_fixture::<f32>(file);
    }
}

/// Every tensor a model stores, replaced by the given (tracked) tensors in
/// traversal order, so that gradients reach exactly those tensors.
fn set_weights(model: &mut dyn Layer<f64>, ws: &[Tensor<f64>]) {
    let mut it = ws.iter();
    model.visit_tensors_mut(&mut |_: &str, t: &mut Tensor<f64>, _: TensorKind| {
        *t = it.next().expect("one tensor per weight").clone();
    });
    assert!(it.next().is_none());
}

fn flat(ts: &[&Tensor<f64>]) -> Tensor<f64> {
    let parts: Vec<Tensor<f64>> = ts.iter().map(|t| t.reshape(&[-1])).collect();
    let refs: Vec<&Tensor<f64>> = parts.iter().collect();
    Tensor::cat(&refs, 0)
}

/// A tiny model's inputs (`x`, states) followed by its weights, and a
/// function of all of them returning every output, flattened.
type Case = (Vec<Tensor<f64>>, Box<dyn Fn(&[Tensor<f64>]) -> Tensor<f64>>);

fn tiny_case(kind: &'static str, cfg: RnnConfig, seed: u64) -> Case {
    let (t, n) = (3, 2);
    let mut rng = Rng::new(seed);
    let rows = cfg.num_layers * cfg.num_directions();
    let x_shape = if cfg.batch_first {
        [n, t, cfg.input_size]
    } else {
        [t, n, cfg.input_size]
    };
    let mut inputs = vec![Tensor::<f64>::normal(&x_shape, 0.0, 1.0, &mut rng)];
    let n_states = if kind == "lstm" { 2 } else { 1 };
    for _ in 0..n_states {
        inputs.push(Tensor::normal(
            &[rows, n, cfg.hidden_size],
            0.0,
            0.5,
            &mut rng,
        ));
    }
    let model = match kind {
        "lstm" => Model::Lstm(Lstm::new(cfg, &mut rng)),
        "gru" => Model::Gru(Gru::new(cfg, &mut rng)),
        _ => Model::Rnn(Rnn::new(cfg, &mut rng)),
    };
    inputs.extend(
        model
            .layer()
            .named_tensors()
            .into_iter()
            .map(|(_, w, _)| w.detach()),
    );
    let f = move |xs: &[Tensor<f64>]| {
        let mut m = match kind {
            "lstm" => Model::Lstm(Lstm::new(cfg, &mut Rng::new(0))),
            "gru" => Model::Gru(Gru::new(cfg, &mut Rng::new(0))),
            _ => Model::Rnn(Rnn::new(cfg, &mut Rng::new(0))),
        };
        set_weights(m.layer_mut(), &xs[1 + n_states..]);
        let outs = m.run(xs[0].clone(), &xs[1..1 + n_states]);
        flat(&outs.values().collect::<Vec<_>>())
    };
    (inputs, Box::new(f))
}

#[test]
fn gradcheck_tiny_lstm_and_gru() {
    let one = RnnConfig::new(3, 2);
    let deep = RnnConfig::new(3, 2)
        .num_layers(2)
        .bidirectional(true)
        .batch_first(true);
    for (kind, cfg) in [
        ("lstm", one),
        ("lstm", deep),
        ("gru", one),
        ("gru", deep),
        ("rnn", deep),
    ] {
        let (inputs, f) = tiny_case(kind, cfg, 11);
        let report = gradcheck(&f, &inputs, 1e-6, 1e-6, 1e-6)
            .unwrap_or_else(|e| panic!("{kind} {cfg:?}: {e}"));
        assert_eq!(
            report.checked,
            inputs.iter().map(|t| t.numel()).sum::<usize>()
        );
    }
}

/// The gradient of `<f(xs), w>` with respect to every input.
fn grads_of(
    f: &dyn Fn(&[Tensor<f64>]) -> Tensor<f64>,
    xs: &[Tensor<f64>],
    w: &Tensor<f64>,
    graph: bool,
) -> Vec<Tensor<f64>> {
    let loss = f(xs).mul(w).sum();
    let g: Gradients<f64> = if graph {
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

/// Gradients of gradients: the Hessian-vector product through the recorded
/// backward rules against central differences of the gradient.
#[test]
fn second_order_through_lstm_and_gru() {
    let cfg = RnnConfig::new(3, 2).bidirectional(true);
    for kind in ["lstm", "gru"] {
        let (inputs, f) = tiny_case(kind, cfg, 21);
        let mut rng = Rng::new(5);
        let w = Tensor::<f64>::normal(f(&inputs).shape(), 0.0, 1.0, &mut rng);
        let vs: Vec<Tensor<f64>> = inputs
            .iter()
            .map(|x| Tensor::normal(x.shape(), 0.0, 1.0, &mut rng))
            .collect();
        let xs: Vec<Tensor<f64>> = inputs.iter().map(|x| x.requires_grad()).collect();
        let gs = grads_of(&f, &xs, &w, true);
        let s = gs
            .iter()
            .zip(&vs)
            .map(|(g, v)| g.mul(v).sum())
            .reduce(|a, b| a.add(&b))
            .unwrap();
        let h = s.backward();
        let eps = 1e-6;
        let shifted = |sign: f64| {
            let xs: Vec<Tensor<f64>> = inputs
                .iter()
                .zip(&vs)
                .map(|(x, v)| x.add(&v.mul_scalar(sign * eps)).requires_grad())
                .collect();
            grads_of(&f, &xs, &w, false)
        };
        let (gp, gm) = (shifted(1.0), shifted(-1.0));
        for (i, x) in xs.iter().enumerate() {
            let analytic = h.get(x).unwrap().to_vec();
            for (j, a) in analytic.iter().enumerate() {
                let numeric = (gp[i].as_slice()[j] - gm[i].as_slice()[j]) / (2.0 * eps);
                assert!(
                    (a - numeric).abs() <= 1e-6 + 1e-6 * numeric.abs(),
                    "{kind}: second order, input {i}, element {j}: {a} vs {numeric}"
                );
            }
        }
    }
}

#[test]
fn state_dict_round_trip_keeps_pytorch_names_and_outputs() {
    let cfg = RnnConfig::new(3, 4).num_layers(2).bidirectional(true);
    let a = Lstm::<f64>::new(cfg, &mut Rng::new(1));
    let mut b = Lstm::<f64>::new(cfg, &mut Rng::new(2));
    let sd = a.state_dict();
    let mut expected = Vec::new();
    for k in 0..2 {
        for dir in ["", "_reverse"] {
            for w in ["weight_ih", "weight_hh", "bias_ih", "bias_hh"] {
                expected.push(format!("{w}_l{k}{dir}"));
            }
        }
    }
    let order: Vec<String> = a.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(order, expected, "PyTorch's parameter order");
    expected.sort();
    assert_eq!(sd.keys().cloned().collect::<Vec<_>>(), expected);
    assert_eq!(sd["weight_ih_l1_reverse"].shape(), &[16, 8]);

    let x = Tensor::<f64>::normal(&[4, 2, 3], 0.0, 1.0, &mut Rng::new(3));
    assert_ne!(
        a.forward(x.clone()).0.to_vec(),
        b.forward(x.clone()).0.to_vec()
    );
    b.load_state_dict(&sd).unwrap();
    assert!(b.parameters().iter().all(|p| p.is_tracked()));
    let (oa, (ha, ca)) = a.forward(x.clone());
    let (ob, (hb, cb)) = b.forward(x);
    assert_eq!(oa.to_vec(), ob.to_vec());
    assert_eq!(ha.to_vec(), hb.to_vec());
    assert_eq!(ca.to_vec(), cb.to_vec());

    // a layer of the wrong size names every mismatched key
    let mut c = Lstm::<f64>::new(RnnConfig::new(3, 5).num_layers(2), &mut Rng::new(0));
    let err = c.load_state_dict(&sd).unwrap_err().to_string();
    assert!(
        err.contains("weight_hh_l0: model has shape [20, 5], file has [16, 4]"),
        "{err}"
    );
    assert!(err.contains("weight_ih_l0_reverse"), "{err}");

    // Rnn and Gru through the same round trip
    let r = Rnn::<f32>::new(RnnConfig::new(2, 3).bias(false), &mut Rng::new(4));
    let mut r2 = Rnn::<f32>::new(RnnConfig::new(2, 3).bias(false), &mut Rng::new(5));
    r2.load_state_dict(&r.state_dict()).unwrap();
    assert_eq!(
        r2.state_dict()["weight_hh_l0"].to_vec(),
        r.state_dict()["weight_hh_l0"].to_vec()
    );
    let g = Gru::<f32>::new(RnnConfig::new(2, 3), &mut Rng::new(6));
    let mut g2 = Gru::<f32>::new(RnnConfig::new(2, 3), &mut Rng::new(7));
    g2.load_state_dict(&g.state_dict()).unwrap();
    let x = Tensor::<f32>::ones(&[2, 1, 2]);
    assert_eq!(g.forward(x.clone()).1.to_vec(), g2.forward(x).1.to_vec());
}

#[test]
fn recurrent_layers_nest_in_derived_models() {
    #[derive(Layer)]
    struct Tagger {
        encoder: Lstm<f32>,
        head: Linear<f32>,
    }
    let mut rng = Rng::new(0);
    let m = Tagger {
        encoder: Lstm::new(RnnConfig::new(4, 6).bidirectional(true), &mut rng),
        head: Linear::new(12, 3, &mut rng),
    };
    let names: Vec<String> = m.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names[0], "encoder.weight_ih_l0");
    assert_eq!(names[7], "encoder.bias_hh_l0_reverse");
    assert_eq!(m.named_layers()[0].0, "encoder");
    let (out, _) = m.encoder.forward(Tensor::ones(&[5, 2, 4]));
    assert_eq!(m.head.forward(out).shape(), &[5, 2, 3]);
}

#[test]
fn zero_initial_state_equals_explicit_zeros_and_relu_is_nonnegative() {
    let cfg = RnnConfig::new(3, 4).num_layers(2).bidirectional(true);
    let lstm = Lstm::<f64>::new(cfg, &mut Rng::new(8));
    let x = Tensor::<f64>::normal(&[5, 2, 3], 0.0, 1.0, &mut Rng::new(9));
    let z = Tensor::<f64>::zeros(&[4, 2, 4]);
    let (a, (ha, _)) = lstm.forward(x.clone());
    let (b, (hb, _)) = lstm.forward((x.clone(), (z.clone(), z.clone())));
    assert_eq!(a.to_vec(), b.to_vec());
    assert_eq!(ha.to_vec(), hb.to_vec());
    // the forward half of the last step is h_n's last-layer forward row, the
    // reverse half of the first step its reverse row
    let h = 4;
    assert_eq!(
        a.narrow(0, 4, 1).narrow(2, 0, h).to_vec(),
        ha.narrow(0, 2, 1).to_vec()
    );
    assert_eq!(
        a.narrow(0, 0, 1).narrow(2, h, h).to_vec(),
        ha.narrow(0, 3, 1).to_vec()
    );

    let relu = Rnn::<f64>::with_nonlinearity(cfg, RnnNonlinearity::Relu, &mut Rng::new(8));
    let (o, h_n) = relu.forward((x, z));
    assert!(o
        .to_vec()
        .iter()
        .chain(h_n.to_vec().iter())
        .all(|&v| v >= 0.0));
    assert!(o.to_vec().iter().any(|&v| v > 0.0));
}
