//! `trendsync completions SHELL`

use std::io::Write;

use anyhow::{Context, Result};
use clap::CommandFactory;

use crate::cli::Cli;

pub fn run(shell: clap_complete::Shell) -> Result<()> {
    // Generated into memory first: the generators panic on a failed write, and stdout
    // may be a full disk or a closed pipe.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "trendsync", &mut script);
    std::io::stdout()
        .lock()
        .write_all(&script)
        .context("writing the completion script to stdout")
}
