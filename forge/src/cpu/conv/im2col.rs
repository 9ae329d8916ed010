//! Convolution by `im2col` / `col2im` and gemm: the three products built on
//! them (the forward convolution, its input gradient, which is also the
//! transposed convolution, and its weight gradient), for every geometry the
//! direct kernels (`conv_small.rs`) do not take.
//!
//! Work is split over the batch in fixed chunks: each image is computed by
//! one single-threaded call, and the weight gradient sums per-chunk partial
//! results in chunk order, so results do not depend on the thread count.

use super::geom::ConvGeom;
use crate::base::Float;
use crate::cpu::buffers::{build, fill_init, for_each_chunk_mut, refill};
use crate::cpu::gemm::prepared::{
    as_f32, gemm_into, gemm_into_panels, GemmOut, PackedA, PreparedA,
};
use crate::cpu::gemm::{gemm, packed_f32_applies, Fp8Panels, Mat, PACKED_F32_TILE};
use crate::cpu::memory::Storage;
use panels::ImagePanels;
pub(super) use taps::TapWeights;

/// Images per chunk of the weight-gradient reduction. Fixed (never derived
/// from the thread count) so the summation order is always the same.
const WEIGHT_GRAD_CHUNK: usize = 4;

/// Column-buffer budget, in elements, of the batched convolution paths
/// (1 MiB of `f32`: a chunk's columns stay in a core's L2 cache while the
/// gemm reads them).
const COLS_BUDGET: usize = 1 << 18;

/// [`conv2d_forward`](super::conv2d_forward) by im2col and gemm (lengths
/// checked by the caller).
pub(super) fn forward<E: Float>(
    g: &ConvGeom,
    x: &[E],
    weight: &[E],
    bias: Option<&[E]>,
) -> Storage<E> {
    let (k_len, l, og) = (g.k_len(), g.l(), g.og());
    if g.groups == 1 {
        if let Some(classes) = g.tap_plan() {
            return taps::forward_classes(g, &classes, x, weight, bias, COLS_BUDGET);
        }
        return forward_batched(g, x, weight, bias, COLS_BUDGET);
    }
    forward_groups(g, x, bias, |grp, cols, y_grp| {
        gemm(
            og,
            k_len,
            l,
            Mat::row_major(&weight[grp * og * k_len..(grp + 1) * og * k_len], k_len),
            Mat::row_major(cols, l),
            E::one(),
            y_grp,
        )
    })
}

/// [`forward`] followed by `act` over the output (`f32`): on the paths that
/// store the product straight into the output, `act` runs in the product's
/// epilogue after the bias ([`GemmOut::with_row_epilogue`]), on each block
/// of outputs while it is in cache; elsewhere over each chunk's outputs or
/// the finished output. `act` computes each element on its own, so the
/// values are those of [`forward`] followed by `act`. `kept`, when given,
/// is the weight packed as [`PackedA::new`] packs it (`[o, k]`), read
/// instead of packing it again (the same bits).
pub(super) fn forward_act(
    g: &ConvGeom,
    x: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    act: fn(&mut [f32]),
    kept: Option<&PackedA>,
) -> Storage<f32> {
    if g.groups == 1 && g.tap_plan().is_none() {
        let (k, l, o) = (g.k_len(), g.l(), g.o);
        let per = g.batch_chunk(COLS_BUDGET);
        let (a, n_max) = (Mat::row_major(weight, k), per.min(g.n) * l);
        let w = match kept {
            Some(p) => PreparedA::with_packed(o, k, a, n_max, p),
            None => PreparedA::new(o, k, a, n_max),
        };
        let mut cols = Columns::reused(g, per);
        return forward_prepared(g, x, &w, bias, per, &mut cols, Some(act));
    }
    let mut y = forward(g, x, weight, bias);
    act(&mut y);
    y
}

/// `act` over `y` in place, when given (`E` is then `f32`).
///
/// # Panics
/// When `act` is given and `E` is not `f32`.
pub(super) fn apply_act<E: Float>(y: &mut [E], act: Option<fn(&mut [f32])>) {
    if let Some(f) = act {
        assert!(
            std::any::TypeId::of::<E>() == std::any::TypeId::of::<f32>(),
            "conv2d: an activation in the output pass is for f32"
        );
        // SAFETY: `E` is `f32` (asserted), so this is the same slice under
        // its own type.
        f(unsafe { std::slice::from_raw_parts_mut(y.as_mut_ptr().cast::<f32>(), y.len()) });
    }
}

