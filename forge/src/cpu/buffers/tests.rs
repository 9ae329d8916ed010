//! The buffers' parallel loops: every row or plane is handed to exactly
//! one call, and a pass too cheap for a worker stays on the caller.
use super::*;

/// `for_each_row_mut` hands every row to `f` exactly once with its own
/// index and length (one-element rows, rows that do not divide a task,
/// a short last row), on 1 and 2 threads, inline and in parallel; a pass
/// of one-element rows too small to pay for a worker stays on the caller.
#[test]
fn row_groups_visit_every_row_once() {
    // Holds the thread count against the other unit tests that set it.
    let _threads = crate::cpu::threads::lock_thread_count();
    use crate::cpu::threads::{num_threads, pool_dispatches, set_num_threads};
    let prev = num_threads();
    for threads in [1, 2] {
        set_num_threads(threads);
        for (n, row_len) in [(4608, 1), (300_000, 7), (300_001, 5000), (10, 3), (0, 4)] {
            let mut out = vec![(usize::MAX, 0); n];
            for_each_row_mut(&mut out, row_len, |r, row| {
                let len = row.len();
                for (j, slot) in row.iter_mut().enumerate() {
                    assert_eq!(slot.0, usize::MAX, "row {r} visited twice");
                    *slot = (r, j + 1000 * len);
                }
            });
            for (i, &(r, tag)) in out.iter().enumerate() {
                let len = row_len.min(n - i / row_len * row_len);
                assert_eq!(
                    (r, tag),
                    (i / row_len, i % row_len + 1000 * len),
                    "{n} {row_len}"
                );
            }
        }
        let before = pool_dispatches();
        let mut tiny = vec![0u8; 4608];
        for_each_row_mut(&mut tiny, 1, |r, row| row[0] = r as u8);
        assert_eq!(
            pool_dispatches(),
            before,
            "a 4608-element copy woke the pool"
        );
    }
    set_num_threads(prev);
}

/// `build_planes` hands every plane to exactly one call, with its own index,
/// whether the planes are grouped into parallel tasks or run inline, on 1
/// and 2 threads; a pass too cheap to pay for a worker (ResNet-18's global
/// average pool: 8192 one-element planes) stays on the caller.
#[test]
fn planes_are_each_built_once_by_their_own_call() {
    // Holds the thread count against the other unit tests that set it.
    let _threads = crate::cpu::threads::lock_thread_count();
    use crate::cpu::threads::{num_threads, pool_dispatches, set_num_threads};
    let prev = num_threads();
    for threads in [1, 2] {
        set_num_threads(threads);
        // (planes, plane_len, work): inline, grouped (4096 / 3 planes a
        // task), one plane a task (work above a task's size), empty.
        for (planes, len, work) in [(10, 3, 3), (100_000, 3, 3), (40, 5000, 5000), (0, 4, 4)] {
            let out = build_planes::<(usize, usize)>(planes, len, work, |p, plane| {
                for (j, slot) in plane.iter_mut().enumerate() {
                    slot.write((p, j));
                }
            });
            assert_eq!(out.len(), planes * len);
            for (i, &v) in out.iter().enumerate() {
                assert_eq!(v, (i / len, i % len), "{planes} x {len}");
            }
        }
        let before = pool_dispatches();
        let pooled = build_planes::<f32>(8192, 1, 1, |p, plane| _ = plane[0].write(p as f32));
        assert_eq!(pooled[8191], 8191.0);
        assert_eq!(
            pool_dispatches(),
            before,
            "8192 one-element planes woke the pool"
        );
    }
    set_num_threads(prev);
}
