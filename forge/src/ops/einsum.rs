//! `einsum`: Einstein summation over any number of operands, composed of
//! differentiable ops (so gradients of every order come from theirs):
//! repeated subscripts within an operand become a `diagonal`, subscripts of
//! size 1 broadcast, subscripts used by one operand only are summed first,
//! and the operands are contracted left to right, each pair as one batched
//! matrix product (`[batch, kept a, summed] x [batch, summed, kept b]`).

use super::einsum_parse::{parse, spell, Label};
use crate::tensor::{Device, Float, Tensor};
use std::collections::BTreeMap;

/// An operand on the way: its tensor and one label per dimension.
struct Term<E: Float, D: Device> {
    t: Tensor<E, D>,
    labels: Vec<Label>,
}

impl<E: Float, D: Device> Term<E, D> {
    /// Sums the dimensions whose labels `drop` selects.
    fn sum_labels(self, drop: impl Fn(Label) -> bool) -> Self {
        let dims: Vec<isize> = (0..self.labels.len())
            .filter(|&i| drop(self.labels[i]))
            .map(|i| i as isize)
            .collect();
        if dims.is_empty() {
            return self;
        }
        let labels = self.labels.iter().copied().filter(|&l| !drop(l)).collect();
        Term {
            t: self.t.sum_dim(&dims, false),
            labels,
        }
    }

    /// Permutes the dimensions into the order of `labels`.
    fn arrange(self, labels: &[Label]) -> Tensor<E, D> {
        let p: Vec<isize> = labels
            .iter()
            .map(|l| self.labels.iter().position(|m| m == l).unwrap() as isize)
            .collect();
        self.t.permute(&p)
    }

    fn sizes(&self, labels: &[Label]) -> Vec<usize> {
        labels
            .iter()
            .map(|l| self.t.shape()[self.labels.iter().position(|m| m == l).unwrap()])
            .collect()
    }
}

/// `a` contracted with `b`, keeping the labels in `keep` (the output's and
/// those of the operands still to come).
fn contract<E: Float, D: Device>(a: Term<E, D>, b: Term<E, D>, keep: &[Label]) -> Term<E, D> {
    let a = a.sum_labels(|l| !b.labels.contains(&l) && !keep.contains(&l));
    let b = b.sum_labels(|l| !a.labels.contains(&l) && !keep.contains(&l));
    let shared = |l: &&Label| b.labels.contains(l);
    let batch: Vec<Label> = a
        .labels
        .iter()
        .filter(shared)
        .filter(|l| keep.contains(l))
        .copied()
        .collect();
    let summed: Vec<Label> = a
        .labels
        .iter()
        .filter(shared)
        .filter(|l| !keep.contains(l))
        .copied()
        .collect();
    let a_only: Vec<Label> = a
        .labels
        .iter()
        .filter(|l| !b.labels.contains(l))
        .copied()
        .collect();
    let b_only: Vec<Label> = b
        .labels
        .iter()
        .filter(|l| !a.labels.contains(l))
        .copied()
        .collect();
    let (bs, ms, ks, ns) = (
        a.sizes(&batch),
        a.sizes(&a_only),
        a.sizes(&summed),
        b.sizes(&b_only),
    );
    let prod = |v: &[usize]| v.iter().product::<usize>() as isize;
    let order_a: Vec<Label> = [&batch[..], &a_only, &summed].concat();
    let order_b: Vec<Label> = [&batch[..], &summed, &b_only].concat();
    let am = a
        .arrange(&order_a)
        .reshape(&[prod(&bs), prod(&ms), prod(&ks)]);
    let bm = b
        .arrange(&order_b)
        .reshape(&[prod(&bs), prod(&ks), prod(&ns)]);
    let shape: Vec<isize> = [&bs[..], &ms, &ns]
        .concat()
        .iter()
        .map(|&d| d as isize)
        .collect();
    Term {
        t: am.matmul(&bm).reshape(&shape),
        labels: [&batch[..], &a_only, &b_only].concat(),
    }
}

