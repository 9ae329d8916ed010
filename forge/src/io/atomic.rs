//! Atomic file replacement: write a temporary file in the same folder,
//! `fsync` it, rename it over the target, then `fsync` the folder. Readers
//! see either the whole old file or the whole new one, and a crash or error
//! part-way leaves the previous file untouched.
//!
//! The temporary file is `.<name>.tmp-<pid>-<n>` beside the target
//! `<name>`. Its writer holds an exclusive advisory lock on it
//! ([`File::lock`]: `flock` on Unix) from its creation until the rename,
//! and the operating system drops the lock when the writer dies, however it
//! dies. So a writer killed mid-write (SIGKILL, an out-of-memory kill, a
//! preempted machine) leaves a temporary file that nobody holds locked,
//! and every later write to the same target removes such files first: on
//! Unix, a file of that name that can be locked at once is an orphan, one
//! that cannot is being written and stays. The lock, not the process id,
//! decides, because a process id says nothing of a writer on another
//! machine sharing the folder, and a restarted container gives the new
//! process the dead one's id.

use crate::error::{ForgeError, Result};
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Distinguishes temporary files of concurrent writers in one process.
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to `path` atomically (see [`atomic_write_with`]).
///
/// # Errors
/// [`ForgeError::Io`] (with the path) when the temporary file cannot be
/// created, written, synced or renamed. The previous file, if any, is then
/// unchanged and the temporary file removed.
///
/// ```
/// let path = std::env::temp_dir().join(format!("forge-atomic-doc-{}", std::process::id()));
/// forge::io::atomic_write(&path, b"first").unwrap();
/// forge::io::atomic_write(&path, b"second").unwrap();
/// assert_eq!(std::fs::read(&path).unwrap(), b"second");
/// std::fs::remove_file(&path).unwrap();
/// ```
pub fn atomic_write(path: impl AsRef<Path>, bytes: &[u8]) -> Result<()> {
    atomic_write_with(path, |w| w.write_all(bytes))
}

/// Writes the output of `f` to `path` atomically: `f` receives a writer on
/// a temporary file in the same folder, and the file replaces `path` only
/// when `f` and the flush and `fsync` that follow all succeed.
///
/// Before writing, the temporary files of earlier writes to `path` whose
/// writers died are removed (on Unix, where each writer holds an advisory
/// lock on its temporary file until the rename, so a file no one holds
/// locked is an orphan): a killed save leaves a file behind only until the
/// next save. Files of writers still running are never touched.
///
/// # Errors
/// [`ForgeError::Io`] when `f` fails or the file cannot be created, synced
/// or renamed; the previous file is then unchanged and the temporary file
/// removed. A stale temporary file that cannot be removed is left alone
/// and is not an error.
///
/// ```
/// use std::io::Write;
/// let path = std::env::temp_dir().join(format!("forge-atomic-with-doc-{}", std::process::id()));
/// forge::io::atomic_write(&path, b"old").unwrap();
/// let r = forge::io::atomic_write_with(&path, |w| {
///     w.write_all(b"partial")?;
///     Err(std::io::Error::other("disk full"))
/// });
/// assert!(r.is_err());
/// assert_eq!(std::fs::read(&path).unwrap(), b"old");
/// std::fs::remove_file(&path).unwrap();
/// ```
pub fn atomic_write_with(
    path: impl AsRef<Path>,
    f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let path = path.as_ref();
    let name = path
        .file_name()
        .ok_or_else(|| {
            ForgeError::io(
                path,
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file path"),
            )
        })?
        .to_string_lossy()
        .into_owned();
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    remove_orphans(&dir, &name);
    let (tmp, file) = create_locked(&dir, &name)?;

    let written = (|| {
        let mut w = BufWriter::new(&file);
        f(&mut w)?;
        w.flush()?;
        drop(w);
        file.sync_all()?;
        // The lock is held until the file has its final name.
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        // Best effort: the error that matters is the one we return.
        let _ = std::fs::remove_file(&tmp);
        return Err(ForgeError::io(path, e));
    }
    drop(file);
    sync_dir(&dir).map_err(|e| ForgeError::io(&dir, e))
}

/// Creates a new temporary file for target `name` in `dir` and locks it.
/// A name taken already (a dead writer's file with this process's id) is
/// skipped for the next.
fn create_locked(dir: &Path, name: &str) -> Result<(PathBuf, File)> {
    let mut attempts = 0;
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{name}.tmp-{}-{n}", std::process::id()));
        let file = match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempts < 100 => {
                attempts += 1;
                continue;
            }
            Err(e) => return Err(ForgeError::io(&tmp, e)),
        };
        // Where the file system has no locks, no other writer can lock
        // either, so none removes this file: writing unlocked is safe.
        let _ = file.lock();
        // Between the creation and the lock, another writer may have
        // locked the new file, taken it for an orphan and removed it
        // (that writer keeps the lock until the file is gone, so the
        // `lock` above waited for it): then the name no longer leads to
        // this file, and a new one is made.
        if same_file(&file, &tmp) {
            return Ok((tmp, file));
        }
    }
}

