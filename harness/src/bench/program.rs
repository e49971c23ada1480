//! The `program` kind on the guest side: its command line (each argument
//! quoted for the guest's shell, so matrix text is never interpreted) and
//! the parsers of its output (a pattern per metric, or the `sample` line
//! protocol; the operation count for per-op profiles).

use anyhow::{bail, Result};

use super::{parse_samples, Measured, Parsed};
use crate::config::{Count, MetricSpec, Pattern};

/// The program's parts the command needs.
pub struct Invocation<'a> {
    /// The program's path in the guest
    /// ([`Executable::guest_path`](crate::config::Executable::guest_path)).
    pub program: &'a str,
    /// Arguments as written.
    pub args: &'a [String],
    /// What `{workers}` stands for.
    pub workers: Count,
    /// What `{duration_s}` stands for.
    pub duration_s: u32,
    /// The uid to run as.
    pub user: Option<u32>,
    /// Whether the output gives the op count (else one op a repetition).
    pub counts_ops: bool,
}

/// The guest command: the runner (timeout, process session, stat lines)
/// around `profmark exec`, which opens the profiler window, runs the
/// program in `/tmp` (as `user` when given) and closes the window.
pub fn command(p: &Invocation, timeout_s: u64, nproc: u32) -> String {
    let mut words = vec![
        "/bench/run".to_string(),
        timeout_s.to_string(),
        "/bench/profmark".into(),
        "exec".into(),
        // 0: the harness reads the op count from the output afterwards
        if p.counts_ops { "0" } else { "1" }.into(),
    ];
    if let Some(uid) = p.user {
        words.extend(["-u".into(), uid.to_string()]);
    }
    words.push(quote(p.program));
    let workers = p.workers.resolve(nproc).to_string();
    for a in p.args {
        let a = a
            .replace("{nproc}", &nproc.to_string())
            .replace("{workers}", &workers)
            .replace("{duration_s}", &p.duration_s.to_string());
        words.push(quote(&a));
    }
    words.join(" ")
}

/// `s` as one word of a POSIX shell: single-quoted, a `'` written `'\''`.
pub fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-=:,+@%".contains(&b))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Parses one repetition: each metric's pattern over stdout then stderr
/// (the `sample` protocol when none is declared), and the op count. A
/// metric that matches nothing fails the repetition with the output's tail.
pub fn parse(metrics: &[MetricSpec], ops: Option<&Pattern>, stdout: &str, stderr: &str) -> Result<Parsed> {
    let mut p = parse_samples(stdout)?;
    if !metrics.is_empty() {
        p.metrics.clear();
    }
    for m in metrics {
        let Some(value) = find(&m.regex, stdout, stderr)? else {
            bail!(
                "metric {}: `{}` matches nothing in the output ({})",
                m.name,
                m.regex.0,
                tail(stdout, stderr)
            );
        };
        p.metrics.push(Measured {
            metric: m.name.clone(),
            value,
            unit: m.unit.clone(),
            higher_is_better: m.higher_is_better,
            series: vec![],
            warmup_series: vec![],
        });
    }
    if let Some(re) = ops {
        match find(re, stdout, stderr)? {
            Some(n) if n >= 1.0 && n.fract() == 0.0 && n < u64::MAX as f64 => p.ops = Some(n as u64),
            Some(n) => bail!("ops: `{}` gave {n}, not a whole count of at least 1", re.0),
            None => bail!(
                "ops: `{}` matches nothing in the output ({})",
                re.0,
                tail(stdout, stderr)
            ),
        }
    }
    if p.metrics.is_empty() {
        bail!(
            "the program printed no sample line and declares no metric ({})",
            tail(stdout, stderr)
        );
    }
    Ok(p)
}

/// The `value` group of the first match in stdout, else in stderr, as a
/// finite number.
fn find(re: &Pattern, stdout: &str, stderr: &str) -> Result<Option<f64>> {
    let r = re.regex();
    let Some(c) = r.captures(stdout).or_else(|| r.captures(stderr)) else {
        return Ok(None);
    };
    let text = c.name("value").map_or("", |v| v.as_str());
    match text.replace(',', "").parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(Some(v)),
        _ => bail!("`{}` matched `{text}`, which is not a finite number", re.0),
    }
}

/// The last lines of the output, for a failure that shows what was printed.
pub fn tail(stdout: &str, stderr: &str) -> String {
    let lines: Vec<&str> = stdout
        .lines()
        .chain(stderr.lines())
        .filter(|l| !l.trim().is_empty() && !is_runner_line(l))
        .collect();
    if lines.is_empty() {
        return "it printed nothing".into();
    }
    let from = lines.len().saturating_sub(3);
    format!("last lines: {}", lines[from..].join(" | "))
}

