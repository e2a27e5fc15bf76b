//! `slimtcp-vhost`: see `slimtcp-vhost --help` and docs/operating.md.

use std::process::ExitCode;

use clap::Parser;
use slimtcp_vhost::config::{Args, Command, Config};
use slimtcp_vhost::server::StopHandle;

/// Exit code for bad command-line arguments.
const EXIT_USAGE: u8 = 2;
/// Exit code for runtime failures.
const EXIT_FAILURE: u8 = 1;

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
    if let Some(Command::Check { config }) = &args.command {
        return match Config::from_file(config) {
            Ok(c) => {
                println!("{}: valid, {} tenants", config.display(), c.tenants.len());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("slimtcp-vhost: error: {e}");
                ExitCode::from(EXIT_USAGE)
            }
        };
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
