//! Convolutions over tiny planes, where most kernel taps read padding.
//!
//! With a 3x3, padding-1 kernel on a 1x1 plane only the centre tap ever
//! meets the image: an im2col + gemm over all nine taps multiplies (and
//! packs) eight rows of zeros for every useful one. On a 2x2 plane every tap
//! meets the image somewhere, but each output position sees only four of
//! the nine. ResNet-18 on 32x32 inputs runs its last two stages on such
//! planes.
//!
//! Here the output positions are split into *tap classes*: positions whose
//! windows meet the image at the same taps. Each class runs its own im2col
//! over its taps only (tap-major: one `[c, positions]` block per tap) and
//! one gemm per tap against that tap's weight `[o, c]` (the used taps'
//! weights copied out of `[o, c, kh, kw]` once per call), so no product of
//! a padding zero is ever formed. The products
//! left out are `0 * w`, exactly zero for finite weights, so the results
//! equal the dense path's up to the order of the (nonzero) summands; with
//! small integers they are exactly equal, which is what the tests check.
//!
//! Which classes a geometry gets depends only on its shape
//! ([`ConvGeom::tap_plan`]), and every kernel here sums in a fixed order,
//! so results do not depend on the thread count.

use super::chunks;
use crate::base::Float;
use crate::cpu::buffers::{
    build, build_chunks, fill_init, for_each_chunk_mut, for_each_row_mut, refill,
};
use crate::cpu::conv::geom::ConvGeom;
use crate::cpu::gemm::prepared::PreparedA;
use crate::cpu::gemm::{gemm, Mat};
use crate::cpu::memory::Storage;
use crate::cpu::threads::parallel_for_cost;
use std::mem::MaybeUninit;
use std::sync::Mutex;

/// Marks a tap that falls on the padding in a class's offset table.
const PAD: usize = usize::MAX;

/// Most classes a plan may have (each is one gemm per chunk of images).
const MAX_CLASSES: usize = 16;

/// Fewest gemm columns (images times positions) a class of a split plan
/// may have.
const MIN_CLASS_COLS: usize = 8;

/// Elements per parallel chunk of the gathers and scatters.
const GATHER_CHUNK: usize = 1 << 12;

/// Output positions whose windows meet the image at the same kernel taps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct TapClass {
    /// Kernel taps `t = i * kw + j`, increasing.
    pub(super) taps: Vec<usize>,
    /// Output positions `p = oy * ow + ox`, increasing.
    pub(super) pos: Vec<usize>,
}

/// The kernel indices along one axis that meet the image, per output
/// coordinate, grouped: `(indices, coordinates)` in order of first use.
fn axis_groups(
    out_len: usize,
    k: usize,
    s: usize,
    p: usize,
    d: usize,
    len: usize,
) -> Vec<(Vec<usize>, Vec<usize>)> {
    let mut groups: Vec<(Vec<usize>, Vec<usize>)> = Vec::new();
    for o in 0..out_len {
        let valid: Vec<usize> = (0..k)
            .filter(|&i| ConvGeom::src(o, i, s, p, d, len).is_some())
            .collect();
        match groups.iter_mut().find(|(v, _)| *v == valid) {
            Some((_, coords)) => coords.push(o),
            None => groups.push((valid, vec![o])),
        }
    }
    groups
}

/// The cartesian product `a x b` flattened as `x * stride + y`, increasing
/// when `a` and `b` are.
fn product(a: &[usize], b: &[usize], stride: usize) -> Vec<usize> {
    a.iter()
        .flat_map(|&x| b.iter().map(move |&y| x * stride + y))
        .collect()
}

impl ConvGeom {
    fn row_groups(&self) -> Vec<(Vec<usize>, Vec<usize>)> {
        let ([s, _], [p, _], [d, _]) = (self.stride, self.padding, self.dilation);
        axis_groups(self.oh, self.kh, s, p, d, self.h)
    }

