//! The command line: outcomes to exit codes, the error line, `--help`.

use super::*;
use clap::CommandFactory;

#[test]
fn an_error_prints_its_chain_once_after_error() {
    let e = anyhow::anyhow!("/tmp/x is not a run directory").context("open the run");
    assert_eq!(error_text(&e), "error: open the run: /tmp/x is not a run directory");
    let e = anyhow::anyhow!("no such file")
        .context("read run.json")
        .context("resume /tmp/r");
    assert_eq!(error_text(&e), "error: resume /tmp/r: read run.json: no such file");
    // issue 47: a name quoting U+202E would reorder the terminal's line
    let e = anyhow::anyhow!("1 problem(s):\n  benchmarks[0].name: `a\u{202e}b` must be ...").context("load the matrix");
    assert_eq!(
        error_text(&e),
        "error: load the matrix: 1 problem(s):\n  benchmarks[0].name: `a\\u{202e}b` must be ..."
    );
}

#[test]
fn the_help_lists_every_exit_code() {
    let help = Cli::command().render_help().to_string();
    for e in Exit::ALL {
        assert!(help.contains(&format!("{:>3}  {}", e.code(), e.meaning())), "{help}");
    }
}

#[test]
fn the_command_line_is_consistent() {
    Cli::command().debug_assert();
}