/// A line the guest runner prints around every program.
fn is_runner_line(l: &str) -> bool {
    ["uptime0 ", "uptime1 ", "stat0 ", "stat1 "]
        .iter()
        .any(|t| l.starts_with(t))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Count, NprocWord};

    fn inv<'a>(args: &'a [String], user: Option<u32>, counts_ops: bool) -> Invocation<'a> {
        Invocation {
            program: "/usr/bin/stress-ng",
            args,
            workers: Count::Named(NprocWord::Nproc),
            duration_s: 7,
            user,
            counts_ops,
        }
    }

    #[test]
    fn arguments_are_quoted_and_placeholders_replaced() {
        let args: Vec<String> = [
            "--pipe",
            "{workers}",
            "-t",
            "{duration_s}s",
            "a b",
            "$(reboot)",
            "it's",
            "",
        ]
        .map(String::from)
        .to_vec();
        let table = [
            (
                inv(&args, None, true),
                "/bench/run 60 /bench/profmark exec 0 /usr/bin/stress-ng --pipe 4 -t 7s 'a b' '$(reboot)' 'it'\\''s' ''",
            ),
            (
                inv(&args[..1], Some(1000), false),
                "/bench/run 60 /bench/profmark exec 1 -u 1000 /usr/bin/stress-ng --pipe",
            ),
        ];
        for (i, want) in table {
            assert_eq!(command(&i, 60, 4), want);
        }
        let built = Invocation {
            program: "/bench/prog/p",
            ..inv(&[], None, false)
        };
        assert_eq!(
            command(&built, 5, 1),
            "/bench/run 5 /bench/profmark exec 1 /bench/prog/p"
        );
    }

    /// The guest's shell reads each quoted word back as written.
    #[test]
    fn quoted_words_reach_the_program_literally() {
        let words = ["a b", "$(echo no)", "it's", "`x`", "\\n", "*", ""];
        let line = words.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ");
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("for a in {line}; do printf '%s\\n' \"$a\"; done"))
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            words.map(|w| format!("{w}\n")).concat()
        );
    }

    fn metric(name: &str, re: &str, hib: bool) -> MetricSpec {
        MetricSpec {
            name: name.into(),
            regex: Pattern(re.into()),
            unit: "u".into(),
            higher_is_better: hib,
        }
    }

    #[test]
    fn metrics_come_from_stdout_then_stderr_and_nothing_matched_fails() {
        // stress-ng 0.15 prints its --metrics-brief table on stderr
        let err = "stress-ng: metrc: [9] stressor       bogo ops real time  usr time  sys time   bogo ops/s     bogo ops/s\n\
                   stress-ng: metrc: [9] pipe             388925      1.00      0.02      0.37    388766.87      980887.91\n";
        let ms = [metric(
            "bogo_ops_per_s",
            r"pipe\s+\d+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+(?P<value>[\d.]+)",
            true,
        )];
        let ops = Pattern(r"pipe\s+(?P<value>\d+)".into());
        let p = parse(&ms, Some(&ops), "uptime0 1 1\n", err).unwrap();
        assert_eq!((p.metrics[0].value, p.ops), (388766.87, Some(388925)));
        let e = parse(
            &ms,
            None,
            "uptime0 1 1\nsomething else\n",
            "stress-ng: error: no pipe\n",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "metric bogo_ops_per_s: `{}` matches nothing in the output (last lines: something else | stress-ng: error: no pipe)",
                ms[0].regex.0
            )
        );
        let e = parse(&ms, Some(&Pattern("x(?P<value>[0-9.]+)".into())), "", err).unwrap_err();
        assert!(
            e.to_string().starts_with("ops: `x(?P<value>[0-9.]+)` matches nothing"),
            "{e}"
        );
        let zero = Pattern(r"(?P<value>0)\.02".into());
        assert!(parse(&ms, Some(&zero), "", err)
            .unwrap_err()
            .to_string()
            .contains("not a whole count"));
    }

    #[test]
    fn without_metrics_the_sample_protocol_is_read() {
        let out = "sample metric=r value=3 unit=x better=higher\n";
        let p = parse(&[], None, out, "").unwrap();
        assert_eq!((p.metrics[0].metric.as_str(), p.metrics[0].value), ("r", 3.0));
        let e = parse(&[], None, "hello\n", "").unwrap_err().to_string();
        assert_eq!(
            e,
            "the program printed no sample line and declares no metric (last lines: hello)"
        );
    }
}
