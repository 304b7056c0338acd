//! `trendsync man [COMMAND]`: a man page, in roff, from the clap definitions `--help`
//! shows: the main page, or one command's (`trendsync-run(1)`, `trendsync-budget-charge(1)`),
//! the pages the main one lists.

use std::io::Write;

use anyhow::{Context, Result};
use clap::CommandFactory;

use crate::cli::Cli;
use crate::error::UsageError;

pub fn run(path: &[String]) -> Result<()> {
    let mut cmd = Cli::command();
    // Built, so that each command knows its full name (`trendsync-budget-charge`).
    cmd.build();
    let mut page_of = &cmd;
    for name in path {
        page_of = page_of.find_subcommand(name).ok_or_else(|| {
            let known: Vec<&str> = page_of.get_subcommands().map(|c| c.get_name()).collect();
            UsageError(format!(
                "no command {:?} to show the page of; use one of: {}",
                path.join(" "),
                known.join(", ")
            ))
        })?;
    }
    // Rendered into memory first, as the completions are: stdout may be a full disk or
    // a closed pipe, and the page is written once, whole.
    let mut page = Vec::new();
    clap_mangen::Man::new(page_of.clone())
        // Every page names the program and its version; a command's own would be its
        // name alone ("run "), since only the program has a version.
        .source(format!("trendsync {}", env!("CARGO_PKG_VERSION")))
        .render(&mut page)
        .context("rendering the man page")?;
    std::io::stdout()
        .lock()
        .write_all(&page)
        .context("writing the man page to stdout")
}
