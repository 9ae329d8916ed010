use super::plan::plan;
use super::*;
use crate::cpu::conv::conv2d_forward;
use crate::tensor::Rng;

/// Geometries on both sides of the plan's choices: 3x3 and 1x1, strides
/// 1 and 2, a 7x7 stem, dilation, planes from 1x1 to 9x9, channel counts
/// that leave a partial block, batches whose tap classes group or not (and
/// so plans that read a padded copy of the input or the input as it is).
pub(super) fn geoms() -> Vec<ConvGeom> {
    let g = |x: [usize; 4], w: [usize; 4], s: usize, p: usize, d: usize| {
        ConvGeom::new(x, w, [s, s], [p, p], [d, d], 1).unwrap()
    };
    vec![
        g([1, 16, 8, 8], [64, 16, 3, 3], 1, 1, 1),
        g([2, 8, 4, 4], [40, 8, 3, 3], 1, 1, 1),
        g([1, 32, 1, 1], [32, 32, 3, 3], 1, 1, 1),
        g([16, 8, 1, 1], [33, 8, 3, 3], 1, 1, 1),
        g([8, 8, 2, 2], [32, 8, 3, 3], 1, 1, 1),
        g([1, 8, 2, 2], [32, 8, 3, 3], 1, 1, 1),
        g([3, 8, 8, 8], [16, 8, 3, 3], 2, 1, 1),
        g([2, 8, 8, 8], [24, 8, 1, 1], 2, 0, 1),
        g([1, 12, 5, 5], [64, 12, 1, 1], 1, 0, 1),
        g([1, 3, 16, 16], [64, 3, 7, 7], 2, 3, 1),
        g([2, 5, 9, 9], [7, 5, 3, 3], 1, 2, 2),
        g([12, 4, 5, 5], [16, 4, 3, 3], 2, 1, 1),
        g([32, 3, 6, 6], [8, 3, 3, 3], 1, 1, 1),
    ]
}

pub(super) fn rand(n: usize, rng: &mut Rng) -> Vec<f32> {
    (0..n).map(|_| rng.normal() as f32).collect()
}

/// The convolution in f64 and, per output, the sum of the products'
/// magnitudes (for the rounding bound).
fn reference(g: &ConvGeom, x: &[f32], w: &[f32], b: Option<&[f32]>) -> (Vec<f64>, Vec<f64>) {
    let l = g.l();
    let (mut y, mut mag) = (vec![0.0; g.n * g.o * l], vec![0.0; g.n * g.o * l]);
    for n in 0..g.n {
        for o in 0..g.o {
            for oy in 0..g.oh {
                for ox in 0..g.ow {
                    let (mut s, mut m) = (b.map_or(0.0, |b| b[o] as f64), 0.0);
                    for c in 0..g.c {
                        for ky in 0..g.kh {
                            for kx in 0..g.kw {
                                let iy = (oy * g.stride[0] + ky * g.dilation[0])
                                    .checked_sub(g.padding[0])
                                    .filter(|&v| v < g.h);
                                let ix = (ox * g.stride[1] + kx * g.dilation[1])
                                    .checked_sub(g.padding[1])
                                    .filter(|&v| v < g.w);
                                if let (Some(iy), Some(ix)) = (iy, ix) {
                                    let p = x[((n * g.c + c) * g.h + iy) * g.w + ix] as f64
                                        * w[((o * g.c + c) * g.kh + ky) * g.kw + kx] as f64;
                                    s += p;
                                    m += p.abs();
                                }
                            }
                        }
                    }
                    let at = (n * g.o + o) * l + oy * g.ow + ox;
                    y[at] = s;
                    mag[at] = m;
                }
            }
        }
    }
    (y, mag)
}

