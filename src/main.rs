use std::process::ExitCode;

use clap::Parser;

use trendsync::cli::Cli;
use trendsync::cmd::exit_code_for;
use trendsync::error::{is_broken_pipe, is_silent, report};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match trendsync::cmd::run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that went away (`| head`) is not a failure of ours.
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            if !is_silent(&err) {
                tracing::error!("{}", report(&err));
            }
            ExitCode::from(exit_code_for(&err).code())
        }
    }
}