/// The grouped convolution's loop: per image (in parallel), the output
/// started at the bias, then per group its columns (`[k_len, l]`) and
/// `product(group, cols, y_group)` adding the group's weight times them
/// into its `og` output rows (`beta = 1`).
fn forward_groups<E: Float>(
    g: &ConvGeom,
    x: &[E],
    bias: Option<&[E]>,
    product: impl Fn(usize, &[E], &mut [E]) + Sync,
) -> Storage<E> {
    let (k_len, l, og, cg) = (g.k_len(), g.l(), g.og(), g.cg());
    let mut y = Storage::filled(g.n * g.o * l, E::zero());
    for_each_chunk_mut(&mut y, g.o * l, |b, y_img| {
        if let Some(bias) = bias {
            for (o, row) in y_img.chunks_mut(l).enumerate() {
                row.fill(bias[o]);
            }
        }
        let x_img = &x[b * g.c * g.h * g.w..(b + 1) * g.c * g.h * g.w];
        let mut cols = Storage::filled(k_len * l, E::zero());
        for grp in 0..g.groups {
            g.im2col(&x_img[grp * cg * g.h * g.w..], &mut cols);
            product(grp, &cols, &mut y_img[grp * og * l..(grp + 1) * og * l]);
        }
    });
    y
}

/// [`conv2d_backward_input`](super::conv2d_backward_input) by gemm and
/// col2im (lengths checked by the caller).
///
/// `kept_taps`: the used taps' weights a recording forward over tap
/// classes copied out of this same `weight` ([`forward_keeping`]).
pub(super) fn backward_input<E: Float>(
    g: &ConvGeom,
    y_grad: &[E],
    weight: &[E],
    bias: Option<&[E]>,
    kept_taps: Option<&TapWeights<E>>,
) -> Storage<E> {
    let (k_len, l, og, cg) = (g.k_len(), g.l(), g.og(), g.cg());
    let plane = g.h * g.w;
    if g.groups == 1 {
        if let Some(classes) = g.tap_plan() {
            return taps::backward_input_classes(
                g,
                &classes,
                y_grad,
                weight,
                bias,
                COLS_BUDGET,
                kept_taps,
            );
        }
        return backward_input_batched(g, y_grad, weight, bias, COLS_BUDGET);
    }
    let mut gx = Storage::filled(g.n * g.c * plane, E::zero());
    for_each_chunk_mut(&mut gx, g.c * plane, |b, gx_img| {
        if let Some(bias) = bias {
            for (c, p) in gx_img.chunks_mut(plane).enumerate() {
                p.fill(bias[c]);
            }
        }
        let gy_img = &y_grad[b * g.o * l..(b + 1) * g.o * l];
        let mut cols = Storage::filled(k_len * l, E::zero());
        for grp in 0..g.groups {
            gemm(
                k_len,
                og,
                l,
                Mat::transposed(&weight[grp * og * k_len..(grp + 1) * og * k_len], k_len),
                Mat::row_major(&gy_img[grp * og * l..(grp + 1) * og * l], l),
                E::zero(),
                &mut cols,
            );
            g.col2im(&cols, &mut gx_img[grp * cg * plane..(grp + 1) * cg * plane]);
        }
    });
    gx
}

/// [`conv2d_backward_weight`](super::conv2d_backward_weight) by im2col and
/// gemm (lengths checked by the caller).
pub(super) fn backward_weight<E: Float>(g: &ConvGeom, x: &[E], y_grad: &[E]) -> Storage<E> {
    let (k_len, l, og, cg) = (g.k_len(), g.l(), g.og(), g.cg());
    let img = g.c * g.h * g.w;
    if g.groups == 1 {
        if let Some(classes) = g.weight_grad_plan() {
            return taps::backward_weight_classes(g, &classes, x, y_grad, COLS_BUDGET);
        }
        return backward_weight_batched(g, x, y_grad, COLS_BUDGET);
    }
    let wlen = g.o * k_len;
    let n_chunks = g.n.div_ceil(WEIGHT_GRAD_CHUNK);
    let mut partials = Storage::filled(n_chunks * wlen, E::zero());
    for_each_chunk_mut(&mut partials, wlen, |ch, part| {
        let mut cols = Storage::filled(k_len * l, E::zero());
        for b in ch * WEIGHT_GRAD_CHUNK..((ch + 1) * WEIGHT_GRAD_CHUNK).min(g.n) {
            let x_img = &x[b * img..(b + 1) * img];
            let gy_img = &y_grad[b * g.o * l..(b + 1) * g.o * l];
            for grp in 0..g.groups {
                g.im2col(&x_img[grp * cg * g.h * g.w..], &mut cols);
                gemm(
                    og,
                    l,
                    k_len,
                    Mat::row_major(&gy_img[grp * og * l..(grp + 1) * og * l], l),
                    Mat::transposed(&cols, l),
                    E::one(),
                    &mut part[grp * og * k_len..(grp + 1) * og * k_len],
                );
            }
        }
    });
    let mut gw = Storage::filled(wlen, E::zero());
    for part in partials.chunks(wlen) {
        for (a, &b) in gw.iter_mut().zip(part) {
            *a += b;
        }
    }
    gw
}

