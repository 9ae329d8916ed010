//! Anomaly detection names the op that made the first non-finite value,
//! the line that called it, its input shapes and the inputs that were
//! already non-finite, in the forward and in the backward pass.

use forge::tools::{detect_anomaly, Pass};
use forge::Tensor;

/// 50 ops (counted as they run), one of them a `log` of a negative value
/// at the line recorded in `bad_line`.
fn fifty_ops(x: &Tensor<f64>, ran: &mut usize, bad_line: &mut u32) -> Tensor<f64> {
    let mut h = x.clone();
    for i in 0..48 {
        h = match i % 6 {
            0 => &h * 0.5,
            1 => h.tanh(),
            2 => &h + 2.0,
            3 => h.log(), // h is in (1, 3): finite
            4 => h.exp(),
            _ => h.sqrt(),
        };
        *ran += 1;
        if i == 30 {
            let shifted = &h - 100.0; // every value is negative now
            *ran += 1;
            *bad_line = line!() + 1;
            h = shifted.log();
            *ran += 1;
        }
    }
    h.sum()
}

#[test]
fn anomaly_names_the_log_of_a_negative_among_fifty_ops() {
    let x = Tensor::<f64>::from_vec(vec![0.1, 0.2, 0.3, 0.4, 0.5, 0.6], &[2, 3]).requires_grad();
    let (mut ran, mut bad_line) = (0, 0);
    let err = detect_anomaly(|| fifty_ops(&x, &mut ran, &mut bad_line)).unwrap_err();
    assert_eq!(err.op, "log", "{err}");
    assert_eq!(err.pass, Pass::Forward);
    let site = err.site.expect("a call site");
    assert_eq!((site.file, site.line), (file!(), bad_line), "{err}");
    assert!(!site.inside_forge);
    assert_eq!(err.input_shapes, vec![vec![2, 3]]);
    assert!(err.nonfinite_inputs.is_empty());
    assert!(err.value.is_nan());
    assert_eq!(err.index, 0);
    // It stopped at the bad op: 31 ops of the loop and the shift ran, the
    // log raised before counting itself.
    assert_eq!(ran, 32);
    let text = err.to_string();
    assert!(
        text.contains("`log`") && text.contains(&format!("{}:{bad_line}:", file!())),
        "{text}"
    );
}

#[test]
fn without_detection_the_same_graph_runs_to_a_nan() {
    let x = Tensor::<f64>::from_vec(vec![0.1, 0.2, 0.3, 0.4, 0.5, 0.6], &[2, 3]).requires_grad();
    let (mut ran, mut bad_line) = (0, 0);
    let y = fifty_ops(&x, &mut ran, &mut bad_line);
    assert_eq!(ran, 50);
    assert!(y.item().is_nan());
}

#[test]
fn a_finite_run_returns_its_value() {
    let x = Tensor::<f64>::from_vec(vec![0.5, 1.5], &[2]).requires_grad();
    let g = detect_anomaly(|| x.log().exp().sum().backward()).unwrap();
    assert_eq!(g.get(&x).unwrap().to_vec(), vec![1.0, 1.0]);
}

#[test]
fn an_infinite_gradient_is_reported_by_the_backward_of_its_op() {
    // sqrt(0) = 0 is finite; its derivative 1 / (2 sqrt(0)) is not.
    let w = Tensor::<f64>::from_vec(vec![4.0, 0.0, 1.0], &[3]).requires_grad();
    let mut line = 0;
    let err = detect_anomaly(|| {
        line = line!() + 1;
        let r = w.sqrt();
        (&r * 3.0).sum().backward().len()
    })
    .unwrap_err();
    assert_eq!((err.op, err.pass), ("sqrt", Pass::Backward), "{err}");
    assert_eq!(err.grad_input, Some(0));
    assert_eq!(err.index, 1);
    assert_eq!(err.value, f64::INFINITY);
    assert!(!err.upstream_nonfinite);
    assert_eq!(err.site.unwrap().line, line);
}

#[test]
fn an_input_that_was_already_non_finite_is_named() {
    let a = Tensor::<f32>::from_vec(vec![1.0, 2.0], &[2]).requires_grad();
    let b = Tensor::<f32>::from_vec(vec![f32::NAN, 0.0], &[2]).requires_grad();
    let err = detect_anomaly(|| &a * &b).unwrap_err();
    assert_eq!(err.op, "mul");
    assert_eq!(err.nonfinite_inputs, vec![1]);
    assert_eq!(err.input_shapes, vec![vec![2], vec![2]]);
}

#[test]
fn other_panics_pass_through_detection() {
    let r = std::panic::catch_unwind(|| {
        let _ = detect_anomaly(|| panic!("not an anomaly"));
    });
    let msg = r.unwrap_err();
    assert_eq!(msg.downcast_ref::<&str>(), Some(&"not an anomaly"));
    assert!(!forge::tools::is_anomaly_enabled());
}
