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
//! windows meet the image at the same taps. Each class runs its own
//! im2col + gemm with only its `c * taps` rows (and the matching weight
//! columns), so no product of a padding zero is ever formed. The products
//! left out are `0 * w`, exactly zero for finite weights, so the results
//! equal the dense path's up to the order of the (nonzero) summands; with
//! small integers they are exactly equal, which is what the tests check.
//!
//! Which classes a geometry gets depends only on its shape
//! ([`ConvGeom::tap_plan`]), and every kernel here sums in a fixed order,
//! so results do not depend on the thread count.

use super::{build, chunks, for_each_chunk_mut, refill, ConvGeom};
use crate::base::Float;
use crate::cpu::gemm::{gemm, Mat};
use crate::cpu::memory::Storage;
use std::mem::MaybeUninit;

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
    /// gemm is at least [`MIN_CLASS_COLS`] wide over the batch (each class
    /// gathers its weight columns, which a narrower product does not pay
    /// back), else that one class when it leaves out taps (1x1 planes),
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
        } else if cost(&union) < self.kh * self.kw * self.l() {
            Some(union)
        } else {
            None
        }
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

    /// Images `b0..b0 + nb` unfolded over one class:
    /// `cols [c * tg, nb * lg]`, row `ci * tg + ti`, column `bi * lg + pi`
    /// (`tab` is [`offsets`](Self::offsets)); every element is written.
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
        for_each_chunk_mut(&mut cols[..self.c * tg * ld], rows * ld, |ch, part| {
            for (r, row) in part.chunks_mut(ld).enumerate() {
                let r = ch * rows + r;
                let (ci, ti) = (r / tg, r % tg);
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
        for_each_chunk_mut(&mut out[..o * ld], ld, |oc, row| {
            for (bi, dst) in row.chunks_mut(lg).enumerate() {
                let src = &gy[((b0 + bi) * o + oc) * l..][..l];
                for (d, &p) in dst.iter_mut().zip(&cls.pos) {
                    d.write(src[p]);
                }
            }
        });
    }

    /// Images per chunk for one class: as many as keep its columns within
    /// `budget` elements, at least one (from the shape only).
    fn class_chunk(&self, cls: &TapClass, budget: usize) -> usize {
        (budget / (self.c * cls.taps.len() * cls.pos.len()).max(1)).clamp(1, self.n.max(1))
    }
}

/// The weight columns of one class, `[o, c * tg]` (row `oc`, column
/// `ci * tg + ti` holding `weight[oc, ci, taps[ti]]`): a strided view for a
/// single tap, else gathered into `store`.
fn class_weight<'a, E: Float>(
    g: &ConvGeom,
    cls: &TapClass,
    weight: &'a [E],
    store: &'a mut Storage<E>,
) -> Mat<'a, E> {
    let (taps, tg) = (g.kh * g.kw, cls.taps.len());
    let k = g.c * tg;
    if tg == 1 {
        return Mat {
            data: &weight[cls.taps[0]..],
            rs: g.c * taps,
            cs: taps,
        };
    }
    refill(store, g.o * k, |out| {
        for_each_chunk_mut(out, k, |oc, row| {
            for (ci, dst) in row.chunks_mut(tg).enumerate() {
                let src = &weight[(oc * g.c + ci) * taps..][..taps];
                for (d, &t) in dst.iter_mut().zip(&cls.taps) {
                    d.write(src[t]);
                }
            }
        });
    });
    Mat::row_major(&store[..g.o * k], k)
}

