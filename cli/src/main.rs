//! `tessera`: parses the command line and hands it to the library.

use clap::Parser;

fn main() -> std::process::ExitCode {
    // A media child (sandboxed FFmpeg work) is this same binary; serve it and exit if asked.
    tessera_farm::sandbox::run_child_if_requested();
    let cli = tessera_cli::Cli::parse();
    tessera_cli::main_with(cli)
}
