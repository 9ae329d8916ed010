//! Atomic file replacement: write a temporary file in the same folder,
//! `fsync` it, rename it over the target, then `fsync` the folder. Readers
//! see either the whole old file or the whole new one, and a crash or error
//! part-way leaves the previous file untouched.

use crate::error::{ForgeError, Result};
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Distinguishes temporary files of concurrent writers in one process.
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to `path` atomically.
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
/// # Errors
/// [`ForgeError::Io`] when `f` fails or the file cannot be created, synced
/// or renamed; the previous file is then unchanged and the temporary file
/// removed.
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
    let name = path.file_name().ok_or_else(|| {
        ForgeError::io(
            path,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file path"),
        )
    })?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let tmp = dir.join(format!(
        ".{}.tmp-{}-{}",
        name.to_string_lossy(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|e| ForgeError::io(&tmp, e))?;

    let written = (|| {
        let mut w = BufWriter::new(file);
        f(&mut w)?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        // Best effort: the error that matters is the one we return.
        let _ = std::fs::remove_file(&tmp);
        return Err(ForgeError::io(path, e));
    }
    sync_dir(&dir).map_err(|e| ForgeError::io(&dir, e))
}

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
}
