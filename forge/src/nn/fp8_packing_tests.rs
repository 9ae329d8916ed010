//! The fp8 convolutions and recurrent layers against the f32 layers
//! holding their decoded weights (what they computed when they decoded
//! the whole weight on every call): the same bits at 1 and 2 threads, for
//! both encodings, per-row and per-tensor scales, odd channel counts and
//! `k` over a `KC` block, on every path; and on the paths that decode in
//! their packing step (the direct convolution, im2col and gemm, the
//! recurrent layers' projections and hidden products), no whole-weight
//! decode at all.

use super::conv_bn_act::conv_bn_act;
use super::{BatchNorm2d, Conv2d, Forward, Gru, Layer, Lstm, Rnn, RnnConfig, RnnNonlinearity};
use crate::autograd::no_grad;
use crate::quant::{to_fp8, Fp8Format, Granularity, WHOLE_DECODES};
use crate::tensor::{Rng, Tensor};
use std::collections::BTreeMap;

const CASES: [(Fp8Format, Granularity); 4] = [
    (Fp8Format::E4M3, Granularity::PerChannel),
    (Fp8Format::E5M2, Granularity::PerTensor),
    (Fp8Format::E4M3, Granularity::PerTensor),
    (Fp8Format::E5M2, Granularity::PerChannel),
];

/// `f()` and how many whole weights this thread decoded meanwhile.
fn counting<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let before = WHOLE_DECODES.with(|d| d.get());
    let r = f();
    (r, WHOLE_DECODES.with(|d| d.get()) - before)
}

/// Whether this CPU (class) runs the packed f32 gemm, whose packing the
/// im2col and LSTM paths decode in.
fn packed_gemm() -> bool {
    crate::cpu::gemm::packed_f32_available()
}

/// An fp8 copy of `conv` and the f32 layer holding its decoded weight.
fn fp8_and_decoded(
    conv: &Conv2d<f32>,
    format: Fp8Format,
    granularity: Granularity,
) -> (Conv2d<f32>, Conv2d<f32>) {
    let mut q = conv.clone();
    assert_eq!(to_fp8(&mut q, format, granularity), 1);
    let mut r = q.clone();
    r.weight = q.fp8().unwrap().dequantized_tensor();
    r.fp8 = None;
    (q, r)
}

/// Each geometry with the path it takes: `(conv, input, grad mode on,
/// decodes in the packing step)`.
fn conv_cases() -> Vec<(Conv2d<f32>, Tensor<f32>, bool, bool)> {
    let mut rng = Rng::new(11);
    let conv = |c, o, k, rng: &mut Rng| Conv2d::<f32>::new(c, o, k, rng);
    let x = |s: &[usize], rng: &mut Rng| Tensor::<f32>::uniform(s, -1.0, 1.0, rng);
    vec![
        // the direct kernel (outside autograd, few positions): 37 output
        // channels (a partial block), k = 171
        (
            conv(19, 37, 3, &mut rng).padding(1),
            x(&[2, 19, 6, 6], &mut rng),
            false,
            true,
        ),
        // k = 360, over a KC block; stride 2
        (
            conv(40, 33, 3, &mut rng).padding(1).stride(2),
            x(&[1, 40, 7, 7], &mut rng),
            false,
            true,
        ),
        // im2col and gemm: 4608 positions (past the direct kernel's), and
        // with grad mode on (recording: never the direct kernel)
        (
            conv(19, 37, 3, &mut rng).padding(1),
            x(&[2, 19, 48, 48], &mut rng),
            false,
            true,
        ),
        (
            conv(40, 33, 3, &mut rng).padding(1),
            x(&[2, 40, 6, 6], &mut rng),
            true,
            true,
        ),
        (
            conv(20, 50, 1, &mut rng),
            x(&[3, 20, 5, 5], &mut rng),
            true,
            true,
        ),
        // a VGG-style layer (40 channels on a 16x16 plane): within the
        // direct kernel's reach, but f32 inference takes im2col + gemm
        // there (`direct_preferred_f32`), and so must the fp8 layer; k =
        // 360 spans two KC blocks, where the two kernels' summation
        // orders differ (with k in one block they gave the same bits)
        (
            conv(40, 30, 3, &mut rng).padding(1),
            x(&[2, 40, 16, 16], &mut rng),
            false,
            true,
        ),
        // several groups, each group's rows packed from the bytes: 3
        // output channels a group; 35 (group 1's rows straddle two held
        // panels of 32) with k = 288 over a KC block; stride 2, no_grad
        (
            conv(8, 6, 3, &mut rng).groups(2).padding(1),
            x(&[2, 8, 6, 6], &mut rng),
            true,
            true,
        ),
        (
            conv(64, 70, 3, &mut rng).groups(2).padding(1),
            x(&[2, 64, 6, 6], &mut rng),
            false,
            true,
        ),
        (
            conv(60, 99, 3, &mut rng).groups(3).padding(1).stride(2),
            x(&[3, 60, 11, 11], &mut rng),
            true,
            true,
        ),
        // decoded whole: several groups over 9 positions (a thin
        // product), depthwise (one output channel a group), the
        // small-channel kernels, a plane of 16 positions, 1x1 planes (tap
        // classes)
        (
            conv(8, 6, 3, &mut rng).groups(2),
            x(&[2, 8, 5, 5], &mut rng),
            true,
            false,
        ),
        (
            conv(8, 8, 3, &mut rng).groups(8).padding(1),
            x(&[2, 8, 6, 6], &mut rng),
            false,
            false,
        ),
        (
            conv(3, 16, 3, &mut rng).padding(1),
            x(&[2, 3, 9, 9], &mut rng),
            true,
            false,
        ),
        (
            conv(19, 37, 3, &mut rng).padding(1),
            x(&[1, 19, 4, 4], &mut rng),
            true,
            false,
        ),
        (
            conv(32, 40, 3, &mut rng).padding(1),
            x(&[16, 32, 1, 1], &mut rng),
            true,
            false,
        ),
    ]
}

