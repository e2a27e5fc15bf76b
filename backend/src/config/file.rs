//! The config file (`--config FILE`): TOML read through serde, with the span of every key kept
//! so that each error names the file, the line and the key.
//!
//! ```toml
//! [daemon]
//! control = "/run/slimtcp/control.sock"   # the control socket (stats, capture)
//! metrics = "127.0.0.1:9464"              # the Prometheus endpoint
//! eal = "-l 0 --vdev=net_tap0,iface=slim0" # DPDK's EAL, when a tenant uses a DPDK port
//! log = "info"                            # the log level (RUST_LOG wins when set)
//!
//! [[tenant]]                              # the keys of a --tenant spec
//! name = "alpha"
//! socket = "/run/slimtcp/alpha.sock"
//! ip = "10.0.1.2/24"
//! tap = "slim-alpha"
//! core = 2
//! ```
//!
//! A tenant table's keys go through the `--tenant` spec's parser ([`RawTenant::set`]), so a
//! setting means the same thing in both places.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};

use toml::Spanned;

use super::tenant::RawTenant;
use super::ConfigError;

/// The `[daemon]` table.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct DaemonTable {
    control: Option<Spanned<PathBuf>>,
    metrics: Option<Spanned<String>>,
    eal: Option<Spanned<String>>,
    log: Option<Spanned<String>>,
}

/// A `[[tenant]]` table as written: keys and values with their spans.
type TenantTable = BTreeMap<Spanned<String>, Spanned<toml::Value>>;

/// The whole file.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FileTables {
    daemon: Option<DaemonTable>,
    #[serde(default)]
    tenant: Vec<Spanned<TenantTable>>,
}

/// The daemon's settings from the file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DaemonSettings {
    /// The control socket's path.
    pub control: Option<PathBuf>,
    /// The Prometheus endpoint's address.
    pub metrics: Option<SocketAddr>,
    /// The EAL's arguments, split at whitespace.
    pub eal: Option<Vec<String>>,
    /// The log level.
    pub log: Option<String>,
}

/// A read config file: its settings, and where each was written for the errors found later.
#[derive(Debug)]
pub(super) struct ConfigFile {
    path: PathBuf,
    text: String,
    pub daemon: DaemonSettings,
    eal_span: Option<Range<usize>>,
    /// The tenants, in file order.
    pub tenants: Vec<RawTenant>,
    /// Per tenant, where its settings were written.
    spans: Vec<TableSpans>,
}

/// Where a `[[tenant]]` table was written: its header, and each key.
#[derive(Debug)]
struct TableSpans {
    header: Range<usize>,
    keys: BTreeMap<String, Range<usize>>,
}

/// Log levels the `log` key takes.
const LOG_LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