/// The same matrix read transposed.
fn transpose<E>(m: Mat<'_, E>) -> Mat<'_, E> {
    Mat {
        data: m.data,
        rs: m.cs,
        cs: m.rs,
    }
}

/// The forward convolution (groups = 1) over tap classes: per class and
/// chunk of images, `weight_g [o, c tg] x cols_g [c tg, nb lg]`, scattered
/// into `y` with the bias added. Every position is in exactly one class,
/// so every element of `y` is written once.
pub(super) fn forward_classes<E: Float>(
    g: &ConvGeom,
    classes: &[TapClass],
    x: &[E],
    weight: &[E],
    bias: Option<&[E]>,
    budget: usize,
) -> Storage<E> {
    let (o, l) = (g.o, g.l());
    build(g.n * o * l, |y| {
        for cls in classes {
            let (tg, lg) = (cls.taps.len(), cls.pos.len());
            let (k, per) = (g.c * tg, g.class_chunk(cls, budget));
            let tab = g.offsets(cls);
            let mut wstore = Storage::with_capacity(if tg == 1 { 0 } else { o * k });
            let w = class_weight(g, cls, weight, &mut wstore);
            let mut cols = Storage::with_capacity(k * per * lg);
            let mut prod = Storage::filled(o * per * lg, E::zero());
            for (b0, nb) in chunks(g.n, per) {
                let ld = nb * lg;
                refill(&mut cols, k * ld, |c| {
                    g.im2col_class(x, cls, &tab, (b0, nb), c)
                });
                let prod = &mut prod[..o * ld];
                gemm(
                    o,
                    k,
                    ld,
                    w,
                    Mat::row_major(&cols[..k * ld], ld),
                    E::zero(),
                    prod,
                );
                let prod = &*prod;
                for_each_chunk_mut(&mut y[b0 * o * l..(b0 + nb) * o * l], o * l, |bi, y_img| {
                    for (oc, row) in y_img.chunks_mut(l).enumerate() {
                        let b = bias.map_or(E::zero(), |b| b[oc]);
                        let src = &prod[oc * ld + bi * lg..][..lg];
                        for (&p, &v) in cls.pos.iter().zip(src) {
                            row[p].write(v + b);
                        }
                    }
                });
            }
        }
    })
}

/// The input gradient (groups = 1) over tap classes: per class and chunk,
/// `weight_g^T [c tg, o] x gy_g [o, nb lg]` into columns, each added back
/// onto the input position it was read from (classes, then channels, taps
/// and positions in increasing order).
pub(super) fn backward_input_classes<E: Float>(
    g: &ConvGeom,
    classes: &[TapClass],
    y_grad: &[E],
    weight: &[E],
    bias: Option<&[E]>,
    budget: usize,
) -> Storage<E> {
    let (o, plane) = (g.o, g.h * g.w);
    let img = g.c * plane;
    let mut gx = Storage::filled(g.n * img, E::zero());
    if let Some(bias) = bias {
        for_each_chunk_mut(&mut gx, plane, |r, p| p.fill(bias[r % g.c]));
    }
    for cls in classes {
        let (tg, lg) = (cls.taps.len(), cls.pos.len());
        let (k, per) = (g.c * tg, g.class_chunk(cls, budget));
        let tab = g.offsets(cls);
        let mut wstore = Storage::with_capacity(if tg == 1 { 0 } else { o * k });
        let wt = transpose(class_weight(g, cls, weight, &mut wstore));
        let mut gyc = Storage::with_capacity(o * per * lg);
        let mut cols = Storage::filled(k * per * lg, E::zero());
        for (b0, nb) in chunks(g.n, per) {
            let ld = nb * lg;
            refill(&mut gyc, o * ld, |c| {
                g.gather_class(y_grad, cls, (b0, nb), c)
            });
            let cols = &mut cols[..k * ld];
            gemm(
                k,
                o,
                ld,
                wt,
                Mat::row_major(&gyc[..o * ld], ld),
                E::zero(),
                cols,
            );
            let cols = &*cols;
            for_each_chunk_mut(&mut gx[b0 * img..(b0 + nb) * img], img, |bi, gx_img| {
                for (ci, p) in gx_img.chunks_mut(plane).enumerate() {
                    for ti in 0..tg {
                        let src = &cols[(ci * tg + ti) * ld + bi * lg..][..lg];
                        for (&off, &v) in tab[ti * lg..(ti + 1) * lg].iter().zip(src) {
                            if off != PAD {
                                p[off] += v;
                            }
                        }
                    }
                }
            });
        }
    }
    gx
}

/// The weight gradient (groups = 1) over tap classes: per class, summed
/// over the chunks of images in order,
/// `gw_g [o, c tg] = gy_g [o, nb lg] x cols_g^T [nb lg, c tg]`, then added
/// into the full `[o, c, kh, kw]` gradient (classes in order; taps that
/// meet no image keep a zero gradient).
pub(super) fn backward_weight_classes<E: Float>(
    g: &ConvGeom,
    classes: &[TapClass],
    x: &[E],
    y_grad: &[E],
    budget: usize,
) -> Storage<E> {
    let (o, taps) = (g.o, g.kh * g.kw);
    let mut gw = Storage::filled(o * g.c * taps, E::zero());
    for cls in classes {
        let (tg, lg) = (cls.taps.len(), cls.pos.len());
        let (k, per) = (g.c * tg, g.class_chunk(cls, budget));
        let tab = g.offsets(cls);
        let mut cols = Storage::with_capacity(k * per * lg);
        let mut gyc = Storage::with_capacity(o * per * lg);
        let mut gwg = Storage::filled(o * k, E::zero());
        for (b0, nb) in chunks(g.n, per) {
            let ld = nb * lg;
            refill(&mut cols, k * ld, |c| {
                g.im2col_class(x, cls, &tab, (b0, nb), c)
            });
            refill(&mut gyc, o * ld, |c| {
                g.gather_class(y_grad, cls, (b0, nb), c)
            });
            gemm(
                o,
                ld,
                k,
                Mat::row_major(&gyc[..o * ld], ld),
                Mat::transposed(&cols[..k * ld], ld),
                if b0 == 0 { E::zero() } else { E::one() },
                &mut gwg,
            );
        }
        for_each_chunk_mut(&mut gw, g.c * taps, |oc, row| {
            for (ci, dst) in row.chunks_mut(taps).enumerate() {
                let src = &gwg[oc * k + ci * tg..][..tg];
                for (&t, &v) in cls.taps.iter().zip(src) {
                    dst[t] += v;
                }
            }
        });
    }
    gw
}

#[cfg(test)]
mod tests;
