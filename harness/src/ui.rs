//! What the user sees while a run goes: an indicatif bar (stage and cell)
//! when stderr is a terminal, plain timestamped lines otherwise, and
//! one-line notices. Nothing here decides anything.

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
        Ui { bar, start: Instant::now(), quiet }
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

    /// A one-line notice, always shown.
    pub fn notice(&self, msg: &str) {
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
