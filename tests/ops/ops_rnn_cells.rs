//! The fused recurrent cells (`lstm_sequence`, `gru_sequence`): one tape
//! node per layer and direction, one kernel per time step for the gate
//! nonlinearities and the state update, a fused backward.
//!
//! Math (gate rows `(i, f, g, o)` for the LSTM, `(r, z, n)` for the GRU;
//! `xp` is the input projection with its biases, `hw = h_{t-1} W_hh^T`):
//!
//! ```text
//! LSTM  a = (xp_t + b) + hw;  i, f, o = sigmoid(a_i, a_f, a_o);  g = tanh(a_g)
//!       c_t = f c_{t-1} + i g;  h_t = o tanh(c_t)
//!   back  dh = dy_t + dh_next;  do = dh tanh(c_t)
//!         dc = dc_next + dh o (1 - tanh(c_t)^2)
//!         da = (dc g i(1-i), dc c_{t-1} f(1-f), dc i (1-g^2), do o(1-o))
//!         dc_next = dc f;  dh_next = da W_hh;  dW_hh += da^T h_{t-1};  dxp_t = da
//!         db = da summed over t and the rows
//! GRU   hp = hw + b_hh;  r, z = sigmoid(xp_rz + hp_rz);  n = tanh(xp_n + r hp_n)
//!       h_t = n + z (h_{t-1} - n)
//!   back  dh = dy_t + dh_next;  dn = dh (1 - z) (1 - n^2);  dz = dh (h_{t-1} - n) z(1-z)
//!         dr = dn hp_n r(1-r);  dxp_t = (dr, dz, dn);  dhp = (dr, dz, dn r)
//!         dh_next = dh z + dhp W_hh;  dW_hh += dhp^T h_{t-1};  db_hh += sum_rows dhp
//! ```
//!
//! Tolerances: the gradchecks use forge's f64 central differences (eps
//! 1e-6, atol = rtol = 1e-6). The fused forward does the composed ops'
//! arithmetic in the same order (the same vector `sigmoid`/`tanh`, `xp + hw`
//! added after the product), so its values equal the composed ones exactly
//! in f32 and f64; the fused backward sums in another order (one `dW_hh`
//! product over the whole sequence instead of one per step), so gradients
//! agree to 1e-12 relative in f64 and 1e-5 in f32. PyTorch parity of the
//! layers (every fixture in `tests/fixtures/rnn/`) is in `nn_rnn_parity.rs`,
//! which runs through these ops.

use forge::nn::functional::{gru_sequence, lstm_sequence};
use forge::{gradcheck, Float, Rng, Tensor};

/// The composed LSTM: tensor ops per step, as `nn::Lstm` did before the
/// fused op. Returns `(out [T, N, H], h_n, c_n)`.
fn lstm_composed<E: Float>(
    xp: &Tensor<E>,
    h0: &Tensor<E>,
    c0: &Tensor<E>,
    w: &Tensor<E>,
    b: Option<&Tensor<E>>,
    reverse: bool,
) -> (Tensor<E>, Tensor<E>, Tensor<E>) {
    let (t_len, n, hid) = (xp.dim(0), xp.dim(1), h0.dim(1));
    let (mut h, mut c) = (h0.clone(), c0.clone());
    let mut ys: Vec<Option<Tensor<E>>> = vec![None; t_len];
    for s in 0..t_len {
        let t = if reverse { t_len - 1 - s } else { s };
        let mut x = xp.narrow(0, t, 1).view(&[n, 4 * hid]);
        if let Some(b) = b {
            x = x.add(b);
        }
        let gates = x.add(&h.matmul_t(w));
        let i = gates.narrow(1, 0, hid).sigmoid();
        let f = gates.narrow(1, hid, hid).sigmoid();
        let g = gates.narrow(1, 2 * hid, hid).tanh();
        let o = gates.narrow(1, 3 * hid, hid).sigmoid();
        c = f.mul(&c).add(&i.mul(&g));
        h = o.mul(&c.tanh());
        ys[t] = Some(h.clone());
    }
    let ys: Vec<Tensor<E>> = ys.into_iter().flatten().collect();
    let refs: Vec<&Tensor<E>> = ys.iter().collect();
    (Tensor::stack(&refs, 0), h, c)
}

