//! Parity of the shape and indexing ops with PyTorch (fixtures
//! `ops/shape_*`): the output and every input gradient.
//!
//! Outputs of these ops only move data, so they must equal PyTorch's
//! bit for bit (`==`). Gradients may sum repeated contributions (gather,
//! index_select, expand, repeat) in a different order than PyTorch, so they
//! use each file's own tolerance (rtol 1e-10, atol 1e-12 in f64; see
//! tests/fixtures/README.md).

use crate::common;
use common::Fixture;
use forge::{Float, Tensor};

fn usizes(f: &Fixture, key: &str) -> Vec<usize> {
    f.meta_list(key)
        .iter()
        .map(|s| s.parse().unwrap())
        .collect()
}

fn isizes(f: &Fixture, key: &str) -> Vec<isize> {
    f.meta_list(key)
        .iter()
        .map(|s| s.parse().unwrap())
        .collect()
}

fn int(f: &Fixture, key: &str) -> isize {
    f.meta(key).parse().unwrap()
}

/// Applies the fixture's op to its float inputs (in f64 or f32).
fn apply<E: Float>(f: &Fixture, xs: &[Tensor<E>]) -> Tensor<E> {
    let x = &xs[0];
    let refs: Vec<&Tensor<E>> = xs.iter().collect();
    match f.meta("op") {
        "cat" => Tensor::cat(&refs, int(f, "dim")),
        "stack" => Tensor::stack(&refs, int(f, "dim")),
        "expand" => x.expand(&usizes(f, "shape")),
        "flip" => x.flip(&isizes(f, "dims")),
        "gather" => x.gather(int(f, "dim"), &f.i("index")),
        "index_select" => x.index_select(int(f, "dim"), &f.i("index")),
        "narrow" => x.narrow(
            int(f, "dim"),
            int(f, "start") as usize,
            int(f, "length") as usize,
        ),
        "pad" => {
            assert_eq!(f.meta("mode"), "constant");
            let p = usizes(f, "pad");
            let pairs: Vec<(usize, usize)> = p.chunks(2).map(|c| (c[0], c[1])).collect();
            x.pad(&pairs, f.meta_f64("value"))
        }
        "permute" => x.permute(&isizes(f, "dims")),
        "repeat" => x.repeat(&usizes(f, "repeats")),
        "reshape" => x.reshape(&isizes(f, "shape")),
        "slice_step" => x.slice(
            int(f, "dim"),
            int(f, "start"),
            int(f, "end"),
            int(f, "step") as usize,
        ),
        "transpose" => x.transpose(int(f, "dim0"), int(f, "dim1")),
        other => panic!("{}: unknown op {other}", f.name),
    }
}

#[test]
fn shape_ops_match_pytorch() {
    let files = common::fixtures_with_prefix("ops", "shape_");
    assert!(
        files.len() >= 13,
        "expected the 13 shape fixtures: {files:?}"
    );
    for file in files {
        let f = Fixture::load(&file);
        let names: Vec<String> = f
            .meta_list("inputs")
            .into_iter()
            .filter(|n| f.floats.contains_key(n))
            .collect();
        let xs: Vec<Tensor<f64>> = names.iter().map(|n| f.t(n).requires_grad()).collect();
        let y = apply(&f, &xs);
        f.check("out", &y);
        assert_eq!(
            y.to_vec(),
            f.t("out").to_vec(),
            "{file}: out differs bitwise"
        );
        let g = y.backward_with(&f.t("gout"), false);
        let grads = f.meta_list("grads");
        assert_eq!(grads, names, "{file}: every float input has a gradient");
        for (name, x) in names.iter().zip(&xs) {
            let got = g
                .get(x)
                .unwrap_or_else(|| panic!("{file}: no gradient for {name}"));
            f.check(&format!("grad_{name}"), got);
        }
    }
}

#[test]
fn shape_ops_match_pytorch_in_f32() {
    // The same fixtures in f32 with the files' f32 tolerances: the ops are
    // generic over the float type.
    for file in common::fixtures_with_prefix("ops", "shape_") {
        let f = Fixture::load(&file);
        let (rtol, atol) = (f.meta_f64("f32_rtol"), f.meta_f64("f32_atol"));
        let names: Vec<String> = f
            .meta_list("inputs")
            .into_iter()
            .filter(|n| f.floats.contains_key(n))
            .collect();
        let xs: Vec<Tensor<f32>> = names
            .iter()
            .map(|n| f.t(n).cast::<f32>().requires_grad())
            .collect();
        let xs64: Vec<Tensor<f64>> = names.iter().map(|n| f.t(n)).collect();
        // f32 data movement equals the f64 result rounded to f32.
        let y = apply(&f, &xs);
        let y64 = apply(&f, &xs64).cast::<f32>();
        assert_eq!(y.to_vec(), y64.to_vec(), "{file}: f32 out");
        let g = y.backward_with(&f.t("gout").cast::<f32>(), false);
        for (name, x) in names.iter().zip(&xs) {
            common::assert_close(
                &format!("{file}: f32 grad_{name}"),
                &g.get(x).unwrap().cast::<f64>(),
                &f.t(&format!("grad_{name}")),
                rtol,
                atol,
            );
        }
    }
}
