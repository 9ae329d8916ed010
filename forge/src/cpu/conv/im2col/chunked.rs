//! The batched im2col paths with their chunks of images in parallel, each
//! chunk whole on one thread.
//!
//! [`forward_batched`](super::forward_batched) and
//! [`backward_input_batched`](super::backward_input_batched) walk the batch
//! in chunks of `per` images (as many as keep a chunk's columns within the
//! L2-sized budget), one after another, and split each chunk's passes
//! (the unfold, the product's packing and tiles, the col2im or the bias)
//! over the threads: four or five hand-offs a chunk, each a wait for the
//! slower thread, and each thread reading columns the other unfolded. On
//! a small conv net (10 -> 20 channels on 16x16 planes at batch 96: nine
//! chunks of eleven images, about 0.2 ms each) two threads ran those
//! passes no faster than one.
//!
//! Here, where there are at least two chunks per thread, the chunks
//! themselves are the parallel loop: each runs its unfold, product and
//! col2im (or output copy) on one thread into its own buffers, and the
//! call makes one hand-off. The chunks and each chunk's operations are
//! the serial path's (a product's bits do not depend on the thread that
//! runs it or on how many threads there are), so the results are bit for
//! bit those of the chunk-serial loops, at any thread count.
//!
//! Where the columns are not kept and the product is stored straight into
//! the output, a chunk packs its product's panels straight from its images
//! ([`ImagePanels`]) instead of unfolding them first, as the serial loop
//! does.
//!
//! The weight gradient stays chunk-serial: its chunks add into one `[o, k]`
//! sum in chunk order.

use super::panels::ImagePanels;
use super::{apply_act, chunks, kernels};
use crate::base::Float;
use crate::cpu::buffers::{build, build_chunks, fill_init, SharedOut};
use crate::cpu::conv::geom::ConvGeom;
use crate::cpu::gemm::prepared::{as_f32, gemm_into, gemm_into_panels, GemmOut, PreparedA};
use crate::cpu::gemm::{gemm, Mat};
use crate::cpu::memory::Storage;
use crate::cpu::threads::num_threads;
use std::mem::MaybeUninit;

/// Whether the batched paths run `n_chunks` chunks of images in parallel
/// (at least two per thread, so that claiming them dynamically keeps the
/// threads within a chunk of each other). One thread keeps the serial
/// loops. Only the schedule depends on the thread count, never the values.
pub(super) fn in_parallel(n_chunks: usize) -> bool {
    let threads = num_threads();
    threads > 1 && n_chunks >= 2 * threads
}

