//! What the user sees while a run goes: an indicatif bar (stage and cell)
//! when stderr is a terminal, plain timestamped lines otherwise, and
//! one-line notices. Text that may come from a guest (console lines, program
//! output) is escaped here so that no control sequence reaches the terminal.
//! Nothing here decides anything.

use std::io::IsTerminal;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

/// Progress reporting for a run.
pub struct Ui {
    bar: Option<ProgressBar>,
    start: Instant,
    quiet: bool,
}

impl Ui {
    /// A UI drawing bars only on a terminal; `quiet` silences progress lines.
    pub fn new(total: u64, quiet: bool) -> Ui {
        let tty = std::io::stderr().is_terminal() && std::env::var_os("HARNESS_NO_PROGRESS").is_none();
        let bar = (tty && !quiet).then(|| {
            let b = ProgressBar::new(total);
            b.set_style(
                ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {prefix:>8} {wide_msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            b.enable_steady_tick(std::time::Duration::from_millis(250));
            b
        });
        Ui {
            bar,
            start: Instant::now(),
            quiet,
        }
    }

    /// A new stage/cell message.
    pub fn stage(&self, stage: &str, msg: &str) {
        match &self.bar {
            Some(b) => {
                b.set_prefix(stage.to_string());
                b.set_message(msg.to_string());
            }
            None if !self.quiet => eprintln!("[{:>6.0}s] {stage}: {msg}", self.start.elapsed().as_secs_f64()),
            None => {}
        }
    }

    /// One unit of work done.
    pub fn inc(&self) {
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }

    /// A one-line notice, always shown; control characters are escaped.
    pub fn notice(&self, msg: &str) {
        let msg = printable(msg);
        match &self.bar {
            Some(b) => b.println(format!("notice: {msg}")),
            None => eprintln!("notice: {msg}"),
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// A notice outside a run's progress display (readers of run files).
pub fn notice(msg: &str) {
    eprintln!("notice: {}", printable(msg));
}

/// `s` with every control character escaped (`\x1b`, `\n`, `\u{9b}`), so
/// a guest's escape sequences print as text on one line; so are the
/// bidirectional overrides and isolates (`\u{202e}`), which would reorder
/// the text around them.
pub fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push('\t'),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() || is_bidi(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// `s` as [`printable`] makes it, but for its line breaks, which are
/// kept: a message of several lines that may quote the user's or a
/// guest's bytes.
pub fn printable_lines(s: &str) -> String {
    s.split('\n').map(printable).collect::<Vec<_>>().join("\n")
}

/// The bidirectional marks, embeddings, overrides and isolates.
fn is_bidi(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_keep_their_breaks_and_lose_their_escapes() {
        assert_eq!(
            printable_lines("1 problem(s):\n  name: `a\u{202e}b\x1b[2J`\r"),
            "1 problem(s):\n  name: `a\\u{202e}b\\x1b[2J`\\r"
        );
    }

    #[test]
    fn bidi_overrides_are_escaped() {
        assert_eq!(
            printable("exec\u{202e}sdrawkcab\u{2066}x"),
            "exec\\u{202e}sdrawkcab\\u{2066}x"
        );
        assert_eq!(printable("é ↑ ≈ — 1.5×"), "é ↑ ≈ — 1.5×");
    }

    #[test]
    fn control_characters_are_escaped() {
        let console = "\u{1b}[2J\u{1b}]0;owned\u{7}BUG: x\r\nnext\u{9b}31m\ttab é";
        let p = printable(console);
        assert_eq!(p, "\\x1b[2J\\x1b]0;owned\\x07BUG: x\\r\\nnext\\u{9b}31m\ttab é");
        assert!(!p.chars().any(|c| c.is_control() && c != '\t'), "{p:?}");
    }
}