/// The VGG-style geometry of the cases is one where the direct kernel
/// could run but f32 inference prefers im2col + gemm (else those cases
/// would test nothing new).
#[test]
fn the_vgg_style_case_is_one_where_the_paths_differ() {
    use crate::cpu::conv::{direct_preferred, direct_preferred_f32, ConvGeom};
    let g = ConvGeom::new([2, 40, 16, 16], [30, 40, 3, 3], [1, 1], [1, 1], [1, 1], 1).unwrap();
    assert!(direct_preferred(&g) && !direct_preferred_f32(&g));
}

#[test]
fn fp8_convolutions_equal_the_decoded_f32_layers() {
    // the thread count is set below: no other test may change it meanwhile
    let _threads = crate::cpu::threads::lock_thread_count();
    for (i, (conv, x, grad, packs)) in conv_cases().into_iter().enumerate() {
        for (format, granularity) in CASES {
            let (q, r) = fp8_and_decoded(&conv, format, granularity);
            for threads in [1, 2] {
                crate::cpu::set_num_threads(threads);
                let run = |m: &Conv2d<f32>| {
                    if grad {
                        m.forward(x.clone()).detach()
                    } else {
                        no_grad(|| m.forward(x.clone()))
                    }
                };
                let want = run(&r);
                let (got, decodes) = counting(|| run(&q));
                let what = format!("case {i} {format:?} {granularity:?} threads {threads}");
                assert!(got.to_vec() == want.to_vec(), "{what}");
                if packs && packed_gemm() {
                    assert_eq!(decodes, 0, "{what}: decoded the whole weight");
                }
                if !packs {
                    assert_eq!(decodes, 1, "{what}: the fallback decodes once");
                }
            }
        }
    }
}

/// A batch norm in evaluation mode with running statistics and affine
/// parameters away from their defaults.
fn trained_bn(o: usize, rng: &mut Rng) -> BatchNorm2d<f32> {
    let mut bn = BatchNorm2d::<f32>::new(o);
    let y = Tensor::<f32>::uniform(&[4, o, 3, 3], -2.0, 3.0, rng);
    no_grad(|| bn.forward(y));
    bn.weight = Some(Tensor::uniform(&[o], 0.5, 1.5, rng));
    bn.bias = Some(Tensor::uniform(&[o], -0.5, 0.5, rng));
    bn.eval();
    bn
}