/// The forward of [`forward_prepared`](super::forward_prepared) over
/// chunks of `per` images in parallel (where [`in_parallel`] holds; `None`
/// otherwise): per chunk, its columns unfolded into a buffer of its own, or
/// into its range of `kept` (`[k, nb l]` per chunk, chunk after chunk,
/// `k n l` elements, set to that length on return), and its product into
/// `y`, with the serial path's operations for each of its three cases
/// (stored straight into `y` then the bias added; one image started at the
/// bias; through a `[o, nb l]` buffer copied out with the bias added).
pub(super) fn forward<E: Float>(
    g: &ConvGeom,
    x: &[E],
    w: &PreparedA<'_, E>,
    bias: Option<&[E]>,
    per: usize,
    kept: Option<&mut Storage<E>>,
    act: Option<fn(&mut [f32])>,
) -> Option<Storage<E>> {
    let (k, l, o) = (g.k_len(), g.l(), g.o);
    let n_chunks = g.n.div_ceil(per.max(1));
    if !in_parallel(n_chunks) {
        return None;
    }
    let direct = as_f32(x).is_some()
        && l % 16 == 0
        && chunks(g.n, per).all(|(_, nb)| w.packed(nb * l).is_some());
    let mut kept = kept;
    let kept_at = kept.as_deref_mut().map(|c| {
        assert!(c.is_empty() && c.capacity() >= k * g.n * l, "kept columns");
        SharedOut(c.spare_capacity_mut().as_mut_ptr().cast::<E>())
    });
    let y = build_chunks(g.n * o * l, per * o * l, |ch, y| {
        let (b0, nb) = (ch * per, y.len() / (o * l));
        let ld = nb * l;
        if direct
            && kept_at.is_none()
            && let (Some(pa), Some(xf)) = (w.packed(ld), as_f32(x))
        {
            // no columns to keep: the panels packed from the images
            let panels = ImagePanels::new(g, xf, b0, nb);
            let pack =
                |k0: usize, kc: usize, j0: usize, dst: &mut [f32]| panels.pack(k0, kc, j0, dst);
            // SAFETY: the product (beta 0) writes every element of `out`,
            // which `store_direct` makes as its contract requires.
            return unsafe {
                store_direct(g, bias, act, y, |out| gemm_into_panels(pa, ld, &pack, out))
            };
        }
        let own: Storage<E>;
        let cols: &[E] = match kept_at {
            Some(at) => {
                // SAFETY: chunk `ch` writes elements `k l b0..k l (b0 + nb)`
                // of the kept buffer (capacity `k n l`, asserted), disjoint
                // from every other chunk's; it is not read before the loop
                // returns but by this chunk, after `im2col_batch` wrote
                // every element of the range (its contract).
                unsafe {
                    let p = at.get().add(k * l * b0);
                    g.im2col_batch(x, b0, nb, std::slice::from_raw_parts_mut(p.cast(), k * ld));
                    std::slice::from_raw_parts(p, k * ld)
                }
            }
            None => {
                own = build(k * ld, |c| g.im2col_batch(x, b0, nb, c));
                &own
            }
        };
        chunk_product(g, w, (bias, act), (nb, per), cols, direct, y);
    });
    if let Some(c) = kept {
        // SAFETY: the chunks cover images `0..n`, so their ranges cover
        // `0..k n l`, each written whole (above); the capacity was asserted.
        unsafe { c.set_len(k * g.n * l) };
    }
    Some(y)
}

/// An activation over `f32` outputs in place, when there is one.
type Act = Option<fn(&mut [f32])>;

/// One chunk's product `w cols` (`cols [k, nb l]`) into its `nb` images of
/// the output, `y` (`[nb, o, l]`), as the serial path computes it, then
/// `act` (`f32`).
fn chunk_product<E: Float>(
    g: &ConvGeom,
    w: &PreparedA<'_, E>,
    (bias, act): (Option<&[E]>, Act),
    (nb, per): (usize, usize),
    cols: &[E],
    direct: bool,
    y: &mut [MaybeUninit<E>],
) {
    let (l, o) = (g.l(), g.o);
    let ld = nb * l;
    if direct && let (Some(pa), Some(cf)) = (w.packed(ld), as_f32(cols)) {
        // SAFETY: the product (beta 0) writes every element of `out`,
        // which `store_direct` makes as its contract requires.
        return unsafe {
            store_direct(g, bias, act, y, |out| {
                gemm_into(pa, ld, Mat::row_major(cf, ld), out)
            })
        };
    }
    if per == 1 {
        let y = fill_init(y, E::zero());
        if let Some(bias) = bias {
            for (row, &b) in y.chunks_mut(l).zip(bias) {
                row.fill(b);
            }
        }
        let beta = if bias.is_some() { E::one() } else { E::zero() };
        w.gemm(l, Mat::row_major(cols, l), beta, y);
        apply_act(y, act);
        return;
    }
    let mut prod = Storage::stale(o * ld);
    w.gemm(ld, Mat::row_major(cols, ld), E::zero(), &mut prod);
    for (bi, y_img) in y.chunks_mut(o * l).enumerate() {
        for (oc, row) in y_img.chunks_mut(l).enumerate() {
            let b = bias.map_or(E::zero(), |b| b[oc]);
            for (v, &p) in row.iter_mut().zip(&prod[oc * ld + bi * l..][..l]) {
                v.write(p + b);
            }
        }
    }
    if act.is_some() {
        // SAFETY: every element was written just above (each image's `o`
        // rows of `l`).
        apply_act(unsafe { &mut *(std::ptr::from_mut(y) as *mut [E]) }, act);
    }
}

