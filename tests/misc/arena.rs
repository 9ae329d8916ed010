//! Arenas (issue 37 item 3): a steady inference loop in an arena takes no
//! buffer from the OS after warm-up, at 1 and 2 threads; an output read
//! after the arena's next call panics naming the arena and both calls,
//! and never shows another call's values; results kept with `keep` or
//! built `outside_arena` stay readable.

use forge::prelude::*;
use forge::runtime::{outside_arena, Arena, Executor};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A conv net whose products and convolutions go parallel on 2 threads.
fn net(rng: &mut Rng) -> sequential_type![Conv2d, Relu, MaxPool2d, Flatten, Linear, Tanh, Linear] {
    sequential![
        Conv2d::new(3, 8, 3, rng),
        Relu,
        MaxPool2d::new(2),
        Flatten,
        Linear::new(8 * 15 * 15, 64, rng),
        Tanh,
        Linear::new(64, 10, rng)
    ]
}

#[test]
fn a_steady_inference_loop_takes_nothing_from_the_os_after_warm_up() {
    let mut rng = Rng::new(5);
    let model = net(&mut rng);
    let x = Tensor::<f32>::normal(&[16, 3, 32, 32], 0.0, 1.0, &mut rng);
    let want = no_grad(|| model.forward(x.clone())).to_vec();
    for threads in [1, 2] {
        let exec = Executor::new(threads);
        let mut arena = Arena::new(format!("loop{threads}"));
        let exec_before = exec.memory_stats();
        // The previous call's output is alive while the next runs (it is
        // replaced after), as in `y = run(..)` loops.
        let mut y = exec.run_in(&mut arena, || no_grad(|| model.forward(x.clone())));
        for _ in 0..2 {
            y = exec.run_in(&mut arena, || no_grad(|| model.forward(x.clone())));
        }
        let warm = arena.memory_stats();
        for _ in 0..8 {
            y = exec.run_in(&mut arena, || no_grad(|| model.forward(x.clone())));
            assert_eq!(y.to_vec(), want, "{threads} thread(s)");
        }
        let after = arena.memory_stats();
        assert_eq!(
            after.misses, warm.misses,
            "{threads} thread(s): buffers taken from the OS after warm-up"
        );
        assert!(after.hits > warm.hits, "the calls draw from the arena");
        assert_eq!(after.high_water_bytes, warm.high_water_bytes);
        assert_eq!(arena.calls(), 11);
        // Everything the calls made came from the arena, nothing from the
        // executor's own pool.
        let e = exec.memory_stats();
        assert_eq!((e.hits, e.misses), (exec_before.hits, exec_before.misses));
        drop(y);
        assert_eq!(arena.memory_stats().live_bytes, 0, "every buffer back");
    }
}

#[test]
fn an_output_read_after_the_next_call_panics_naming_the_arena_and_the_calls() {
    let mut arena = Arena::new("replies");
    let x = Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[4]);
    let first = arena.run(|| x.mul_scalar(10.0));
    assert_eq!(
        first.to_vec(),
        vec![10.0, 20.0, 30.0, 40.0],
        "readable until the next call"
    );
    let kept = arena.keep(&first);
    drop(arena.run(|| x.mul_scalar(-1.0)));
    let second = arena.run(|| x.mul_scalar(-1.0));
    type Read<'a> = Box<dyn Fn() + 'a>;
    let reads: [(&str, Read<'_>); 3] = [
        ("to_vec", Box::new(|| drop(first.to_vec()))),
        ("an op", Box::new(|| drop(first.add(&x)))),
        ("sum", Box::new(|| drop(first.sum()))),
    ];
    for (what, read) in &reads {
        let err = catch_unwind(AssertUnwindSafe(read)).expect_err(what);
        let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            msg.contains("arena \"replies\"") && msg.contains("call 1") && msg.contains("call 3"),
            "{what}: {msg}"
        );
    }
    // An op inside a later call that reads it panics too.
    let inside = catch_unwind(AssertUnwindSafe(|| arena.run(|| drop(first.exp()))));
    assert!(inside.is_err());
    // The copy kept before, and the current call's output, are fine.
    assert_eq!(kept.to_vec(), vec![10.0, 20.0, 30.0, 40.0]);
    assert!(
        catch_unwind(AssertUnwindSafe(|| second.to_vec())).is_err(),
        "call 4 ran"
    );
    let third = arena.run(|| x.mul_scalar(2.0));
    assert_eq!(third.to_vec(), vec![2.0, 4.0, 6.0, 8.0]);
}

#[test]
fn values_built_outside_the_arena_outlive_its_calls() {
    let mut arena = Arena::new("cache");
    let x = Tensor::<f32>::ones(&[8]);
    let (cached, out) = arena.run(|| (outside_arena(|| x.exp()), x.exp()));
    let before = arena.memory_stats();
    arena.run(|| ());
    assert_eq!(cached.to_vec(), vec![1f32.exp(); 8]);
    assert!(catch_unwind(AssertUnwindSafe(|| out.to_vec())).is_err());
    assert_eq!(before.live_bytes, 64, "only `out` is the arena's");
    drop(out);
    assert_eq!(arena.memory_stats().live_bytes, 0);
    assert_eq!(arena.trim(), 64);
}