    fn col_groups(&self) -> Vec<(Vec<usize>, Vec<usize>)> {
        let ([_, s], [_, p], [_, d]) = (self.stride, self.padding, self.dilation);
        axis_groups(self.ow, self.kw, s, p, d, self.w)
    }

    /// One class per distinct set of taps that meet the image: rows of
    /// equal valid kernel rows times columns of equal valid kernel columns.
    pub(super) fn classes_grouped(&self) -> Vec<TapClass> {
        let cols = self.col_groups();
        let mut out = Vec::new();
        for (is, oys) in self.row_groups() {
            for (js, oxs) in &cols {
                let mut pos = product(&oys, oxs, self.ow);
                pos.sort_unstable();
                out.push(TapClass {
                    taps: product(&is, js, self.kw),
                    pos,
                });
            }
        }
        out.sort_by_key(|c| c.pos[0]);
        out
    }

    /// One class of every position, with the taps that meet the image at
    /// some position (tap `(i, j)` does iff row `i` does at some output row
    /// and column `j` at some output column).
    pub(super) fn classes_union(&self) -> Vec<TapClass> {
        let union = |groups: Vec<(Vec<usize>, Vec<usize>)>, k: usize| -> Vec<usize> {
            (0..k)
                .filter(|i| groups.iter().any(|(v, _)| v.contains(i)))
                .collect()
        };
        vec![TapClass {
            taps: product(
                &union(self.row_groups(), self.kh),
                &union(self.col_groups(), self.kw),
                self.kw,
            ),
            pos: (0..self.l()).collect(),
        }]
    }

    /// The tap classes the batched paths use, or `None` for the dense
    /// im2col over every tap: the classes of
    /// [`classes_grouped`](Self::classes_grouped) when they cut the
    /// multiply-adds of one class over the useful taps by at least 40%
    /// (2x2 planes of a 3x3 padding-1 kernel: by 56%) and each class's
    /// gemms are at least [`MIN_CLASS_COLS`] wide over the batch (a class
    /// runs one gemm per tap; with a batch of one image each would be a
    /// matrix-vector product, and the dense path's single product over all
    /// taps is cheaper), else that one class when it leaves out taps (1x1
    /// planes) and its product is as wide (with fewer columns, copying the
    /// used taps' weights costs more than the dense matrix-vector product
    /// saves: ResNet-18 batch-1 inference spent 40% of its time there),
    /// else `None`. Depends on the shape only.
    pub(super) fn tap_plan(&self) -> Option<Vec<TapClass>> {
        let cost =
            |cls: &[TapClass]| -> usize { cls.iter().map(|c| c.taps.len() * c.pos.len()).sum() };
        let union = self.classes_union();
        let grouped = self.classes_grouped();
        let wide = grouped
            .iter()
            .all(|c| self.n * c.pos.len() >= MIN_CLASS_COLS);
        if grouped.len() > 1
            && grouped.len() <= MAX_CLASSES
            && wide
            && 10 * cost(&grouped) <= 6 * cost(&union)
        {
            Some(grouped)
        } else if cost(&union) < self.kh * self.kw * self.l() && self.n * self.l() >= MIN_CLASS_COLS
        {
            Some(union)
        } else {
            None
        }
    }

    /// The tap classes the weight gradient runs over: [`tap_plan`]'s when
    /// it is a single class (taps that never meet the image left out, as
    /// on 1x1 planes), else `None`, the dense path. A split plan's weight
    /// gradient is one product per class and tap, each of inner length
    /// `n` times the class's positions (16 for 2x2 planes at batch 16)
    /// and each writing a whole `[o, c]` block; the dense path's single
    /// product over all taps (inner length `n oh ow`, 2.25x the
    /// multiply-adds there) took 2.8 ms against 3.8 ms for a 256-channel
    /// 3x3 layer on 2x2 planes at batch 16 (1 thread, CPU time, AVX2).
    /// Depends on the shape only.
    ///
    /// [`tap_plan`]: Self::tap_plan
    pub(super) fn weight_grad_plan(&self) -> Option<Vec<TapClass>> {
        self.tap_plan().filter(|classes| classes.len() == 1)
    }