impl<E: Float, D: Device> Tensor<E, D> {
    /// Einstein summation with `torch.einsum`'s rules: `equation` names each
    /// operand's dimensions with letters (`a-z`, `A-Z`), at most one `...`
    /// per term for broadcast dimensions (aligned to the right), and an
    /// optional `->` output; without it the output is the ellipsis
    /// dimensions followed by the letters seen once, in ASCII order
    /// (uppercase first). A letter repeated within a term takes the
    /// diagonal (`"ii->i"`, `"ii"` is the trace); letters absent from the
    /// output are summed; dimensions of size 1 broadcast against the same
    /// letter elsewhere. Pairs of operands are contracted left to right as
    /// batched matrix products. Differentiable in every operand, to any
    /// order.
    ///
    /// # Panics
    /// When the equation is malformed, its terms do not match the operands'
    /// count or ranks, a letter has two sizes other than 1, or the output
    /// repeats a letter or names one no input has.
    ///
    /// ```
    /// use forge::Tensor;
    /// let a = Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]);
    /// let b = Tensor::<f32>::from_vec(vec![1.0, 0.0, 1.0, 1.0], &[2, 2]);
    /// assert_eq!(Tensor::einsum("ij,jk->ik", &[&a, &b]).to_vec(), a.matmul(&b).to_vec());
    /// assert_eq!(Tensor::einsum("ii", &[&a]).item(), 5.0);
    /// assert_eq!(Tensor::einsum("ij->j", &[&a]).to_vec(), vec![4.0, 6.0]);
    /// ```
    #[track_caller]
    pub fn einsum(equation: &str, operands: &[&Self]) -> Self {
        assert!(!operands.is_empty(), "einsum: {equation:?}: no operands");
        let ranks: Vec<usize> = operands.iter().map(|t| t.rank()).collect();
        let eq = parse(equation, &ranks);
        // The size of every label: equal wherever it appears, or 1.
        let mut size: BTreeMap<Label, usize> = BTreeMap::new();
        for (t, labels) in operands.iter().zip(&eq.inputs) {
            for (&l, &d) in labels.iter().zip(t.shape()) {
                let s = size.entry(l).or_insert(d);
                if *s == 1 {
                    *s = d;
                }
                assert!(
                    d == *s || d == 1,
                    "einsum: {equation:?}: subscript {} has sizes {} and {d} (operand shapes {:?})",
                    spell(l),
                    *s,
                    operands
                        .iter()
                        .map(|t| t.shape().to_vec())
                        .collect::<Vec<_>>()
                );
            }
        }
        let mut terms: Vec<Term<E, D>> = Vec::with_capacity(operands.len());
        for (k, (t, labels)) in operands.iter().zip(&eq.inputs).enumerate() {
            let mut term = Term {
                t: (*t).clone(),
                labels: labels.clone(),
            };
            // Repeated labels: the diagonal, appended as the last dimension.
            while let Some((p, q)) = repeated(&term.labels) {
                let (dp, dq) = (term.t.shape()[p], term.t.shape()[q]);
                assert!(
                    dp == dq,
                    "einsum: {equation:?}: subscript {} repeated in operand {k} of shape {:?} with sizes {dp} and {dq}",
                    spell(term.labels[p]),
                    term.t.shape()
                );
                let l = term.labels[p];
                term.t = term.t.diagonal(0, p as isize, q as isize);
                term.labels.remove(q);
                term.labels.remove(p);
                term.labels.push(l);
            }
            // Size-1 dimensions of a label that is larger elsewhere: the
            // operand is constant along it.
            while let Some(p) = (0..term.labels.len())
                .find(|&p| term.t.shape()[p] == 1 && size[&term.labels[p]] > 1)
            {
                term.t = term.t.squeeze(p as isize);
                term.labels.remove(p);
            }
            terms.push(term);
        }
        // Labels needed after operand k: the output's and operands k+1...
        let mut keep_after: Vec<Vec<Label>> = vec![eq.output.clone(); terms.len()];
        for k in (0..terms.len().saturating_sub(1)).rev() {
            let mut v = keep_after[k + 1].clone();
            v.extend(&terms[k + 1].labels);
            keep_after[k] = v;
        }
        let mut terms = terms.into_iter().enumerate();
        let (_, first) = terms.next().unwrap();
        let keep0 = &keep_after[0];
        let mut acc = first.sum_labels(|l| !keep0.contains(&l));
        for (k, term) in terms {
            let keep = &keep_after[k];
            let term = term.sum_labels(|l| !keep.contains(&l) && !acc.labels.contains(&l));
            acc = contract(acc, term, keep);
        }
        let out = &eq.output;
        acc.sum_labels(|l| !out.contains(&l)).arrange(out)
    }
}

/// The first pair of positions holding the same label.
fn repeated(labels: &[Label]) -> Option<(usize, usize)> {
    (0..labels.len()).find_map(|q| (0..q).find(|&p| labels[p] == labels[q]).map(|p| (p, q)))
}