/// The composed GRU, as `nn::Gru` did before the fused op.
fn gru_composed<E: Float>(
    xp: &Tensor<E>,
    h0: &Tensor<E>,
    w: &Tensor<E>,
    b: Option<&Tensor<E>>,
    reverse: bool,
) -> (Tensor<E>, Tensor<E>) {
    let (t_len, n, hid) = (xp.dim(0), xp.dim(1), h0.dim(1));
    let mut h = h0.clone();
    let mut ys: Vec<Option<Tensor<E>>> = vec![None; t_len];
    for s in 0..t_len {
        let t = if reverse { t_len - 1 - s } else { s };
        let x = xp.narrow(0, t, 1).view(&[n, 3 * hid]);
        let mut hp = h.matmul_t(w);
        if let Some(b) = b {
            hp = hp.add(b);
        }
        let rz = x
            .narrow(1, 0, 2 * hid)
            .add(&hp.narrow(1, 0, 2 * hid))
            .sigmoid();
        let r = rz.narrow(1, 0, hid);
        let z = rz.narrow(1, hid, hid);
        let nn = x
            .narrow(1, 2 * hid, hid)
            .add(&r.mul(&hp.narrow(1, 2 * hid, hid)))
            .tanh();
        h = nn.add(&z.mul(&h.sub(&nn)));
        ys[t] = Some(h.clone());
    }
    let ys: Vec<Tensor<E>> = ys.into_iter().flatten().collect();
    let refs: Vec<&Tensor<E>> = ys.iter().collect();
    (Tensor::stack(&refs, 0), h)
}

fn flat<E: Float>(ts: &[&Tensor<E>]) -> Tensor<E> {
    let parts: Vec<Tensor<E>> = ts.iter().map(|t| t.reshape(&[-1])).collect();
    let refs: Vec<&Tensor<E>> = parts.iter().collect();
    Tensor::cat(&refs, 0)
}

/// `H v` for the scalar `loss` of the inputs `xs` (`v` one tensor per
/// input): the gradient of `sum_k <dloss/dx_k, v_k>`, through
/// `backward_with_graph`.
fn hessian_times(loss: &Tensor<f64>, xs: &[Tensor<f64>], vs: &[Tensor<f64>]) -> Vec<Tensor<f64>> {
    let g = loss.backward_with_graph();
    let s = xs
        .iter()
        .zip(vs)
        .map(|(t, v)| g.get(t).unwrap().mul(v).sum())
        .reduce(|a, b| a.add(&b))
        .unwrap();
    let hg = s.backward();
    xs.iter().map(|t| hg.get(t).unwrap().clone()).collect()
}

/// Random `(xp, h0, c0, w_hh, b_hh)` for `T` steps, batch `N`, hidden `H`
/// and `gates` gate blocks.
fn inputs<E: Float>(t: usize, n: usize, h: usize, gates: usize, seed: u64) -> Vec<Tensor<E>> {
    let mut rng = Rng::new(seed);
    vec![
        Tensor::normal(&[t, n, gates * h], 0.0, 1.0, &mut rng),
        Tensor::normal(&[n, h], 0.0, 0.5, &mut rng),
        Tensor::normal(&[n, h], 0.0, 0.5, &mut rng),
        Tensor::normal(&[gates * h, h], 0.0, 0.6, &mut rng),
        Tensor::normal(&[gates * h], 0.0, 0.5, &mut rng),
    ]
}

