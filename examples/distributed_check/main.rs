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

use forge::distributed::ThreadCommunicator;
use std::path::PathBuf;

const USAGE: &str = "usage: distributed_check --expect-world N [--threads N] [--dir DIR] [--bench]";

fn main() {
    let mut expected = None;
    let mut threads = None;
    let mut dir = std::env::temp_dir();
    let mut bench = false;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| fail(&format!("{flag} needs a value")))
        };
        match flag.as_str() {
            "--expect-world" => expected = Some(number(&value())),
            "--threads" => threads = Some(number(&value())),
            "--dir" => dir = PathBuf::from(value()),
            "--bench" => bench = true,
            _ => fail(&format!("unknown flag {flag}")),
        }
    }
    let expected = expected.unwrap_or_else(|| fail("--expect-world N is required"));
    let (passed, root) = match threads {
        Some(n) => (
            ThreadCommunicator::run(n, |c| {
                if bench {
                    scenarios::bench_reduce(&c);
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
    use forge::distributed::Communicator;
    let comm = forge::distributed::MpiCommunicator::init().unwrap_or_else(|e| fail(&e.to_string()));
    if bench {
        scenarios::world(&comm, expected);
        scenarios::bench_reduce(&comm);
        return (0, comm.is_root());
    }
    (scenarios::all(&comm, expected, dir), comm.is_root())
}

#[cfg(not(feature = "mpi"))]
fn run_processes(expected: usize, dir: &std::path::Path, bench: bool) -> (usize, bool) {
    let comm = forge::distributed::LocalCommunicator;
    if bench {
        scenarios::bench_reduce(&comm);
        return (0, true);
    }
    (scenarios::all(&comm, expected, dir), true)
}

fn number(s: &str) -> usize {
    s.parse()
        .unwrap_or_else(|_| fail(&format!("not a number: {s}")))
}

fn fail(msg: &str) -> ! {
    eprintln!("distributed_check: {msg}\n{USAGE}");
    std::process::exit(2)
}