    /// The in-plane offset `y * w + x` that tap `cls.taps[ti]` reads at
    /// position `cls.pos[pi]`, at `ti * pos.len() + pi` ([`PAD`] where it
    /// falls on the padding).
    fn offsets(&self, cls: &TapClass) -> Vec<usize> {
        let [s0, s1] = self.stride;
        let [p0, p1] = self.padding;
        let [d0, d1] = self.dilation;
        let mut tab = Vec::with_capacity(cls.taps.len() * cls.pos.len());
        for &t in &cls.taps {
            for &p in &cls.pos {
                let y = Self::src(p / self.ow, t / self.kw, s0, p0, d0, self.h);
                let x = Self::src(p % self.ow, t % self.kw, s1, p1, d1, self.w);
                tab.push(match (y, x) {
                    (Some(y), Some(x)) => y * self.w + x,
                    _ => PAD,
                });
            }
        }
        tab
    }

    /// Images `b0..b0 + nb` unfolded over one class, tap-major:
    /// `cols [tg * c, nb * lg]`, row `ti * c + ci`, column `bi * lg + pi`
    /// (`tab` is [`offsets`](Self::offsets)), so that each tap's rows are
    /// one contiguous `[c, nb * lg]` block; every element is written.
    fn im2col_class<E: Float>(
        &self,
        x: &[E],
        cls: &TapClass,
        tab: &[usize],
        (b0, nb): (usize, usize),
        cols: &mut [MaybeUninit<E>],
    ) {
        let (tg, lg, plane) = (cls.taps.len(), cls.pos.len(), self.h * self.w);
        let ld = nb * lg;
        let rows = (GATHER_CHUNK / ld.max(1)).max(1);
        for_each_chunk_mut(&mut cols[..tg * self.c * ld], rows * ld, |ch, part| {
            for (r, row) in part.chunks_mut(ld).enumerate() {
                let r = ch * rows + r;
                let (ti, ci) = (r / self.c, r % self.c);
                let offs = &tab[ti * lg..(ti + 1) * lg];
                for (bi, dst) in row.chunks_mut(lg).enumerate() {
                    let at = ((b0 + bi) * self.c + ci) * plane;
                    let src = &x[at..at + plane];
                    for (d, &off) in dst.iter_mut().zip(offs) {
                        d.write(if off == PAD { E::zero() } else { src[off] });
                    }
                }
            }
        });
    }

    /// `gy [n, o, l]` images `b0..b0 + nb` at one class's positions, as
    /// `[o, nb * lg]`; every element is written.
    fn gather_class<E: Float>(
        &self,
        gy: &[E],
        cls: &TapClass,
        (b0, nb): (usize, usize),
        out: &mut [MaybeUninit<E>],
    ) {
        let (o, l, lg) = (self.o, self.l(), cls.pos.len());
        let ld = nb * lg;
        for_each_row_mut(&mut out[..o * ld], ld, |oc, row| {
            for (bi, dst) in row.chunks_mut(lg).enumerate() {
                let src = &gy[((b0 + bi) * o + oc) * l..][..l];
                for (d, &p) in dst.iter_mut().zip(&cls.pos) {
                    d.write(src[p]);
                }
            }
        });
    }

    /// `(k, per, ldn)` of one class: its column rows `c * taps`, images per
    /// chunk ([`class_chunk`](Self::class_chunk)) and columns over the
    /// whole batch `n * positions`.
    fn class_sizes(&self, cls: &TapClass, budget: usize) -> (usize, usize, usize) {
        let k = self.c * cls.taps.len();
        (k, self.class_chunk(cls, budget), self.n * cls.pos.len())
    }