#[test]
fn lstm_sequence_gradcheck_f64() {
    for reverse in [false, true] {
        let xs = inputs::<f64>(4, 3, 3, 4, 1);
        let xs = &xs[..];
        let f = |v: &[Tensor<f64>]| {
            let (out, h_n, c_n) = lstm_sequence(&v[0], &v[1], &v[2], &v[3], Some(&v[4]), reverse);
            flat(&[&out, &h_n, &c_n])
        };
        let report =
            gradcheck(f, xs, 1e-6, 1e-6, 1e-6).unwrap_or_else(|e| panic!("reverse {reverse}: {e}"));
        assert_eq!(report.checked, xs.iter().map(|t| t.numel()).sum::<usize>());
    }
}

#[test]
fn gru_sequence_gradcheck_f64() {
    for (reverse, bias) in [(false, true), (true, true), (false, false)] {
        let all = inputs::<f64>(4, 3, 3, 3, 2);
        let xs: Vec<Tensor<f64>> = if bias {
            vec![
                all[0].clone(),
                all[1].clone(),
                all[3].clone(),
                all[4].clone(),
            ]
        } else {
            vec![all[0].clone(), all[1].clone(), all[3].clone()]
        };
        let f = |v: &[Tensor<f64>]| {
            let (out, h_n) = gru_sequence(&v[0], &v[1], &v[2], v.get(3), reverse);
            flat(&[&out, &h_n])
        };
        let report = gradcheck(f, &xs, 1e-6, 1e-6, 1e-6)
            .unwrap_or_else(|e| panic!("reverse {reverse} bias {bias}: {e}"));
        assert_eq!(report.checked, xs.iter().map(|t| t.numel()).sum::<usize>());
    }
}

/// `|a - b| <= tol * max(|b|, 1)` element by element.
fn assert_close<E: Float>(what: &str, a: &Tensor<E>, b: &Tensor<E>, tol: f64) {
    assert_eq!(a.shape(), b.shape(), "{what}");
    for (k, (x, y)) in a.to_vec().iter().zip(b.to_vec()).enumerate() {
        let (x, y) = (forge::Element::to_f64(*x), forge::Element::to_f64(y));
        assert!(
            (x - y).abs() <= tol * y.abs().max(1.0),
            "{what}[{k}]: fused {x} vs composed {y}"
        );
    }
}

