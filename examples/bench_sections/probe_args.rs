//! The small helpers of the probe examples (`r18_ops.rs`, `r18_layers.rs`):
//! a numeric flag read from the command line and a median.

/// The number after `name` on the command line (`--reps 50`), or
/// `default` when the flag is absent.
///
/// # Panics
/// When the value after the flag is not a number.
pub fn arg(name: &str, default: usize) -> usize {
    let a: Vec<String> = std::env::args().collect();
    a.iter()
        .position(|s| s == name)
        .and_then(|i| a.get(i + 1))
        .map_or(default, |v| v.parse().expect("a number"))
}

/// The median of `v` (the upper one of an even count).
///
/// # Panics
/// When `v` is empty.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}
