use std::process::ExitCode;

use clap::Parser;

use trendsync::cli::{Cli, LogFormat};
use trendsync::cmd::exit_code_for;
use trendsync::error::{is_broken_pipe, is_silent, print_failure};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let log_events = cli.global.log_format == LogFormat::Json;
    match trendsync::cmd::run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that went away (`| head`) is not a failure of ours.
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            let code = exit_code_for(&err);
            if !is_silent(&err) {
                print_failure(&err, code, log_events);
            }
            ExitCode::from(code.code())
        }
    }
}
