//! Throw-away network namespaces, and threads and commands that run inside them.
//!
//! A [`Netns`] is created with `ip netns add`, has `lo` up, and is deleted when dropped (also
//! while a panicking test unwinds). Names always start with [`crate::PREFIX`].

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread::JoinHandle;

use crate::PREFIX;

/// Longest Linux interface name (IFNAMSIZ - 1).
pub const IFNAME_MAX: usize = 15;

static NETNS_COUNTER: AtomicU32 = AtomicU32::new(0);
static IFNAME_COUNTER: AtomicU32 = AtomicU32::new(0);

/// Why a namespace operation failed.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    /// A command could not be started at all.
    #[error("could not start `{command}`")]
    Spawn {
        /// The command line.
        command: String,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// A command ran and exited unsuccessfully.
    #[error("`{command}` failed ({status}): {stderr}")]
    CommandFailed {
        /// The command line.
        command: String,
        /// Its exit status.
        status: ExitStatus,
        /// Its standard error, trimmed.
        stderr: String,
    },
    /// `/var/run/netns/<name>` could not be opened.
    #[error("could not open namespace file {path}")]
    Open {
        /// The namespace file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// `setns` refused to move the thread into the namespace.
    #[error("could not enter namespace {name}")]
    Enter {
        /// The namespace name.
        name: String,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// The OS refused to create a thread.
    #[error("could not spawn a thread")]
    Thread(#[source] std::io::Error),
}

/// A network namespace that lives as long as this value.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates `<prefix>-<pid>-<counter>` (with [`PREFIX`] prepended if `prefix` lacks it) and
    /// brings its loopback interface up.
    pub fn create(prefix: &str) -> Result<Netns, NetnsError> {
        let n = NETNS_COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("{}-{}-{n}", with_prefix(prefix), std::process::id());
        run_checked(Command::new("ip").args(["netns", "add", &name]))?;
        let ns = Netns { name };
        run_checked(Command::new("ip").args(["-n", &ns.name, "link", "set", "lo", "up"]))?;
        Ok(ns)
    }

    /// A fresh interface name of at most [`IFNAME_MAX`] bytes: `prefix` (with [`PREFIX`]
    /// prepended if missing, then shortened if needed) + pid in hex + a counter in base 36.
    pub fn unique_ifname(prefix: &str) -> String {
        let n = IFNAME_COUNTER.fetch_add(1, Ordering::Relaxed);
        let suffix = format!("{:x}{}", std::process::id(), base36(n));
        let prefix = with_prefix(prefix);
        let keep = IFNAME_MAX.saturating_sub(suffix.len()).min(prefix.len());
        let mut name = format!("{}{suffix}", &prefix[..keep]);
        name.truncate(IFNAME_MAX);
        name
    }

    /// The namespace's name, as `ip netns` knows it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The bind-mounted namespace file, `/var/run/netns/<name>`.
    pub fn path(&self) -> PathBuf {
        PathBuf::from("/var/run/netns").join(&self.name)
    }

    /// Runs `f` on a new thread inside the namespace and returns its result; a panic in `f` is
    /// re-raised here.
    ///
    /// # Panics
    /// Also panics if the thread cannot enter the namespace; use [`Netns::try_run`] to get that
    /// as an error instead.
    pub fn run<F, R>(&self, f: F) -> R
    where
        F: FnOnce() -> R + Send,
        R: Send,
    {
        match self.try_run(f) {
            Ok(r) => r,
            Err(e) => panic!("Netns::run: {e}"),
        }
    }

    /// Like [`Netns::run`], but failing to open or enter the namespace is an error.
    pub fn try_run<F, R>(&self, f: F) -> Result<R, NetnsError>
    where
        F: FnOnce() -> R + Send,
        R: Send,
    {
        let file = self.open()?;
        let name = self.name.as_str();
        std::thread::scope(|scope| {
            let handle = std::thread::Builder::new()
                .name(format!("ns:{name}"))
                .spawn_scoped(scope, move || -> Result<R, NetnsError> {
                    enter(&file, name)?;
                    Ok(f())
                })
                .map_err(NetnsError::Thread)?;
            match handle.join() {
                Ok(result) => result,
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    }

    /// Starts `f` on a new named thread inside the namespace, for long-running helpers.
    pub fn spawn<F, R>(&self, thread_name: &str, f: F) -> Result<NsThread<R>, NetnsError>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let file = self.open()?;
        let name = self.name.clone();
        let handle = std::thread::Builder::new()
            .name(thread_name.to_owned())
            .spawn(move || -> Result<R, NetnsError> {
                enter(&file, &name)?;
                Ok(f())
            })
            .map_err(NetnsError::Thread)?;
        Ok(NsThread { handle })
    }

    /// `ip netns exec <name> args...`, configured but not started (set stdio as you need).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name]).args(args);
        cmd
    }

    /// Runs `args` inside the namespace and returns its output, whatever its exit status.
    pub fn exec(&self, args: &[&str]) -> Result<Output, NetnsError> {
        let mut cmd = self.command(args);
        cmd.output().map_err(|source| NetnsError::Spawn { command: describe(&cmd), source })
    }

    /// Runs `args` inside the namespace; a non-zero exit is an error. Returns its stdout.
    pub fn exec_ok(&self, args: &[&str]) -> Result<String, NetnsError> {
        run_checked(&mut self.command(args))
    }

    /// Starts `args` inside the namespace (stdin closed, stdout and stderr inherited); the
    /// process is killed when the guard drops.
    pub fn spawn_cmd(&self, args: &[&str]) -> Result<ChildGuard, NetnsError> {
        let mut cmd = self.command(args);
        cmd.stdin(Stdio::null());
        let child = cmd.spawn().map_err(|source| NetnsError::Spawn { command: describe(&cmd), source })?;
        Ok(ChildGuard::new(child))
    }

    fn open(&self) -> Result<File, NetnsError> {
        let path = self.path();
        File::open(&path).map_err(|source| NetnsError::Open { path, source })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if let Err(e) = run_checked(Command::new("ip").args(["netns", "del", &self.name])) {
            eprintln!("warning: could not delete network namespace {}: {e}", self.name);
        }
    }
}

/// A thread started by [`Netns::spawn`].
#[derive(Debug)]
pub struct NsThread<R> {
    handle: JoinHandle<Result<R, NetnsError>>,
}

impl<R> NsThread<R> {
    /// Waits for the thread; a panic in it is re-raised here.
    pub fn join(self) -> Result<R, NetnsError> {
        match self.handle.join() {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }

    /// True once the thread has returned (or panicked).
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }
}

/// A child process that is killed and reaped when the guard drops.
#[derive(Debug)]
pub struct ChildGuard {
    child: Child,
}

impl ChildGuard {
    /// Guards `child`.
    pub fn new(child: Child) -> Self {
        ChildGuard { child }
    }

    /// The guarded child.
    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }

    /// The child's process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            // Errors mean it already exited; either way we reap it below.
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Moves the calling thread into the namespace behind `file`.
fn enter(file: &File, name: &str) -> Result<(), NetnsError> {
    // SAFETY: `file` is an open namespace file that outlives the call; setns with CLONE_NEWNET
    // changes only the calling thread's network namespace and touches no memory of ours.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(NetnsError::Enter { name: name.to_owned(), source: std::io::Error::last_os_error() });
    }
    Ok(())
}

/// Runs `cmd` to completion; a non-zero exit is an error. Returns its stdout.
pub(crate) fn run_checked(cmd: &mut Command) -> Result<String, NetnsError> {
    let command = describe(cmd);
    let out = cmd.output().map_err(|source| NetnsError::Spawn { command: command.clone(), source })?;
    if !out.status.success() {
        return Err(NetnsError::CommandFailed {
            command,
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `cmd` as a readable command line.
pub(crate) fn describe(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|s| s.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

fn with_prefix(prefix: &str) -> String {
    if prefix.starts_with(PREFIX) {
        prefix.to_owned()
    } else {
        format!("{PREFIX}{prefix}")
    }
}

fn base36(mut n: u32) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_names_are_unique_short_and_carry_the_project_prefix() {
        let names: Vec<String> = (0..2000).map(|_| Netns::unique_ifname("slimtap")).collect();
        for name in &names {
            assert!(name.len() <= IFNAME_MAX, "{name} is too long");
            assert!(name.starts_with(PREFIX), "{name} lacks the prefix");
        }
        let mut dedup = names.clone();
        dedup.sort();
        dedup.dedup();
        assert_eq!(dedup.len(), names.len());
        assert!(
            Netns::unique_ifname("veth").starts_with("slimtv"),
            "prefix prepended, then shortened to fit"
        );
    }
}
