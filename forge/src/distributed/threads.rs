//! [`ThreadCommunicator`]: N ranks as N threads of one process.

use super::{check_peer, Buf, BufMut, Communicator};
use crate::error::{ForgeError, Result};
use std::sync::mpsc::{channel, Receiver, Sender};

/// One message between two threads.
enum Payload {
    U8(Vec<u8>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

impl Payload {
    fn of(buf: Buf<'_>) -> Self {
        match buf {
            Buf::U8(b) => Payload::U8(b.to_vec()),
            Buf::F32(b) => Payload::F32(b.to_vec()),
            Buf::F64(b) => Payload::F64(b.to_vec()),
        }
    }

    fn describe(&self) -> String {
        match self {
            Payload::U8(v) => format!("{} u8", v.len()),
            Payload::F32(v) => format!("{} f32", v.len()),
            Payload::F64(v) => format!("{} f64", v.len()),
        }
    }
}

/// One rank of a group of threads that talk over channels: the same
/// [`Communicator`] as an MPI job, inside one process. The tests of the
/// data-parallel logic run on it, and it serves to try a distributed
/// program without `mpirun`.
///
/// Messages between two ranks arrive in order, as in MPI. A rank whose
/// thread has ended (returned or panicked) makes its peers' calls fail
/// with [`ForgeError::Distributed`] instead of waiting for ever.
///
/// ```
/// use forge::distributed::{Communicator, ThreadCommunicator};
/// let ranks = ThreadCommunicator::run(3, |c| (c.rank(), c.size()));
/// assert_eq!(ranks, vec![(0, 3), (1, 3), (2, 3)]);
/// ```
pub struct ThreadCommunicator {
    rank: usize,
    /// `to[r]` sends to rank `r` (`None` for this rank).
    to: Vec<Option<Sender<Payload>>>,
    /// `from[r]` receives from rank `r` (`None` for this rank).
    from: Vec<Option<Receiver<Payload>>>,
}

impl std::fmt::Debug for ThreadCommunicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadCommunicator")
            .field("rank", &self.rank)
            .field("size", &self.to.len())
            .finish()
    }
}

impl ThreadCommunicator {
    /// `n` connected ranks, to be moved to one thread each.
    ///
    /// # Panics
    /// When `n` is zero.
    ///
    /// ```
    /// use forge::distributed::{Communicator, ThreadCommunicator};
    /// let group = ThreadCommunicator::group(2);
    /// assert_eq!(group[1].rank(), 1);
    /// ```
    pub fn group(n: usize) -> Vec<ThreadCommunicator> {
        assert!(
            n > 0,
            "ThreadCommunicator::group: a group needs at least one rank"
        );
        let mut to: Vec<Vec<Option<Sender<Payload>>>> =
            (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
        let mut from: Vec<Vec<Option<Receiver<Payload>>>> =
            (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
        for a in 0..n {
            for b in 0..n {
                if a != b {
                    let (tx, rx) = channel();
                    to[a][b] = Some(tx);
                    from[b][a] = Some(rx);
                }
            }
        }
        to.into_iter()
            .zip(from)
            .enumerate()
            .map(|(rank, (to, from))| ThreadCommunicator { rank, to, from })
            .collect()
    }

    /// Runs `f` on `n` threads, one rank each, and returns their results in
    /// rank order.
    ///
    /// # Panics
    /// When `n` is zero, or (after every thread has ended) when one of the
    /// threads panicked: the first panic is resumed.
    ///
    /// ```
    /// use forge::distributed::{Communicator, ThreadCommunicator};
    /// let out = ThreadCommunicator::run(2, |c| c.rank() * 10);
    /// assert_eq!(out, vec![0, 10]);
    /// ```
    pub fn run<T: Send>(n: usize, f: impl Fn(ThreadCommunicator) -> T + Sync) -> Vec<T> {
        let f = &f;
        std::thread::scope(|s| {
            let handles: Vec<_> = Self::group(n)
                .into_iter()
                .map(|c| s.spawn(move || f(c)))
                .collect();
            let results: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
            results
                .into_iter()
                .map(|r| r.unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        })
    }

    fn gone(&self, peer: usize) -> ForgeError {
        ForgeError::Distributed(format!(
            "rank {}: rank {peer} is gone (its thread ended)",
            self.rank
        ))
    }
}

impl Communicator for ThreadCommunicator {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.to.len()
    }

    fn barrier(&self) -> Result<()> {
        // Everyone reports to rank 0, which then releases everyone.
        if self.size() == 1 {
            return Ok(());
        }
        if self.rank == 0 {
            for r in 1..self.size() {
                self.receive(BufMut::U8(&mut []), r)?;
            }
            for r in 1..self.size() {
                self.send(Buf::U8(&[]), r)?;
            }
            Ok(())
        } else {
            self.send(Buf::U8(&[]), 0)?;
            self.receive(BufMut::U8(&mut []), 0)
        }
    }

    fn broadcast(&self, buf: BufMut<'_>, root: usize) -> Result<()> {
        check_peer(root, self.size())?;
        if self.rank == root {
            for r in (0..self.size()).filter(|&r| r != root) {
                self.send(buf.as_buf(), r)?;
            }
            Ok(())
        } else {
            self.receive(buf, root)
        }
    }

    fn send(&self, buf: Buf<'_>, to: usize) -> Result<()> {
        check_peer(to, self.size())?;
        let tx = self.to[to].as_ref().ok_or_else(|| {
            ForgeError::Distributed(format!("rank {}: send to itself", self.rank))
        })?;
        tx.send(Payload::of(buf)).map_err(|_| self.gone(to))
    }

    fn receive(&self, buf: BufMut<'_>, from: usize) -> Result<()> {
        check_peer(from, self.size())?;
        let rx = self.from[from].as_ref().ok_or_else(|| {
            ForgeError::Distributed(format!("rank {}: receive from itself", self.rank))
        })?;
        let msg = rx.recv().map_err(|_| self.gone(from))?;
        let expected = buf.len();
        let got = msg.describe();
        match (buf, msg) {
            (BufMut::U8(b), Payload::U8(v)) if b.len() == v.len() => b.copy_from_slice(&v),
            (BufMut::F32(b), Payload::F32(v)) if b.len() == v.len() => b.copy_from_slice(&v),
            (BufMut::F64(b), Payload::F64(v)) if b.len() == v.len() => b.copy_from_slice(&v),
            (b, _) => {
                return Err(ForgeError::Distributed(format!(
                    "rank {} expected {expected} {} from rank {from}, got {got}",
                    self.rank,
                    b.as_buf().type_name()
                )))
            }
        }
        Ok(())
    }
}
