//! The data-parallel checks of `forge::distributed` on real processes.
//!
//! `.ci/run` launches it under `mpirun -np 2` and `-np 4`:
//!
//! ```sh
//! cargo build --features mpi --example distributed_check
//! mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np 2 \
//!     target/debug/examples/distributed_check --expect-world 2
//! ```
//!
//! `--expect-world N` is required: it is the number of processes the
//! launcher was asked for, and the first check fails when MPI reports
//! another world size (a binary started by another MPI's `mpirun` runs as
//! N worlds of one). Without the `mpi` feature the program is a world of
//! one; `--threads N` runs N ranks as threads of one process instead.
//!
//! `--bench` times instead of checking: the gradient reduction of a
//! LeNet-5-sized model (61,706 f32) after a barrier, so that the figure is
//! the transfer and not the wait for a slower rank.

mod scenarios;

use clap::Parser;
use forge::distributed::{Communicator, DistributedDataParallel, ThreadCommunicator};
use forge::prelude::*;
use std::path::PathBuf;

/// The data-parallel checks of `forge::distributed` on real processes (or
/// on thread ranks with `--threads`).
#[derive(Parser, Debug)]
#[command(name = "distributed_check")]
struct Args {
    /// The number of processes the launcher was asked for (the first check
    /// fails when MPI reports another world size)
    #[arg(long)]
    expect_world: usize,
    /// Run this many ranks as threads of one process instead of MPI processes
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    threads: Option<u64>,
    /// Where the checkpoint scenarios write their files
    #[arg(long, default_value_os_t = std::env::temp_dir())]
    dir: PathBuf,
    /// Time the gradient reduction instead of checking
    #[arg(long)]
    bench: bool,
}

fn main() {
    let Args {
        expect_world: expected,
        threads,
        dir,
        bench,
    } = Args::parse();
    let (passed, root) = match threads {
        Some(n) => (
            ThreadCommunicator::run(n as usize, |c| {
                if bench {
                    bench_reduce(&c);
                    return 0;
                }
                scenarios::all(&c, expected, &dir)
            })[0],
            true,
        ),
        None => run_processes(expected, &dir, bench),
    };
    if bench {
        return;
    }
    if root {
        println!("{passed} passed, 0 failed");
    }
}

#[cfg(feature = "mpi")]
fn run_processes(expected: usize, dir: &std::path::Path, bench: bool) -> (usize, bool) {
    let comm = forge::distributed::MpiCommunicator::init().unwrap_or_else(|e| {
        eprintln!("distributed_check: {e}");
        std::process::exit(2)
    });
    if bench {
        scenarios::world(&comm, expected);
        bench_reduce(&comm);
        return (0, comm.is_root());
    }
    (scenarios::all(&comm, expected, dir), comm.is_root())
}

#[cfg(not(feature = "mpi"))]
fn run_processes(expected: usize, dir: &std::path::Path, bench: bool) -> (usize, bool) {
    let comm = forge::distributed::LocalCommunicator;
    if bench {
        bench_reduce(&comm);
        return (0, true);
    }
    (scenarios::all(&comm, expected, dir), true)
}

/// Times, after a barrier (so that a slower rank's compute is not
/// counted), the gradient reduction of a LeNet-5-sized model: the whole
/// `reduce_gradients` (layout check, one bucket) and the bucket's
/// all-reduce alone. Prints the medians of 200 rounds on rank 0.
pub fn bench_reduce<C: Communicator>(comm: &C) {
    let model = forge::models::mnist::LeNet5::new(&mut forge::Rng::new(0));
    let mut ddp = DistributedDataParallel::new(model, comm).expect("new");
    let mut grads = Gradients::new();
    for p in ddp.parameters() {
        grads.insert(&p, Tensor::ones(p.shape()));
    }
    let numel = ddp.num_parameters();
    let mut flat = vec![1.0f32; numel];
    let (mut whole, mut bucket) = (Vec::new(), Vec::new());
    for _ in 0..200 {
        comm.barrier().expect("barrier");
        let t = std::time::Instant::now();
        ddp.reduce_gradients(&grads).expect("reduce");
        whole.push(t.elapsed().as_secs_f64() * 1e3);
        comm.barrier().expect("barrier");
        let t = std::time::Instant::now();
        comm.all_reduce_mean(&mut flat).expect("all_reduce");
        bucket.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    if comm.is_root() {
        println!(
            "{} ranks, {numel} f32 gradients: reduce_gradients {:.3} ms, all-reduce alone {:.3} ms (medians of 200)",
            comm.size(),
            median(&mut whole),
            median(&mut bucket)
        );
    }
}
