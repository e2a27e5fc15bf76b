//! `slimtcp-vhost`: see `slimtcp-vhost --help` and docs/operating.md.

use std::process::ExitCode;

use std::time::Duration;

use clap::Parser;
use slimtcp_vhost::config::{Args, Command, Config};
use slimtcp_vhost::daemon::client;
use slimtcp_vhost::server::StopHandle;

/// Exit code for bad command-line arguments.
const EXIT_USAGE: u8 = 2;
/// Exit code for runtime failures.
const EXIT_FAILURE: u8 = 1;

/// The subcommands: `check`, `stats`, `capture`.
fn run_command(command: &Command) -> ExitCode {
    let result = match command {
        Command::Check { config } => match Config::from_file(config) {
            Ok(c) => {
                println!("{}: valid, {} tenants", config.display(), c.tenants.len());
                return ExitCode::SUCCESS;
            }
            Err(e) => {
                eprintln!("slimtcp-vhost: error: {e}");
                return ExitCode::from(EXIT_USAGE);
            }
        },
        Command::Stats { control, json, watch, interval } => {
            let interval = Duration::try_from_secs_f64(*interval).unwrap_or(Duration::from_secs(1));
            client::stats(control, *json, *watch, interval)
        }
        Command::Capture { control, tenant, file, seconds, count } => {
            client::capture(control, tenant, file, *seconds, *count).map(|frames| {
                println!("{frames} frames of {tenant} captured to {}", file.display());
            })
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("slimtcp-vhost: error: {}", slimtcp_vhost::error_chain(&e));
            ExitCode::from(EXIT_FAILURE)
        }
    }
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let line = slimtcp::report::usage_error_line(&e.to_string());
            eprintln!("slimtcp-vhost: error: {line} (see --help)");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if let Some(command) = &args.command {
        return run_command(command);
    }
    let config = match Config::try_from(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("slimtcp-vhost: error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    slimtcp_vhost::log_limit::init(config.log.as_deref().unwrap_or("info"));
    match slimtcp_vhost::start_backend(&config, &StopHandle::default()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("slimtcp-vhost: error: {}", slimtcp_vhost::error_chain(&e));
            ExitCode::from(EXIT_FAILURE)
        }
    }
}
