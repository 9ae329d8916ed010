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

    // Reductions, shape and layout ops, joins, indexing, losses and
    // constructors: the panic is reported on the line of the call.
    let mut wrong = Vec::new();
    macro_rules! reported_here {
        ($call:expr, $needle:literal) => {{
            let line = line!();
            let (file, at, msg) = panic_site(|| {
                let _ = $call;
            });
            if (file.as_str(), at) != (this, line) || !msg.contains($needle) {
                wrong.push(format!("{}: at {file}:{at}: {msg}", stringify!($call)));
            }
        }};
    }
    let t = Tensor::<f32>::zeros(&[2, 3]);
    let idx = Tensor::<i64>::from_vec(vec![0, 7], &[2]);
    let mask = Tensor::<bool>::from_vec(vec![true; 4], &[4]);
    reported_here!(t.sum_dim(&[2], false), "out of range");
    reported_here!(t.sum_dim(&[1, -1], false), "repeated axis");
    reported_here!(t.mean_dim(&[5], true), "out of range");
    reported_here!(t.var_dim(&[3], 1, false), "out of range");
    reported_here!(t.std_dim(&[-3], 1, false), "out of range");
    reported_here!(t.max_dim(&[4], false), "out of range");
    reported_here!(t.min_dim(&[4], false), "out of range");
    reported_here!(t.argmax_dim(2, false), "out of range");
    reported_here!(t.reshape(&[4, -1]), "");
    reported_here!(t.view(&[5]), "");
    reported_here!(t.permute(&[0, 0]), "");
    reported_here!(t.permute(&[0, 5]), "out of range");
    reported_here!(t.transpose(0, 2), "out of range");
    reported_here!(t.expand(&[4, 3]), "");
    reported_here!(t.squeeze(3), "out of range");
    reported_here!(t.unsqueeze(4), "out of range");
    reported_here!(t.flatten(0, 3), "out of range");
    reported_here!(t.narrow(1, 2, 2), "");
    reported_here!(t.slice(3, 0, 1, 1), "out of range");
    reported_here!(t.flip(&[2]), "out of range");
    reported_here!(Tensor::cat(&[&t, &Tensor::zeros(&[2, 4])], 0), "");
    reported_here!(Tensor::stack(&[&t, &Tensor::zeros(&[3, 2])], 0), "");
    reported_here!(t.split(0, 1), "positive");
    reported_here!(t.index_select(1, &idx), "");
    reported_here!(t.gather(1, &idx), "");
    reported_here!(t.masked_fill(&mask, 0.0), "");
    reported_here!(t.sum_to(&[4]), "");
    reported_here!(t.dim(2), "out of range");
    reported_here!(t.item(), "");
    reported_here!(Tensor::<f32>::from_vec(vec![1.0; 5], &[2, 3]), "");
    reported_here!(mse_loss(&t, &Tensor::zeros(&[3, 2])), "");
    reported_here!(t.dropout(1.5, true, &mut rng), "");
    assert!(
        wrong.is_empty(),
        "reported elsewhere:\n{}",
        wrong.join("\n")
    );
}