    /// Images per chunk for one class: as many as keep its columns within
    /// `budget` elements, at least one (from the shape only).
    fn class_chunk(&self, cls: &TapClass, budget: usize) -> usize {
        (budget / (self.c * cls.taps.len() * cls.pos.len()).max(1)).clamp(1, self.n.max(1))
    }
}

/// The taps some class of `classes` uses, increasing.
fn used_taps(classes: &[TapClass]) -> Vec<usize> {
    let mut used: Vec<usize> = classes.iter().flat_map(|c| c.taps.clone()).collect();
    used.sort_unstable();
    used.dedup();
    used
}

/// The widest forward product of a plan: a class's chunk of images times
/// its positions.
fn widest(g: &ConvGeom, classes: &[TapClass], budget: usize) -> usize {
    classes
        .iter()
        .map(|cls| g.class_chunk(cls, budget) * cls.pos.len())
        .max()
        .unwrap_or(0)
}

/// Tap `t`'s weight `[o, c]` read in place from `weight [o, c, kh, kw]`
/// (rows `c kh kw` apart, columns `kh kw` apart).
fn tap_in_place<'a, E>(g: &ConvGeom, weight: &'a [E], t: usize) -> Mat<'a, E> {
    let kk = g.kh * g.kw;
    Mat {
        data: &weight[t..],
        rs: g.c * kk,
        cs: kk,
    }
}

/// The weights of the taps a plan uses, copied once per call from
/// `weight [o, c, kh, kw]` (per output channel, one strided pass over its
/// row per used tap) into `[o, taps used, c]`, so that each tap's `[o, c]`
/// matrix has contiguous rows.
pub(in crate::cpu::conv) struct TapWeights<E: Copy> {
    /// The taps used by some class, increasing.
    taps: Vec<usize>,
    /// `[o, taps.len(), c]`.
    data: Storage<E>,
    /// Input channels.
    c: usize,
}

impl<E: Float> TapWeights<E> {
    fn new(g: &ConvGeom, classes: &[TapClass], weight: &[E]) -> Self {
        let used = used_taps(classes);
        let (c, taps, nt) = (g.c, g.kh * g.kw, used.len());
        // Per output channel, one strided pass over its row of `weight`
        // (in L1 after the first tap) per used tap, each writing a
        // contiguous run: on a 1x1 plane (one tap in nine) this copy reads
        // the whole weight, and the per-element loop over `(c, taps)` was
        // 20% of a 512-channel layer's training step.
        let data = build_chunks(g.o * nt * c, nt * c, |oc, row| {
            let src = &weight[oc * c * taps..][..c * taps];
            for (slot, &t) in used.iter().enumerate() {
                let dst = &mut row[slot * c..][..c];
                for (d, &v) in dst.iter_mut().zip(src[t..].iter().step_by(taps)) {
                    d.write(v);
                }
            }
        });
        TapWeights {
            taps: used,
            data,
            c,
        }
    }

    /// Whether these are the used taps' weights of `classes` over `g`
    /// (the same taps and sizes; the values are the caller's to vouch
    /// for).
    fn fits(&self, g: &ConvGeom, classes: &[TapClass]) -> bool {
        let used = used_taps(classes);
        self.c == g.c && self.data.len() == g.o * used.len() * g.c && self.taps == used
    }

    /// Tap `t`'s weight `[o, c]` (`weight[oc, ci, t]`), a row-major view.
    fn get(&self, t: usize) -> Mat<'_, E> {
        let slot = self.taps.binary_search(&t).expect("tap used by the plan");
        Mat {
            data: &self.data[slot * self.c..],
            rs: self.taps.len() * self.c,
            cs: 1,
        }
    }
}

