//! `trendsync completions SHELL`

use anyhow::Result;
use clap::CommandFactory;

use crate::cli::Cli;

pub fn run(shell: clap_complete::Shell) -> Result<()> {
    clap_complete::generate(
        shell,
        &mut Cli::command(),
        "trendsync",
        &mut std::io::stdout(),
    );
    Ok(())
}