/// Every kernel gives the same bits, within the rounding bound of a
/// recursive sum of the products (`n u sum |w x|`, `n = c kh kw + 1`
/// terms, `u = 2^-24`, doubled for the input's own rounding) of the f64
/// convolution, as the im2col path does.
#[test]
fn kernels_agree_and_match_the_f64_convolution() {
    let mut rng = Rng::new(11);
    for g in geoms() {
        let x = rand(g.n * g.c * g.h * g.w, &mut rng);
        let w = rand(g.o * g.c * g.kh * g.kw, &mut rng);
        let b = rand(g.o, &mut rng);
        let p = PackedConv::new(g.o, g.c, g.kh, g.kw, &w);
        let (want, mag) = reference(&g, &x, &w, Some(&b));
        let gemm = conv2d_forward(&g, &x, &w, Some(&b));
        let mut first: Option<Vec<u32>> = None;
        for k in Kernel::available() {
            let y = forward_by(k, &g, &x, &p, Some(&b), None, false);
            let terms = (g.c * g.kh * g.kw + 1) as f64;
            for (i, (&v, (&r, &m))) in y.iter().zip(want.iter().zip(&mag)).enumerate() {
                let bound = 2.0 * terms * f64::from(f32::EPSILON) / 2.0 * (m + r.abs()) + 1e-30;
                assert!(
                    (v as f64 - r).abs() <= bound,
                    "{g:?} {k:?} [{i}]: {v} vs {r}"
                );
                let gv = gemm[i] as f64;
                assert!((gv - r).abs() <= bound, "{g:?} gemm [{i}]: {gv} vs {r}");
            }
            let bits: Vec<u32> = y.iter().map(|v| v.to_bits()).collect();
            match &first {
                None => first = Some(bits),
                Some(f) => assert!(*f == bits, "{g:?}: {k:?} differs from the portable loops"),
            }
        }
    }
}

/// One and two threads give the same bits.
#[test]
fn same_bits_for_one_and_two_threads() {
    let mut rng = Rng::new(12);
    for g in geoms() {
        let x = rand(g.n * g.c * g.h * g.w, &mut rng);
        let w = rand(g.o * g.c * g.kh * g.kw, &mut rng);
        let p = PackedConv::new(g.o, g.c, g.kh, g.kw, &w);
        let run = |t: usize| {
            let _g = crate::cpu::threads::lock_thread_count();
            crate::cpu::set_num_threads(t);
            let y = forward(&g, &x, &p, None, None, true).to_vec();
            crate::cpu::set_num_threads(0);
            y
        };
        let (a, b) = (run(1), run(2));
        assert!(
            a.iter()
                .map(|v| v.to_bits())
                .eq(b.iter().map(|v| v.to_bits())),
            "{g:?}"
        );
    }
}

/// The output pass: `relu(acc + bias + residual)`, in that order, for
/// every combination of the three (each a separately compiled pass) and
/// every kernel, on a plane
/// of one position per image (outputs a channel apart) and one of 16 (40
/// channels: a full block and a part block), with a sum of exactly zero
/// and a NaN residual.
#[test]
fn bias_residual_relu_in_the_output_pass() {
    let mut rng = Rng::new(13);
    for hw in [4, 1] {
        let g = ConvGeom::new([2, 8, hw, hw], [40, 8, 3, 3], [1, 1], [1, 1], [1, 1], 1).unwrap();
        let x = rand(g.n * g.c * g.h * g.w, &mut rng);
        let w = rand(g.o * g.c * 9, &mut rng);
        let b = rand(g.o, &mut rng);
        let mut r = rand(g.n * g.o * g.l(), &mut rng);
        let p = PackedConv::new(g.o, g.c, 3, 3, &w);
        let plain = forward(&g, &x, &p, None, None, false);
        // an output whose sum is exactly zero (ReLU's boundary), a NaN
        r[0] = -plain[0];
        r[1] = f32::NAN;
        for (k, mask) in Kernel::available()
            .into_iter()
            .flat_map(|k| (0..8).map(move |m| (k, m)))
        {
            let (bias, res, relu) = (mask & 1 != 0, mask & 2 != 0, mask & 4 != 0);
            let fused = forward_by(
                k,
                &g,
                &x,
                &p,
                bias.then_some(&b[..]),
                res.then_some(&r[..]),
                relu,
            );
            let mut zeros = 0;
            for (i, (&f, &v)) in fused.iter().zip(plain.iter()).enumerate() {
                let mut s = v;
                if bias {
                    s += b[i / g.l() % g.o];
                }
                if res {
                    s += r[i];
                }
                let off = s.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater);
                let want = if relu && off { 0.0 } else { s };
                assert_eq!(
                    f.to_bits(),
                    want.to_bits(),
                    "{hw}x{hw} {k:?} {mask:03b} [{i}]"
                );
                zeros += usize::from(f == 0.0);
            }
            assert!(!relu || (zeros > 0 && zeros < fused.len()), "{mask:03b}");
        }
    }
}