/// Fused against composed, values exactly and gradients within `tol`, for
/// a batch large enough (N = 40, H = 24) that the cell kernel splits its
/// rows into several blocks, and for a batch of one (N = 1: the per-step
/// product is a matrix-vector loop, whose summation order depends on how
/// `W_hh` is laid out, so the fused op must read it as the composed op).
fn fused_matches_composed<E: Float>(tol: f64) {
    for (n, reverse) in [(40, false), (40, true), (1, false)] {
        let xs = inputs::<E>(5, n, 24, 4, 3);
        let tr: Vec<Tensor<E>> = xs.iter().map(|t| t.requires_grad()).collect();
        // with the bias, and without it in reverse
        let b = (!reverse).then_some(&tr[4]);
        let mut rng = Rng::new(9);
        let u = Tensor::<E>::normal(&[6 * n * 24 + n * 24], 0.0, 1.0, &mut rng);
        let (o1, h1, c1) = lstm_sequence(&tr[0], &tr[1], &tr[2], &tr[3], b, reverse);
        let (o2, h2, c2) = lstm_composed(&tr[0], &tr[1], &tr[2], &tr[3], b, reverse);
        assert_eq!(o1.to_vec(), o2.to_vec(), "lstm out, reverse {reverse}");
        assert_eq!(h1.to_vec(), h2.to_vec(), "lstm h_n");
        assert_eq!(c1.to_vec(), c2.to_vec(), "lstm c_n");
        // under no_grad (nothing saved: another path of the step kernel)
        let (o3, h3, c3) =
            forge::no_grad(|| lstm_sequence(&tr[0], &tr[1], &tr[2], &tr[3], b, reverse));
        assert_eq!(
            o3.to_vec(),
            o2.to_vec(),
            "lstm out, no_grad, reverse {reverse}"
        );
        assert_eq!(h3.to_vec(), h2.to_vec(), "lstm h_n, no_grad");
        assert_eq!(c3.to_vec(), c2.to_vec(), "lstm c_n, no_grad");
        let g1 = flat(&[&o1, &h1, &c1]).mul(&u).sum().backward();
        let g2 = flat(&[&o2, &h2, &c2]).mul(&u).sum().backward();
        for (k, t) in tr.iter().enumerate().take(if reverse { 4 } else { 5 }) {
            let what = format!("lstm grad {k}, reverse {reverse}");
            assert_close(&what, g1.get(t).unwrap(), g2.get(t).unwrap(), tol);
        }

        let xs = inputs::<E>(5, n, 24, 3, 4);
        let tr: Vec<Tensor<E>> = [0, 1, 3, 4]
            .iter()
            .map(|&k| xs[k].requires_grad())
            .collect();
        let u = Tensor::<E>::normal(&[6 * n * 24], 0.0, 1.0, &mut rng);
        let (o1, h1) = gru_sequence(&tr[0], &tr[1], &tr[2], Some(&tr[3]), reverse);
        let (o2, h2) = gru_composed(&tr[0], &tr[1], &tr[2], Some(&tr[3]), reverse);
        assert_eq!(o1.to_vec(), o2.to_vec(), "gru out, reverse {reverse}");
        assert_eq!(h1.to_vec(), h2.to_vec(), "gru h_n");
        let g1 = flat(&[&o1, &h1]).mul(&u).sum().backward();
        let g2 = flat(&[&o2, &h2]).mul(&u).sum().backward();
        for (k, t) in tr.iter().enumerate() {
            let what = format!("gru grad {k}, reverse {reverse}");
            assert_close(&what, g1.get(t).unwrap(), g2.get(t).unwrap(), tol);
        }
    }
}

#[test]
fn fused_cells_match_the_composed_ops_f64() {
    fused_matches_composed::<f64>(1e-12);
}

#[test]
fn fused_cells_match_the_composed_ops_f32() {
    fused_matches_composed::<f32>(1e-5);
}

/// `backward_with_graph` through the fused ops gives the composed ops'
/// differentiable gradient: Hessian-vector products agree.
#[test]
fn gradients_of_gradients_match_the_composed_ops() {
    let xs = inputs::<f64>(3, 2, 3, 4, 5);
    let mut rng = Rng::new(6);
    let u = Tensor::<f64>::normal(&[4 * 2 * 3 + 2 * 3], 0.0, 1.0, &mut rng);
    let vs: Vec<Tensor<f64>> = xs
        .iter()
        .map(|x| Tensor::normal(x.shape(), 0.0, 1.0, &mut rng))
        .collect();
    for reverse in [false, true] {
        let hvp = |fused: bool| {
            let tr: Vec<Tensor<f64>> = xs.iter().map(|t| t.requires_grad()).collect();
            let (o, h, c) = if fused {
                lstm_sequence(&tr[0], &tr[1], &tr[2], &tr[3], Some(&tr[4]), reverse)
            } else {
                lstm_composed(&tr[0], &tr[1], &tr[2], &tr[3], Some(&tr[4]), reverse)
            };
            hessian_times(&flat(&[&o, &h, &c]).mul(&u).sum(), &tr, &vs)
        };
        for (k, (a, b)) in hvp(true).iter().zip(hvp(false)).enumerate() {
            assert_close(&format!("lstm hvp {k}, reverse {reverse}"), a, &b, 1e-10);
        }
    }
    let xs = inputs::<f64>(3, 2, 3, 3, 7);
    let idx = [0, 1, 3, 4];
    let vs: Vec<Tensor<f64>> = idx
        .iter()
        .map(|&k| Tensor::normal(xs[k].shape(), 0.0, 1.0, &mut rng))
        .collect();
    let u = Tensor::<f64>::normal(&[4 * 2 * 3], 0.0, 1.0, &mut rng);
    for reverse in [false, true] {
        let hvp = |fused: bool| {
            let tr: Vec<Tensor<f64>> = idx.iter().map(|&k| xs[k].requires_grad()).collect();
            let (o, h) = if fused {
                gru_sequence(&tr[0], &tr[1], &tr[2], Some(&tr[3]), reverse)
            } else {
                gru_composed(&tr[0], &tr[1], &tr[2], Some(&tr[3]), reverse)
            };
            hessian_times(&flat(&[&o, &h]).mul(&u).sum(), &tr, &vs)
        };
        for (k, (a, b)) in hvp(true).iter().zip(hvp(false)).enumerate() {
            assert_close(&format!("gru hvp {k}, reverse {reverse}"), a, &b, 1e-10);
        }
    }
}

