//! Tests of the thread pool (`super`).

use super::*;
use std::sync::Mutex;

#[test]
fn every_chunk_runs_once_for_any_thread_count() {
    let _threads = lock_thread_count();
    for threads in [1, 2, 3, 8] {
        set_num_threads(threads);
        let seen = Mutex::new(vec![0u32; 37]);
        parallel_for(37, |i| seen.lock().unwrap()[i] += 1);
        assert_eq!(*seen.lock().unwrap(), vec![1; 37], "{threads} threads");
    }
}

#[test]
fn join_returns_both_results_on_any_thread_count_and_propagates_panics() {
    let _threads = lock_thread_count();
    for threads in [1, 2, 3] {
        set_num_threads(threads);
        let owned = [1u64, 2, 3];
        let (a, b) = join(|| owned.iter().sum::<u64>(), || format!("{threads}"));
        assert_eq!((a, b), (6, threads.to_string()));
        // Inside a parallel chunk both run inline, on that thread.
        let inner = Mutex::new(Vec::new());
        parallel_for(2, |i| {
            let me = std::thread::current().id();
            let (x, y) = join(
                || std::thread::current().id(),
                || std::thread::current().id(),
            );
            assert_eq!((x, y), (me, me));
            inner.lock().unwrap().push(i);
        });
        assert_eq!(inner.lock().unwrap().len(), 2);
        let caught = std::panic::catch_unwind(|| join(|| 1, || -> i32 { panic!("second") }));
        assert!(caught.is_err(), "{threads} threads");
    }
    set_num_threads(1);
}

#[test]
fn the_thread_done_with_its_half_of_a_join_helps_with_the_other() {
    let _threads = lock_thread_count();
    set_num_threads(2);
    // `a` runs a parallel loop of 200 one-millisecond chunks; `b` waits
    // until `a` has started (so the two halves are on two threads) and
    // returns. The thread that ran `b` then claims chunks of `a`'s loop:
    // they run on both threads, each exactly once.
    let started = std::sync::atomic::AtomicBool::new(false);
    let runs = Mutex::new(Vec::new());
    let (sum, waited) = join(
        || {
            started.store(true, Ordering::SeqCst);
            let sum = AtomicUsize::new(0);
            parallel_for(200, |i| {
                std::thread::sleep(Duration::from_millis(1));
                runs.lock().unwrap().push((i, std::thread::current().id()));
                sum.fetch_add(i, Ordering::Relaxed);
            });
            sum.into_inner()
        },
        || {
            while !started.load(Ordering::SeqCst) {
                std::hint::spin_loop();
            }
            std::thread::current().id()
        },
    );
    assert_eq!(sum, 199 * 200 / 2);
    let runs = runs.into_inner().unwrap();
    let mut chunks: Vec<usize> = runs.iter().map(|r| r.0).collect();
    chunks.sort_unstable();
    assert_eq!(chunks, (0..200).collect::<Vec<_>>(), "each chunk once");
    assert!(
        runs.iter().any(|r| r.1 == waited),
        "the thread done with its half ran none of the other's chunks"
    );
    set_num_threads(1);
}

#[test]
fn nested_calls_run_inline() {
    let _threads = lock_thread_count();
    set_num_threads(2);
    let total = AtomicUsize::new(0);
    parallel_for(4, |_| {
        parallel_for(4, |_| {
            assert!(IN_PARALLEL.with(Cell::get));
            total.fetch_add(1, Ordering::Relaxed);
        })
    });
    assert_eq!(total.load(Ordering::Relaxed), 16);
}

#[test]
fn cheap_work_runs_inline_and_costly_work_dispatches() {
    let _threads = lock_thread_count();
    set_num_threads(2);
    let before = pool_dispatches();
    let n = AtomicUsize::new(0);
    parallel_for_cost(8, PARALLEL_MIN_NS - 1, |_| {
        n.fetch_add(1, Ordering::Relaxed);
    });
    assert_eq!(
        pool_dispatches(),
        before,
        "work below the threshold woke the pool"
    );
    parallel_for_cost(8, PARALLEL_MIN_NS, |_| {
        n.fetch_add(1, Ordering::Relaxed);
    });
    assert_eq!(pool_dispatches(), before + 1);
    assert_eq!(n.load(Ordering::Relaxed), 16);
    set_num_threads(1);
    parallel_for_cost(8, usize::MAX, |_| {});
    assert_eq!(pool_dispatches(), before + 1, "one thread never dispatches");
}

#[test]
fn the_caller_does_not_wait_for_a_busy_worker() {
    let _threads = lock_thread_count();
    // Occupy the only worker of the 2-thread pool: a parallel_for must
    // still finish, the calling thread running every chunk itself,
    // instead of waiting for the worker to pick up its share.
    let (release, blocked) = std::sync::mpsc::channel::<()>();
    let (started, has_started) = std::sync::mpsc::channel::<()>();
    pool(2).threads.spawn(move || {
        started.send(()).unwrap();
        let _ = blocked.recv();
    });
    has_started.recv().unwrap();
    let (done, finished) = std::sync::mpsc::channel::<usize>();
    std::thread::spawn(move || {
        set_num_threads(2);
        let n = AtomicUsize::new(0);
        parallel_for_cost(4, usize::MAX, |_| {
            n.fetch_add(1, Ordering::Relaxed);
        });
        done.send(n.load(Ordering::Relaxed)).unwrap();
    });
    // A deadlock detector, not a timing test: the loop takes
    // microseconds, so 60 s means it is stuck behind the worker.
    let got = finished.recv_timeout(std::time::Duration::from_secs(60));
    release.send(()).unwrap();
    assert_eq!(got, Ok(4), "parallel_for waited for a busy worker");
}

#[test]
fn lingering_workers_hand_off_every_chunk_exactly_once() {
    let _threads = lock_thread_count();
    // Back-to-back calls (the worker lingers between them and joins
    // the next by itself) from four callers sharing one pool, so that
    // tasks replace each other in the pool's slot while workers join
    // them: every chunk of every call must run exactly once, and each
    // call must see its own chunks only.
    set_num_threads(2);
    let callers: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                set_num_threads(2);
                for round in 0..300usize {
                    let chunks = 2 + (round * 7 + t) % 13;
                    let seen: Vec<AtomicUsize> = (0..chunks).map(|_| AtomicUsize::new(0)).collect();
                    parallel_for(chunks, |i| {
                        seen[i].fetch_add(1, Ordering::Relaxed);
                        // a little work, so that the threads overlap
                        for _ in 0..200 {
                            std::hint::spin_loop();
                        }
                    });
                    for (i, s) in seen.iter().enumerate() {
                        assert_eq!(
                            s.load(Ordering::Relaxed),
                            1,
                            "caller {t} round {round} chunk {i}"
                        );
                    }
                }
            })
        })
        .collect();
    for c in callers {
        c.join().unwrap();
    }
}

#[test]
fn panics_propagate() {
    let _threads = lock_thread_count();
    set_num_threads(2);
    let r = std::panic::catch_unwind(|| parallel_for(4, |i| assert!(i != 3, "chunk 3")));
    assert!(r.is_err());
    // The pool still works afterwards.
    let n = AtomicUsize::new(0);
    parallel_for(4, |_| {
        n.fetch_add(1, Ordering::Relaxed);
    });
    assert_eq!(n.load(Ordering::Relaxed), 4);
}
