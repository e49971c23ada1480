//! Helpers shared by the integration tests: where the checkout is, the
//! real-QEMU tests' shared work directory and the lock that keeps them one
//! at a time, fresh scratch directories, and running the harness expecting
//! success.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository checkout.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// A fresh, empty scratch directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `c`, prints its output, asserts it succeeded, returns its stdout.
pub fn run_ok(mut c: Command) -> String {
    let out = c.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!("{stderr}\n{stdout}");
    assert!(out.status.success(), "harness failed: {:?}\n{stderr}", out.status);
    stdout
}

/// The work directory the real-QEMU tests share (kernel cache, tree copy,
/// ccache): `$HARNESS_E2E_WORK`, else `target/e2e-work` of this checkout.
/// Pointing several checkouts at one directory shares their kernels.
pub fn e2e_work() -> PathBuf {
    std::env::var_os("HARNESS_E2E_WORK")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/e2e-work"))
}

/// Held for the whole of one real-QEMU test: an exclusive lock on
/// `<e2e_work>.lock`, so tests in this process (each call opens the file
/// anew, and flock conflicts between open files) and in other processes
/// using the same work directory run one at a time instead of finding the
/// work directory taken. When dropped it appends the test's name and the
/// seconds it held the lock to `<e2e_work>.times`, so a CI run's cost can
/// be read test by test (docs/measurements, the test suite's records).
pub struct Serial {
    _file: std::fs::File,
    since: std::time::Instant,
}

impl Drop for Serial {
    fn drop(&mut self) {
        use std::io::Write;
        let name = std::thread::current().name().unwrap_or("?").to_string();
        let secs = self.since.elapsed().as_secs();
        let ok = if std::thread::panicking() { "failed" } else { "ok" };
        let line = format!("{secs:>6} s  {ok:6}  {name}\n");
        eprint!("e2e time: {line}");
        let times = e2e_work().with_extension("times");
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(times) {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

/// Waits for and takes the real-QEMU tests' lock (see [`Serial`]).
pub fn serial() -> Serial {
    let work = e2e_work();
    std::fs::create_dir_all(work.parent().unwrap()).unwrap();
    let path = work.with_extension("lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap();
    file.lock().unwrap_or_else(|e| panic!("lock {}: {e}", path.display()));
    Serial {
        _file: file,
        since: std::time::Instant::now(),
    }
}

/// The profiler plugin built into the release directory of the target
/// directory the harness binary is in, where the harness looks for it.
pub fn build_profiler() {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_harness"));
    let target = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
    let st = Command::new(env!("CARGO"))
        .args(["build", "--release", "-p", "harness-profiler"])
        .env("CARGO_TARGET_DIR", &target)
        .current_dir(repo())
        .status()
        .unwrap();
    assert!(st.success(), "cargo build --release -p harness-profiler");
    assert!(target.join("release/libharness_profiler.so").is_file());
}

/// Runs git in `dir` as a test committer; its trimmed output (fails the
/// test when git fails).
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t.invalid"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
