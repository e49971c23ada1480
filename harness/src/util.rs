//! The bottom layer (L0): small facts every other module may use and that
//! use nothing of the harness but each other — time stamps, hex digests,
//! file locks.

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context, Result};

/// Seconds since the Unix epoch (0 on a clock set before it).
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// UTC now as RFC 3339 (seconds).
pub fn now_rfc3339() -> String {
    rfc3339(unix_now())
}

/// Formats Unix seconds as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn rfc3339(secs: u64) -> String {
    let t = i64::try_from(secs)
        .ok()
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .unwrap_or(jiff::Timestamp::MAX);
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// UTC now as a compact stamp for directory names (`20261201-101500`):
/// the start of a run id, and of a bisection's directory.
pub fn stamp() -> String {
    compact(unix_now())
}

/// Formats Unix seconds as `YYYYMMDD-HHMMSS`.
fn compact(secs: u64) -> String {
    rfc3339(secs)
        .replace([':', '-'], "")
        .replace('T', "-")
        .trim_end_matches('Z')
        .to_string()
}

/// Lower-case hex of `b`.
pub fn hex(b: &[u8]) -> String {
    hex::encode(b)
}

/// The marker [`write_dir_once`] writes last into a directory it makes.
pub const COMPLETE: &str = ".complete";

/// Whether `dir` holds its completion marker and every one of `files` as given.
fn holds(dir: &Path, files: &[(&str, &[u8])]) -> bool {
    dir.join(COMPLETE).is_file()
        && files
            .iter()
            .all(|(p, data)| std::fs::read(dir.join(p)).ok().as_deref() == Some(*data))
}

/// A name beside `dir` no other process or thread uses: `<dir>.<what>-<pid>-<n>`.
fn private_name(dir: &Path, what: &str) -> std::path::PathBuf {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    dir.with_file_name(format!("{name}.{what}-{}-{n}", std::process::id()))
}

/// Writes `data` to `path` whole: into a temporary file beside it, under a
/// name no other process or thread uses ([`private_name`]), synced, then
/// renamed into place, so a reader sees the old file or the new one, never
/// a torn one, and two writers never share a temporary file. The
/// temporary file is removed when anything fails; the error names `path`.
/// The directory must exist.
pub fn write_whole(path: &Path, data: &[u8]) -> Result<()> {
    let tmp = private_name(path, "tmp");
    let written = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(data).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("write {}", path.display()));
    }
    Ok(())
}

/// Reads `path` whole if it is a regular file of at most `cap` bytes:
/// opened without following a symlink and without blocking on a FIFO, its
/// type checked on the open file, at most `cap + 1` bytes read. Errors
/// name the file and say what it is instead.
pub fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let f = match f {
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            bail!("{} is a symlink, not a file; refusing to follow it", path.display())
        }
        r => r.with_context(|| format!("read {}", path.display()))?,
    };
    let kind = f
        .metadata()
        .with_context(|| format!("read {}", path.display()))?
        .file_type();
    if !kind.is_file() {
        bail!(
            "{} is not a regular file (a directory, FIFO, socket or device); refusing to read it",
            path.display()
        );
    }
    let mut data = Vec::new();
    f.take(cap + 1)
        .read_to_end(&mut data)
        .with_context(|| format!("read {}", path.display()))?;
    if data.len() as u64 > cap {
        bail!("{} is larger than {}; refusing to read it", path.display(), human(cap));
    }
    Ok(data)
}

/// `rel`, a path a run's own files name (an event's profile, a log), as a
/// path inside the run directory `dir`: refused unless relative and free of
/// `..`, so a hand-edited run directory cannot make a reader open
/// `/etc/passwd` or a file beside the run.
pub fn inside(dir: &Path, rel: &str) -> Result<std::path::PathBuf> {
    let p = Path::new(rel);
    let plain = p.components().all(|c| matches!(c, std::path::Component::Normal(_)));
    if rel.is_empty() || !plain {
        bail!("`{rel}` in {} is not a path inside the run directory (absolute, or with `..`); the run's files were edited by hand", dir.display());
    }
    Ok(dir.join(p))
}

