//! The fp8 convolutions and recurrent layers against the f32 layers
//! holding their decoded weights (what they computed when they decoded
//! the whole weight on every call): the same bits at 1 and 2 threads, for
//! both encodings, per-row and per-tensor scales, odd channel counts and
//! `k` over a `KC` block, on every path; and on the paths that decode in
//! their packing step (the direct convolution, im2col and gemm, the
//! projected LSTM), no whole-weight decode at all.

use super::conv_bn_act::conv_bn_act;
use super::{BatchNorm2d, Conv2d, Forward, Gru, Layer, Lstm, RnnConfig};
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
        // decoded whole: several groups, the small-channel kernels, a
        // plane of 16 positions (a thin product), 1x1 planes (tap classes)
        (
            conv(8, 6, 3, &mut rng).groups(2),
            x(&[2, 8, 5, 5], &mut rng),
            true,
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

#[test]
fn fp8_recurrent_layers_equal_the_decoded_f32_layers() {
    // the thread count is set below: no other test may change it meanwhile
    let _threads = crate::cpu::threads::lock_thread_count();
    let mut rng = Rng::new(13);
    // input 300 (W_ih's k over a KC block), hidden 37 (4H = 148 and
    // 3H = 111 columns: partial panels); two bidirectional layers, and a
    // batch-first one
    let cfgs = [
        RnnConfig::new(300, 37).num_layers(2).bidirectional(true),
        RnnConfig::new(300, 37).batch_first(true),
    ];
    let x = Tensor::<f32>::uniform(&[5, 3, 300], -1.0, 1.0, &mut rng);
    let one = Tensor::<f32>::uniform(&[5, 1, 300], -1.0, 1.0, &mut rng);
    for cfg in cfgs {
        for (format, granularity) in CASES {
            let mut q = Lstm::<f32>::new(cfg, &mut Rng::new(1));
            let mut r = q.clone();
            assert_eq!(to_fp8(&mut q, format, granularity), 1);
            r.load_state_dict(&decoded_dict(&q)).unwrap();
            let mut gq = Gru::<f32>::new(cfg, &mut Rng::new(2));
            let mut gr = gq.clone();
            assert_eq!(to_fp8(&mut gq, format, granularity), 1);
            gr.load_state_dict(&decoded_dict(&gq)).unwrap();
            for threads in [1, 2] {
                crate::cpu::set_num_threads(threads);
                let what = format!("{cfg:?} {format:?} {granularity:?} threads {threads}");
                let lstm = |m: &Lstm<f32>, x: &Tensor<f32>| {
                    let (y, (h, c)) = m.forward(x.clone());
                    [y, h, c].map(|t| t.detach().to_vec())
                };
                // no_grad, three sequences: the projected path, decoding
                // in its packing step
                let want = no_grad(|| lstm(&r, &x));
                let (got, decodes) = counting(|| no_grad(|| lstm(&q, &x)));
                assert!(got == want, "lstm {what}");
                if packed_gemm() {
                    assert_eq!(decodes, 0, "lstm {what}: decoded a whole weight");
                }
                // one sequence, and recording: the weights decoded per cell
                let want = no_grad(|| lstm(&r, &one));
                assert!(
                    no_grad(|| lstm(&q, &one)) == want,
                    "lstm {what}: one sequence"
                );
                assert!(lstm(&q, &x) == lstm(&r, &x), "lstm {what}: recording");
                let gru = |m: &Gru<f32>| {
                    let (y, h) = m.forward(x.clone());
                    [y, h].map(|t| t.detach().to_vec())
                };
                assert!(no_grad(|| gru(&gq)) == no_grad(|| gru(&gr)), "gru {what}");
                assert!(gru(&gq) == gru(&gr), "gru {what}: recording");
            }
        }
    }
}
