//! Shape panics point at the caller's line (`#[track_caller]` on
//! `Forward::forward`, `Sequential` and the tensor ops), not inside forge.
//! One test per binary: it installs a panic hook.

use forge::f32::Linear;
use forge::prelude::*;
use std::sync::Mutex;

static SEEN: Mutex<Vec<(String, u32, String)>> = Mutex::new(Vec::new());

/// Runs `f`, which must panic; returns the reported file, line and message.
fn panic_site(f: impl FnOnce()) -> (String, u32, String) {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    assert!(r.is_err(), "expected a panic");
    SEEN.lock().unwrap().pop().expect("the hook saw the panic")
}

#[test]
fn shape_panics_point_at_the_callers_line() {
    std::panic::set_hook(Box::new(|info| {
        let loc = info.location().unwrap();
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| info.payload().downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        eprintln!("panic at {}:{}: {msg}", loc.file(), loc.line());
        SEEN.lock()
            .unwrap()
            .push((loc.file().to_string(), loc.line(), msg));
    }));
    let this = file!();
    let mut rng = Rng::new(0);

    let fc = Linear::new(4, 2, &mut rng);
    let (file, line, msg) = panic_site(|| {
        fc.forward(Tensor::zeros(&[3, 5])); // the line reported
    });
    assert_eq!((file.as_str(), line), (this, line!() - 2), "{msg}");

    let a = Tensor::<f32>::zeros(&[2, 3]);
    let b = Tensor::<f32>::zeros(&[4, 5]);
    let (file, line, msg) = panic_site(|| {
        a.matmul(&b);
    });
    assert_eq!((file.as_str(), line), (this, line!() - 2), "{msg}");
    assert!(msg.contains("inner dimensions 3 and 4 differ"), "{msg}");

    let (file, line, msg) = panic_site(|| {
        let _ = &a + &b;
    });
    assert_eq!((file.as_str(), line), (this, line!() - 2), "{msg}");

    let (file, line, msg) = panic_site(|| {
        a.softmax(5);
    });
    assert_eq!((file.as_str(), line), (this, line!() - 2), "{msg}");
    assert!(msg.contains("axis 5 is out of range"), "{msg}");

    let model = sequential![
        Linear::new(5, 3, &mut rng),
        Relu,
        Linear::new(4, 2, &mut rng)
    ];
    let (file, line, msg) = panic_site(|| {
        model.forward(Tensor::zeros(&[8, 5]));
    });
    assert_eq!((file.as_str(), line), (this, line!() - 2), "{msg}");
    assert!(msg.starts_with("Sequential layer 2 (Linear): "), "{msg}");
    // The layer's own panic inside the Sequential was not reported again.
    assert!(SEEN.lock().unwrap().is_empty());
}
