//! The cores DPDK's EAL takes (`-l`, `-c`, `--lcores` in `--dpdk`), so that no worker is pinned
//! onto one of them.

use slimtcp::cpu::CpuSet;

use super::ConfigError;

/// The CPUs the EAL's lcores run on, when the arguments name them (`None`: DPDK's default, every
/// core, with the main lcore on the first; nothing to check against).
pub(super) fn eal_cpus(args: &[String]) -> Result<Option<CpuSet>, ConfigError> {
    let mut found = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (opt, value) = match a.as_str() {
            "-l" | "-c" | "--lcores" => (a.as_str(), it.next().map(String::as_str)),
            s if s.starts_with("--lcores=") => ("--lcores", Some(&s["--lcores=".len()..])),
            s if s.starts_with("-l") && s.len() > 2 => ("-l", Some(&s[2..])),
            s if s.starts_with("-c") && s.len() > 2 => ("-c", Some(&s[2..])),
            _ => continue,
        };
        let bad = |value: &str| ConfigError::BadEalCores { opt: opt.to_owned(), value: value.to_owned() };
        let value = value.ok_or_else(|| bad(""))?;
        let set = match opt {
            "-c" => core_mask(value),
            "-l" => value.parse().ok(),
            _ => lcores_cpus(value),
        }
        .ok_or_else(|| bad(value))?;
        found = Some(set);
    }
    Ok(found)
}

/// `-c 0x3`: a hexadecimal mask of cores.
fn core_mask(mask: &str) -> Option<CpuSet> {
    let digits = mask.strip_prefix("0x").or_else(|| mask.strip_prefix("0X")).unwrap_or(mask);
    if digits.is_empty() {
        return None;
    }
    let mut set = CpuSet::empty();
    for (i, d) in digits.chars().rev().enumerate() {
        let nibble = d.to_digit(16)?;
        for bit in 0..4 {
            if nibble & (1 << bit) != 0 {
                set.insert(i * 4 + bit).ok()?;
            }
        }
    }
    Some(set)
}

/// `--lcores 0-1,(2-3)@4,5@(6,7)`: lcore sets, each on the CPUs after its `@` or, without one,
/// on the CPUs of the same numbers.
fn lcores_cpus(spec: &str) -> Option<CpuSet> {
    let mut set = CpuSet::empty();
    let mut depth = 0usize;
    let mut start = 0;
    let mut items = Vec::new();
    for (i, ch) in spec.char_indices() {
        match ch {
            '(' => depth += 1,
            ')' => depth = depth.checked_sub(1)?,
            ',' if depth == 0 => {
                items.push(&spec[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return None;
    }
    items.push(&spec[start..]);
    for item in items {
        let cpus = item.rsplit_once('@').map_or(item, |(_, cpus)| cpus);
        let part: CpuSet = cpus.trim_start_matches('(').trim_end_matches(')').parse().ok()?;
        set.extend(&part);
    }
    Some(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    fn cpus(s: &str) -> String {
        eal_cpus(&args(s)).expect("valid").map_or("default".into(), |c| c.to_string())
    }

    #[test]
    fn the_eals_cores_in_each_form() {
        assert_eq!(cpus("--no-pci -l 0-2,5 --vdev=net_tap0"), "0-2,5");
        assert_eq!(cpus("-l1"), "1");
        assert_eq!(cpus("-c 0x6"), "1-2");
        assert_eq!(cpus("-cf0"), "4-7");
        assert_eq!(cpus("--lcores 0-1,(2-3)@4,5@(6,7)"), "0-1,4,6-7");
        assert_eq!(cpus("--lcores=3"), "3");
        assert_eq!(cpus("--no-huge -m 256"), "default");
    }

    #[test]
    fn a_form_that_does_not_parse_is_an_error() {
        for bad in ["-l", "-l 3-1", "-l x", "-c 0xg", "--lcores (1-2@3"] {
            assert!(eal_cpus(&args(bad)).is_err(), "{bad}");
        }
    }
}
