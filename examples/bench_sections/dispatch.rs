//! `bench --only dispatch`: what handing work to forge's worker pool costs
//! on this machine, so that `PARALLEL_MIN_NS` in forge/src/cpu/threads.rs (the
//! smallest op worth splitting) can be checked against it.
//!
//! Each sample is one `parallel_for` of 2 empty chunks at 2 threads, taken
//! after the calling thread has spun for a gap (so the worker has had time
//! to go to sleep, as between two ops of a model). It prints the caller's
//! time for the call and the delay until the worker ran its chunk (or
//! "caller took both" when the caller finished before the worker woke).

use forge::runtime::set_num_threads;
use forge::{Cpu, Device};
use std::sync::Mutex;
use std::time::{Duration, Instant};

fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Prints one line per gap: the caller's median time per call and the
/// median wake-up delay of the worker.
pub fn run(quick: bool) {
    println!(
        "dispatch: parallel_for(2 chunks) at 2 threads after the caller spun for a gap;\n\
         call = caller's time, wake = start of the worker's chunk after the call began"
    );
    set_num_threads(2);
    Cpu::parallel_for(2, |_| {});
    let samples = if quick { 50 } else { 400 };
    for gap_us in [0u64, 20, 100, 1000] {
        let mut call = Vec::new();
        let mut wake = Vec::new();
        let mut alone = 0;
        for _ in 0..samples {
            spin(Duration::from_micros(gap_us));
            let me = std::thread::current().id();
            let seen: Mutex<Option<Instant>> = Mutex::new(None);
            let t0 = Instant::now();
            Cpu::parallel_for(2, |_| {
                if std::thread::current().id() != me {
                    *seen.lock().unwrap() = Some(Instant::now());
                } else {
                    // the caller's chunk lasts 30 µs, so a worker that
                    // wakes within that finds the second chunk
                    spin(Duration::from_micros(30));
                }
            });
            call.push(t0.elapsed().as_secs_f64() * 1e6);
            let worker_start = *seen.lock().unwrap();
            match worker_start {
                Some(t) => wake.push((t - t0).as_secs_f64() * 1e6),
                None => alone += 1,
            }
        }
        let wake_text = if wake.is_empty() {
            "never".to_string()
        } else {
            format!("{:.1} µs", median(&mut wake))
        };
        println!(
            "gap {gap_us:>5} µs: call {:>6.1} µs (30 µs of it the caller's chunk) | worker wake {wake_text} | caller took both chunks {alone}/{samples}",
            median(&mut call)
        );
    }
}