/// The padded input is the input with zeros around each plane, whatever
/// the pooled buffer it is written into held before (NaN here), on a
/// batch small enough to run on the calling thread and on one large
/// enough to split; narrow planes (zeroed in groups of planes, rows
/// copied at a compile-time width: 1, 2, 4, 8, 16, or another width) and
/// wide ones (border and rows written apart), group sizes from 1 to 64
/// planes (`gcd(planes, 64)`), padding on one axis only.
#[test]
fn padded_planes_are_zero_bordered_copies() {
    let mut rng = Rng::new(14);
    for (n, c, h, w, p0, p1) in [
        (1, 3, 5, 4, 1, 2),
        (6, 64, 8, 8, 1, 1),
        (2, 5, 3, 7, 3, 0),
        (1, 256, 2, 2, 1, 1),
        (1, 512, 1, 1, 1, 1),
        (1, 128, 4, 4, 1, 1),
        (3, 7, 16, 16, 1, 1),
        (5, 3, 3, 2, 0, 2),
        (1, 96, 2, 1, 2, 1),
        (1, 2, 30, 30, 1, 1),
        (1, 3, 32, 32, 3, 3),
    ] {
        let g = ConvGeom::new([n, c, h, w], [4, c, 3, 3], [1, 1], [p0, p1], [1, 1], 1).unwrap();
        let x = rand(n * c * h * w, &mut rng);
        let (hp, wp) = (h + 2 * p0, w + 2 * p1);
        drop(Storage::filled(n * c * hp * wp, f32::NAN));
        let xp = padded(&g, &x).unwrap();
        assert_eq!(xp.len(), n * c * hp * wp);
        for (i, &v) in xp.iter().enumerate() {
            let (plane, r, col) = (i / (hp * wp), i / wp % hp, i % wp);
            let inside = (p0..p0 + h).contains(&r) && (p1..p1 + w).contains(&col);
            let want = if inside {
                x[plane * h * w + (r - p0) * w + col - p1]
            } else {
                0.0
            };
            assert_eq!(v.to_bits(), want.to_bits(), "{g:?} [{i}]");
        }
    }
}

/// A convolution that reads much more weight than it multiplies splits
/// over two threads (ResNet-18's 1x1 downsample to 512 channels at batch
/// 1: 0.5 MB of weights, 0.13 M multiply-adds), one with few of both does
/// not.
#[test]
fn weight_streams_split_over_threads() {
    let mut rng = Rng::new(15);
    let mut dispatches = |g: &ConvGeom| {
        let x = rand(g.n * g.c * g.h * g.w, &mut rng);
        let w = rand(g.o * g.c * g.kh * g.kw, &mut rng);
        let p = PackedConv::new(g.o, g.c, g.kh, g.kw, &w);
        let _t = crate::cpu::threads::lock_thread_count();
        crate::cpu::set_num_threads(2);
        let before = crate::cpu::threads::pool_dispatches();
        let _ = forward(g, &x, &p, None, None, false);
        let after = crate::cpu::threads::pool_dispatches();
        crate::cpu::set_num_threads(0);
        after - before
    };
    let ds = ConvGeom::new([1, 256, 2, 2], [512, 256, 1, 1], [2, 2], [0, 0], [1, 1], 1).unwrap();
    assert_eq!(dispatches(&ds), 1);
    let small = ConvGeom::new([1, 16, 2, 2], [32, 16, 1, 1], [2, 2], [0, 0], [1, 1], 1).unwrap();
    assert_eq!(dispatches(&small), 0);
}

