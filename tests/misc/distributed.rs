//! `forge::distributed` on ranks that are threads: the same checks that
//! `.ci/run` runs on MPI processes (examples/distributed_check).

#[path = "../../examples/distributed_check/scenarios.rs"]
mod scenarios;

use forge::distributed::{LocalCommunicator, ThreadCommunicator};

fn run(n: usize) {
    let dir = std::env::temp_dir().join(format!("forge-distributed-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let passed = ThreadCommunicator::run(n, |c| scenarios::all(&c, n, &dir));
    assert!(passed.iter().all(|&p| p == 7));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn one_process() {
    let dir = std::env::temp_dir().join(format!("forge-distributed-{}-local", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    scenarios::all(&LocalCommunicator, 1, &dir);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn two_threads() {
    run(2);
}

#[test]
fn three_threads() {
    // 64 does not split over 3 ranks: every check but the batch-64 one.
    let dir = std::env::temp_dir().join(format!("forge-distributed-{}-3", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    ThreadCommunicator::run(3, |c| {
        scenarios::world(&c, 3);
        scenarios::all_reduce_order(&c);
        scenarios::buffers_follow_rank_0(&c);
        scenarios::sampler_shards(&c);
        scenarios::checkpoint_resume(&c, &dir);
        scenarios::model_mismatch_fails(&c);
    });
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn four_threads() {
    run(4);
}