/// Each used tap's weight `[o, c]` prepared once per call for the
/// forward products ([`PreparedA`]: packed for `f32` on AVX-512, so
/// neither a packing per class and chunk), from the used taps' weights
/// copied out of `weight` ([`TapWeights`], made once per call and kept by
/// a recording forward for the input gradient's products).
struct TapsPrepared<'a, E> {
    /// The taps used by some class, increasing.
    taps: Vec<usize>,
    /// Their prepared weights (from the copy), in the same order.
    prep: Vec<PreparedA<'a, E>>,
    /// The weight `[o, c, kh, kw]` itself, for the matrix-vector products.
    weight: &'a [E],
}

impl<'a, E: Float> TapsPrepared<'a, E> {
    fn new(
        g: &ConvGeom,
        classes: &[TapClass],
        copied: &'a TapWeights<E>,
        weight: &'a [E],
        budget: usize,
    ) -> Self {
        let n_max = widest(g, classes, budget);
        let prep = copied
            .taps
            .iter()
            .map(|&t| PreparedA::new(g.o, g.c, copied.get(t), n_max))
            .collect();
        TapsPrepared {
            taps: copied.taps.clone(),
            prep,
            weight,
        }
    }

    /// Every tap's weight prepared from `weight` read in place (as before
    /// the copy; the tests compare the two bit for bit).
    #[cfg(test)]
    fn in_place(g: &ConvGeom, classes: &[TapClass], weight: &'a [E], budget: usize) -> Self {
        let n_max = widest(g, classes, budget);
        let taps = used_taps(classes);
        let prep = taps
            .iter()
            .map(|&t| PreparedA::new(g.o, g.c, tap_in_place(g, weight, t), n_max))
            .collect();
        TapsPrepared { taps, prep, weight }
    }

    /// `c = weight_t b + beta c` for tap `t` (`b` is `[c, n]`, `c`
    /// row-major `[o, n]`), the bits of [`gemm`] over `weight_t` read in
    /// place: from the copy (the packed product copies the operand; the
    /// narrow kernel of 2 to 16 columns sums each output in the same order
    /// whatever its strides), except for a matrix-vector product (one
    /// column or one output channel), whose kernel [`gemm`] chooses by the
    /// operand's strides, so it reads the weight in place as before. The
    /// copy spares the narrow products their reads of the weight in place
    /// (rows `c kh kw` floats apart, taps `kh kw` apart: every step of a
    /// row block touched eight lines far apart for a few floats of each).
    fn gemm(&self, g: &ConvGeom, t: usize, n: usize, b: Mat<'_, E>, beta: E, c: &mut [E]) {
        if n == 1 || g.o == 1 {
            return gemm(g.o, g.c, n, tap_in_place(g, self.weight, t), b, beta, c);
        }
        let slot = self.taps.binary_search(&t).expect("tap used by the plan");
        self.prep[slot].gemm(n, b, beta, c);
    }
}