/// A kept plan is the plan of its geometry (taps, offsets, outputs), also
/// after more geometries than are kept have been planned.
#[test]
fn kept_plans_are_the_geometrys_plans() {
    let same = |a: &plan::Plan, b: &plan::Plan| {
        a.plane == b.plane
            && a.padded == b.padded
            && a.tiles.len() == b.tiles.len()
            && a.tiles.iter().zip(&b.tiles).all(|(s, t)| {
                s.np == t.np
                    && s.offs == t.offs
                    && s.outs == t.outs
                    && s.taps == t.taps
                    && s.far == t.far
            })
    };
    let gs: Vec<ConvGeom> = (1..40)
        .map(|n| ConvGeom::new([n, 3, 5, 5], [4, 3, 3, 3], [1, 1], [1, 1], [1, 1], 1).unwrap())
        .chain(geoms())
        .collect();
    for _ in 0..2 {
        for g in &gs {
            for as_is_ok in [false, true] {
                let (kept, made) = (plan::plan_cached(g, as_is_ok), plan(g, as_is_ok));
                assert!(same(&kept, &made), "{g:?} {as_is_ok}");
            }
        }
    }
}

/// Tiles run only the taps that meet the image: the centre tap on a 1x1
/// plane, four taps per 2x2 position once classes group over the batch,
/// all nine on an interior class.
#[test]
fn tiles_skip_padding_taps() {
    let g = |n: usize, hw: usize| {
        ConvGeom::new([n, 8, hw, hw], [8, 8, 3, 3], [1, 1], [1, 1], [1, 1], 1).unwrap()
    };
    let p = plan(&g(1, 1), false);
    assert_eq!(p.tiles.len(), 1);
    // the centre tap: row 1, column 1 of the padded 3x3 plane
    assert_eq!(p.tiles[0].taps, vec![(4 * 8 * OB, 3 + 1)]);
    let p = plan(&g(32, 2), false);
    assert!(
        p.tiles.iter().all(|t| t.taps.len() == 4),
        "grouped by class"
    );
    assert_eq!(p.tiles.iter().map(|t| t.np).sum::<usize>(), 32 * 4);
    let p = plan(&g(1, 2), false);
    assert!(p.tiles.len() == 1 && p.tiles[0].taps.len() == 9, "one tile");
    let p = plan(&g(16, 8), false);
    assert!(p.tiles.iter().any(|t| t.taps.len() == 9));
    assert!(p.tiles.iter().any(|t| t.taps.len() == 4), "corner class");
    assert_eq!(p.tiles.iter().map(|t| t.np).sum::<usize>(), 16 * 64);
}

