//! Shared helpers for the integration tests: loading PyTorch fixtures,
//! comparing tensors with a written-down tolerance, and the lock of the
//! tests that set the thread count.
#![allow(dead_code)]

use forge::{DType, Element, Float, Tensor};
use safetensors::SafeTensors;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

/// Held for its whole run by every test that sets the thread count
/// (`forge::runtime::set_num_threads`, process-wide): the tests of one binary
/// run in parallel, and a test that checks 1 against 2 threads, or that
/// 2 threads dispatch to the worker pool (`pool_dispatches`), must not have
/// the count changed under it by another. Tests that never set the count
/// need not hold it: every result is the same for any thread count.
pub fn lock_thread_count() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    // A test that failed while holding it does not fail the others.
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// One fixture file: its tensors (floats as f64, integers as i64) and its
/// metadata strings.
pub struct Fixture {
    pub name: String,
    pub floats: BTreeMap<String, Tensor<f64>>,
    pub ints: BTreeMap<String, Tensor<i64>>,
    pub bytes: BTreeMap<String, Vec<u8>>,
    pub meta: BTreeMap<String, String>,
}

/// `run()` at 1 thread, then at 2: both results, and whether the 2-thread
/// run handed work to the worker threads. The caller holds
/// [`lock_thread_count`] and restores the count it wants afterwards.
pub fn at_1_and_2_threads<T>(run: impl Fn() -> T) -> (T, T, bool) {
    forge::runtime::set_num_threads(1);
    let one = run();
    forge::runtime::set_num_threads(2);
    let before = forge::runtime::pool_dispatches();
    let two = run();
    (one, two, forge::runtime::pool_dispatches() > before)
}

pub fn fixture_path(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

/// Every fixture file in a subfolder whose name starts with `prefix`, sorted.
pub fn fixtures_with_prefix(dir: &str, prefix: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(fixture_path(dir))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix) && n.ends_with(".safetensors"))
        .map(|n| format!("{dir}/{n}"))
        .collect();
    v.sort();
    v
}

/// Every fixture file in a subfolder whose name starts with `prefix` and
/// whose metadata `op` is one of `ops`, sorted: a test of some ops reads
/// every file of those ops, and other ops' files that share the prefix
/// (`conv_transpose1d` beside `conv2d`) are left to their own tests.
pub fn fixtures_for_ops(dir: &str, prefix: &str, ops: &[&str]) -> Vec<String> {
    fixtures_with_prefix(dir, prefix)
        .into_iter()
        .filter(|rel| ops.contains(&Fixture::load(rel).meta("op")))
        .collect()
}

