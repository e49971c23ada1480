//! A series from somewhere: an mbox (`b4 am`, `git format-patch --stdout`),
//! a directory of `git format-patch` files, a quilt directory with a
//! `series` file, or a git range (`git format-patch --stdout BASE..TOPIC`).
//! Each is written out as a quilt directory (`<dir>/<name>/series` and one
//! file per patch, byte for byte as it came) that [`super::patch`] and the
//! tree apply like any series of a matrix.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::proc::Cmd;

/// Where a series comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// An mbox file: one patch per message.
    Mbox(PathBuf),
    /// A directory of `*.patch` files, in name order.
    PatchDir(PathBuf),
    /// A quilt directory: its `series` file gives the order.
    Quilt(PathBuf),
    /// `git format-patch --stdout <range>` in a git tree.
    GitRange {
        /// The git tree.
        tree: PathBuf,
        /// `BASE..TOPIC`.
        range: String,
    },
}

impl Source {
    /// What a path on the command line is: a quilt directory when it holds a
    /// `series` file, a patch directory otherwise, an mbox when a file.
    pub fn detect(p: &Path) -> Result<Source> {
        let meta = std::fs::metadata(p).with_context(|| format!("read the series {}", p.display()))?;
        Ok(if meta.is_dir() && p.join("series").is_file() {
            Source::Quilt(p.to_path_buf())
        } else if meta.is_dir() {
            Source::PatchDir(p.to_path_buf())
        } else {
            Source::Mbox(p.to_path_buf())
        })
    }

    /// The file, directory or range, as the user gave it.
    fn named(&self) -> String {
        match self {
            Source::Mbox(p) | Source::PatchDir(p) | Source::Quilt(p) => p.display().to_string(),
            Source::GitRange { range, .. } => range.clone(),
        }
    }

    /// The patches, as (file name, bytes), in order.
    pub fn patches(&self, log: &Path) -> Result<Vec<(String, Vec<u8>)>> {
        match self {
            Source::Mbox(f) => {
                let text = std::fs::read(f).with_context(|| format!("read {}", f.display()))?;
                let msgs = split_mbox(&text);
                if msgs.is_empty() {
                    bail!(
                        "read {}: no patch in it (an mbox has `From ` lines, a patch a `---`/`+++` diff)",
                        f.display()
                    );
                }
                Ok(named(msgs))
            }
            Source::PatchDir(d) => {
                let mut files: Vec<PathBuf> = std::fs::read_dir(d)
                    .with_context(|| format!("read {}", d.display()))?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "patch") && p.is_file())
                    .collect();
                files.sort();
                if files.is_empty() {
                    bail!("read {}: no *.patch file and no `series` file in it", d.display());
                }
                read_all(&files)
            }
            Source::Quilt(d) => {
                let s = super::patch::load_series(d.parent().unwrap_or(Path::new("/")), &file_name(d))?;
                read_all(&s.patches)
            }
            Source::GitRange { tree, range } => git_range(tree, range, log),
        }
    }
}

/// Each file of `files` as (file name, bytes).
fn read_all(files: &[PathBuf]) -> Result<Vec<(String, Vec<u8>)>> {
    files
        .iter()
        .map(|p| {
            Ok((
                file_name(p),
                std::fs::read(p).with_context(|| format!("read {}", p.display()))?,
            ))
        })
        .collect()
}