/// The blocks packed from an fp8 weight's bytes are those `PackedConv::new`
/// packs from the decoded weight (and, with a factor per output channel,
/// from the decoded weight scaled as `nn/fuse.rs` scales it), element for
/// element: both encodings, channel counts that leave a partial block,
/// `c * kh * kw` over two `KC` blocks (a `k` block boundary inside a
/// channel's taps) and under one; and every kernel's output from them is
/// the f32 packing's.
#[test]
fn fp8_packing_is_the_decoded_weights_packing() {
    use crate::cpu::gemm::Fp8Bits;
    let mut rng = Rng::new(9);
    for (o, c, kh, kw, bits) in [
        (37, 19, 3, 3, Fp8Bits::E4M3),
        (33, 40, 3, 3, Fp8Bits::E5M2),
        (64, 3, 7, 7, Fp8Bits::E4M3),
        (7, 5, 1, 1, Fp8Bits::E5M2),
    ] {
        let k = c * kh * kw;
        let (w, dense) = crate::cpu::gemm::random_fp8_weight(&mut rng, (o, k), bits, (0.05, 0.01));
        let bn: Vec<f32> = (0..o).map(|_| rng.normal() as f32).collect();
        let folded: Vec<f32> = dense
            .iter()
            .enumerate()
            .map(|(i, &v)| v * bn[i / k])
            .collect();
        for (scale, want) in [(None, &dense), (Some(&bn[..]), &folded)] {
            let a = PackedConv::from_fp8((o, c, kh, kw), &w, scale);
            let b = PackedConv::new(o, c, kh, kw, want);
            assert!(
                a.w.len() == b.w.len()
                    && a.w
                        .iter()
                        .zip(b.w.iter())
                        .all(|(x, y)| x.to_bits() == y.to_bits()),
                "o {o} c {c} {kh}x{kw} {bits:?} folded {}",
                scale.is_some()
            );
        }
        let g = ConvGeom::new([2, c, 6, 6], [o, c, kh, kw], [1, 1], [1, 1], [1, 1], 1).unwrap();
        let x = rand(g.n * c * 36, &mut rng);
        let bias = rand(o, &mut rng);
        let want = forward(
            &g,
            &x,
            &PackedConv::new(o, c, kh, kw, &dense),
            Some(&bias),
            None,
            true,
        );
        let got = forward_fp8(&g, &x, &w, None, Some(&bias), None, true, false);
        assert!(
            want[..] == got[..],
            "o {o} c {c} {kh}x{kw} {bits:?}: outputs"
        );
    }
}

/// [`preferred_f32`] takes the direct kernel where it was measured
/// faster (ResNet-18 on 32x32 at batches 1, 32 and 64: the 7x7 stem, 64
/// channels on 8x8, more channels only on 4x4 planes and smaller; few
/// channels on 16x16; beyond 4096 positions only windows of 64 values
/// and more, up to 16384 positions) and takes im2col + gemm for VGG-style
/// layers (many channels on 8x8 and larger planes), where [`preferred`]
/// alone took the direct kernel.
#[test]
fn f32_choice_by_plane_and_channels() {
    let g = |x: [usize; 4], o: usize, k: usize, s: usize| {
        let p = k / 2;
        ConvGeom::new(x, [o, x[1], k, k], [s, s], [p, p], [1, 1], 1).unwrap()
    };
    for n in [1, 32, 64] {
        for geom in [
            g([n, 3, 32, 32], 64, 7, 2),
            g([n, 64, 8, 8], 64, 3, 1),
            g([n, 64, 8, 8], 128, 3, 2),
            g([n, 128, 4, 4], 128, 3, 1),
            g([n, 256, 2, 2], 256, 3, 1),
            g([n, 512, 1, 1], 512, 3, 1),
        ] {
            assert!(preferred_f32(&geom), "{geom:?}");
        }
    }
    // beyond 4096 positions, f32 only: the stem at batch 32 and 64
    let stem = g([32, 3, 32, 32], 64, 7, 2);
    assert!(!preferred(&stem) && preferred_f32(&stem));
    for gemm in [
        g([128, 3, 32, 32], 64, 7, 2),
        g([16, 3, 32, 32], 64, 3, 1),
        g([64, 64, 8, 8], 128, 1, 2),
    ] {
        assert!(!preferred_f32(&gemm), "{gemm:?}");
    }
    for keep in [
        g([16, 16, 16, 16], 16, 3, 1),
        g([1, 128, 8, 8], 128, 3, 1),
        g([64, 64, 8, 8], 64, 3, 1),
    ] {
        assert!(preferred_f32(&keep), "{keep:?}");
    }
    for gemm in [
        g([16, 64, 16, 16], 128, 3, 1),
        g([16, 24, 16, 16], 24, 3, 1),
        g([1, 256, 16, 16], 256, 3, 1),
        g([16, 96, 8, 8], 96, 3, 1),
        g([8, 256, 8, 8], 256, 3, 1),
    ] {
        assert!(preferred(&gemm), "{gemm:?}: the direct kernel before");
        assert!(!preferred_f32(&gemm), "{gemm:?}");
    }
}

