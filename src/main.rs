use std::process::ExitCode;

use clap::Parser;

use trendsync::cli::{Cli, LogFormat};
use trendsync::error::{exit_code_for, is_broken_pipe, is_silent, print_failure};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let log_events = cli.global.log_format == LogFormat::Json;
    match trendsync::cmd::run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that went away (`| head`) is not a failure of ours.
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            if !is_silent(&err) {
                print_failure(&err, log_events);
            }
            ExitCode::from(exit_code_for(&err).code())
        }
    }
}