/// The same matrix read transposed.
fn transpose<E>(m: Mat<'_, E>) -> Mat<'_, E> {
    Mat {
        data: m.data,
        rs: m.cs,
        cs: m.rs,
    }
}

/// `f(i)` for every `i < n`, each call on one thread, in parallel over `i`
/// when the whole costs about `cost_ns` or more (see
/// [`parallel_for_cost`]); the results in order of `i`.
fn par_map<T: Send>(n: usize, cost_ns: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let slots: Vec<Mutex<Option<T>>> = (0..n).map(|_| Mutex::new(None)).collect();
    parallel_for_cost(n, cost_ns, |i| {
        let v = f(i);
        *slots[i].lock().expect("par_map: slot poisoned") = Some(v);
    });
    slots
        .into_iter()
        .map(|s| {
            s.into_inner()
                .expect("par_map: slot poisoned")
                .expect("par_map: every index runs")
        })
        .collect()
}

/// Single-thread cost estimate, in ns, of the gemms of a plan (about 64
/// multiply-adds per ns).
fn plan_cost(g: &ConvGeom, classes: &[TapClass]) -> usize {
    let macs: usize = classes
        .iter()
        .map(|c| g.o * g.c * c.taps.len() * g.n * c.pos.len())
        .sum();
    macs / 64
}

/// Copies the `rows x ld` block `src` into columns `col0..col0 + ld` of the
/// row-major `dst` with rows of `ldn`.
fn put_cols<E: Copy>(dst: &mut [E], ldn: usize, col0: usize, src: &[E], ld: usize) {
    for (d, s) in dst.chunks_mut(ldn).zip(src.chunks(ld)) {
        d[col0..col0 + ld].copy_from_slice(s);
    }
}

/// One class's forward product `[o, n lg]` (column `b * lg + pi`): per
/// chunk of images, `sum over its taps t of weight_t [o, c] x cols_t [c,
/// nb lg]` (one gemm per tap, accumulated in tap order).
fn class_forward<E: Float>(
    g: &ConvGeom,
    cls: &TapClass,
    x: &[E],
    weight: &TapsPrepared<'_, E>,
    budget: usize,
) -> Storage<E> {
    let (o, c, lg) = (g.o, g.c, cls.pos.len());
    let (k, per, ldn) = g.class_sizes(cls, budget);
    let tab = g.offsets(cls);
    let mut out = Storage::filled(o * ldn, E::zero());
    let mut cols = Storage::with_capacity(k * per * lg);
    let mut prod = Storage::filled(o * per * lg, E::zero());
    for (b0, nb) in chunks(g.n, per) {
        let ld = nb * lg;
        refill(&mut cols, k * ld, |cs| {
            g.im2col_class(x, cls, &tab, (b0, nb), cs)
        });
        let prod = &mut prod[..o * ld];
        for (ti, &t) in cls.taps.iter().enumerate() {
            let ct = Mat::row_major(&cols[ti * c * ld..(ti + 1) * c * ld], ld);
            let beta = if ti == 0 { E::zero() } else { E::one() };
            weight.gemm(g, t, ld, ct, beta, prod);
        }
        put_cols(&mut out, ldn, b0 * lg, prod, ld);
    }
    out
}

/// The forward convolution (groups = 1) over tap classes: each class's
/// product ([`class_forward`]; classes in parallel, each on one thread,
/// when there are several), then scattered into `y` with the bias added,
/// in parallel over images. Every position is in exactly one class, so
/// every element of `y` is written once.
pub(super) fn forward_classes<E: Float>(
    g: &ConvGeom,
    classes: &[TapClass],
    x: &[E],
    weight: &[E],
    bias: Option<&[E]>,
    budget: usize,
) -> Storage<E> {
    forward_classes_keeping(g, classes, x, weight, bias, budget).0
}

/// [`forward_classes`], and the used taps' weights it copied out of
/// `weight`, for [`backward_input_classes`] of the same call's gradient
/// (one pass over the weight instead of two: on a 1x1 plane the copy
/// reads the whole `[o, c, 3, 3]` weight for one tap in nine, and the
/// second copy in the backward was 9% of a ResNet-18 training step).
pub(super) fn forward_classes_keeping<E: Float>(
    g: &ConvGeom,
    classes: &[TapClass],
    x: &[E],
    weight: &[E],
    bias: Option<&[E]>,
    budget: usize,
) -> (Storage<E>, TapWeights<E>) {
    let copied = TapWeights::new(g, classes, weight);
    let prepared = TapsPrepared::new(g, classes, &copied, weight, budget);
    let y = forward_over(g, classes, x, &prepared, bias, budget);
    (y, copied)
}

/// [`forward_classes`] with the taps' weights prepared.
fn forward_over<E: Float>(
    g: &ConvGeom,
    classes: &[TapClass],
    x: &[E],
    weight: &TapsPrepared<'_, E>,
    bias: Option<&[E]>,
    budget: usize,
) -> Storage<E> {
    let (o, l) = (g.o, g.l());
    let prods = par_map(classes.len(), plan_cost(g, classes), |i| {
        class_forward(g, &classes[i], x, weight, budget)
    });
    build(g.n * o * l, |y| {
        for_each_chunk_mut(y, o * l, |b, y_img| {
            for (cls, prod) in classes.iter().zip(&prods) {
                let (lg, ldn) = (cls.pos.len(), g.n * cls.pos.len());
                for (oc, row) in y_img.chunks_mut(l).enumerate() {
                    let bv = bias.map_or(E::zero(), |bs| bs[oc]);
                    let src = &prod[oc * ldn + b * lg..][..lg];
                    for (&p, &v) in cls.pos.iter().zip(src) {
                        row[p].write(v + bv);
                    }
                }
            }
        });
    })
}

/// One class's input-gradient columns `[tg c, n lg]` (row `ti * c + ci`,
/// column `b * lg + pi`): per chunk of images, `cols_t [c, nb lg] =
/// weight_t^T [c, o] x gy_g [o, nb lg]` for each of its taps `t`.
fn class_input_cols<E: Float>(
    g: &ConvGeom,
    cls: &TapClass,
    y_grad: &[E],
    weight: &TapWeights<E>,
    budget: usize,
) -> Storage<E> {
    let (o, c, lg) = (g.o, g.c, cls.pos.len());
    let (k, per, ldn) = g.class_sizes(cls, budget);
    let mut out = Storage::filled(k * ldn, E::zero());
    let mut gyc = Storage::with_capacity(o * per * lg);
    let mut cols = Storage::filled(c * per * lg, E::zero());
    for (b0, nb) in chunks(g.n, per) {
        let ld = nb * lg;
        refill(&mut gyc, o * ld, |cs| {
            g.gather_class(y_grad, cls, (b0, nb), cs)
        });
        let gy = Mat::row_major(&gyc[..o * ld], ld);
        for (ti, &t) in cls.taps.iter().enumerate() {
            let ct = &mut cols[..c * ld];
            gemm(c, o, ld, transpose(weight.get(t)), gy, E::zero(), ct);
            put_cols(
                &mut out[ti * c * ldn..(ti + 1) * c * ldn],
                ldn,
                b0 * lg,
                ct,
                ld,
            );
        }
    }
    out
}

/// The input gradient (groups = 1) over tap classes: each class's columns
/// ([`class_input_cols`]; classes in parallel when there are several), each
/// entry then added back onto the input position it was read from, in
/// parallel over images (per image: classes, channels, taps and positions
/// in increasing order).
///
/// `kept`: the used taps' weights a recording forward copied out of this
/// same `weight` ([`forward_classes_keeping`]); without them they are
/// copied here.
///
/// # Panics
/// When `kept` holds other taps or sizes than `classes` over `g` use (the
/// plan depends on the shape only, so a forward of the same geometry
/// made them for the same classes).
pub(super) fn backward_input_classes<E: Float>(
    g: &ConvGeom,
    classes: &[TapClass],
    y_grad: &[E],
    weight: &[E],
    bias: Option<&[E]>,
    budget: usize,
    kept: Option<&TapWeights<E>>,
) -> Storage<E> {
    let (c, plane) = (g.c, g.h * g.w);
    let copied;
    let weight = match kept {
        Some(k) => {
            assert!(
                k.fits(g, classes),
                "backward_input_classes: kept taps of another plan"
            );
            k
        }
        None => {
            copied = TapWeights::new(g, classes, weight);
            &copied
        }
    };
    let cols = par_map(classes.len(), plan_cost(g, classes), |i| {
        class_input_cols(g, &classes[i], y_grad, weight, budget)
    });
    let tabs: Vec<Vec<usize>> = classes.iter().map(|cls| g.offsets(cls)).collect();
    let mut gx = Storage::filled(g.n * c * plane, E::zero());
    for_each_chunk_mut(&mut gx, c * plane, |b, gx_img| {
        for (ci, p) in gx_img.chunks_mut(plane).enumerate() {
            if let Some(bias) = bias {
                p.fill(bias[ci]);
            }
            for ((cls, cols), tab) in classes.iter().zip(&cols).zip(&tabs) {
                let (lg, ldn) = (cls.pos.len(), g.n * cls.pos.len());
                for ti in 0..cls.taps.len() {
                    let src = &cols[(ti * c + ci) * ldn + b * lg..][..lg];
                    for (&off, &v) in tab[ti * lg..(ti + 1) * lg].iter().zip(src) {
                        if off != PAD {
                            p[off] += v;
                        }
                    }
                }
            }
        }
    });
    gx
}

/// One class's weight gradient `[tg, o, c]`: per chunk of images, in
/// order, `gw_t [o, c] += gy_g [o, nb lg] x cols_t^T [nb lg, c]` for each
/// of its taps `t`.
fn class_weight_grad<E: Float>(
    g: &ConvGeom,
    cls: &TapClass,
    x: &[E],
    y_grad: &[E],
    budget: usize,
) -> Storage<E> {
    let (o, c, tg, lg) = (g.o, g.c, cls.taps.len(), cls.pos.len());
    let (k, per) = (c * tg, g.class_chunk(cls, budget));
    let tab = g.offsets(cls);
    let mut cols = Storage::with_capacity(k * per * lg);
    let mut gyc = Storage::with_capacity(o * per * lg);
    let mut gw = Storage::filled(tg * o * c, E::zero());
    for (b0, nb) in chunks(g.n, per) {
        let ld = nb * lg;
        refill(&mut cols, k * ld, |cs| {
            g.im2col_class(x, cls, &tab, (b0, nb), cs)
        });
        refill(&mut gyc, o * ld, |cs| {
            g.gather_class(y_grad, cls, (b0, nb), cs)
        });
        let gy = Mat::row_major(&gyc[..o * ld], ld);
        let beta = if b0 == 0 { E::zero() } else { E::one() };
        for ti in 0..tg {
            let ct = Mat::transposed(&cols[ti * c * ld..(ti + 1) * c * ld], ld);
            gemm(
                o,
                ld,
                c,
                gy,
                ct,
                beta,
                &mut gw[ti * o * c..(ti + 1) * o * c],
            );
        }
    }
    gw
}

/// The weight gradient (groups = 1) over tap classes: each class's
/// ([`class_weight_grad`]; classes in parallel when there are several),
/// then added into the full `[o, c, kh, kw]` gradient in class order (taps
/// that meet no image keep a zero gradient). The full gradient is written
/// in one parallel pass, one output channel's row per task (zeroed in
/// cache, then the classes added): on a 1x1 plane only one tap in nine is
/// used, and a serial zero-fill of the whole buffer before the adds (9.4 MB
/// for a 512-channel 3x3 layer) was 2-3% of a ResNet-18 training step.
pub(super) fn backward_weight_classes<E: Float>(
    g: &ConvGeom,
    classes: &[TapClass],
    x: &[E],
    y_grad: &[E],
    budget: usize,
) -> Storage<E> {
    let (o, c, taps) = (g.o, g.c, g.kh * g.kw);
    let parts = par_map(classes.len(), plan_cost(g, classes), |i| {
        class_weight_grad(g, &classes[i], x, y_grad, budget)
    });
    build_chunks(o * c * taps, c * taps, |oc, row| {
        let row = fill_init(row, E::zero());
        // Per class, then per tap, one contiguous run of the class's
        // gradient added at stride `taps` (each element still receives
        // its classes' terms in class order: a class holds a tap once).
        for (cls, part) in classes.iter().zip(&parts) {
            for (ti, &t) in cls.taps.iter().enumerate() {
                let src = &part[(ti * o + oc) * c..][..c];
                for (d, &v) in row[t..].iter_mut().step_by(taps).zip(src) {
                    *d += v;
                }
            }
        }
    })
}

#[cfg(test)]
mod tests;