/// Where every tile's positions are of one tap class (the classes grouped
/// over the batch), the plan reads the input as it is (no padded copy),
/// and the outputs are those of the plan over the padded copy, bit for
/// bit, by every kernel: strides 1 and 2, a 7x7 stem, dilation, unequal
/// padding, 1x1 planes. Where a tile mixes classes (one image of 8x8), the
/// plan reads the padded copy.
#[test]
fn unpadded_reads_give_the_padded_copys_bits() {
    let g = |x: [usize; 4], w: [usize; 4], s: usize, p: [usize; 2], d: usize| {
        ConvGeom::new(x, w, [s, s], p, [d, d], 1).unwrap()
    };
    let mixed = g([1, 4, 8, 8], [8, 4, 3, 3], 1, [1, 1], 1);
    assert!(plan(&mixed, true).padded, "one image of 8x8 mixes classes");
    let mut rng = Rng::new(16);
    for geom in [
        g([32, 5, 8, 8], [40, 5, 3, 3], 1, [1, 1], 1),
        g([32, 3, 8, 8], [16, 3, 3, 3], 2, [1, 1], 1),
        g([16, 4, 1, 1], [8, 4, 3, 3], 1, [1, 1], 1),
        g([32, 4, 2, 2], [33, 4, 3, 3], 1, [1, 1], 1),
        g([12, 3, 11, 11], [16, 3, 7, 7], 2, [3, 3], 1),
        g([24, 2, 9, 7], [8, 2, 3, 3], 1, [2, 0], 2),
        g([13, 3, 6, 5], [8, 3, 3, 2], 1, [1, 0], 1),
    ] {
        let (as_is, copy) = (plan(&geom, true), plan(&geom, false));
        assert!(!as_is.padded && copy.padded, "{geom:?}: layouts");
        let x = rand(geom.n * geom.c * geom.h * geom.w, &mut rng);
        let w = rand(geom.o * geom.c * geom.kh * geom.kw, &mut rng);
        let b = rand(geom.o, &mut rng);
        let r = rand(geom.n * geom.o * geom.l(), &mut rng);
        let p = PackedConv::new(geom.o, geom.c, geom.kh, geom.kw, &w);
        let (want, _) = reference(&geom, &x, &w, Some(&b));
        for k in Kernel::available() {
            let run = |pl: &plan::Plan| {
                forward_planned(k, &geom, &x, &p, pl, Some(&b), Some(&r), true)
                    .iter()
                    .map(|v| v.to_bits())
                    .collect::<Vec<u32>>()
            };
            let got = run(&as_is);
            assert!(got == run(&copy), "{geom:?} {k:?}: bits differ");
            // and it is the convolution (not two equal wrong answers)
            for (i, (&v, &r0)) in got.iter().zip(&want).enumerate() {
                let want_v = (r0 + f64::from(r[i])).max(0.0);
                let v = f64::from(f32::from_bits(v));
                assert!(
                    (v - want_v).abs() <= 1e-3 * (1.0 + want_v.abs()),
                    "{geom:?} {k:?} [{i}]"
                );
            }
        }
    }
}