/// The chunks of images `(b0, nb)` the batched paths walk, `per` at a time.
fn chunks(n: usize, per: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..n)
        .step_by(per.max(1))
        .map(move |b0| (b0, per.min(n - b0)))
}

/// [`forward`] for one group: per chunk of images, one product
/// `weight [o, k] x cols [k, nb l]`, the weight packed once per call
/// ([`PreparedA`]) and one im2col into `cols [k, nb l]` per chunk. For
/// `f32` on AVX-512 with whole 16-lane vectors of positions per image the
/// product goes straight into `y` ([`forward_direct`]); otherwise into
/// `[o, nb l]`, whose rows are then copied image by image into `y` with the
/// bias added (a chunk of one image is computed in place in `y`).
fn forward_batched<E: Float>(
    g: &ConvGeom,
    x: &[E],
    weight: &[E],
    bias: Option<&[E]>,
    budget: usize,
) -> Storage<E> {
    let (k, l, o) = (g.k_len(), g.l(), g.o);
    let per = g.batch_chunk(budget);
    let w = PreparedA::new(o, k, Mat::row_major(weight, k), per.min(g.n) * l);
    forward_prepared(g, x, &w, bias, per, &mut Columns::reused(g, per), None)
}

/// Whether [`forward_act`] multiplies `g`'s weight as a packed operand
/// (one group, no tap classes, the packed `f32` kernel for every chunk's
/// product), so that a weight packed once ([`PackedA::new`] over `[o, k]`)
/// may be kept for it.
pub(super) fn packs_weight(g: &ConvGeom) -> bool {
    let per = g.batch_chunk(COLS_BUDGET);
    g.groups == 1
        && g.tap_plan().is_none()
        && chunks(g.n, per).all(|(_, nb)| packed_f32_applies::<f32>(g.o, g.k_len(), nb * g.l()))
}

/// [`forward`] with the 8-bit float weight `w` (`[o, k]`), where it takes
/// [`forward_batched`] (one group, no tap classes) with every product on
/// the packed path: the weight packed once for the call with each value
/// decoded from its byte in the packing step ([`PreparedA::from_fp8`]),
/// then the same chunks and products as for the f32 weight holding the
/// decoded values, so the same bits; several groups by
/// [`forward_groups_fp8`]. `None` elsewhere (the caller decodes the
/// weight and runs [`forward`]): tap classes, output planes of at most 16
/// positions (a product that thin reads the weight in place), one output
/// channel a group, or no packed kernel.
pub(super) fn forward_fp8(
    g: &ConvGeom,
    x: &[f32],
    w: &Fp8Panels,
    bias: Option<&[f32]>,
) -> Option<Storage<f32>> {
    let l = g.l();
    if g.groups != 1 {
        return forward_groups_fp8(g, x, w, bias);
    }
    if g.tap_plan().is_some() {
        return None;
    }
    let per = g.batch_chunk(COLS_BUDGET);
    // every product has at least one image's `l` columns
    let w = PreparedA::<f32>::from_fp8(w, l, per.min(g.n) * l)?;
    Some(forward_prepared(
        g,
        x,
        &w,
        bias,
        per,
        &mut Columns::reused(g, per),
        None,
    ))
}

/// The grouped convolution of [`forward`] with each group's rows of the
/// fp8 weight packed from the bytes once for the call
/// ([`PreparedA::from_fp8_rows`]): the bits of `forward` with the decoded
/// weight (each product `gemm`'s, on the same panels). `None` where a
/// group's product would not take the packed kernel (one output channel
/// a group, at most 16 output positions, no packed kernel).
fn forward_groups_fp8(
    g: &ConvGeom,
    x: &[f32],
    w: &Fp8Panels,
    bias: Option<&[f32]>,
) -> Option<Storage<f32>> {
    let (og, l) = (g.og(), g.l());
    let ws = (0..g.groups)
        .map(|grp| PreparedA::<f32>::from_fp8_rows(w, grp * og, og, l, l))
        .collect::<Option<Vec<_>>>()?;
    Some(forward_groups(g, x, bias, |grp, cols, y_grp| {
        ws[grp].gemm(l, Mat::row_major(cols, l), 1.0, y_grp)
    }))
}