/// The patches of `range` (`BASE..TOPIC`) in the git tree `tree`, by `git
/// format-patch` (its output kept in `log`).
fn git_range(tree: &Path, range: &str, log: &Path) -> Result<Vec<(String, Vec<u8>)>> {
    if !range.contains("..") {
        bail!("the range `{range}` is not BASE..TOPIC");
    }
    let f = Cmd::new("git")
        .arg("-C")
        .arg(tree)
        .args(["format-patch", "--stdout", "--no-signature", range])
        .capture()
        .run()?;
    if !f.success() {
        bail!(
            "run git format-patch {range} in {}: {}",
            tree.display(),
            f.output.trim()
        );
    }
    std::fs::write(log, f.output.as_bytes()).with_context(|| format!("write {}", log.display()))?;
    let msgs = split_mbox(f.output.as_bytes());
    if msgs.is_empty() {
        bail!(
            "take the patches of {range} in {}: the range holds no commit",
            tree.display()
        );
    }
    Ok(named(msgs))
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `0001-<subject words>.patch` names for split messages.
fn named(msgs: Vec<Vec<u8>>) -> Vec<(String, Vec<u8>)> {
    msgs.into_iter()
        .enumerate()
        .map(|(i, m)| {
            let text = String::from_utf8_lossy(&m);
            let subject = text.lines().find_map(|l| l.strip_prefix("Subject:")).unwrap_or("patch");
            let subject = subject.trim();
            let subject = if subject.starts_with('[') {
                subject.split_once(']').map_or(subject, |(_, r)| r)
            } else {
                subject
            };
            let slug: String = subject
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() {
                        c.to_ascii_lowercase()
                    } else {
                        '-'
                    }
                })
                .collect();
            let slug: Vec<&str> = slug.split('-').filter(|w| !w.is_empty()).collect();
            let slug = slug.join("-").chars().take(52).collect::<String>();
            (
                format!(
                    "{:04}-{}.patch",
                    i + 1,
                    if slug.is_empty() { "patch".into() } else { slug }
                ),
                m,
            )
        })
        .collect()
}

/// Splits an mbox into messages at each `From ` line (the line itself is
/// dropped); a file without one is a single message. Messages without a
/// diff (a cover letter) are left out.
pub fn split_mbox(data: &[u8]) -> Vec<Vec<u8>> {
    let mut msgs: Vec<Vec<u8>> = Vec::new();
    let mut cur: Option<Vec<u8>> = None;
    let lines: Vec<&[u8]> = data.split_inclusive(|&b| b == b'\n').collect();
    for (i, &line) in lines.iter().enumerate() {
        if is_postmark(line, lines.get(i + 1).copied()) {
            msgs.extend(cur.take());
            cur = Some(Vec::new());
            continue;
        }
        cur.get_or_insert_with(Vec::new).extend_from_slice(line);
    }
    msgs.extend(cur);
    let has_diff = |m: &Vec<u8>| {
        m.split(|&b| b == b'\n')
            .any(|l| l.starts_with(b"+++ ") || l.starts_with(b"diff --git "))
    };
    msgs.into_iter().filter(has_diff).collect()
}

/// Whether `line` is an mbox postmark rather than a body line that starts
/// with `From ` (a commit message's "From the parent's view …" split one
/// mail in two): `From SENDER DATE` as `git format-patch` and mail
/// archives write it (`From 1a2b… Mon Sep 17 00:00:00 2001`: a time and a
/// four-digit year), or a bare `From SENDER` followed by a header line.
fn is_postmark(line: &[u8], next: Option<&[u8]>) -> bool {
    static DATED: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    static BARE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    static HEADER: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = |cell: &'static std::sync::OnceLock<regex::Regex>, pattern: &str| {
        cell.get_or_init(|| regex::Regex::new(pattern).unwrap())
    };
    let text = |b: &[u8]| {
        std::str::from_utf8(b)
            .map(|l| l.trim_end().to_string())
            .unwrap_or_default()
    };
    if !line.starts_with(b"From ") {
        return false;
    }
    let l = text(line);
    re(&DATED, r"^From \S+ .*\b\d{1,2}:\d\d(:\d\d)?\b.*\b\d{4}$").is_match(&l)
        || (re(&BARE, r"^From \S+$").is_match(&l)
            && next.is_some_and(|n| re(&HEADER, r"^[A-Za-z][A-Za-z0-9-]*: ").is_match(&text(n))))
}