/// A tile's bound is its farthest read, which a read before the input (a
/// wrapped offset) exceeds; every plan's tiles read inside their input
/// (padded or as it is), and the check
/// refuses an input one value shorter than the farthest read needs.
#[test]
fn tile_bounds_are_the_farthest_read() {
    assert_eq!(plan::farthest(&[10, 2], &[(0, 1), (0, 4)]), 14);
    assert_eq!(
        plan::farthest(&[5usize.wrapping_neg()], &[(0, 3)]),
        usize::MAX - 1
    );
    assert_eq!(plan::farthest(&[], &[(0, 3)]), 0);
    for g in geoms() {
        for as_is_ok in [false, true] {
            let pl = plan(&g, as_is_ok);
            let len = if pl.padded {
                g.n * g.c * pl.plane
            } else {
                g.n * g.c * g.h * g.w
            };
            let far = pl.tiles.iter().map(|t| t.far).max().unwrap();
            assert!(far + (g.c - 1) * pl.plane < len, "{g:?} {as_is_ok}");
            for t in &pl.tiles {
                assert!(tile_reads_inside(t, g.c, pl.plane, len), "{g:?}");
                let need = t.far + (g.c - 1) * pl.plane + 1;
                assert!(!tile_reads_inside(t, g.c, pl.plane, need - 1), "{g:?}");
            }
        }
    }
}

/// ResNet-18's eleven convolution geometries on 3x32x32 images, at batch
/// 1 (a padded copy, tiles over all positions; the deep layers split over
/// 8-16 channel blocks on two threads, each thread streaming its own
/// blocks of the weight) and at batch 12 (tiles grouped by tap class over
/// the batch, the input read as it is), through the fused output pass
/// (bias, residual, ReLU): two threads give the bits of one, the best
/// kernel the portable loops' bits, and the result is the convolution
/// within the rounding bound of `kernels_agree_and_match_the_f64_convolution`.
#[test]
fn resnet18_layers_same_bits_for_one_and_two_threads() {
    let mut rng = Rng::new(17);
    // (c, o, k, stride, padding, input side)
    let layers = [
        (3, 64, 7, 2, 3, 32),
        (64, 64, 3, 1, 1, 8),
        (64, 128, 3, 2, 1, 8),
        (128, 128, 3, 1, 1, 4),
        (64, 128, 1, 2, 0, 8),
        (128, 256, 3, 2, 1, 4),
        (256, 256, 3, 1, 1, 2),
        (128, 256, 1, 2, 0, 4),
        (256, 512, 3, 2, 1, 2),
        (512, 512, 3, 1, 1, 1),
        (256, 512, 1, 2, 0, 2),
    ];
    for n in [1, 12] {
        for (c, o, k, s, p, side) in layers {
            let g =
                ConvGeom::new([n, c, side, side], [o, c, k, k], [s, s], [p, p], [1, 1], 1).unwrap();
            let x = rand(g.n * g.c * g.h * g.w, &mut rng);
            let w: Vec<f32> = rand(g.o * g.c * k * k, &mut rng)
                .into_iter()
                .map(|v| v * 0.05)
                .collect();
            let b = rand(g.o, &mut rng);
            let r = rand(g.n * g.o * g.l(), &mut rng);
            let pk = PackedConv::new(g.o, g.c, k, k, &w);
            let run = |kernel: Kernel, threads: usize| {
                let _t = crate::cpu::threads::lock_thread_count();
                crate::cpu::set_num_threads(threads);
                let y = forward_by(kernel, &g, &x, &pk, Some(&b), Some(&r), true).to_vec();
                crate::cpu::set_num_threads(0);
                y
            };
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            let one = run(Kernel::best(), 1);
            assert!(
                bits(&run(Kernel::best(), 2)) == bits(&one),
                "{g:?}: 2 threads"
            );
            assert!(
                bits(&run(Kernel::Portable, 1)) == bits(&one),
                "{g:?}: portable loops"
            );
            let (want, mag) = reference(&g, &x, &w, Some(&b));
            let terms = (g.c * k * k + 2) as f64;
            for (i, &v) in one.iter().enumerate() {
                let sum = want[i] + f64::from(r[i]);
                let bound =
                    2.0 * terms * f64::from(f32::EPSILON) * (mag[i] + sum.abs() + 1.0) + 1e-30;
                assert!(
                    (f64::from(v) - sum.max(0.0)).abs() <= bound,
                    "{g:?} [{i}]: {v} vs {sum}"
                );
            }
        }
    }
}
