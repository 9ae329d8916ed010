//! [`MpiCommunicator`]: the ranks of an `mpirun` job (cargo feature `mpi`).

use super::{check_peer, Buf, BufMut, Communicator};
use crate::error::{ForgeError, Result};
use mpi::environment::Universe;
use mpi::point_to_point::{Destination, Source};
use mpi::topology::{Communicator as _, SimpleCommunicator};
use mpi::traits::{CommunicatorCollectives, Equivalence, Root};
use mpi::Threading;

/// The world communicator of an MPI job: one per process, created once,
/// at the start of `main` (MPI can be initialised once per process;
/// dropping this value finalises it).
///
/// Only the thread that created it may use it (`Threading::Funneled`):
/// forge's worker threads compute, the main thread communicates.
///
/// [`init`](MpiCommunicator::init) refuses a launch that MPI would not
/// notice is wrong: a binary built against one MPI library and started by
/// another library's `mpirun` runs as several one-process worlds that each
/// "train" alone. The launcher's environment (`OMPI_COMM_WORLD_SIZE`
/// for Open MPI, `PMI_SIZE` for MPICH) tells the size it meant; a world of another
/// size is an error.
///
/// ```no_run
/// use forge::distributed::{Communicator, MpiCommunicator};
/// let comm = MpiCommunicator::init().unwrap();
/// if comm.is_root() {
///     println!("{} processes", comm.size());
/// }
/// ```
pub struct MpiCommunicator {
    world: SimpleCommunicator,
    // Dropped last: finalises MPI after the communicator is gone.
    _universe: Universe,
}

impl std::fmt::Debug for MpiCommunicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiCommunicator")
            .field("rank", &self.world.rank())
            .field("size", &self.world.size())
            .finish()
    }
}

/// Environment variables through which launchers announce the world size.
/// (Open MPI's `mpirun`; MPICH's and Intel MPI's Hydra `mpiexec`.)
const LAUNCHER_SIZE_VARS: [&str; 2] = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"];

impl MpiCommunicator {
    /// Initialises MPI and returns the world communicator. A program
    /// started without `mpirun` is a world of one.
    ///
    /// # Errors
    /// [`ForgeError::Distributed`] when MPI was already initialised in this
    /// process, or when the launcher announced a world size that differs
    /// from MPI's (the mismatched-`mpirun` trap, see the type's docs).
    ///
    /// ```no_run
    /// let comm = forge::distributed::MpiCommunicator::init()?;
    /// # Ok::<(), forge::ForgeError>(())
    /// ```
    pub fn init() -> Result<Self> {
        let (universe, _provided) = mpi::initialize_with_threading(Threading::Funneled)
            .ok_or_else(|| {
                ForgeError::Distributed("MPI is already initialised in this process".into())
            })?;
        let world = universe.world();
        let size = world.size() as usize;
        for var in LAUNCHER_SIZE_VARS {
            if let Some(n) = std::env::var(var)
                .ok()
                .and_then(|v| v.parse::<usize>().ok())
                && n != size
            {
                return Err(mismatch(var, n, size));
            }
        }
        Ok(MpiCommunicator {
            world,
            _universe: universe,
        })
    }

    /// Ends every process of the job with `code` (`MPI_Abort`): what to do
    /// when one rank cannot go on and the others would wait for it.
    ///
    /// ```no_run
    /// let comm = forge::distributed::MpiCommunicator::init().unwrap();
    /// comm.abort(3);
    /// ```
    pub fn abort(&self, code: i32) -> ! {
        self.world.abort(code)
    }
}

fn mismatch(var: &str, announced: usize, size: usize) -> ForgeError {
    ForgeError::Distributed(format!(
        "the launcher announced {announced} processes ({var}) but MPI sees a world of {size}: \
         this binary was probably started by the mpirun of another MPI library than the one \
         it was built against (check `which mpirun` and `mpirun --version`)"
    ))
}

/// The element count as MPI's `int`.
fn count(n: usize) -> Result<i32> {
    i32::try_from(n).map_err(|_| {
        ForgeError::Distributed(format!(
            "a message of {n} elements is larger than MPI's count type allows; use smaller buckets"
        ))
    })
}

impl MpiCommunicator {
    fn send_slice<T: Equivalence>(&self, b: &[T], to: usize) {
        self.world.process_at_rank(to as i32).send(b)
    }

    fn receive_slice<T: Equivalence>(&self, b: &mut [T], from: usize) -> Result<()> {
        let status = self.world.process_at_rank(from as i32).receive_into(b);
        let got = status.count(T::equivalent_datatype());
        if got as usize != b.len() {
            return Err(ForgeError::Distributed(format!(
                "rank {} expected {} elements from rank {from}, got {got}",
                self.world.rank(),
                b.len()
            )));
        }
        Ok(())
    }
}

impl Communicator for MpiCommunicator {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    fn size(&self) -> usize {
        self.world.size() as usize
    }

    fn barrier(&self) -> Result<()> {
        self.world.barrier();
        Ok(())
    }

    fn broadcast(&self, buf: BufMut<'_>, root: usize) -> Result<()> {
        check_peer(root, self.size())?;
        count(buf.len())?;
        let p = self.world.process_at_rank(root as i32);
        match buf {
            BufMut::U8(b) => p.broadcast_into(b),
            BufMut::F32(b) => p.broadcast_into(b),
            BufMut::F64(b) => p.broadcast_into(b),
        }
        Ok(())
    }

    fn send(&self, buf: Buf<'_>, to: usize) -> Result<()> {
        check_peer(to, self.size())?;
        count(buf.len())?;
        match buf {
            Buf::U8(b) => self.send_slice(b, to),
            Buf::F32(b) => self.send_slice(b, to),
            Buf::F64(b) => self.send_slice(b, to),
        }
        Ok(())
    }

    fn receive(&self, buf: BufMut<'_>, from: usize) -> Result<()> {
        check_peer(from, self.size())?;
        count(buf.len())?;
        match buf {
            BufMut::U8(b) => self.receive_slice(b, from),
            BufMut::F32(b) => self.receive_slice(b, from),
            BufMut::F64(b) => self.receive_slice(b, from),
        }
    }
}
