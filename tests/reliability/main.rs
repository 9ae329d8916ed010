//! The reliability tests (docs/src/reliability.md): a soak run, crash
//! consistency under SIGKILL, and concurrency under load. The long ones are
//! `#[ignore]`d with their reason and run by `.ci/run`; each that measures
//! process-wide state (resident memory, the buffer pool's counters) or
//! needs to be killed runs its work in a child process, this test binary
//! started again on one test.
//! A module of the one suite binary (`tests/suite.rs`; CONTRIBUTING.md,
//! "The test layout"), its files modules named as the files.

mod crash;
mod load;
mod soak;

/// Held by each long test of this area while it runs, so that they run
/// one at a time: the soak's step times and the load test's eight threads
/// would otherwise disturb each other when `--ignored` runs them all.
fn heavy() -> std::sync::MutexGuard<'static, ()> {
    static HEAVY: std::sync::Mutex<()> = std::sync::Mutex::new(());
    HEAVY.lock().unwrap_or_else(|e| e.into_inner())
}
