//! The `harness` binary: everything lives in the library.
fn main() -> std::process::ExitCode {
    harness::cli::main()
}
