//! Which benchmarks execute what a series changes: each function the
//! series' hunks change (`kernel::hunks`) against the kernel profiles of a
//! run's boots — base's for a function base has, the variant's for one the
//! series adds — as calls per operation per benchmark; a function no
//! benchmark executes, or one the symbol table lacks (inlined, or a static
//! function folded into its caller), is said plainly. Pure but for reading
//! the run's profile files; `coverage.json` in the run directory holds it.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::kernel::hunks::{Change, Changed};
use crate::profile::PerOp;

/// The file in a run directory.
pub const FILE: &str = "coverage.json";

/// One benchmark's mean calls per op of each function, over the boots of
/// one kernel.
pub type CallsPerOp = BTreeMap<String, f64>;

/// How one changed function is measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionRow {
    /// The function and its file, as the hunks give them.
    pub changed: Changed,
    /// The name the kernel has it under (a syscall body may be under its
    /// `__x64_sys_` wrapper), or None when the symbol table lacks it.
    pub symbol: Option<String>,
    /// Benchmark → calls per op, for each benchmark that executes it.
    pub benchmarks: BTreeMap<String, f64>,
}

/// A series' coverage by a matrix's benchmarks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Coverage {
    /// The series' name.
    pub series: String,
    /// The vCPU count whose profiles were read.
    pub vcpus: u32,
    /// The benchmarks whose profiles were read.
    pub benchmarks: Vec<String>,
    /// One row per changed function.
    pub rows: Vec<FunctionRow>,
    /// Files the series changes that no row stands for (a header, a
    /// Kconfig or Makefile, a change outside any function body): what
    /// such a change reaches is not traced to functions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub untold: Vec<String>,
}

impl Coverage {
    /// Whether the series changes only what coverage cannot trace: no
    /// function body, but files (headers, Kconfig, Makefiles).
    pub fn cannot_tell(&self) -> bool {
        self.rows.is_empty() && !self.untold.is_empty()
    }

    /// Whether no benchmark executes any changed function.
    pub fn unmeasured(&self) -> bool {
        !self.rows.is_empty() && self.rows.iter().all(|r| r.benchmarks.is_empty())
    }

    /// The benchmarks that execute at least one changed function.
    pub fn covering(&self) -> BTreeSet<&str> {
        self.rows
            .iter()
            .flat_map(|r| r.benchmarks.keys().map(String::as_str))
            .collect()
    }
}

/// The coverage a run directory holds (none when `coverage.json` is absent).
pub fn read(run_dir: &std::path::Path) -> anyhow::Result<Vec<Coverage>> {
    use anyhow::Context;
    let path = run_dir.join(FILE);
    match std::fs::read(&path) {
        Ok(data) => serde_json::from_slice(&data).with_context(|| format!("read {}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e).with_context(|| format!("read {}", path.display())),
    }
}

/// Names a changed function may have in the kernel: a syscall body
/// (`__do_sys_X`) is often inlined into its wrappers.
fn candidates(function: &str) -> Vec<String> {
    match function.strip_prefix("__do_sys_") {
        Some(s) => vec![function.into(), format!("__se_sys_{s}"), format!("__x64_sys_{s}")],
        None => vec![function.into()],
    }
}

/// The coverage of `changed` (the functions, and every file the series
/// touches) from per-benchmark calls per op of base (`base`) and of the
/// variant (`variant`, for functions the series adds); `symbols` is the
/// variant's symbol table (None: unknown).
pub fn table(
    series: &str,
    vcpus: u32,
    changed: &Changes,
    symbols: Option<&BTreeSet<String>>,
    base: &BTreeMap<String, CallsPerOp>,
    variant: &BTreeMap<String, CallsPerOp>,
) -> Coverage {
    let rows: Vec<FunctionRow> = changed
        .functions
        .iter()
        .map(|c| {
            let names = candidates(&c.function);
            let symbol = match symbols {
                Some(s) => names.iter().find(|n| s.contains(*n)).cloned(),
                None => Some(c.function.clone()),
            };
            let from = if c.change == Change::Added { variant } else { base };
            let benchmarks = from
                .iter()
                .filter_map(|(b, calls)| {
                    let found: Vec<f64> = names.iter().filter_map(|n| calls.get(n)).copied().collect();
                    (!found.is_empty()).then(|| (b.clone(), found.into_iter().fold(0.0, f64::max)))
                })
                .collect();
            FunctionRow {
                changed: c.clone(),
                symbol,
                benchmarks,
            }
        })
        .collect();
    Coverage {
        series: series.into(),
        vcpus,
        benchmarks: base
            .keys()
            .chain(variant.keys())
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
        untold: changed
            .files
            .iter()
            .filter(|f| !rows.iter().any(|r| &r.changed.file == *f))
            .cloned()
            .collect(),
        rows,
    }
}

/// What a series changes: the functions its hunks show, and every file it
/// touches.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Changes {
    /// The functions, from [`crate::kernel::hunks`].
    pub functions: Vec<Changed>,
    /// Every file, relative to the tree's top.
    pub files: Vec<String>,
}

/// A file's kind, as the text names it.
fn kind(file: &str) -> &'static str {
    let name = file.rsplit('/').next().unwrap_or(file);
    if name.ends_with(".h") {
        "a header"
    } else if name.starts_with("Kconfig") {
        "Kconfig"
    } else if name == "Makefile" || name == "Kbuild" || name.ends_with(".mk") {
        "a Makefile"
    } else if name.ends_with(".c") {
        "outside any function body"
    } else {
        "not C"
    }
}