/// [`forward_batched`] with its weight prepared (`per` images a chunk),
/// each chunk unfolded into `cols`, then `act` (see [`forward_act`]).
fn forward_prepared<E: Float>(
    g: &ConvGeom,
    x: &[E],
    w: &PreparedA<'_, E>,
    bias: Option<&[E]>,
    per: usize,
    cols: &mut Columns<E>,
    act: Option<fn(&mut [f32])>,
) -> Storage<E> {
    let kept = match cols {
        Columns::Kept(c) => Some(c),
        Columns::Reused(_) => None,
    };
    if let Some(y) = chunked::forward(g, x, w, bias, per, kept, act) {
        return y;
    }
    if let Some(y) = forward_direct(g, x, w, bias, per, cols, act) {
        return y;
    }
    let mut y = forward_copying(g, x, w, bias, per, cols);
    apply_act(&mut y, act);
    y
}

/// [`forward_prepared`] through a product buffer, or for chunks of one
/// image in place in `y` started at the bias.
fn forward_copying<E: Float>(
    g: &ConvGeom,
    x: &[E],
    w: &PreparedA<'_, E>,
    bias: Option<&[E]>,
    per: usize,
    cols: &mut Columns<E>,
) -> Storage<E> {
    let (l, o) = (g.l(), g.o);
    if per == 1 {
        let mut y = Storage::with_capacity(g.n * o * l);
        for i in 0..o * g.n {
            let b = bias.map_or(E::zero(), |bs| bs[i % o]);
            y.extend(std::iter::repeat_n(b, l));
        }
        let beta = if bias.is_some() { E::one() } else { E::zero() };
        for b in 0..g.n {
            let cols = cols.unfold(g, x, b, 1);
            w.gemm(
                l,
                Mat::row_major(cols, l),
                beta,
                &mut y[b * o * l..(b + 1) * o * l],
            );
        }
        return y;
    }
    let mut prod = Storage::filled(o * per * l, E::zero());
    build(g.n * o * l, |y| {
        for (b0, nb) in chunks(g.n, per) {
            let ld = nb * l;
            let cols = cols.unfold(g, x, b0, nb);
            w.gemm(ld, Mat::row_major(cols, ld), E::zero(), &mut prod[..o * ld]);
            let prod = &prod[..o * ld];
            for_each_chunk_mut(&mut y[b0 * o * l..(b0 + nb) * o * l], o * l, |bi, y_img| {
                for (oc, row) in y_img.chunks_mut(l).enumerate() {
                    let b = bias.map_or(E::zero(), |b| b[oc]);
                    for (v, &p) in row.iter_mut().zip(&prod[oc * ld + bi * l..][..l]) {
                        v.write(p + b);
                    }
                }
            });
        }
    })
}

