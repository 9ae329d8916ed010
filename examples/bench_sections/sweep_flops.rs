//! The arithmetic of one step of a sweep spec: the FLOPs of its matrix
//! products and convolutions (2 per multiply-add), which are all but a few
//! percent of every kind's work, for the sweep's `floor / PyTorch` column
//! (`bench/compare_table.py`): the time a step doing those FLOPs would take
//! if every one ran at the machine's measured FMA peak.
//!
//! The count is the least any implementation of the model must do, so the
//! floor is a true lower bound:
//! - a causal GPT's attention counts the pairs of a query and a key at or
//!   before it (`T (T + 1) / 2` per sequence), not the full `T x T`;
//! - a training step is three times the forward (each product's two
//!   gradient products) less the input gradient of the first product,
//!   whose input is data that needs no gradient (the first Linear or
//!   convolution, the encoder's first `q, k, v` projection, the LSTM's
//!   input projection); a GPT's first product reads the embeddings, whose
//!   gradient is needed, so it keeps all three;
//! - the optimizer's few FLOPs per weight, the normalizations, the
//!   activations and the softmax are left out.
//!
//! This file is included by `examples/sweep.rs` (`#[path]`, beside
//! `bench --json`'s sections); its keys and
//! defaults are the ones `sweep.rs`'s `make` reads.

use std::collections::BTreeMap;

/// `(forward FLOPs, FLOPs of the first product's forward when its input
/// gradient is not needed)` of a spec of `kind` with `keys` at batch `b`;
/// `None` for a kind this table does not know. `num(key, default)` reads a
/// number key, `list(key, default)` a `-`-separated one.
pub fn forward_flops(kind: &str, keys: &BTreeMap<String, String>, b: usize) -> Option<(f64, f64)> {
    let num = |k: &str, d: usize| -> f64 {
        keys.get(k)
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(d) as f64
    };
    let list = |k: &str, d: &str| -> Vec<String> {
        keys.get(k)
            .map_or(d, |v| v.as_str())
            .split('-')
            .map(str::to_string)
            .collect()
    };
    let b = b as f64;
    // `rows` inputs of width `i` into `o` outputs
    let product = |rows: f64, i: f64, o: f64| 2.0 * rows * i * o;
    // a k x k convolution from `cin` to `cout` channels with an `hw`-pixel output
    let conv = |cin: f64, cout: f64, k: f64, hw: f64| 2.0 * b * cout * hw * cin * k * k;
    Some(match kind {
        "gpt" => {
            let (l, d, t, v) = (num("L", 4), num("d", 128), num("T", 64), num("V", 256));
            let tokens = b * t;
            // q, k, v, the output projection and the 4x MLP: 12 d^2
            // multiply-adds a token a layer; then the head over the vocab
            let dense = l * product(tokens, d, 12.0 * d) + product(tokens, d, v);
            // q k^T and the weighted sum of the values, d multiply-adds
            // each per causal (query, key) pair
            let attention = l * b * (t * (t + 1.0) / 2.0) * 4.0 * d;
            (dense + attention, 0.0)
        }
        "mlp" => {
            let sizes: Vec<f64> = list("sizes", "784-512-256-10")
                .iter()
                .map(|s| s.parse::<usize>().ok().map(|n| n as f64))
                .collect::<Option<_>>()?;
            let all = sizes.windows(2).map(|w| product(b, w[0], w[1])).sum();
            let first = sizes
                .windows(2)
                .next()
                .map_or(0.0, |w| product(b, w[0], w[1]));
            (all, first)
        }
        "cnn" => {
            let (k, mut hw, c) = (num("k", 3), num("S", 32), num("C", 10));
            let mut ch = num("in", 3);
            let (mut all, mut first) = (0.0, None);
            for item in list("ch", "64-64-M-128-M") {
                if item == "M" {
                    hw = (hw / 2.0).floor();
                } else {
                    let out = item.parse::<usize>().ok()? as f64;
                    let f = conv(ch, out, k, hw * hw);
                    all += f;
                    first.get_or_insert(f);
                    ch = out;
                }
            }
            (all + product(b, ch * hw * hw, c), first.unwrap_or(0.0))
        }
        "enc" => {
            let (l, d, t, c) = (num("L", 4), num("d", 256), num("T", 128), num("C", 10));
            let ff = num("ff", (4.0 * d) as usize);
            let tokens = b * t;
            let layer = product(tokens, d, 4.0 * d)
                + 2.0 * product(tokens, d, ff)
                // full (unmasked) attention: q k^T and the weighted sum
                + b * t * t * 4.0 * d;
            (
                l * layer + product(tokens, d, c),
                product(tokens, d, 3.0 * d),
            )
        }
        "lstm" => {
            let (i, h, t) = (num("I", 128), num("H", 128), num("T", 32));
            let input = t * product(b, i, 4.0 * h);
            let hidden = t * product(b, h, 4.0 * h);
            (input + hidden + product(b, h, 10.0), input)
        }
        "resnet18" => {
            // torchvision's arithmetic of sizes: a k x k, stride s, padding
            // p convolution or pool maps a side n to (n + 2p - k) / s + 1
            let side = |n: f64, k: f64, s: f64, p: f64| ((n + 2.0 * p - k) / s).floor() + 1.0;
            let s = num("S", 32);
            let stem_side = side(s, 7.0, 2.0, 3.0);
            let stem = conv(3.0, 64.0, 7.0, stem_side * stem_side);
            let mut n = side(stem_side, 3.0, 2.0, 1.0);
            let (mut f, mut cin) = (stem, 64.0);
            for (cout, stride) in [(64.0, 1.0), (128.0, 2.0), (256.0, 2.0), (512.0, 2.0)] {
                n = side(n, 3.0, stride, 1.0);
                let hw = n * n;
                f += conv(cin, cout, 3.0, hw) + 3.0 * conv(cout, cout, 3.0, hw);
                if stride != 1.0 || cin != cout {
                    f += conv(cin, cout, 1.0, hw);
                }
                cin = cout;
            }
            (f + product(b, 512.0, 10.0), stem)
        }
        "lenet" => {
            let first = conv(1.0, 6.0, 5.0, 784.0);
            let f = first
                + conv(6.0, 16.0, 5.0, 100.0)
                + product(b, 400.0, 120.0)
                + product(b, 120.0, 84.0)
                + product(b, 84.0, 10.0);
            (f, first)
        }
        _ => return None,
    })
}

/// GFLOP of one timed step of `mode` (`train`: forward and backward;
/// `infer`: the forward), from [`forward_flops`].
pub fn step_gflop(
    kind: &str,
    keys: &BTreeMap<String, String>,
    b: usize,
    mode: &str,
) -> Option<f64> {
    let (fwd, first) = forward_flops(kind, keys, b)?;
    let flops = match mode {
        "train" => 3.0 * fwd - first,
        "infer" => fwd,
        _ => return None,
    };
    Some(flops / 1e9)
}
