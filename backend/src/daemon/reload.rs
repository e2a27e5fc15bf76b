//! SIGHUP: the config file read again, and the tenants it adds or removes started or stopped
//! without touching the others. What cannot change while running (a running tenant's
//! settings, the `[daemon]` table, the EAL) is refused with a warning naming it: the process
//! keeps what it runs.

use crate::config::{Config, TenantSpec};

use super::tenants::TenantSet;

/// Reads `current`'s config file again and applies what may change while running; `current`
/// becomes what runs. Returns the tenants started.
pub fn reload(current: &mut Config, tenants: &mut TenantSet) -> usize {
    let Some(args) = current.reload.clone() else {
        log::warn!("SIGHUP: no config file to read again (started without --config)");
        return 0;
    };
    let new = match Config::try_from(args) {
        Ok(c) => c,
        Err(e) => {
            log::error!("SIGHUP: configuration not reloaded: {e}");
            return 0;
        }
    };
    for (what, changed) in [
        ("the control socket", new.control != current.control),
        ("the metrics address", new.metrics != current.metrics),
        ("the EAL arguments", new.eal_args != current.eal_args),
        ("the log level", new.log != current.log),
    ] {
        if changed {
            log::warn!("SIGHUP: {what} changed: that needs a restart; kept as it was");
        }
    }
    let running: Vec<TenantSpec> = tenants.specs().cloned().collect();
    let mut kept = Vec::new();
    for old in &running {
        match new.tenants.iter().find(|t| t.name == old.name) {
            None => {
                log::info!("SIGHUP: tenant {} removed: stopping it", old.name);
                tenants.stop(&old.name);
            }
            Some(t) if t != old => {
                log::warn!(
                    "SIGHUP: tenant {} changed: that needs its removal and a new name, or a restart; \
                     it keeps running as it was",
                    old.name
                );
                kept.push(old.clone());
            }
            Some(_) => kept.push(old.clone()),
        }
    }
    let mut started = 0;
    for spec in new.tenants.iter().filter(|t| !running.iter().any(|r| r.name == t.name)) {
        match tenants.start(spec.clone()) {
            Ok(()) => {
                log::info!("SIGHUP: tenant {} added", spec.name);
                kept.push(spec.clone());
                started += 1;
            }
            Err(e) => log::error!("SIGHUP: tenant {} not started: {}", spec.name, crate::error_chain(&e)),
        }
    }
    current.tenants = kept;
    started
}