/// The forward with the product stored straight into `y` (`f32` on
/// AVX-512, `oh * ow` a multiple of 16, products on the packed path): per
/// chunk of `per` images (the same chunks as the copying path), one
/// product with the packed weight whose `[o, nb l]` result goes straight
/// into `y [n, o, l]` (one output segment per image), no `[o, nb l]`
/// buffer and no copy; the bias and `act` are applied in the product's
/// epilogue to each finished block, `y = act(product + bias)` as on the
/// copying path, whose bits it has. The product's right operand,
/// the chunk's columns `[k, nb l]`, is packed panel by panel straight from
/// the images ([`ImagePanels`]) where the columns are not kept, else
/// unfolded into `cols` first (the same panels: the same bits). `None`
/// when it does not apply.
fn forward_direct<E: Float>(
    g: &ConvGeom,
    x: &[E],
    w: &PreparedA<'_, E>,
    bias: Option<&[E]>,
    per: usize,
    cols: &mut Columns<E>,
    act: Option<fn(&mut [f32])>,
) -> Option<Storage<E>> {
    let (k, l, o) = (g.k_len(), g.l(), g.o);
    as_f32(x)?;
    // (`E` is `f32` from here on)
    let bias = match bias {
        Some(b) => Some(as_f32(b)?),
        None => None,
    };
    if l % 16 != 0 || chunks(g.n, per).any(|(_, nb)| w.packed(nb * l).is_none()) {
        return None;
    }
    let mut y = Storage::<E>::with_capacity(g.n * o * l);
    let yp = y.spare_capacity_mut().as_mut_ptr().cast::<f32>();
    for (b0, nb) in chunks(g.n, per) {
        let ld = nb * l;
        let pa = w.packed(ld)?;
        let out = GemmOut::segmented(yp.wrapping_add(b0 * o * l), l, l, o * l)
            .with_row_epilogue(bias, act);
        // SAFETY (both products): the output addresses images
        // `b0..b0 + nb` of `y` (capacity `n o l`): element `(oc, bi l + p)`
        // at `(b0 + bi) o l + oc l + p`, distinct for distinct
        // `(oc, bi, p)`; `y` is not otherwise accessed until the product
        // returns.
        if let Columns::Reused(_) = cols {
            // no columns to keep: the panels packed from the images
            let xf = as_f32(x)?;
            let panels = ImagePanels::new(g, xf, b0, nb);
            let pack =
                |k0: usize, kc: usize, j0: usize, dst: &mut [f32]| panels.pack(k0, kc, j0, dst);
            // SAFETY: above.
            unsafe { gemm_into_panels(pa, ld, &pack, out) };
        } else {
            let cols = cols.unfold(g, x, b0, nb);
            let cf = as_f32(&cols[..k * ld])?;
            // SAFETY: above.
            unsafe { gemm_into(pa, ld, Mat::row_major(cf, ld), out) };
        }
    }
    // SAFETY: the products wrote every element of every image (beta 0);
    // the bias (`o` values, a row's) outlives them.
    unsafe { y.set_len(g.n * o * l) };
    Some(y)
}

/// [`backward_input`] for one group: per chunk of images, the output
/// gradient gathered channel-major `[o, nb l]` (used in place for a chunk
/// of one image), one gemm `weight^T [k, o] x gy [o, nb l]` into columns,
/// and a col2im per image.
fn backward_input_batched<E: Float>(
    g: &ConvGeom,
    y_grad: &[E],
    weight: &[E],
    bias: Option<&[E]>,
    budget: usize,
) -> Storage<E> {
    let (k, l, o) = (g.k_len(), g.l(), g.o);
    let (plane, taps) = (g.h * g.w, g.kh * g.kw);
    let per = g.batch_chunk(budget);
    if let Some(gx) = chunked::backward_input(g, y_grad, weight, bias, per) {
        return gx;
    }
    // Unzeroed: each chunk's product (beta 0, which never reads its
    // output) writes the columns its col2im then reads.
    let mut cols = Storage::stale(k * per * l);
    let mut gyc = Storage::with_capacity(if per > 1 { o * per * l } else { 0 });
    let img = g.c * plane;
    let (inside, fast) = (g.inside_table(), kernels::fast::<E>());
    build(g.n * img, |gx| {
        for (b0, nb) in chunks(g.n, per) {
            let ld = nb * l;
            let gy = g.channel_major(y_grad, b0, nb, &mut gyc);
            gemm(
                k,
                o,
                ld,
                Mat::transposed(weight, k),
                Mat::row_major(&gy[..o * ld], ld),
                E::zero(),
                &mut cols[..k * ld],
            );
            let cols = &cols[..k * ld];
            for_each_chunk_mut(&mut gx[b0 * img..(b0 + nb) * img], img, |bi, gx_img| {
                for (ci, p) in gx_img.chunks_mut(plane).enumerate() {
                    let p = fill_init(p, bias.map_or(E::zero(), |b| b[ci]));
                    g.col2im_channel(&cols[ci * taps * ld..], ld, bi * l, &inside, p, fast);
                }
            });
        }
    })
}

/// [`backward_weight`] for one group: per chunk of images, in order,
/// `weight_grad [o, k] += gy [o, nb l] x cols^T [nb l, k]` (the output
/// gradient gathered channel-major, or used in place for one image).
fn backward_weight_batched<E: Float>(
    g: &ConvGeom,
    x: &[E],
    y_grad: &[E],
    budget: usize,
) -> Storage<E> {
    let (k, l, o) = (g.k_len(), g.l(), g.o);
    let per = g.batch_chunk(budget);
    let mut cols = Columns::reused(g, per);
    let mut gyc = Storage::with_capacity(if per > 1 { o * per * l } else { 0 });
    // Unzeroed: the first chunk's product (beta 0) writes all of it.
    let mut gw = Storage::stale(o * k);
    let flip = weight_grad_flipped::<E>(g);
    for (b0, nb) in chunks(g.n, per) {
        let cols = cols.unfold(g, x, b0, nb);
        weight_grad_chunk(g, y_grad, (b0, nb), cols, &mut gyc, &mut gw, flip);
    }
    weight_grad_unflip(g, gw, flip)
}