#[test]
fn fp8_convolutions_with_a_folded_batch_norm_equal_the_decoded_f32_layers() {
    // the thread count is set below: no other test may change it meanwhile
    let _threads = crate::cpu::threads::lock_thread_count();
    let mut rng = Rng::new(12);
    for (c, o, hw, n, stride) in [
        (19, 37, 6, 2, 1),
        (40, 33, 7, 1, 2),
        // im2col (past the direct kernel's positions): the in-place pass
        (19, 37, 48, 2, 1),
        // a VGG-style layer, im2col in f32 inference though the direct
        // kernel could take it
        (40, 30, 16, 2, 1),
    ] {
        let conv = Conv2d::<f32>::new(c, o, 3, &mut rng)
            .padding(1)
            .stride(stride);
        let bn = trained_bn(o, &mut rng);
        let x = Tensor::<f32>::uniform(&[n, c, hw, hw], -1.0, 1.0, &mut rng);
        let oh = (hw + 2 - 3) / stride + 1;
        let geom = crate::cpu::conv::ConvGeom::new(
            [n, c, hw, hw],
            [o, c, 3, 3],
            [stride, stride],
            [1, 1],
            [1, 1],
            1,
        )
        .unwrap();
        let direct_f32 = crate::cpu::conv::direct_preferred_f32(&geom);
        let res = Tensor::<f32>::uniform(&[n, o, oh, oh], -1.0, 1.0, &mut rng);
        for (format, granularity) in CASES {
            let (q, r) = fp8_and_decoded(&conv, format, granularity);
            for threads in [1, 2] {
                crate::cpu::set_num_threads(threads);
                for (residual, relu) in [(None, false), (Some(&res), true)] {
                    let want = no_grad(|| conv_bn_act(&r, &bn, x.clone(), residual, relu));
                    let (got, decodes) =
                        counting(|| no_grad(|| conv_bn_act(&q, &bn, x.clone(), residual, relu)));
                    let what = format!(
                        "{c} -> {o}, {hw}x{hw}, {format:?} {granularity:?} threads {threads}"
                    );
                    assert!(got.to_vec() == want.to_vec(), "{what}");
                    // the direct kernel decodes in its packing on every
                    // CPU class; im2col + gemm needs the packed gemm
                    if packed_gemm() || direct_f32 {
                        assert_eq!(decodes, 0, "{what}: decoded the whole weight");
                    }
                }
            }
        }
    }
}

/// The f32 state dict of an fp8 model: each weight's decoded values times
/// its scale (one rounding, as the packing step computes them).
fn decoded_dict<L: Layer<f32>>(model: &L) -> BTreeMap<String, Tensor<f32>> {
    let mut dict = model.state_dict();
    let scales: Vec<String> = dict
        .keys()
        .filter(|k| k.ends_with("_scale"))
        .cloned()
        .collect();
    for s in scales {
        let scale = dict.remove(&s).unwrap();
        let w = s.strip_suffix("_scale").unwrap().to_string();
        let rows = if scale.numel() == 1 {
            1
        } else {
            dict[&w].dim(0)
        };
        let v = dict[&w].mul(&scale.reshape(&[rows, 1]));
        dict.insert(w, v);
    }
    dict
}

/// An fp8 copy of the recurrent layer `m` and the f32 layer holding its
/// decoded weights.
fn fp8_pair<L: Layer<f32> + Clone>(m: &L, format: Fp8Format, granularity: Granularity) -> (L, L) {
    let mut q = m.clone();
    assert_eq!(to_fp8(&mut q, format, granularity), 1);
    let mut r = m.clone();
    r.load_state_dict(&decoded_dict(&q)).unwrap();
    (q, r)
}

/// A recurrent layer's forward pass as values: `(output, states..)`
/// detached, under `no_grad` or with grad mode on (the f32 layer then
/// records; the fp8 one runs its inference loops).
type Run<'a, L> = &'a dyn Fn(&L, &Tensor<f32>) -> Vec<Vec<f32>>;

/// `run` on the fp8 layer equals `run` on the decoded f32 layer for each
/// input `(name, x, one sequence)`, under `no_grad` and recording; and
/// the layer's `cells` decode their `W_hh` into a tensor where the f32
/// loop has no packing step (one sequence, or no packed kernel), nothing
/// otherwise (`W_ih` is never decoded into a tensor: with the packed
/// kernel its product decodes panels, `gemm_fp8_t`).
fn check_recurrent<L>(
    q: &L,
    r: &L,
    xs: &[(&str, &Tensor<f32>, bool)],
    run: Run<'_, L>,
    cells: usize,
    what: &str,
) {
    for (name, x, one) in xs {
        for grad in [false, true] {
            let go = |m: &L| {
                if grad {
                    run(m, x)
                } else {
                    no_grad(|| run(m, x))
                }
            };
            let want = go(r);
            let (got, decodes) = counting(|| go(q));
            let what = format!("{what}, {name}, grad mode {grad}");
            assert!(got == want, "{what}");
            let hh = if packed_gemm() && !one { 0 } else { cells };
            assert_eq!(decodes, hh, "{what}: whole-weight decodes");
        }
    }
}