/// Gradients through the fused ops are bit-identical for 1 and 2 threads
/// and from run to run (the per-step products are large enough to be split
/// across threads: N = 64, 4H = 512, H = 128).
#[test]
fn fused_gradients_are_bit_identical_for_1_and_2_threads() {
    let _threads = crate::common::lock_thread_count();
    let run = |threads: usize| {
        forge::runtime::set_num_threads(threads);
        let xs = inputs::<f32>(3, 64, 128, 4, 8);
        let tr: Vec<Tensor<f32>> = xs.iter().map(|t| t.requires_grad()).collect();
        let (o, _, c) = lstm_sequence(&tr[0], &tr[1], &tr[2], &tr[3], Some(&tr[4]), false);
        let g = o.square().sum().add(&c.sum()).backward();
        let mut out: Vec<Vec<f32>> = tr.iter().map(|t| g.get(t).unwrap().to_vec()).collect();
        let gx = inputs::<f32>(3, 64, 128, 3, 9);
        let tg: Vec<Tensor<f32>> = [0, 1, 3, 4]
            .iter()
            .map(|&k| gx[k].requires_grad())
            .collect();
        let (o, _) = gru_sequence(&tg[0], &tg[1], &tg[2], Some(&tg[3]), true);
        let g = o.square().sum().backward();
        out.extend(tg.iter().map(|t| g.get(t).unwrap().to_vec()));
        out
    };
    let one = run(1);
    let two = run(2);
    let again = run(2);
    forge::runtime::set_num_threads(1);
    assert!(one == two, "1 vs 2 threads");
    assert!(two == again, "run to run");
}

/// The f32 LSTM forward gives the composed ops' bits on whichever step
/// kernel this CPU runs (the fused one-pass kernel on AVX-512 or AVX2 +
/// FMA, the generic loops otherwise): hidden sizes on and off multiples of
/// 8 and 16 lanes, with and without the bias, recorded (the kernel saves
/// the gates and `tanh(c)`) and under `no_grad` (it saves nothing), batches
/// of one block and of two, at 1 and 2 threads. Compared as bit patterns,
/// so a zero of the wrong sign fails too.
#[test]
fn f32_lstm_step_kernel_gives_the_composed_bits() {
    let _threads = crate::common::lock_thread_count();
    let bits = |t: &Tensor<f32>| -> Vec<u32> { t.to_vec().iter().map(|v| v.to_bits()).collect() };
    for threads in [1, 2] {
        forge::runtime::set_num_threads(threads);
        for h in [1, 5, 8, 13, 16, 24, 37] {
            for (n, reverse) in [(1, false), (2, true), (19, false), (40, true)] {
                let xs = inputs::<f32>(4, n, h, 4, 11 + h as u64);
                let tr: Vec<Tensor<f32>> = xs.iter().map(|t| t.requires_grad()).collect();
                for with_bias in [true, false] {
                    let what = format!("threads {threads} h {h} n {n} bias {with_bias}");
                    let (b, bt) = (with_bias.then_some(&xs[4]), with_bias.then_some(&tr[4]));
                    let want = lstm_composed(&xs[0], &xs[1], &xs[2], &xs[3], b, reverse);
                    let rec = lstm_sequence(&tr[0], &tr[1], &tr[2], &tr[3], bt, reverse);
                    assert!(rec.0.is_tracked(), "{what}: recorded");
                    let free = forge::no_grad(|| {
                        lstm_sequence(&tr[0], &tr[1], &tr[2], &tr[3], bt, reverse)
                    });
                    for (got, mode) in [(&rec, "recorded"), (&free, "no_grad")] {
                        assert!(bits(&got.0) == bits(&want.0), "out, {mode}, {what}");
                        assert!(bits(&got.1) == bits(&want.1), "h_n, {mode}, {what}");
                        assert!(bits(&got.2) == bits(&want.2), "c_n, {mode}, {what}");
                    }
                }
            }
        }
    }
    forge::runtime::set_num_threads(1);
}