/// Whether `path` names the file `file` has open.
#[cfg(unix)]
fn same_file(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Without inode numbers, the name is taken at its word (no writer
/// removes other writers' files on these platforms).
#[cfg(not(unix))]
fn same_file(_file: &File, _path: &Path) -> bool {
    true
}

/// Whether `entry` is the name of a temporary file for target `name`:
/// `.<name>.tmp-<digits>-<digits>`, exactly.
#[cfg_attr(not(unix), allow(dead_code))]
fn is_temp_of(entry: &str, name: &str) -> bool {
    let Some(rest) = entry
        .strip_prefix('.')
        .and_then(|r| r.strip_prefix(name))
        .and_then(|r| r.strip_prefix(".tmp-"))
    else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    rest.split_once('-')
        .is_some_and(|(pid, n)| digits(pid) && digits(n))
}

/// Removes the temporary files of target `name` in `dir` that no writer
/// holds locked, best effort: a file that cannot be opened, locked or
/// removed stays.
#[cfg(unix)]
fn remove_orphans(dir: &Path, name: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if !entry
            .file_name()
            .to_str()
            .is_some_and(|e| is_temp_of(e, name))
        {
            continue;
        }
        let p = entry.path();
        // Opened for writing: over NFS an exclusive lock needs it.
        let Ok(f) = OpenOptions::new().read(true).write(true).open(&p) else {
            continue;
        };
        if f.try_lock().is_err() {
            continue; // a live writer's
        }
        // The name may have been renamed away (a writer that finished
        // between the listing and the lock) or taken by a new file since.
        if same_file(&f, &p) {
            let _ = std::fs::remove_file(&p);
        }
        // Dropping `f` releases the lock, after the removal.
    }
}

/// On other platforms an open file may not be removed, and locks are
/// mandatory: stale temporary files are left alone.
#[cfg(not(unix))]
fn remove_orphans(_dir: &Path, _name: &str) {}

/// Makes the rename durable by syncing the folder's entry list.
#[cfg(unix)]
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Folders cannot be opened for syncing on this platform; the rename itself
/// is still atomic.
#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> std::io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "forge-atomic-{tag}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn failure_leaves_previous_file_and_no_temp() {
        let dir = scratch("fail");
        let path = dir.join("ckpt.bin");
        atomic_write(&path, b"previous contents").unwrap();
        let e = atomic_write_with(&path, |w| {
            w.write_all(&[7u8; 100_000])?;
            Err(std::io::Error::other("injected"))
        })
        .unwrap_err();
        assert!(e.to_string().contains("injected"), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), b"previous contents");
        assert_eq!(entries(&dir), vec!["ckpt.bin".to_string()]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_folder_is_an_io_error() {
        let dir = scratch("missing");
        let path = dir.join("no/such/dir/file.bin");
        match atomic_write(&path, b"x") {
            Err(ForgeError::Io { .. }) => {}
            other => panic!("expected an Io error, got {other:?}"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn overwrites_and_refuses_a_folder_path() {
        let dir = scratch("over");
        let path = dir.join("a.bin");
        atomic_write(&path, b"abc").unwrap();
        atomic_write(&path, b"abcd").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"abcd");
        assert!(atomic_write(Path::new("/"), b"x").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
    #[test]
    fn temp_names_match_their_target_only() {
        assert!(is_temp_of(".b.ckpt.tmp-8246-6", "b.ckpt"));
        assert!(is_temp_of(".b.ckpt.tmp-1-0", "b.ckpt"));
        for other in [
            "b.ckpt",
            ".b.ckpt.tmp-8246-",
            ".b.ckpt.tmp--6",
            ".b.ckpt.tmp-82x6-6",
            ".b.ckpt.tmp-8246-6.x",
            "b.ckpt.tmp-8246-6",
            ".a.ckpt.tmp-8246-6",
            ".b.ckpt.tmp-1-2.tmp-3-4",
        ] {
            assert!(!is_temp_of(other, "b.ckpt"), "{other}");
        }
        // The temporary files of target "x.tmp-1-2" are not those of "x".
        assert!(!is_temp_of(".x.tmp-1-2.tmp-3-4", "x"));
        assert!(is_temp_of(".x.tmp-1-2.tmp-3-4", "x.tmp-1-2"));
    }

    /// A dead writer's temporary files (nobody holds them locked; one has
    /// this process's id, as after a container restart) go at the next
    /// write; a live writer's (locked), other targets' and other names
    /// stay.
    #[cfg(unix)]
    #[test]
    fn a_write_removes_dead_writers_temp_files_only() {
        let dir = scratch("orphans");
        let path = dir.join("b.ckpt");
        let me = std::process::id();
        let dead = [
            ".b.ckpt.tmp-8246-6".to_string(),
            format!(".b.ckpt.tmp-{me}-999999"),
        ];
        for n in &dead {
            std::fs::write(dir.join(n), vec![1u8; 4096]).unwrap();
        }
        let live = dir.join(".b.ckpt.tmp-777-3");
        let writer = File::create(&live).unwrap();
        writer.lock().unwrap();
        let keep = [
            ".other.ckpt.tmp-8246-6",
            "b.ckpt.tmp-8246-6",
            ".b.ckpt.tmp-x-1",
        ];
        for n in keep {
            std::fs::write(dir.join(n), b"x").unwrap();
        }
        atomic_write(&path, b"new state").unwrap();
        let mut want: Vec<String> = keep.iter().map(|s| s.to_string()).collect();
        want.push("b.ckpt".into());
        want.push(".b.ckpt.tmp-777-3".into());
        want.sort();
        assert_eq!(entries(&dir), want);
        assert_eq!(std::fs::read(&path).unwrap(), b"new state");
        // Once its writer is gone, the next write removes it too.
        drop(writer);
        atomic_write(&path, b"newer").unwrap();
        assert!(!live.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A temporary name already taken (by a live writer's file, locked, so
    /// not removed) is skipped for the next one.
    #[test]
    fn a_taken_temp_name_is_skipped() {
        let dir = scratch("taken");
        let path = dir.join("t.bin");
        let next = COUNTER.load(Ordering::Relaxed);
        let held: Vec<File> = (next..next + 4)
            .map(|n| {
                let f = File::create(dir.join(format!(".t.bin.tmp-{}-{n}", std::process::id())))
                    .unwrap();
                f.lock().unwrap();
                f
            })
            .collect();
        atomic_write(&path, b"written").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"written");
        assert_eq!(entries(&dir).len(), 5);
        drop(held);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