/// [`backward_weight_batched`] over the columns the forward kept
/// ([`forward_keeping`]): the same chunks and products on the same
/// columns, so the same bits, without unfolding the input again.
pub(super) fn backward_weight_kept<E: Float>(g: &ConvGeom, kept: &[E], y_grad: &[E]) -> Storage<E> {
    let (k, l, o) = (g.k_len(), g.l(), g.o);
    assert_eq!(kept.len(), k * g.n * l, "backward_weight_kept: columns");
    let per = g.batch_chunk(COLS_BUDGET);
    let mut gyc = Storage::with_capacity(if per > 1 { o * per * l } else { 0 });
    // Unzeroed: the first chunk's product (beta 0) writes all of it.
    let mut gw = Storage::stale(o * k);
    let flip = weight_grad_flipped::<E>(g);
    for (b0, nb) in chunks(g.n, per) {
        let cols = &kept[k * l * b0..][..k * l * nb];
        weight_grad_chunk(g, y_grad, (b0, nb), cols, &mut gyc, &mut gw, flip);
    }
    weight_grad_unflip(g, gw, flip)
}

/// One chunk's term of the weight gradient, `gw [o, k] (+)= gy [o, nb l] x
/// cols^T [nb l, k]` (`cols [k, nb l]` of images `b0..b0 + nb`; the first
/// chunk, `b0 = 0`, writes over `gw`), with the output gradient gathered
/// channel-major into `gyc` (or used in place for one image). With `flip`
/// ([`weight_grad_flipped`]) the product runs transposed, `gw^T [k, o]
/// (+)= cols [k, nb l] x gy^T [nb l, o]`, into `gw` read as `[k, o]`.
fn weight_grad_chunk<E: Float>(
    g: &ConvGeom,
    y_grad: &[E],
    (b0, nb): (usize, usize),
    cols: &[E],
    gyc: &mut Storage<E>,
    gw: &mut [E],
    flip: bool,
) {
    let (k, o, ld) = (g.k_len(), g.o, nb * g.l());
    let gy = g.channel_major(y_grad, b0, nb, gyc);
    let beta = if b0 == 0 { E::zero() } else { E::one() };
    let (gy, cols) = (&gy[..o * ld], &cols[..k * ld]);
    // `a [m, ld] x b^T [ld, n]`: the columns by the output gradient's
    // transpose, or the output gradient by the columns'
    let (m, n, a, b) = if flip {
        (k, o, cols, gy)
    } else {
        (o, k, gy, cols)
    };
    let (a, b) = (Mat::row_major(a, ld), Mat::transposed(b, ld));
    gemm(m, ld, n, a, b, beta, gw);
}

/// Whether the weight gradient of `g` runs as its transpose, `cols [k, nb
/// l] x gy^T [nb l, o]` into `[k, o]`, rather than `gy [o, nb l] x cols^T`.
/// The packed kernel reads its left operand's contiguous rows in place and
/// transposes its right operand into panels, so transposed it reads the
/// columns in place and transposes the output gradient (`o` rows) instead
/// of the columns (`k = c kh kw` rows): a 3x3 layer of `c = o` channels
/// transposes nine times less. Taken where both orientations run on the
/// packed `f32` kernel, `k > o`, the transposed product pads no more (its
/// `k` rows in tiles of 12 and `o` columns in panels of 32, against `o`
/// rows and `k` columns) and the gradient has at most
/// [`FLIP_MAX_ELEMS`] elements. Each element's sum is the same (`nb l`
/// products in the same `KC` blocks in increasing order, each a fused
/// multiply-add, and `a b = b a`), so the bits are those of the other
/// orientation
/// (`tests::flipped_weight_gradient_has_the_bits_of_the_plain_product`).
///
/// One thread, the weight gradient of 3x3 "same" layers alone (im2col and
/// product; Intel Xeon of model 167, 2026-12-07, best of 5, load 2-3),
/// plain -> transposed: 32 -> 32 channels at batch 16 on 32x32 planes
/// 3.4 -> 2.4 ms, 64 -> 64 on 32x32 18-22 -> 14.7, 64 -> 64 on 8x8 0.80 ->
/// 0.63-0.68, 128 -> 128 on 4x4 0.78-0.84 -> 0.75-0.80; but 256 -> 256 on
/// 4x4 2.44-2.48 -> 2.52-2.57 and 512 -> 512 on 4x4 9.2-9.4 -> 11.0 (a
/// gradient of 2.4 and 9.4 MB, read and written again by every chunk of
/// images), and 20 -> 40 on 16x16 at batch 96 4.13-4.19 -> 4.24 (40
/// columns padded to 64).
fn weight_grad_flipped<E: Float>(g: &ConvGeom) -> bool {
    let (k, o) = (g.k_len(), g.o);
    let (mr, nr) = PACKED_F32_TILE;
    let padded = |rows: usize, cols: usize| rows.div_ceil(mr) * mr * cols.div_ceil(nr) * nr;
    // `ld` >= 1 plays no part in whether the packed kernel applies
    k > o
        && o * k <= FLIP_MAX_ELEMS
        && padded(k, o) <= padded(o, k)
        && packed_f32_applies::<E>(o, 1, k)
        && packed_f32_applies::<E>(k, 1, o)
}