/// `file (kind), …`.
fn untold_list(files: &[String]) -> String {
    files
        .iter()
        .map(|f| format!("{f} ({})", kind(f)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The mean calls per op over `boots` (one kernel, one benchmark) of
/// every function that executed at all (some are entered by a jump, never
/// called: 0 calls, yet executed).
pub fn mean_calls(boots: &[PerOp]) -> CallsPerOp {
    let mut sum: CallsPerOp = BTreeMap::new();
    for b in boots {
        for (name, f) in b.functions.iter().filter(|(_, f)| f.insns > 0.0 || f.calls > 0.0) {
            *sum.entry(name.clone()).or_default() += f.calls;
        }
    }
    let n = boots.len().max(1) as f64;
    sum.values_mut().for_each(|v| *v /= n);
    sum
}

/// The text table: "changed function → benchmarks that execute it
/// (calls/op)", then the warning when nothing measures the series.
pub fn text(c: &Coverage) -> String {
    let mut out = format!(
        "what {} changes, and which benchmarks execute it (calls per op in the kernel profiles at {} vCPUs):\n",
        c.series, c.vcpus
    );
    if c.cannot_tell() {
        out.push_str(&format!(
            "  coverage cannot tell: the series changes no function body, only {}; \
             which benchmarks reach such a change is not traced to functions\n",
            untold_list(&c.untold)
        ));
        return out;
    }
    if c.rows.is_empty() {
        out.push_str("  no function: the series changes no function body the hunks show\n");
        return out;
    }
    let width = c.rows.iter().map(|r| label(r).len()).max().unwrap_or(0);
    for r in &c.rows {
        out.push_str(&format!("  {:width$}  {}\n", label(r), measured_by(r)));
    }
    if !c.untold.is_empty() {
        out.push_str(&format!(
            "  also changes {}: coverage cannot tell which benchmarks reach that\n",
            untold_list(&c.untold)
        ));
    }
    if c.unmeasured() {
        out.push_str(&format!(
            "warning: not measured by any benchmark here: no benchmark of this matrix ({}) executes a function {} changes; \
             add one that does (docs/benchmarks.md) or its verdicts say nothing about the change\n",
            c.benchmarks.join(", "),
            c.series
        ));
    }
    out
}

/// `function (file, how)`.
fn label(r: &FunctionRow) -> String {
    let how = match r.changed.change {
        Change::Modified => "",
        Change::Added => ", new",
        Change::Removed => ", removed",
    };
    format!("{} ({}{how})", r.changed.function, r.changed.file)
}

/// The benchmarks of a row, or why there are none.
fn measured_by(r: &FunctionRow) -> String {
    if r.symbol.is_none() {
        return "not in the kernel's symbol table (inlined, or not built): its callers' rows stand for it".into();
    }
    if r.benchmarks.is_empty() {
        return match r.changed.change {
            Change::Removed => "removed: base's benchmarks that ran it show none".into(),
            _ => "not measured by any benchmark here".into(),
        };
    }
    let via = match r.symbol.as_deref() {
        Some(s) if s != r.changed.function => format!(" (as {s})"),
        _ => String::new(),
    };
    let list: Vec<String> = r.benchmarks.iter().map(|(b, n)| format!("{b} {n:.2}")).collect();
    format!("{}{via}", list.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ch(function: &str, change: Change) -> Changed {
        Changed {
            function: function.into(),
            file: "f.c".into(),
            change,
        }
    }

    #[test]
    fn each_changed_function_gets_the_benchmarks_that_call_it() {
        let calls = |pairs: &[(&str, f64)]| pairs.iter().map(|(n, c)| (n.to_string(), *c)).collect::<CallsPerOp>();
        let base = BTreeMap::from([
            ("doexec".to_string(), calls(&[("bprm_execve", 1.0)])),
            ("pipe".to_string(), calls(&[("pipe_write", 1.0)])),
        ]);
        let variant = BTreeMap::from([("doexec".to_string(), calls(&[("harness_cost", 1.0)]))]);
        let symbols: BTreeSet<String> = ["bprm_execve", "harness_cost", "__x64_sys_prlimit64", "unrun"]
            .map(String::from)
            .into();
        let changed = [
            ch("bprm_execve", Change::Modified),
            ch("harness_cost", Change::Added),
            ch("__do_sys_prlimit64", Change::Modified),
            ch("unrun", Change::Modified),
            ch("inlined_helper", Change::Modified),
        ];
        let of = |functions: &[Changed]| Changes {
            functions: functions.to_vec(),
            files: vec!["f.c".into()],
        };
        let c = table("s", 2, &of(&changed), Some(&symbols), &base, &variant);
        let got: Vec<(Option<&str>, Vec<&str>)> = c
            .rows
            .iter()
            .map(|r| (r.symbol.as_deref(), r.benchmarks.keys().map(String::as_str).collect()))
            .collect();
        assert_eq!(
            got,
            [
                (Some("bprm_execve"), vec!["doexec"]),
                (Some("harness_cost"), vec!["doexec"]),
                (Some("__x64_sys_prlimit64"), vec![]),
                (Some("unrun"), vec![]),
                (None, vec![]),
            ]
        );
        assert!(!c.unmeasured());
        let t = text(&c);
        assert!(
            t.lines()
                .any(|l| l.contains("bprm_execve (f.c) ") && l.ends_with("doexec 1.00")),
            "{t}"
        );
        assert!(
            t.contains("unrun (f.c)") && t.contains("not measured by any benchmark here"),
            "{t}"
        );
        assert!(
            t.contains("inlined_helper (f.c)") && t.contains("not in the kernel's symbol table"),
            "{t}"
        );
        assert!(!t.contains("warning"), "{t}");
        let only = table("s", 2, &of(&changed[3..4]), Some(&symbols), &base, &variant);
        assert!(only.unmeasured());
        assert!(
            text(&only).contains("warning: not measured by any benchmark here"),
            "{}",
            text(&only)
        );
    }

    #[test]
    fn a_change_no_function_stands_for_is_said_to_be_beyond_coverage() {
        let empty = BTreeMap::new();
        let files = |fs: &[&str]| fs.iter().map(|f| f.to_string()).collect::<Vec<_>>();
        // a header, Kconfig and Makefile only: cannot tell, not "no function"
        let c = table(
            "hdr",
            2,
            &Changes {
                functions: vec![],
                files: files(&["include/linux/mm_types.h", "mm/Kconfig", "mm/Makefile"]),
            },
            None,
            &empty,
            &empty,
        );
        assert!(c.cannot_tell() && !c.unmeasured());
        let t = text(&c);
        assert!(
            t.contains(
                "coverage cannot tell: the series changes no function body, only include/linux/mm_types.h (a header), \
                 mm/Kconfig (Kconfig), mm/Makefile (a Makefile)"
            ),
            "{t}"
        );
        assert!(!t.contains("no function:"), "{t}");
        // beside a function: the function's row, and the header said apart
        let c = table(
            "mixed",
            2,
            &Changes {
                functions: vec![ch("f", Change::Modified)],
                files: files(&["f.c", "include/linux/f.h"]),
            },
            None,
            &empty,
            &empty,
        );
        assert_eq!(c.untold, ["include/linux/f.h"]);
        assert!(!c.cannot_tell());
        assert!(
            text(&c).contains("also changes include/linux/f.h (a header): coverage cannot tell"),
            "{}",
            text(&c)
        );
        // C only: nothing untold, and nothing new in the JSON
        let c = table(
            "c",
            2,
            &Changes {
                functions: vec![ch("f", Change::Modified)],
                files: files(&["f.c"]),
            },
            None,
            &empty,
            &empty,
        );
        assert!(c.untold.is_empty());
        assert!(!serde_json::to_string(&c).unwrap().contains("untold"));
    }
}
