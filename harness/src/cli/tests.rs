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