/// Makes `dir` hold `files` (paths relative to it, and their bytes), safe
/// against every other process doing the same at once: each writer fills a
/// private temporary directory, writes the completion marker last and
/// renames the whole into place, so `dir` is whole or absent. A `dir` found
/// without its marker or with a file other than `files` say (a harness
/// killed while writing, an older harness's race) is moved aside and made
/// again; one that verifies is left alone.
pub fn write_dir_once(dir: &Path, files: &[(&str, &[u8])]) -> Result<()> {
    if holds(dir, files) {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("create {}", parent.display()))?;
    }
    if dir.exists() {
        let aside = private_name(dir, "damaged");
        if std::fs::rename(dir, &aside).is_ok() {
            let _ = std::fs::remove_dir_all(&aside);
        }
    }
    let tmp = private_name(dir, "partial");
    let written = fill(&tmp, files);
    let moved = written.and_then(|()| {
        std::fs::rename(&tmp, dir).with_context(|| format!("move {} into {}", tmp.display(), dir.display()))
    });
    match moved {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            // another writer put a whole directory there first
            if holds(dir, files) {
                Ok(())
            } else {
                Err(e)
            }
        }
    }
}

/// Writes `files` under `tmp`, then the completion marker, each synced.
fn fill(tmp: &Path, files: &[(&str, &[u8])]) -> Result<()> {
    let marker = [(COMPLETE, &b"complete\n"[..])];
    for (p, data) in files.iter().chain(&marker) {
        let dst = tmp.join(p);
        std::fs::create_dir_all(dst.parent().unwrap_or(tmp)).with_context(|| format!("create {}", dst.display()))?;
        let mut f = std::fs::File::create(&dst).with_context(|| format!("write {}", dst.display()))?;
        f.write_all(data).with_context(|| format!("write {}", dst.display()))?;
        f.sync_all().with_context(|| format!("sync {}", dst.display()))?;
    }
    Ok(())
}

/// How long [`Flock::take_patiently`] waits for a lock held for a moment.
pub const MOMENT: std::time::Duration = std::time::Duration::from_secs(3);

/// An exclusive lock (`flock`) on a lock file that names its holder (`pid
/// N, harness <command>`); released when dropped or when the process dies.
pub struct Flock {
    _file: std::fs::File,
}

impl Flock {
    /// Takes the lock on `p` if it is free; `Ok(Err(holder))` names who
    /// holds it.
    pub fn try_take(p: &Path, what: &str) -> Result<std::result::Result<Flock, String>> {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(p)
            .with_context(|| format!("open {}", p.display()))?;
        match f.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Ok(Err(std::fs::read_to_string(p).unwrap_or_default().trim().to_string()))
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(e).with_context(|| format!("lock {}", p.display())),
        }
        f.set_len(0).with_context(|| format!("truncate {}", p.display()))?;
        write!(f, "pid {}, harness {what}", std::process::id()).with_context(|| format!("write {}", p.display()))?;
        Ok(Ok(Flock { _file: f }))
    }

    /// [`Flock::try_take`], trying again for up to [`MOMENT`]: a lock held
    /// for a moment (a reader probing it, a sibling deciding, a dropped
    /// lock whose descriptor a child being forked still holds until its
    /// `exec`) delays the taker, never refuses it; a writer holds a lock
    /// for minutes or hours, so a real conflict costs the moment only.
    pub fn take_patiently(p: &Path, what: &str) -> Result<std::result::Result<Flock, String>> {
        let until = std::time::Instant::now() + MOMENT;
        loop {
            match Flock::try_take(p, what)? {
                Err(_) if std::time::Instant::now() < until => std::thread::sleep(std::time::Duration::from_millis(20)),
                other => return Ok(other),
            }
        }
    }

    /// Takes a shared lock on `p` if no exclusive holder has it (`Ok(None)`
    /// when one has). Shared holders write nothing into the file.
    pub fn try_share(p: &Path) -> Result<Option<Flock>> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(p)
            .with_context(|| format!("open {}", p.display()))?;
        match f.try_lock_shared() {
            Ok(()) => Ok(Some(Flock { _file: f })),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => Err(e).with_context(|| format!("lock {}", p.display())),
        }
    }

    /// Who holds the lock on `p`, without taking it for longer than a
    /// moment and without writing.
    pub fn holder(p: &Path) -> Option<String> {
        let f = std::fs::File::open(p).ok()?;
        // a shared lock conflicts only with an exclusive holder; released when `f` closes
        matches!(f.try_lock_shared(), Err(std::fs::TryLockError::WouldBlock))
            .then(|| std::fs::read_to_string(p).unwrap_or_default().trim().to_string())
    }
}

