//! Parsing of an `einsum` equation into per-operand label lists, with
//! PyTorch's rules: letters `a-z`/`A-Z` as subscripts, at most one `...`
//! per term (its dimensions broadcast, aligned to the right), an optional
//! `->` output (implicit: the ellipsis dimensions, then every letter that
//! occurs once, in ASCII order), spaces ignored.

/// A subscript: a letter's ASCII code, or `ELLIPSIS + k` for the `k`-th of
/// the broadcast (ellipsis) dimensions.
pub(super) type Label = u32;

/// The first label of the ellipsis dimensions.
const ELLIPSIS: Label = 1 << 16;

/// An equation with the ellipsis expanded against the operands' ranks.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Equation {
    /// Each operand's labels, one per dimension.
    pub inputs: Vec<Vec<Label>>,
    /// The output's labels, one per dimension.
    pub output: Vec<Label>,
}

/// A term of the equation before the ellipsis is expanded.
struct Term {
    before: Vec<Label>,
    after: Option<Vec<Label>>,
}

impl Term {
    fn letters(&self) -> impl Iterator<Item = Label> + '_ {
        self.before
            .iter()
            .chain(self.after.iter().flatten())
            .copied()
    }
}

#[track_caller]
fn term(eq: &str, s: &str) -> Term {
    let mut before = Vec::new();
    let mut after: Option<Vec<Label>> = None;
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("...") {
            assert!(
                after.is_none(),
                "einsum: {eq:?}: more than one ellipsis in the term {s:?}"
            );
            after = Some(Vec::new());
            rest = &rest[3..];
            continue;
        }
        assert!(
            c.is_ascii_alphabetic(),
            "einsum: {eq:?}: invalid subscript {c:?} (letters a-z and A-Z, and '...')"
        );
        match after.as_mut() {
            Some(a) => a.push(c as Label),
            None => before.push(c as Label),
        }
        rest = &rest[1..];
    }
    Term { before, after }
}

/// Parses `eq` for operands of the given ranks.
///
/// # Panics
/// When the equation is malformed, its term count differs from the operand
/// count, a term's subscripts do not match its operand's rank, or the
/// output repeats a subscript or names one no input has.
#[track_caller]
pub(super) fn parse(eq: &str, ranks: &[usize]) -> Equation {
    let clean: String = eq.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match clean.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (clean.as_str(), None),
    };
    let terms: Vec<Term> = lhs.split(',').map(|s| term(eq, s)).collect();
    assert!(
        terms.len() == ranks.len(),
        "einsum: {eq:?} has {} input terms for {} operands",
        terms.len(),
        ranks.len()
    );
    let mut ell = 0;
    let mut ell_dims = Vec::with_capacity(terms.len());
    for (t, &r) in terms.iter().zip(ranks) {
        let named = t.letters().count();
        let k = match t.after {
            Some(_) => r.checked_sub(named),
            None => (named == r).then_some(0),
        }
        .unwrap_or_else(|| panic!("einsum: {eq:?}: {named} subscripts for an operand of rank {r}"));
        ell = ell.max(k);
        ell_dims.push(k);
    }
    let ell_labels = |k: usize| (ell - k..ell).map(|j| ELLIPSIS + j as Label);
    let inputs: Vec<Vec<Label>> = terms
        .iter()
        .zip(&ell_dims)
        .map(|(t, &k)| {
            let mut v = t.before.clone();
            if let Some(a) = &t.after {
                v.extend(ell_labels(k));
                v.extend(a);
            }
            v
        })
        .collect();
    let output = match rhs {
        Some(r) => {
            let t = term(eq, r);
            let mut out = t.before.clone();
            if let Some(a) = &t.after {
                out.extend(ell_labels(ell));
                out.extend(a);
            }
            for (i, l) in t.letters().enumerate() {
                assert!(
                    !t.letters().take(i).any(|m| m == l),
                    "einsum: {eq:?}: output subscript {:?} appears more than once",
                    char::from_u32(l).unwrap_or('?')
                );
                assert!(
                    terms.iter().any(|s| s.letters().any(|m| m == l)),
                    "einsum: {eq:?}: output subscript {:?} does not appear in the inputs",
                    char::from_u32(l).unwrap_or('?')
                );
            }
            out
        }
        None => {
            let mut once: Vec<Label> = (0..128)
                .filter(|&l| {
                    terms
                        .iter()
                        .map(|t| t.letters().filter(|&m| m == l).count())
                        .sum::<usize>()
                        == 1
                })
                .collect();
            let mut out: Vec<Label> = ell_labels(ell).collect();
            out.append(&mut once);
            out
        }
    };
    Equation { inputs, output }
}

/// A label as the equation spells it, for messages.
pub(super) fn spell(l: Label) -> String {
    if l >= ELLIPSIS {
        format!("...[{}]", l - ELLIPSIS)
    } else {
        char::from_u32(l).map(String::from).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(s: &str) -> Vec<Label> {
        s.chars().map(|c| c as Label).collect()
    }

    #[test]
    fn implicit_output_is_the_letters_seen_once_in_ascii_order() {
        let e = parse("ba,bc", &[2, 2]);
        assert_eq!(e.output, l("ac"));
        let e = parse("ii", &[2]);
        assert!(e.output.is_empty());
        let e = parse("aB", &[2]);
        assert_eq!(e.output, l("Ba"));
    }

    #[test]
    fn ellipsis_dimensions_align_to_the_right() {
        let e = parse("...ij, j...->...i", &[4, 2]);
        let (e0, e1) = (ELLIPSIS, ELLIPSIS + 1);
        assert_eq!(e.inputs[0], vec![e0, e1, 'i' as Label, 'j' as Label]);
        assert_eq!(e.inputs[1], vec!['j' as Label, e1]);
        assert_eq!(e.output, vec![e0, e1, 'i' as Label]);
        let e = parse("b...", &[1]);
        assert_eq!(e.output, l("b"));
    }

    #[test]
    #[should_panic(expected = "2 input terms for 1 operands")]
    fn term_count_must_match() {
        parse("ij,jk", &[2]);
    }

    #[test]
    #[should_panic(expected = "3 subscripts for an operand of rank 2")]
    fn rank_must_match() {
        parse("ijk->i", &[2]);
    }

    #[test]
    #[should_panic(expected = "does not appear in the inputs")]
    fn output_letters_come_from_the_inputs() {
        parse("ij->k", &[2]);
    }
}