impl ConfigFile {
    /// Reads and parses `path`; each setting is checked on its own (the tenants together are
    /// checked by the caller, which reports with [`ConfigFile::tenant_error`]).
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::ReadFile { path: path.to_path_buf(), why: e.to_string() })?;
        let mut file = ConfigFile {
            path: path.to_path_buf(),
            text,
            daemon: DaemonSettings::default(),
            eal_span: None,
            tenants: Vec::new(),
            spans: Vec::new(),
        };
        let tables: FileTables = toml::from_str(&file.text).map_err(|e| {
            let at = e.span().map_or(0, |s| s.start);
            file.error(at, None, e.message().to_owned())
        })?;
        if let Some(d) = tables.daemon {
            file.read_daemon(d)?;
        }
        if tables.tenant.is_empty() {
            return Err(file.error(0, None, "no [[tenant]] table: a daemon serves one or more".into()));
        }
        for table in tables.tenant {
            let header = table.span();
            let mut raw = RawTenant::default();
            let mut keys = BTreeMap::new();
            for (key, value) in table.into_inner() {
                let text = match value.get_ref() {
                    toml::Value::String(s) => s.clone(),
                    toml::Value::Integer(n) => n.to_string(),
                    toml::Value::Boolean(b) => b.to_string(),
                    _ => {
                        let why = "must be a string, an integer or true/false".to_owned();
                        return Err(file.error(key.span().start, Some(key.get_ref()), why));
                    }
                };
                raw.set(key.get_ref(), &text)
                    .map_err(|why| file.error(key.span().start, Some(key.get_ref()), why))?;
                keys.insert(key.get_ref().clone(), key.span());
            }
            file.tenants.push(raw);
            file.spans.push(TableSpans { header, keys });
        }
        Ok(file)
    }

    fn read_daemon(&mut self, d: DaemonTable) -> Result<(), ConfigError> {
        if let Some(control) = d.control {
            let dir =
                control.get_ref().parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
            if !dir.is_dir() {
                let why = format!("directory {} does not exist", dir.display());
                return Err(self.error(control.span().start, Some("control"), why));
            }
            self.daemon.control = Some(control.into_inner());
        }
        if let Some(metrics) = d.metrics {
            let addr = metrics.get_ref().parse().map_err(|_| {
                let why = format!("{:?} is not ADDR:PORT (e.g. 127.0.0.1:9464)", metrics.get_ref());
                self.error(metrics.span().start, Some("metrics"), why)
            })?;
            self.daemon.metrics = Some(addr);
        }
        if let Some(log) = d.log {
            if !LOG_LEVELS.contains(&log.get_ref().as_str()) {
                let why = format!("{:?} is not one of {}", log.get_ref(), LOG_LEVELS.join(", "));
                return Err(self.error(log.span().start, Some("log"), why));
            }
            self.daemon.log = Some(log.into_inner());
        }
        if let Some(eal) = d.eal {
            self.eal_span = Some(eal.span());
            self.daemon.eal = Some(eal.get_ref().split_whitespace().map(str::to_owned).collect());
        }
        Ok(())
    }

    /// `e`, found in tenant `index`, as an error naming the line of the key it is about (the
    /// table's header when the key is not written, e.g. a missing one). An error about the
    /// EAL's cores names the `eal` key.
    pub fn tenant_error(&self, index: usize, e: ConfigError) -> ConfigError {
        if let ConfigError::BadEalCores { .. } = e {
            return self.eal_error(e);
        }
        let Some(table) = self.spans.get(index) else {
            return self.error(0, None, e.to_string());
        };
        let key = e.tenant_key();
        let at = key.and_then(|k| table.keys.get(k)).unwrap_or(&table.header).start;
        let why = e.to_string();
        self.error(at, Some(key.unwrap_or("tenant")), why)
    }

    /// `e`, about the EAL, at the `eal` key (or the file's start when it came from `--dpdk`).
    pub fn eal_error(&self, e: ConfigError) -> ConfigError {
        let at = self.eal_span.as_ref().map_or(0, |s| s.start);
        self.error(at, Some("eal"), e.to_string())
    }

    /// An error at byte `at` of the file.
    fn error(&self, at: usize, key: Option<&str>, why: String) -> ConfigError {
        let line =
            1 + self.text.as_bytes()[..at.min(self.text.len())].iter().filter(|&&b| b == b'\n').count();
        ConfigError::InFile { path: self.path.clone(), line, key: key.map(str::to_owned), why }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, text: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("slimtcp-config-{}-{name}.toml", std::process::id()));
        std::fs::write(&p, text).expect("write the test file");
        p
    }

    #[test]
    fn reads_the_daemon_and_tenant_tables() {
        let p = write(
            "good",
            "[daemon]\ncontrol = \"/tmp/ctl\"\nmetrics = \"127.0.0.1:9464\"\neal = \"-l 0 --no-huge\"\n\
             log = \"debug\"\n\n[[tenant]]\nname = \"a\"\nsocket = \"/tmp/a\"\nip = \"10.0.0.2/24\"\n\
             tap = \"ta\"\ncore = 1\npromiscuous = true\n[[tenant]]\nsocket = \"/tmp/b\"\n\
             ip = \"10.0.1.2/24\"\nport = 0\n",
        );
        let f = ConfigFile::read(&p).expect("valid");
        assert_eq!(f.daemon.control.as_deref(), Some(Path::new("/tmp/ctl")));
        assert_eq!(f.daemon.metrics, Some("127.0.0.1:9464".parse().expect("addr")));
        assert_eq!(f.daemon.eal, Some(vec!["-l".into(), "0".into(), "--no-huge".into()]));
        assert_eq!(f.daemon.log.as_deref(), Some("debug"));
        assert_eq!(f.tenants.len(), 2);
        assert_eq!((f.tenants[0].core, f.tenants[0].promiscuous), (Some(1), Some(true)));
        assert_eq!(f.tenants[1].port, Some(0));
        let _ = std::fs::remove_file(p);
    }

    #[test]
    fn each_error_names_the_file_line_and_key() {
        let cases = [
            (
                "unknown-tenant-key",
                "[[tenant]]\nsocket = \"/tmp/a\"\ncolour = \"red\"\n",
                3,
                "colour: unknown key",
            ),
            (
                "unknown-daemon-key",
                "[daemon]\n\ncontrl = \"/tmp/c\"\n[[tenant]]\n",
                3,
                "unknown field `contrl`",
            ),
            ("bad-mac", "[[tenant]]\n\n\nmac = \"ff:ff:ff:ff:ff:ff\"\n", 4, "mac: mac=ff:ff:ff:ff:ff:ff"),
            (
                "bad-metrics",
                "[daemon]\nmetrics = \"localhost\"\n[[tenant]]\n",
                2,
                "metrics: \"localhost\" is not",
            ),
            (
                "no-control-dir",
                "[daemon]\ncontrol = \"/nonexistent/dir/c\"\n[[tenant]]\n",
                2,
                "control: directory",
            ),
            ("bad-log", "[daemon]\nlog = \"loud\"\n[[tenant]]\n", 2, "log: \"loud\" is not one of"),
            ("array", "[[tenant]]\ncore = [1, 2]\n", 2, "core: must be a string"),
            ("syntax", "[[tenant]]\ncore = \n", 2, ""),
            ("no-tenant", "[daemon]\n", 1, "no [[tenant]] table"),
            ("twice", "[[tenant]]\ncore = 1\ncore = 2\n", 3, ""),
        ];
        for (name, text, line, says) in cases {
            let p = write(name, text);
            let e = ConfigFile::read(&p).expect_err(name).to_string();
            let at = format!("{}:{line}: ", p.display());
            assert!(e.starts_with(&at), "{name}: {e:?} does not start with {at:?}");
            assert!(e.contains(says), "{name}: {e:?} does not say {says:?}");
            assert!(!e.contains('\n'), "{name}: one line: {e:?}");
            let _ = std::fs::remove_file(p);
        }
    }

    #[test]
    fn a_tenant_error_found_later_names_its_key_or_its_table() {
        let p = write("later", "[[tenant]]\nsocket = \"/tmp/a\"\n\n[[tenant]]\nname = \"b\"\n\ncore = 7\n");
        let f = ConfigFile::read(&p).expect("valid on its own");
        let e = f.tenant_error(1, ConfigError::BadQueues(0)).to_string();
        assert!(e.starts_with(&format!("{}:4: queues: ", p.display())), "the table's header: {e}");
        let e = f.tenant_error(1, ConfigError::BadCore { core: 7, allowed: "0-1".into() }).to_string();
        assert!(e.starts_with(&format!("{}:7: core: ", p.display())), "the key's line: {e}");
        let _ = std::fs::remove_file(p);
    }
}