#[test]
fn fp8_recurrent_layers_equal_the_decoded_f32_layers() {
    // the thread count is set below: no other test may change it meanwhile
    let _threads = crate::cpu::threads::lock_thread_count();
    let mut rng = Rng::new(13);
    // input 300 (W_ih's k over a KC block), hidden 37 (4H = 148, 3H = 111
    // and H = 37 columns: partial panels); two bidirectional layers, and
    // a batch-first one; three sequences (the packed products: the
    // projected LSTM, the GRU's and Elman RNN's prepacked W_hh), one
    // sequence (one-row hidden products) and an unbatched one
    let cfgs = [
        RnnConfig::new(300, 37).num_layers(2).bidirectional(true),
        RnnConfig::new(300, 37).batch_first(true),
    ];
    let x = Tensor::<f32>::uniform(&[5, 3, 300], -1.0, 1.0, &mut rng);
    let one = Tensor::<f32>::uniform(&[5, 1, 300], -1.0, 1.0, &mut rng);
    let unbatched = Tensor::<f32>::uniform(&[4, 300], -1.0, 1.0, &mut rng);

    let lstm: Run<'_, Lstm<f32>> = &|m, x| {
        let (y, (h, c)) = m.forward(x.clone());
        [y, h, c].map(|t| t.detach().to_vec()).to_vec()
    };
    let gru: Run<'_, Gru<f32>> = &|m, x| {
        let (y, h) = m.forward(x.clone());
        [y, h].map(|t| t.detach().to_vec()).to_vec()
    };
    let rnn: Run<'_, Rnn<f32>> = &|m, x| {
        let (y, h) = m.forward(x.clone());
        [y, h].map(|t| t.detach().to_vec()).to_vec()
    };
    for cfg in cfgs {
        // one sequence in the layer's layout
        let one = if cfg.batch_first {
            one.transpose(0, 1).contiguous()
        } else {
            one.clone()
        };
        let xs = [
            ("three", &x, false),
            ("one", &one, true),
            ("unbatched", &unbatched, true),
        ];
        for (format, granularity) in CASES {
            let (lq, lr) = fp8_pair(
                &Lstm::<f32>::new(cfg, &mut Rng::new(1)),
                format,
                granularity,
            );
            let (gq, gr) = fp8_pair(&Gru::<f32>::new(cfg, &mut Rng::new(2)), format, granularity);
            let relu = RnnNonlinearity::Relu;
            let elman = [
                Rnn::<f32>::new(cfg, &mut Rng::new(3)),
                Rnn::<f32>::with_nonlinearity(cfg, relu, &mut Rng::new(4)),
            ]
            .map(|m| fp8_pair(&m, format, granularity));
            for threads in [1, 2] {
                crate::cpu::set_num_threads(threads);
                let what = format!("{cfg:?} {format:?} {granularity:?} threads {threads}");
                let cells = cfg.num_layers * cfg.num_directions();
                check_recurrent(&gq, &gr, &xs, gru, cells, &format!("gru {what}"));
                for (q, r) in &elman {
                    let what = format!("rnn {:?} {what}", r.nonlinearity());
                    check_recurrent(q, r, &xs, rnn, cells, &what);
                }
                check_recurrent(&lq, &lr, &xs, lstm, cells, &format!("lstm {what}"));
            }
        }
    }
}

/// Where the products with the decoded weight take gemm's thin path (at
/// most 16 gate rows: the GRU at H = 5, the Elman RNN at H = 16) the fp8
/// layers decode `W_hh` for the call, and still have the decoded layers'
/// bits.
#[test]
fn fp8_recurrent_layers_with_few_gate_rows_decode_w_hh() {
    let mut rng = Rng::new(14);
    let x = Tensor::<f32>::uniform(&[4, 3, 20], -1.0, 1.0, &mut rng);
    let (format, granularity) = CASES[0];
    let (gq, gr) = fp8_pair(
        &Gru::<f32>::new(RnnConfig::new(20, 5), &mut Rng::new(5)),
        format,
        granularity,
    );
    let (rq, rr) = fp8_pair(
        &Rnn::<f32>::new(RnnConfig::new(20, 16), &mut Rng::new(6)),
        format,
        granularity,
    );
    let gru = |m: &Gru<f32>| no_grad(|| m.forward(x.clone()).0.to_vec());
    let rnn = |m: &Rnn<f32>| no_grad(|| m.forward(x.clone()).0.to_vec());
    let (got, decodes) = counting(|| gru(&gq));
    assert!(got == gru(&gr));
    assert_eq!(decodes, 1, "gru: W_hh decoded once");
    let (got, decodes) = counting(|| rnn(&rq));
    assert!(got == rnn(&rr));
    assert_eq!(decodes, 1, "rnn: W_hh decoded once");
}