/// A chunk's product stored straight into its `nb` images of `y`
/// (`[nb, o, l]`, `f32`) by `product(out)`, with the bias and `act` in the
/// product's epilogue (`act(product + bias)`, the bits of adding the bias
/// afterwards): `out` addresses element `(oc, bi l + p)` of the `[o, nb l]`
/// product at `bi o l + oc l + p` of `y`, distinct for distinct
/// `(oc, bi, p)`, and `y` is not otherwise accessed until `product`
/// returns.
///
/// # Safety
/// `product` writes every element `out` addresses (a product with beta
/// 0), and nothing else.
unsafe fn store_direct<E: Float>(
    g: &ConvGeom,
    bias: Option<&[E]>,
    act: Option<fn(&mut [f32])>,
    y: &mut [MaybeUninit<E>],
    product: impl FnOnce(GemmOut),
) {
    let (l, o) = (g.l(), g.o);
    // (`E` is `f32`: the product writes `f32` into `y`)
    let bias = bias.map(|b| as_f32(b).expect("store_direct: f32"));
    product(
        GemmOut::segmented(y.as_mut_ptr().cast::<f32>(), l, l, o * l).with_row_epilogue(bias, act),
    );
}

/// The input gradient of
/// [`backward_input_batched`](super::backward_input_batched) over chunks
/// of `per` images in parallel (where [`in_parallel`] holds; `None`
/// otherwise): per chunk, the output gradient gathered channel-major (in
/// place for one image), the product `weight^T gy` into columns of its
/// own and a col2im per image, as the serial path does.
pub(super) fn backward_input<E: Float>(
    g: &ConvGeom,
    y_grad: &[E],
    weight: &[E],
    bias: Option<&[E]>,
    per: usize,
) -> Option<Storage<E>> {
    let (k, l, o) = (g.k_len(), g.l(), g.o);
    let (plane, taps) = (g.h * g.w, g.kh * g.kw);
    if !in_parallel(g.n.div_ceil(per.max(1))) {
        return None;
    }
    let img = g.c * plane;
    let (inside, fast) = (g.inside_table(), kernels::fast::<E>());
    Some(build_chunks(g.n * img, per * img, |ch, gx| {
        let (b0, nb) = (ch * per, gx.len() / img);
        let ld = nb * l;
        let mut gyc = Storage::with_capacity(if nb > 1 { o * ld } else { 0 });
        let gy = g.channel_major(y_grad, b0, nb, &mut gyc);
        // Unzeroed: the product (beta 0, which never reads its output)
        // writes every element.
        let mut cols = Storage::stale(k * ld);
        gemm(
            k,
            o,
            ld,
            Mat::transposed(weight, k),
            Mat::row_major(&gy[..o * ld], ld),
            E::zero(),
            &mut cols,
        );
        for (bi, gx_img) in gx.chunks_mut(img).enumerate() {
            for (ci, p) in gx_img.chunks_mut(plane).enumerate() {
                let p = fill_init(p, bias.map_or(E::zero(), |b| b[ci]));
                g.col2im_channel(&cols[ci * taps * ld..], ld, bi * l, &inside, p, fast);
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::super::{
        backward_input_batched, forward_batched, forward_keeping, Kept, COLS_BUDGET,
    };
    use super::*;
    use crate::cpu::threads::{lock_thread_count, set_num_threads};

    fn frac(n: usize, a: usize) -> Vec<f32> {
        (0..n).map(|i| ((i * a) % 23) as f32 * 0.13 - 1.4).collect()
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// The chunks in parallel (two threads, at least four chunks) give the
    /// bits of the chunk-serial loops (one thread) for the forward's three
    /// cases (16-multiple planes stored straight into the output, chunks of
    /// one image, other planes through the copy), with and without bias,
    /// the kept columns, and the input gradient; `f64` (plain products) too.
    #[test]
    fn parallel_chunks_give_the_bits_of_the_serial_loops() {
        let _threads = lock_thread_count();
        let prev = num_threads();
        // (x shape, w shape, padding, budget in chunks' images)
        let cases = [
            ([96, 10, 16, 16], [20, 10, 3, 3], 1, 11), // the small conv net's second layer
            ([13, 6, 8, 8], [37, 6, 5, 5], 2, 3),      // odd channels, last chunk of one
            ([7, 5, 9, 7], [9, 5, 3, 3], 1, 2),        // a plane of 63: the copying path
            ([5, 4, 6, 6], [11, 4, 3, 3], 0, 1),       // chunks of one image (16 positions)
            ([6, 3, 10, 11], [4, 3, 3, 3], 1, 1),      // one image, 110 positions
        ];
        for (xs, ws, p, per) in cases {
            let g = ConvGeom::new(xs, ws, [1, 1], [p, p], [1, 1], 1).unwrap();
            let budget = per * g.k_len() * g.l();
            assert_eq!(g.batch_chunk(budget), per, "{g:?}");
            let x = frac(g.n * g.c * g.h * g.w, 37);
            let w = frac(g.o * g.k_len(), 13);
            let gy = frac(g.n * g.o * g.l(), 11);
            let (bias, bias_in) = (frac(g.o, 7), frac(g.c, 5));
            for b in [None, Some(&bias[..])] {
                set_num_threads(1);
                let want = forward_batched(&g, &x, &w, b, budget);
                set_num_threads(2);
                assert!(in_parallel(g.n.div_ceil(per)), "{g:?}");
                let pw = PreparedA::new(g.o, g.k_len(), Mat::row_major(&w, g.k_len()), per * g.l());
                let got = forward(&g, &x, &pw, b, per, None, None).expect("in parallel");
                assert!(bits(&got) == bits(&want), "{g:?} bias {}", b.is_some());
            }
            for b in [None, Some(&bias_in[..])] {
                set_num_threads(1);
                let want = backward_input_batched(&g, &gy, &w, b, budget);
                set_num_threads(2);
                let got = backward_input(&g, &gy, &w, b, per).expect("in parallel");
                assert!(bits(&got) == bits(&want), "{g:?} bias {}", b.is_some());
            }
            // f64: the plain products
            let (x64, w64, gy64): (Vec<f64>, Vec<f64>, Vec<f64>) = (
                x.iter().map(|&v| f64::from(v) / 3.0).collect(),
                w.iter().map(|&v| f64::from(v) / 7.0).collect(),
                gy.iter().map(|&v| f64::from(v) / 9.0).collect(),
            );
            set_num_threads(1);
            let (want_y, want_gx) = (
                forward_batched(&g, &x64, &w64, None, budget),
                backward_input_batched(&g, &gy64, &w64, None, budget),
            );
            set_num_threads(2);
            assert!(
                forward_batched(&g, &x64, &w64, None, budget) == want_y,
                "{g:?}"
            );
            assert!(
                backward_input_batched(&g, &gy64, &w64, None, budget) == want_gx,
                "{g:?}"
            );
        }
        // the recording forward's kept columns (the net's second layer:
        // nine chunks of up to eleven images within `COLS_BUDGET`)
        let g = ConvGeom::new([96, 10, 16, 16], [20, 10, 3, 3], [1, 1], [1, 1], [1, 1], 1).unwrap();
        assert_eq!(g.n.div_ceil(g.batch_chunk(COLS_BUDGET)), 9);
        let (x, w, bias) = (frac(96 * 10 * 256, 37), frac(20 * 90, 13), frac(20, 7));
        let kept = |threads| {
            set_num_threads(threads);
            let (y, kept) = forward_keeping(&g, &x, &w, Some(&bias));
            let Some(Kept::Columns(c)) = kept else {
                panic!("no kept columns")
            };
            (bits(&y), bits(&c))
        };
        let (one, two) = (kept(1), kept(2));
        assert!(one.0 == two.0, "kept forward's output");
        assert!(one.1 == two.1, "kept columns");
        set_num_threads(prev);
    }
}
