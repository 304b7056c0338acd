use std::process::ExitCode;

use clap::Parser;

use trendsync::cli::Cli;
use trendsync::error::{SilentExit, exit_code_for};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match trendsync::cmd::run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that went away (`| head`) is not a failure of ours.
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            if !err.is::<SilentExit>() {
                tracing::error!("{err:#}");
            }
            ExitCode::from(exit_code_for(&err).code())
        }
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        let kind = c
            .downcast_ref::<std::io::Error>()
            .map(std::io::Error::kind)
            .or_else(|| {
                c.downcast_ref::<serde_json::Error>()
                    .and_then(serde_json::Error::io_error_kind)
            });
        kind == Some(std::io::ErrorKind::BrokenPipe)
    })
}