impl Fixture {
    pub fn load(rel: &str) -> Fixture {
        let bytes = std::fs::read(fixture_path(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let st = SafeTensors::deserialize(&bytes).unwrap();
        let (_, header) = SafeTensors::read_metadata(&bytes).unwrap();
        let meta: BTreeMap<String, String> = header
            .metadata()
            .as_ref()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        let mut floats = BTreeMap::new();
        let mut ints = BTreeMap::new();
        let mut raw = BTreeMap::new();
        for (name, view) in st.tensors() {
            let shape = view.shape().to_vec();
            let data = view.data();
            match view.dtype() {
                safetensors::Dtype::F64 => {
                    let v = data
                        .chunks_exact(8)
                        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
                        .collect();
                    floats.insert(name.to_string(), Tensor::from_vec(v, &shape));
                }
                safetensors::Dtype::I64 => {
                    let v = data
                        .chunks_exact(8)
                        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
                        .collect();
                    ints.insert(name.to_string(), Tensor::from_vec(v, &shape));
                }
                safetensors::Dtype::U8 => {
                    raw.insert(name.to_string(), data.to_vec());
                }
                other => panic!("{rel}: unexpected dtype {other:?} for {name}"),
            }
        }
        Fixture {
            name: rel.to_string(),
            floats,
            ints,
            bytes: raw,
            meta,
        }
    }

    /// A float tensor by name.
    pub fn t(&self, name: &str) -> Tensor<f64> {
        self.floats
            .get(name)
            .unwrap_or_else(|| panic!("{}: no float tensor {name}", self.name))
            .clone()
    }

    /// An integer tensor by name.
    pub fn i(&self, name: &str) -> Tensor<i64> {
        self.ints
            .get(name)
            .unwrap_or_else(|| panic!("{}: no int tensor {name}", self.name))
            .clone()
    }

    pub fn has(&self, name: &str) -> bool {
        self.floats.contains_key(name) || self.ints.contains_key(name)
    }

    /// A metadata string.
    pub fn meta(&self, key: &str) -> &str {
        self.meta
            .get(key)
            .unwrap_or_else(|| panic!("{}: no metadata {key}", self.name))
    }

    /// A metadata list of one or two integers as a pair (`[3]` -> `[3, 3]`),
    /// as PyTorch takes a kernel size, stride or padding.
    pub fn meta_pair(&self, key: &str) -> [usize; 2] {
        let v: Vec<usize> = self
            .meta_list(key)
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        match v.as_slice() {
            [a] => [*a, *a],
            [a, b] => [*a, *b],
            other => panic!("{}: {key} = {other:?}", self.name),
        }
    }

    pub fn meta_f64(&self, key: &str) -> f64 {
        self.meta(key).parse().unwrap()
    }

    pub fn meta_list(&self, key: &str) -> Vec<String> {
        let s = self.meta(key);
        if s.is_empty() {
            vec![]
        } else {
            s.split(',').map(|x| x.trim().to_string()).collect()
        }
    }

    /// The file's own tolerances (rtol, atol).
    pub fn tol(&self) -> (f64, f64) {
        (self.meta_f64("rtol"), self.meta_f64("atol"))
    }

    /// The tolerances for element type `E`: `rtol`/`atol` for f64,
    /// `f32_rtol`/`f32_atol` for f32 (every fixture of an op forge runs in
    /// f32 states them).
    pub fn tol_for<E: Element>(&self) -> (f64, f64) {
        match E::DTYPE {
            DType::F64 => self.tol(),
            DType::F32 => (self.meta_f64("f32_rtol"), self.meta_f64("f32_atol")),
            other => panic!("{}: no tolerances for {other:?}", self.name),
        }
    }

    /// A float tensor by name, cast to `E` (exact for f64).
    pub fn input<E: Float>(&self, name: &str) -> Tensor<E> {
        self.t(name).cast::<E>()
    }

    /// Compares `actual` (of element type `E`) with the stored tensor `name`
    /// using the tolerances for `E` ([`Fixture::tol_for`]).
    pub fn check_as<E: Float>(&self, name: &str, actual: &Tensor<E>) {
        let (rtol, atol) = self.tol_for::<E>();
        assert_close(
            &format!("{} ({:?}): {name}", self.name, E::DTYPE),
            &actual.cast::<f64>(),
            &self.t(name),
            rtol,
            atol,
        );
    }

    /// The parity check of a single-input op in element type `E`: `apply`
    /// (the test's op for this fixture) on the tracked input `x` must give
    /// `out`, and its backward from `gout` must give `grad_x`, within the
    /// tolerances for `E`. Parity tests call it once per element type.
    pub fn check_single_input<E: Float>(&self, apply: fn(&Fixture, &Tensor<E>) -> Tensor<E>) {
        let x = self.input::<E>("x").requires_grad();
        let y = apply(self, &x);
        self.check_as("out", &y);
        let g = y.backward_with(&self.input::<E>("gout"), false);
        self.check_as("grad_x", g.get(&x).unwrap());
    }

    /// Parses a metadata value, naming the file and key on failure.
    pub fn parse<T: std::str::FromStr>(&self, key: &str) -> T {
        self.meta(key)
            .parse()
            .unwrap_or_else(|_| panic!("{}: metadata {key} = {:?}", self.name, self.meta(key)))
    }

    /// A comma-separated metadata list of unsigned integers.
    pub fn usizes(&self, key: &str) -> Vec<usize> {
        self.meta_list(key)
            .iter()
            .map(|s| {
                s.parse()
                    .unwrap_or_else(|_| panic!("{}: metadata {key} = {s:?}", self.name))
            })
            .collect()
    }

    /// A `true`/`false` metadata value.
    pub fn flag(&self, key: &str) -> bool {
        match self.meta(key) {
            "true" => true,
            "false" => false,
            other => panic!("{}: {key} = {other}", self.name),
        }
    }

    /// Compares `actual` with the stored tensor `name` using the file's
    /// tolerances.
    pub fn check(&self, name: &str, actual: &Tensor<f64>) {
        let (rtol, atol) = self.tol();
        assert_close(
            &format!("{}: {name}", self.name),
            actual,
            &self.t(name),
            rtol,
            atol,
        );
    }
}

/// `|a - e| <= atol + rtol |e|` elementwise, and equal shapes.
pub fn assert_close(
    what: &str,
    actual: &Tensor<f64>,
    expected: &Tensor<f64>,
    rtol: f64,
    atol: f64,
) {
    assert_eq!(actual.shape(), expected.shape(), "{what}: shape");
    for (i, (a, e)) in actual
        .as_slice()
        .iter()
        .zip(expected.as_slice())
        .enumerate()
    {
        let ok = (a - e).abs() <= atol + rtol * e.abs();
        assert!(
            ok,
            "{what}: element {i}: got {a}, expected {e} (|diff| {:e}, rtol {rtol}, atol {atol})",
            (a - e).abs()
        );
    }
}

/// The largest relative error `|a - e| / max(|e|, floor)`.
pub fn max_rel_err(actual: &Tensor<f64>, expected: &Tensor<f64>, floor: f64) -> f64 {
    actual
        .as_slice()
        .iter()
        .zip(expected.as_slice())
        .map(|(a, e)| (a - e).abs() / e.abs().max(floor))
        .fold(0.0, f64::max)
}

/// Checks the Hessian-vector product `d(grad f . v)/dx`, computed through
/// `backward_with_graph` (the rules' `create_graph` fallbacks), against
/// central differences of the plain gradient (the fused raw rules) along
/// `v = N(0, 1)` from `seed`: `(grad f(x + eps v) - grad f(x - eps v)) /
/// (2 eps)`, eps 1e-6, tolerance 1e-6 absolute plus 1e-6 relative.
///
/// # Panics
/// With the element, both values and `what` when one differs, or when the
/// gradient is not on the tape.
pub fn assert_hvp(f: impl Fn(&Tensor<f64>) -> Tensor<f64>, x: &Tensor<f64>, seed: u64, what: &str) {
    let v = Tensor::<f64>::normal(x.shape(), 0.0, 1.0, &mut forge::Rng::new(seed));
    let xt = x.detach().requires_grad();
    let g = f(&xt).backward_with_graph();
    let g = g.get(&xt).expect("gradient").clone();
    assert!(g.is_tracked(), "{what}: the gradient must be on the tape");
    let hv = g.mul(&v).sum().backward();
    let hv = hv.get(&xt).expect("second-order gradient").to_vec();
    let grad_at = |sign: f64| {
        let xs = x.add(&v.mul_scalar(sign * 1e-6)).requires_grad();
        f(&xs).backward().get(&xs).expect("gradient").to_vec()
    };
    let (gp, gm) = (grad_at(1.0), grad_at(-1.0));
    for (j, ((a, p), m)) in hv.iter().zip(&gp).zip(&gm).enumerate() {
        let numeric = (p - m) / 2e-6;
        assert!(
            (a - numeric).abs() <= 1e-6 + 1e-6 * numeric.abs(),
            "{what}: element {j}: hvp {a} vs numeric {numeric}"
        );
    }
}