/// The largest weight gradient [`weight_grad_flipped`] runs transposed:
/// 2^18 elements (1 MiB of `f32`, about half a core's L2).
const FLIP_MAX_ELEMS: usize = 1 << 18;

/// The `[o, k]` weight gradient from [`weight_grad_chunk`]'s sums: `gw`
/// itself, or with `flip` its transpose (`gw` holds `[k, o]`).
fn weight_grad_unflip<E: Float>(g: &ConvGeom, gw: Storage<E>, flip: bool) -> Storage<E> {
    if !flip {
        return gw;
    }
    let (k, o) = (g.k_len(), g.o);
    // Unzeroed: the blocks below write every element. In 32 x 32 blocks,
    // so that the reads down `gw`'s columns stay within a few pages (an
    // element at a time, row after row of the output, the transpose of a
    // 256-channel layer's 2304 x 256 sums took 2% of a VGG-style step).
    const BLOCK: usize = 32;
    let mut out = Storage::stale(o * k);
    // (plain slices: `Storage`'s accessors check an arena's generation)
    let (src, dst): (&[E], &mut [E]) = (&gw[..o * k], &mut out[..o * k]);
    for t0 in (0..k).step_by(BLOCK) {
        let t1 = (t0 + BLOCK).min(k);
        for o0 in (0..o).step_by(BLOCK) {
            for oc in o0..(o0 + BLOCK).min(o) {
                let row = &mut dst[oc * k + t0..oc * k + t1];
                for (v, t) in row.iter_mut().zip(t0..t1) {
                    *v = src[t * o + oc];
                }
            }
        }
    }
    out
}

/// Most elements of the column matrix [`forward_keeping`] keeps for the
/// weight gradient (the whole batch's: `c kh kw` rows by `n oh ow`
/// columns), 2^22, 16 MiB of `f32`. The forward otherwise unfolds into
/// one L2-sized buffer per chunk, and the weight gradient unfolds the
/// input again; keeping the columns saves that second unfold (LeNet-5's
/// second convolution at batch 128: 1.9M elements, about a tenth of a
/// training step) for memory held from the forward to the backward.
/// Larger matrices (ResNet-style layers on big planes) are unfolded
/// twice, as before.
pub(super) const KEEP_COLS_MAX: usize = 1 << 22;

/// Whether [`forward_keeping`] keeps the columns of `g`: one group, no tap
/// classes (the paths whose forward and weight gradient unfold the same
/// chunks, [`forward_batched`] and [`backward_weight_batched`]), and the
/// whole batch's columns within [`KEEP_COLS_MAX`] elements. From the shape
/// only.
pub(super) fn keeps_columns(g: &ConvGeom) -> bool {
    g.groups == 1
        && g.k_len().saturating_mul(g.n).saturating_mul(g.l()) <= KEEP_COLS_MAX
        && g.tap_plan().is_none()
}