/// Waits (up to 10 s) until nobody holds `p` exclusively, for tests that
/// drop a lock and take it again at once. A lock is on the open file, and a
/// child another test thread is forking holds a copy of every descriptor
/// until its `exec` closes them: on a loaded host the dropped lock can stay
/// held for milliseconds after `drop`.
#[cfg(test)]
pub fn wait_until_released(p: &Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while Flock::holder(p).is_some() {
        assert!(
            std::time::Instant::now() < deadline,
            "{} still held 10 s after its holder dropped it",
            p.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// `1.5 GiB`, `12.0 MiB`.
pub fn human(bytes: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let (mut v, mut i) = (bytes as f64, 0);
    while v >= 1024.0 && i + 1 < units.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", units[i])
    }
}

/// Base64 (RFC 4648, `+/`) decoded, stopping at `=`; line breaks and
/// spaces are skipped (a mail body wraps it). The first byte that is not
/// base64 is the error.
pub fn base64_decode(text: &[u8]) -> Result<Vec<u8>, u8> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &c in text.iter().take_while(|&&c| c != b'=') {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'\n' | b'\r' | b' ' | b'\t' => continue,
            _ => return Err(c),
        };
        acc = (acc << 6) | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_capped_read_takes_regular_files_only_and_never_blocks() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("p");
        std::fs::write(&f, b"0123456789").unwrap();
        assert_eq!(read_capped(&f, 10).unwrap(), b"0123456789");
        let e = read_capped(&f, 9).unwrap_err().to_string();
        assert!(e.contains("larger than 9 B"), "{e}");
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid C string
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        for (p, what) in [
            (fifo, "not a regular file"),
            (std::path::PathBuf::from("/dev/zero"), "not a regular file"),
            (d.path().to_path_buf(), "not a regular file"),
        ] {
            let e = read_capped(&p, 1 << 20).unwrap_err().to_string();
            assert!(e.contains(what), "{}: {e}", p.display());
        }
        let link = d.path().join("link");
        std::os::unix::fs::symlink("/etc/passwd", &link).unwrap();
        let e = read_capped(&link, 1 << 20).unwrap_err().to_string();
        assert!(e.contains("is a symlink"), "{e}");
    }

    #[test]
    fn a_run_file_names_a_path_inside_its_run() {
        let run = Path::new("/runs/r");
        assert_eq!(
            inside(run, "profiles/a.profile.1").unwrap(),
            run.join("profiles/a.profile.1")
        );
        for bad in ["/etc/passwd", "../other/x", "profiles/../../x", "", "./x"] {
            let e = inside(run, bad).unwrap_err().to_string();
            assert!(e.contains("not a path inside the run directory"), "{bad}: {e}");
        }
    }

    use super::*;

    #[test]
    fn write_whole_replaces_and_leaves_no_temporary_file() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("run.json");
        write_whole(&p, b"one").unwrap();
        write_whole(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, ["run.json"]);
        // a failed rename (a directory in the way) removes the temporary file and names the file
        let d = tmp.path().join("dir.json");
        std::fs::create_dir_all(d.join("inside")).unwrap();
        let e = write_whole(&d, b"x").unwrap_err();
        assert_eq!(e.to_string(), format!("write {}", d.display()));
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 2);
    }

    #[test]
    fn rfc3339_known_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_795_000_000), "2026-11-18T11:06:40Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn stamps_are_compact_utc() {
        assert_eq!(compact(1_795_000_000), "20261118-110640");
        assert_eq!(compact(0), "19700101-000000");
    }

    #[test]
    fn hex_is_lower_case_two_digits_a_byte() {
        assert_eq!(hex(&[0, 0xab, 0x0f]), "00ab0f");
    }

    #[test]
    fn a_held_lock_names_its_holder() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let p = dir.join("lock");
        let held = Flock::try_take(&p, "run").unwrap().unwrap();
        let who = format!("pid {}, harness run", std::process::id());
        assert_eq!(Flock::try_take(&p, "check").unwrap().err(), Some(who.clone()));
        assert_eq!(Flock::holder(&p), Some(who));
        drop(held);
        wait_until_released(&p);
        assert!(Flock::try_take(&p, "check").unwrap().is_ok());
        std::fs::remove_dir_all(dir).ok();
    }
}
