//! `slimtcp-perf` (see `slimtcp-perf --help` and the crate documentation). Exit codes: 0 done,
//! 1 the run failed, 2 bad arguments; errors are one line on stderr.

use std::io::Write;
use std::process::ExitCode;

use slimtcp::report::error_chain;
use slimtcp_perf::cli::{parse_or_exit, split_eal, Args, EXIT_USAGE};
use slimtcp_perf::config::Config;
use slimtcp_perf::meter::Interval;

/// Exit code for a failed run.
const EXIT_FAILURE: u8 = 1;

fn main() -> ExitCode {
    let (eal, ours) = split_eal(std::env::args().skip(1).collect());
    let args: Args = match parse_or_exit("slimtcp-perf", ours) {
        Ok(args) => args,
        Err(code) => return code,
    };
    let cfg = match Config::try_from((eal, args)) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("slimtcp-perf: error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let json = cfg.json;
    let mss = cfg.mss;
    let mut progress = |i: &Interval| {
        let line = i.paper_line(mss);
        if json {
            let _ = writeln!(std::io::stderr(), "{line}");
        } else {
            let _ = writeln!(std::io::stdout(), "{line}");
        }
    };
    match slimtcp_perf::run::run(&cfg, &mut progress) {
        Ok(summary) => {
            println!("{}", if json { summary.to_json() } else { summary.human() });
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("slimtcp-perf: error: {}", error_chain(&e));
            ExitCode::from(EXIT_FAILURE)
        }
    }
}