/// [`forward`], and where [`keeps_columns`] holds, the column matrix it
/// unfolded, `[k, nb l]` per chunk of `nb` images, chunk after chunk
/// (`k n l` elements), for [`backward_weight_kept`]. The output is
/// [`forward`]'s, bit for bit (the same chunks and products).
///
/// Over tap classes, it keeps instead the used taps' weights it copied out
/// of `weight`, for [`backward_input`] of the same call's gradient.
pub(super) fn forward_keeping<E: Float>(
    g: &ConvGeom,
    x: &[E],
    weight: &[E],
    bias: Option<&[E]>,
) -> (Storage<E>, Option<Kept<E>>) {
    if g.groups == 1
        && let Some(classes) = g.tap_plan()
    {
        let (y, copied) = taps::forward_classes_keeping(g, &classes, x, weight, bias, COLS_BUDGET);
        return (y, Some(Kept::Taps(copied)));
    }
    if !keeps_columns(g) {
        return (forward(g, x, weight, bias), None);
    }
    let (k, l, o) = (g.k_len(), g.l(), g.o);
    let per = g.batch_chunk(COLS_BUDGET);
    let w = PreparedA::new(o, k, Mat::row_major(weight, k), per.min(g.n) * l);
    let mut cols = Columns::Kept(Storage::with_capacity(k * g.n * l));
    let y = forward_prepared(g, x, &w, bias, per, &mut cols, None);
    let Columns::Kept(kept) = cols else {
        unreachable!("made kept above")
    };
    (y, Some(Kept::Columns(kept)))
}

/// What a recording forward keeps for its backward ([`forward_keeping`]).
pub(super) enum Kept<E: Copy> {
    /// The column matrix, for [`backward_weight_kept`].
    Columns(Storage<E>),
    /// The used taps' weights of a forward over tap classes, for
    /// [`backward_input`].
    Taps(TapWeights<E>),
}

/// Where the batched forward unfolds each chunk of images: one buffer
/// reused by every chunk, or the whole batch's columns, chunk after chunk,
/// kept for the weight gradient.
enum Columns<E: Copy> {
    /// Room for one chunk, overwritten by the next.
    Reused(Storage<E>),
    /// Room for every chunk; filled in chunk order.
    Kept(Storage<E>),
}

impl<E: Float> Columns<E> {
    /// A reused buffer for chunks of `per` images.
    fn reused(g: &ConvGeom, per: usize) -> Self {
        Columns::Reused(Storage::with_capacity(g.k_len() * per * g.l()))
    }

    /// Images `b0..b0 + nb` unfolded by
    /// [`im2col_batch`](ConvGeom::im2col_batch): `[k, nb l]`.
    ///
    /// # Panics
    /// For kept columns, when the chunks do not come in order.
    fn unfold(&mut self, g: &ConvGeom, x: &[E], b0: usize, nb: usize) -> &[E] {
        let len = g.k_len() * nb * g.l();
        match self {
            Columns::Reused(c) => {
                refill(c, len, |c| g.im2col_batch(x, b0, nb, c));
                &c[..len]
            }
            Columns::Kept(c) => {
                let at = c.len();
                assert_eq!(at, g.k_len() * b0 * g.l(), "kept columns: chunk order");
                g.im2col_batch(x, b0, nb, &mut c.spare_capacity_mut()[..len]);
                // SAFETY: `im2col_batch` wrote every element of the `len`
                // slots after `at` (its contract; the slice indexing above
                // checked that they are within the capacity).
                unsafe { c.set_len(at + len) };
                &c[at..]
            }
        }
    }
}

/// `F.unfold`: every `h x w` plane of `x [n, c, h, w]` unfolded into its
/// columns, `[n, c * kh * kw, oh * ow]` (the geometry's `o` and `groups`
/// are ignored). In parallel over planes.
pub(super) fn unfold<E: Float>(g: &ConvGeom, x: &[E]) -> Storage<E> {
    let one = ConvGeom {
        c: 1,
        groups: 1,
        ..*g
    };
    let (plane, cols) = (g.h * g.w, g.kh * g.kw * g.l());
    let mut out = Storage::filled(g.n * g.c * cols, E::zero());
    for_each_chunk_mut(&mut out, cols, |p, c| {
        one.im2col(&x[p * plane..(p + 1) * plane], c);
    });
    out
}

/// `F.fold`, the adjoint of [`unfold`]: the columns `[n, c * kh * kw,
/// oh * ow]` summed back onto `[n, c, h, w]`. In parallel over planes.
pub(super) fn fold<E: Float>(g: &ConvGeom, cols: &[E]) -> Storage<E> {
    let one = ConvGeom {
        c: 1,
        groups: 1,
        ..*g
    };
    let (plane, len) = (g.h * g.w, g.kh * g.kw * g.l());
    let mut out = Storage::filled(g.n * g.c * plane, E::zero());
    for_each_chunk_mut(&mut out, plane, |p, x| {
        one.col2im(&cols[p * len..(p + 1) * len], x);
    });
    out
}

mod chunked;
mod columns;
mod kernels;
mod panels;
mod taps;
#[cfg(test)]
mod tests;