/// The f32 GRU forward gives the composed ops' bits on whichever step
/// kernel this CPU runs (the fused kernel on AVX-512 or AVX2 + FMA, the
/// generic loops otherwise), as
/// [`f32_lstm_step_kernel_gives_the_composed_bits`].
#[test]
fn f32_gru_step_kernel_gives_the_composed_bits() {
    let _threads = crate::common::lock_thread_count();
    let bits = |t: &Tensor<f32>| -> Vec<u32> { t.to_vec().iter().map(|v| v.to_bits()).collect() };
    for threads in [1, 2] {
        forge::runtime::set_num_threads(threads);
        for h in [1, 5, 8, 13, 16, 24, 37] {
            for (n, reverse) in [(1, true), (2, false), (19, true), (40, false)] {
                let xs = inputs::<f32>(4, n, h, 3, 17 + h as u64);
                let tr: Vec<Tensor<f32>> = xs.iter().map(|t| t.requires_grad()).collect();
                for with_bias in [true, false] {
                    let what = format!("threads {threads} h {h} n {n} bias {with_bias}");
                    let (b, bt) = (with_bias.then_some(&xs[4]), with_bias.then_some(&tr[4]));
                    let want = gru_composed(&xs[0], &xs[1], &xs[3], b, reverse);
                    let rec = gru_sequence(&tr[0], &tr[1], &tr[3], bt, reverse);
                    assert!(rec.0.is_tracked(), "{what}: recorded");
                    let free = forge::no_grad(|| gru_sequence(&tr[0], &tr[1], &tr[3], bt, reverse));
                    for (got, mode) in [(&rec, "recorded"), (&free, "no_grad")] {
                        assert!(bits(&got.0) == bits(&want.0), "out, {mode}, {what}");
                        assert!(bits(&got.1) == bits(&want.1), "h_n, {mode}, {what}");
                    }
                }
            }
        }
    }
    forge::runtime::set_num_threads(1);
}

/// Under `no_grad` the ops record nothing.
#[test]
fn no_grad_records_nothing() {
    let xs = inputs::<f32>(3, 2, 3, 4, 10);
    let tr: Vec<Tensor<f32>> = xs[..4].iter().map(|t| t.requires_grad()).collect();
    let (o, h, c) = forge::no_grad(|| lstm_sequence(&tr[0], &tr[1], &tr[2], &tr[3], None, false));
    assert!(!o.is_tracked() && !h.is_tracked() && !c.is_tracked());
    let (o2, _, _) = lstm_sequence(&tr[0], &tr[1], &tr[2], &tr[3], None, false);
    assert!(o2.is_tracked());
    assert_eq!(o.to_vec(), o2.to_vec());
    let (o, h) = forge::no_grad(|| {
        gru_sequence(
            &tr[0].narrow(2, 0, 9),
            &tr[1],
            &tr[3].narrow(0, 0, 9),
            None,
            true,
        )
    });
    assert!(!o.is_tracked() && !h.is_tracked());
}