/// Every source's patches, in order, each as `patch(1)` applies it: a
/// mail's quoted-printable or base64 body decoded and a Latin-1 one made
/// UTF-8 ([`super::mail::as_patch`]).
pub fn collect(sources: &[Source], log: &Path) -> Result<Vec<(String, Vec<u8>)>> {
    let mut all = Vec::new();
    for src in sources {
        for (name, bytes) in src.patches(log)? {
            let patch =
                super::mail::as_patch(&bytes).map_err(|e| anyhow::anyhow!("read {}: {name}: {e}", src.named()))?;
            all.push((name, patch));
        }
    }
    Ok(all)
}

/// Writes `patches`, in order, as the quilt series `dir/<name>/`
/// (replacing what was there), whole or not at all, safe against another
/// harness writing the same series at once ([`crate::util::write_dir_once`]).
pub fn write_quilt(patches: &[(String, Vec<u8>)], dir: &Path, name: &str) -> Result<()> {
    let mut names: Vec<String> = Vec::new();
    let mut listed = String::new();
    for (n, (file, _)) in patches.iter().enumerate() {
        // two sources may both have a 0001-…: keep the names apart
        let file = if names.contains(file) {
            format!("{:04}-{file}", n + 1)
        } else {
            file.clone()
        };
        listed.push_str(&file);
        listed.push('\n');
        names.push(file);
    }
    let mut files: Vec<(&str, &[u8])> = names
        .iter()
        .map(String::as_str)
        .zip(patches.iter().map(|(_, d)| d.as_slice()))
        .collect();
    files.push(("series", listed.as_bytes()));
    let sdir = dir.join(name);
    crate::util::write_dir_once(&sdir, &files).with_context(|| format!("write the series {}", sdir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const P1: &str =
        "From: A <a@x>\nSubject: [PATCH 1/2] mm: one thing\n\nbody\n---\n--- a/f.c\n+++ b/f.c\n@@ -1 +1 @@\n-a\n+b\n";
    const P2: &str =
        "From: A <a@x>\nSubject: [PATCH 2/2] fs: other\n\n---\n--- a/g.c\n+++ b/g.c\n@@ -1 +1 @@\n-c\n+d\n";

    #[test]
    fn an_mbox_splits_into_its_patches_byte_for_byte() {
        let cover = "From 0000 Mon Sep 17 00:00:00 2001\nFrom: A <a@x>\nSubject: [PATCH 0/2] cover\n\nwords\n";
        let mbox = format!("{cover}From 1111 Mon Sep 17 00:00:00 2001\n{P1}From 2222 Mon Sep 17 00:00:00 2001\n{P2}");
        let msgs = split_mbox(mbox.as_bytes());
        assert_eq!(
            msgs,
            vec![P1.as_bytes().to_vec(), P2.as_bytes().to_vec()],
            "the cover letter has no diff"
        );
        let names: Vec<String> = named(msgs).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["0001-mm-one-thing.patch", "0002-fs-other.patch"]);
        assert_eq!(
            split_mbox(P1.as_bytes()),
            vec![P1.as_bytes().to_vec()],
            "a lone patch is one message"
        );
    }

    /// Issue 58: a body line starting with `From ` is no new mail.
    #[test]
    fn a_body_line_starting_with_from_does_not_split_a_mail() {
        let body = P1.replace(
            "\nbody\n",
            "\nFrom the parent's view the child runs first.\nFrom 10 to 12 workers.\n",
        );
        let mbox = format!("From 1111 Mon Sep 17 00:00:00 2001\n{body}\nFrom a@b.c Thu Jan  1 00:00:00 2026\n{P2}");
        let msgs = split_mbox(mbox.as_bytes());
        assert_eq!(msgs, vec![format!("{body}\n").into_bytes(), P2.as_bytes().to_vec()]);
    }

    #[test]
    fn every_kind_of_source_becomes_a_quilt_series() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        let w = |p: &str, s: &str| {
            let p = root.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, s).unwrap();
        };
        w("mbox", &format!("From x\n{P1}From y\n{P2}"));
        w("dir/0002-b.patch", P2);
        w("dir/0001-a.patch", P1);
        w("dir/notes.txt", "ignored");
        w("quilt/series", "# order\nsecond.patch\nfirst.patch\n");
        w("quilt/first.patch", P1);
        w("quilt/second.patch", P2);
        let log = root.join("log");
        for (src, want) in [("mbox", vec![P1, P2]), ("dir", vec![P1, P2]), ("quilt", vec![P2, P1])] {
            let s = Source::detect(&root.join(src)).unwrap();
            write_quilt(&collect(&[s], &log).unwrap(), &root.join("out"), "t").unwrap();
            let series = super::super::patch::load_series(&root.join("out"), "t").unwrap();
            let got: Vec<String> = series
                .patches
                .iter()
                .map(|p| std::fs::read_to_string(p).unwrap())
                .collect();
            assert_eq!(got, want, "{src}");
        }
        let e = format!("{:#}", Source::detect(&root.join("missing")).unwrap_err());
        assert!(e.starts_with("read the series "), "{e}");
        w("empty/x.txt", "");
        let e = format!(
            "{:#}",
            collect(&[Source::detect(&root.join("empty")).unwrap()], &log).unwrap_err()
        );
        assert!(e.contains("no *.patch file"), "{e}");
    }

    #[test]
    fn a_git_range_gives_its_commits_as_patches() {
        if crate::proc::which("git").is_none() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        std::fs::create_dir_all(&root).unwrap();
        let git = |args: &[&str]| {
            Cmd::new("git")
                .arg("-C")
                .arg(&root)
                .args(["-c", "user.name=t", "-c", "user.email=t@t.invalid"])
                .args(args.iter().copied())
                .capture()
                .run_ok()
                .unwrap()
        };
        git(&["init", "-q"]);
        std::fs::write(root.join("f.c"), "a\n").unwrap();
        git(&["add", "."]);
        git(&["commit", "-qm", "base"]);
        git(&["tag", "base"]);
        for (i, c) in ["b", "c"].iter().enumerate() {
            std::fs::write(root.join("f.c"), format!("{c}\n")).unwrap();
            git(&["commit", "-qam", &format!("step {i}")]);
        }
        let out = root.join("out");
        let src = Source::GitRange {
            tree: root.clone(),
            range: "base..HEAD".into(),
        };
        write_quilt(&collect(&[src], &root.join("log")).unwrap(), &out, "r").unwrap();
        let s = super::super::patch::load_series(&out, "r").unwrap();
        assert!(s.patches[0].ends_with("0001-step-0.patch"), "{:?}", s.patches);
        assert!(std::fs::read_to_string(&s.patches[1]).unwrap().contains("-b\n+c\n"));
        let e = format!(
            "{:#}",
            collect(
                &[Source::GitRange {
                    tree: root.clone(),
                    range: "HEAD..HEAD".into()
                }],
                &root.join("log")
            )
            .unwrap_err()
        );
        assert!(e.contains("holds no commit"), "{e}");
    }

    #[test]
    fn concurrent_tries_of_one_series_each_see_it_whole() {
        let patches: Vec<(String, Vec<u8>)> = (0..20)
            .map(|i| (format!("{i:04}-p.patch"), P1.repeat(50).into_bytes()))
            .collect();
        let want: Vec<Vec<u8>> = patches.iter().map(|p| p.1.clone()).collect();
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("try");
        // each `try` writes the series, then reads it back as its run would, while the others do the same
        let one_try = || -> Result<Vec<Vec<u8>>> {
            write_quilt(&patches, &out, "series")?;
            let s = crate::kernel::patch::load_series(&out, "series")?;
            s.patches
                .iter()
                .map(|p| std::fs::read(p).with_context(|| format!("read {}", p.display())))
                .collect()
        };
        let got: Vec<Result<Vec<Vec<u8>>>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..6)
                .map(|_| s.spawn(|| (0..10).map(|_| one_try()).collect::<Vec<_>>()))
                .collect();
            hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        for g in got {
            assert_eq!(g.unwrap(), want);
        }
    }
}
