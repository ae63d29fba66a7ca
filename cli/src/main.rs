//! `tessera`: parses the command line and hands it to the library.

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = tessera_cli::Cli::parse();
    tessera_cli::main_with(cli)
}
