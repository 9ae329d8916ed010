//! `bench --only placement`: how far apart the machine puts two threads,
//! read as the round trip of one cache line between them.
//!
//! Two threads take turns writing one atomic counter: each waits, spinning,
//! for the other's write, then writes the next value. A round trip is two
//! such hand-offs. Where the two cores share a last-level cache it takes
//! tens of nanoseconds; where they do not (two AMD core complexes, two
//! sockets) several times that, and every read of data the other thread
//! has just written pays it too. The benchmark machine, a 2-vCPU virtual
//! machine, shows both from minute to minute (55-75 ns and 330-370 ns on
//! the AMD EPYC kind), and its 2-thread training steps follow:
//! `bench/compare.sh` records this figure before and after every block,
//! next to the load, in the run's `meta.json`.
//!
//! Not pinned: with two spinning threads on a 2-CPU machine the scheduler
//! runs them on the two CPUs; on a larger one the figure is for whichever
//! two cores they landed on.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Round trips per sample.
const TRIPS: u64 = 100_000;

/// The median round trip, in nanoseconds, over `samples` samples of
/// [`TRIPS`] round trips each.
pub fn round_trip_ns(samples: usize) -> f64 {
    let mut v: Vec<f64> = (0..samples.max(1)).map(|_| sample()).collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One sample: [`TRIPS`] round trips of a counter between this thread
/// and a second one.
fn sample() -> f64 {
    let line = Arc::new(AtomicU64::new(0));
    let other = {
        let line = Arc::clone(&line);
        std::thread::spawn(move || {
            for i in 0..TRIPS {
                while line.load(Ordering::Acquire) != 2 * i + 1 {
                    std::hint::spin_loop();
                }
                line.store(2 * i + 2, Ordering::Release);
            }
        })
    };
    // The clock includes the second thread's start (tens of µs), under
    // 1% of a sample's 100,000 round trips.
    let t0 = Instant::now();
    for i in 0..TRIPS {
        line.store(2 * i + 1, Ordering::Release);
        while line.load(Ordering::Acquire) != 2 * i + 2 {
            std::hint::spin_loop();
        }
    }
    let ns = t0.elapsed().as_secs_f64() * 1e9 / TRIPS as f64;
    other.join().expect("placement: the second thread panicked");
    ns
}

/// Prints the median round trip.
pub fn run(quick: bool) {
    let ns = round_trip_ns(if quick { 3 } else { 7 });
    println!("placement: cache-line round trip between two threads {ns:.0} ns");
}
