//! The VMM configurations of `vmm-configs/` and the VM demo that boots one of them.
//!
//! - the libvirt domain validates against libvirt's own schema (`virt-xml-validate`), and a
//!   broken copy does not (so the check is real);
//! - every script there (and `scripts/demo-vm.sh`) is valid bash;
//! - the QEMU script prints its usage, rejects bad arguments, and builds the vhost-user command
//!   line SlimTCP needs (`--dry-run`), from flags and from the environment;
//! - the cloud-hypervisor file says it is untested; the README lists every file;
//! - `scripts/demo-vm.sh` (what `make demo-vm` runs, booting QEMU through the QEMU script)
//!   passes: the bytes the guest sent equal the bytes Linux received, and the echo is verified.
//!
//! Missing tools (virt-xml-validate, QEMU, the guest image, root) skip a test with a SKIP line,
//! or fail it when `SLIMTCP_REQUIRE_NETNS` is set, as under `make test`.

mod vm;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use slimtcp_system_tests::{slimtcp_vhost_bin, workspace_bin, workspace_root};
use vm::{skip_because, TempDir};

fn configs() -> PathBuf {
    workspace_root().join("vmm-configs")
}

fn qemu_script() -> PathBuf {
    configs().join("qemu").join("slimtcp-vm.sh")
}

fn cloud_hypervisor_script() -> PathBuf {
    configs().join("cloud-hypervisor").join("slimtcp-vm.sh")
}

fn libvirt_domain() -> PathBuf {
    configs().join("libvirt").join("slimtcp-vm.xml")
}

/// Every file under `dir`, recursively, sorted.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("read {}: {e}", d.display())) {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `script ARGS` with a clean `SLIMTCP_VM_*` environment plus `env`.
fn run(script: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(script);
    cmd.args(args);
    for (key, _) in std::env::vars() {
        if key.starts_with("SLIMTCP_VM_") || key.starts_with("SLIMTCP_CH_") {
            cmd.env_remove(key);
        }
    }
    cmd.envs(env.iter().copied());
    cmd.output().unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()))
}

/// The QEMU command line `--dry-run` prints (one argument a line), program name first.
fn dry_run(args: &[&str], env: &[(&str, &str)]) -> Vec<String> {
    let mut all = vec!["--dry-run"];
    all.extend_from_slice(args);
    let out = run(&qemu_script(), &all, env);
    assert!(out.status.success(), "--dry-run {args:?} failed: {}", text(&out.stderr));
    text(&out.stdout).lines().map(str::to_owned).collect()
}

/// The value after option `opt` (the first, or the one whose value starts with `prefix`).
fn value_of<'a>(argv: &'a [String], opt: &str, prefix: &str) -> &'a str {
    argv.windows(2)
        .find(|w| w[0] == opt && w[1].starts_with(prefix))
        .map(|w| w[1].as_str())
        .unwrap_or_else(|| panic!("no {opt} {prefix}... in {argv:?}"))
}

/// A readable file to stand in for a kernel, an initrd or a disk image.
fn stand_in(dir: &Path, name: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, b"not really a kernel").expect("stand-in file");
    path.to_str().expect("utf-8 path").to_owned()
}

#[test]
fn the_libvirt_domain_validates_against_libvirts_schema() {
    // virt-xml-validate is a shell script around xmllint (a separate package in Debian 12).
    let missing = [("virt-xml-validate", "libvirt-clients"), ("xmllint", "libxml2-utils")]
        .into_iter()
        .find_map(|(tool, package)| {
            Command::new(tool).arg("--version").output().err().map(|e| {
                format!("{tool} not found ({e}); run scripts/install-deps.sh (Debian package {package})")
            })
        });
    if skip_because("vmm_configs libvirt", missing) {
        return;
    }
    let domain = libvirt_domain();
    let out =
        Command::new("virt-xml-validate").arg(&domain).arg("domain").output().expect("virt-xml-validate");
    assert!(
        out.status.success() && format!("{}{}", text(&out.stdout), text(&out.stderr)).contains("validates"),
        "{} does not validate:\n{}{}",
        domain.display(),
        text(&out.stdout),
        text(&out.stderr)
    );

    // The same domain with an element libvirt does not know must fail: the schema is really used.
    let dir = TempDir::new("vmm-configs-xml");
    let broken = dir.0.join("broken.xml");
    let xml = std::fs::read_to_string(&domain).expect("domain XML");
    assert!(xml.contains("<model type='virtio'/>"), "the domain's interface has no virtio model");
    std::fs::write(&broken, xml.replace("<model type='virtio'/>", "<model type='virtio'/><slimtcp/>"))
        .expect("broken copy");
    let out =
        Command::new("virt-xml-validate").arg(&broken).arg("domain").output().expect("virt-xml-validate");
    assert!(!out.status.success(), "virt-xml-validate accepted an unknown element: {}", text(&out.stdout));
}

#[test]
fn the_libvirt_domain_attaches_a_vhost_user_net_device_over_shared_memory() {
    let xml = std::fs::read_to_string(libvirt_domain()).expect("domain XML");
    for needle in [
        "<interface type='vhostuser'>",
        "<source type='unix' path='/run/slimtcp/tenant0.sock' mode='client'>",
        "<model type='virtio'/>",
        "<driver queues='2'/>",
        "<source type='memfd'/>",
        "<access mode='shared'/>",
        "machine='q35'",
        "hugepages=64",
    ] {
        assert!(xml.contains(needle), "the libvirt domain lacks {needle}");
    }
}

#[test]
fn every_vmm_config_script_is_valid_executable_bash() {
    let mut scripts: Vec<PathBuf> =
        files_under(&configs()).into_iter().filter(|p| p.extension().is_some_and(|e| e == "sh")).collect();
    assert!(scripts.len() >= 2, "no scripts under vmm-configs: {scripts:?}");
    scripts.push(workspace_root().join("scripts").join("demo-vm.sh"));
    for script in scripts {
        let out = Command::new("bash").arg("-n").arg(&script).output().expect("bash -n");
        assert!(out.status.success(), "bash -n {}: {}", script.display(), text(&out.stderr));
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&script).expect("metadata").permissions(),
        );
        assert!(mode & 0o111 != 0, "{} is not executable", script.display());
    }
}

#[test]
fn the_qemu_script_explains_itself() {
    for flag in ["--help", "-h"] {
        let out = run(&qemu_script(), &[flag], &[]);
        assert!(out.status.success(), "{flag} failed: {}", text(&out.stderr));
        let usage = text(&out.stdout);
        assert!(usage.starts_with("Usage: slimtcp-vm.sh --socket PATH"), "{usage}");
        for option in [
            "--socket",
            "--kernel",
            "--initrd",
            "--disk",
            "--append",
            "--queues",
            "--memory",
            "--accel",
            "--dry-run",
            "SLIMTCP_VM_SOCKET",
            "SLIMTCP_VM_QUEUES",
        ] {
            assert!(usage.contains(option), "the usage text does not mention {option}:\n{usage}");
        }
    }
}

#[test]
fn the_qemu_script_rejects_what_cannot_boot() {
    let dir = TempDir::new("vmm-configs-bad");
    let kernel = stand_in(&dir.0, "vmlinux");
    let disk = stand_in(&dir.0, "disk.qcow2");
    let cases: [(&[&str], &str); 7] = [
        (&[], "--socket is required"),
        (&["--socket", "/s"], "give --kernel (and --initrd) or --disk"),
        (&["--socket", "/s", "--kernel", &kernel, "--disk", &disk], "exclude each other"),
        (&["--socket", "/s", "--kernel", &kernel, "--queues", "0"], "--queues must be 1..=64"),
        (&["--socket", "/s", "--kernel", &kernel, "--accel", "hvf"], "--accel must be auto, tcg or kvm"),
        (&["--socket", "/s", "--kernel", "/nonexistent/vmlinux"], "cannot read /nonexistent/vmlinux"),
        (&["--socket", "/s", "--kernel", &kernel, "--bogus"], "unknown argument '--bogus'"),
    ];
    for (args, why) in cases {
        let out = run(&qemu_script(), args, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?} was accepted: {}", text(&out.stdout));
        let err = text(&out.stderr);
        assert!(err.contains(why), "{args:?}: expected {why:?} in {err:?}");
        assert!(out.stdout.is_empty(), "{args:?} printed a command line");
    }
}

#[test]
fn the_qemu_script_builds_the_vhost_user_command_line() {
    let dir = TempDir::new("vmm-configs-qemu");
    let kernel = stand_in(&dir.0, "vmlinux");
    let initrd = stand_in(&dir.0, "initrd.gz");
    let args = [
        "--socket",
        "/run/t0.sock",
        "--queues",
        "4",
        "--memory",
        "2G",
        "--kernel",
        &kernel,
        "--initrd",
        &initrd,
        "--append",
        "slimvm.run=1",
        "--debug-exit",
        "--",
        "-S",
    ];
    let argv = dry_run(&args, &[]);
    assert_eq!(argv[0], "qemu-system-x86_64");
    assert_eq!(value_of(&argv, "-machine", ""), "q35");
    assert_eq!(value_of(&argv, "-m", ""), "2G");
    // All guest RAM is the shared memfd (node 0's memory), the size of -m.
    assert_eq!(
        value_of(&argv, "-object", "memory-backend-memfd"),
        "memory-backend-memfd,id=mem,size=2G,share=on"
    );
    assert_eq!(value_of(&argv, "-numa", ""), "node,memdev=mem");
    assert_eq!(value_of(&argv, "-chardev", ""), "socket,id=slimtcp0,path=/run/t0.sock,reconnect-ms=1000");
    assert_eq!(value_of(&argv, "-netdev", ""), "vhost-user,id=slimtcp0,chardev=slimtcp0,queues=4");
    assert_eq!(
        value_of(&argv, "-device", "virtio-net-pci"),
        "virtio-net-pci,netdev=slimtcp0,mq=on,disable-legacy=on"
    );
    assert_eq!(value_of(&argv, "-device", "isa-debug-exit"), "isa-debug-exit,iobase=0xf4,iosize=0x04");
    assert_eq!(value_of(&argv, "-kernel", ""), kernel);
    assert_eq!(value_of(&argv, "-initrd", ""), initrd);
    assert_eq!(value_of(&argv, "-append", ""), "console=ttyS0 panic=-1 hugepages=64 slimvm.run=1");
    assert_eq!(argv.last().map(String::as_str), Some("-S"), "arguments after -- go to QEMU last");

    // TCG unless the CPU has hardware virtualisation (a kvm-pvm /dev/kvm alone is not enough).
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let hw_virt = cpuinfo.split_whitespace().any(|w| w == "vmx" || w == "svm");
    let accel = value_of(&argv, "-accel", "");
    if hw_virt {
        assert!(accel == "kvm" || accel == "tcg", "{accel}");
    } else {
        assert_eq!(accel, "tcg", "no vmx/svm in /proc/cpuinfo, yet -accel {accel}");
        assert_eq!(value_of(&argv, "-cpu", ""), "max");
    }
    assert_eq!(
        value_of(&dry_run(&["--socket", "/s", "--kernel", &kernel, "--accel", "kvm"], &[]), "-cpu", ""),
        "host"
    );
}

#[test]
fn the_qemu_script_takes_its_settings_from_the_environment_too() {
    let dir = TempDir::new("vmm-configs-env");
    let disk = stand_in(&dir.0, "guest.img");
    let env = [
        ("SLIMTCP_VM_SOCKET", "/run/t1.sock"),
        ("SLIMTCP_VM_DISK", disk.as_str()),
        ("SLIMTCP_VM_QUEUES", "3"),
        ("SLIMTCP_VM_MEMORY", "768M"),
        ("SLIMTCP_VM_RECONNECT_MS", "0"),
        ("SLIMTCP_VM_HOST_HUGEPAGES", "1"),
    ];
    let argv = dry_run(&[], &env);
    assert_eq!(value_of(&argv, "-netdev", ""), "vhost-user,id=slimtcp0,chardev=slimtcp0,queues=3");
    assert_eq!(value_of(&argv, "-chardev", ""), "socket,id=slimtcp0,path=/run/t1.sock");
    assert_eq!(
        value_of(&argv, "-object", "memory-backend-memfd"),
        "memory-backend-memfd,id=mem,size=768M,share=on,hugetlb=on,hugetlbsize=2M"
    );
    // A disk boots its own command line: no -kernel, no -append; .img is raw.
    assert_eq!(value_of(&argv, "-drive", ""), format!("file={disk},if=virtio,format=raw"));
    assert!(!argv.iter().any(|a| a == "-kernel" || a == "-append"), "{argv:?}");
    // Flags win over the environment.
    let argv = dry_run(&["--queues", "2"], &env);
    assert_eq!(value_of(&argv, "-netdev", ""), "vhost-user,id=slimtcp0,chardev=slimtcp0,queues=2");
}

#[test]
fn the_cloud_hypervisor_command_line_says_it_is_untested() {
    let script = cloud_hypervisor_script();
    let body = std::fs::read_to_string(&script).expect("cloud-hypervisor script");
    let header: String = body.lines().take(4).collect::<Vec<_>>().join("\n");
    assert!(header.contains("# UNTESTED: cloud-hypervisor cannot boot guests"), "{header}");
    for needle in [
        "--memory \"size=$memory,shared=on\"",
        "vhost_user=true",
        "vhost_mode=client",
        "num_queues=$((2 * queues))",
    ] {
        assert!(body.contains(needle), "{} lacks {needle}", script.display());
    }
    let out = run(&script, &["--help"], &[]);
    assert!(out.status.success(), "--help failed: {}", text(&out.stderr));
    assert!(text(&out.stdout).contains("UNTESTED"), "its usage text does not say it is untested");
    let out = run(&script, &["--kernel", "/k"], &[]);
    assert_eq!(out.status.code(), Some(2), "no --socket was accepted");
}

#[test]
fn the_readme_lists_every_config_and_how_it_is_tested() {
    let readme = std::fs::read_to_string(configs().join("README.md")).expect("vmm-configs/README.md");
    for file in files_under(&configs()) {
        let rel =
            file.strip_prefix(configs()).expect("under vmm-configs").to_str().expect("utf-8").to_owned();
        if rel == "README.md" {
            continue;
        }
        let row = readme
            .lines()
            .find(|l| l.starts_with(&format!("| [{rel}]")))
            .unwrap_or_else(|| panic!("vmm-configs/README.md has no row for {rel}"));
        assert!(
            ["**Run**", "**Validated, not booted**", "**Untested**"].iter().any(|s| row.contains(s)),
            "the README's row for {rel} does not say whether a test runs it: {row}"
        );
    }
    let makefile = std::fs::read_to_string(workspace_root().join("Makefile")).expect("Makefile");
    assert!(makefile.contains("./scripts/demo-vm.sh"), "make demo-vm does not run scripts/demo-vm.sh");
    let demo =
        std::fs::read_to_string(workspace_root().join("scripts").join("demo-vm.sh")).expect("demo-vm.sh");
    assert!(
        demo.contains("QEMU_SCRIPT=vmm-configs/qemu/slimtcp-vm.sh"),
        "the VM demo does not boot the QEMU script"
    );
}

/// `make demo-vm`'s script, for real: QEMU through vmm-configs/qemu/slimtcp-vm.sh, slimtcp-perf
/// in the guest sending to Linux, a verified echo, equal byte counts.
#[test]
fn the_vm_demo_boots_the_qemu_script_and_its_bytes_add_up() {
    slimtcp_testkit::require_netns!("vmm_configs demo-vm");
    let Some((_vm_lock, kernel, initrd)) = vm::require_vm("vmm_configs demo-vm", true) else { return };
    let vm_dir = kernel.parent().expect("image directory");
    assert!(initrd.starts_with(vm_dir), "{} is not beside {}", initrd.display(), kernel.display());
    let script = workspace_root().join("scripts").join("demo-vm.sh");
    let out = Command::new(&script)
        .env("VM_DIR", vm_dir)
        .env("DEMO_VM_SECONDS", "3")
        .env("DEMO_VM_BACKEND", slimtcp_vhost_bin())
        .env("DEMO_VM_PERF", workspace_bin("slimtcp-perf"))
        .output()
        .expect("scripts/demo-vm.sh");
    let stdout = text(&out.stdout);
    let context = format!("--- stdout ---\n{stdout}\n--- stderr ---\n{}", text(&out.stderr));
    assert!(out.status.success(), "the VM demo failed ({}):\n{context}", out.status);
    assert!(stdout.lines().any(|l| l.trim_start().starts_with("pps=")), "no live pps= lines:\n{context}");
    assert!(stdout.contains("bytes         : equal"), "{context}");
    assert!(stdout.contains("echo          : echo ok 200 messages of 64 B"), "{context}");
    let figure = |label: &str| -> u64 {
        let line = stdout
            .lines()
            .find(|l| l.trim_start().starts_with(label))
            .unwrap_or_else(|| panic!("no {label}:\n{context}"));
        let value = line.split(':').nth(1).and_then(|v| v.split_whitespace().next());
        value.and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("no byte count in {line:?}"))
    };
    let sent = figure("guest sent");
    assert!(sent > 0, "{context}");
    assert_eq!(sent, figure("Linux received"), "{context}");
    eprintln!("vmm_configs demo-vm: guest sent = Linux received = {sent} B");
}

/// The daemon's example config file, with its paths moved into `dir` and its `core =` lines
/// removed (the example pins five cores; test machines have fewer).
fn daemon_example_here(dir: &Path) -> String {
    let text = std::fs::read_to_string(configs().join("daemon").join("slimtcp-vhost.toml")).expect("example");
    text.replace("/run/slimtcp", dir.to_str().expect("utf-8 path"))
        .lines()
        .filter(|l| !l.trim_start().starts_with("core ="))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_daemons_example_config_passes_check() {
    let dir = TempDir::new("daemon-example");
    let file = dir.0.join("slimtcp-vhost.toml");
    std::fs::write(&file, daemon_example_here(&dir.0)).expect("config");
    let out = Command::new(slimtcp_vhost_bin())
        .args(["check", "--config", file.to_str().expect("utf-8 path")])
        .output()
        .expect("check runs");
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    // Built with DPDK, the whole file is valid; without it, the EAL is the one thing refused,
    // and it is checked last: every tenant passed before.
    let valid = out.status.success() && stdout.contains("valid, 3 tenants");
    let only_dpdk_missing = out.status.code() == Some(2)
        && stderr.contains(": eal: --dpdk needs DPDK support")
        && stderr.lines().count() == 1;
    assert!(valid || only_dpdk_missing, "check: {stdout}{stderr}");
    // A broken copy is refused, naming the line (so the check is real).
    let broken = daemon_example_here(&dir.0).replace("ip = \"10.2.0.2/24\"", "ip = \"10.2.0.2/33\"");
    std::fs::write(&file, broken).expect("config");
    let out = Command::new(slimtcp_vhost_bin())
        .args(["check", "--config", file.to_str().expect("utf-8 path")])
        .output()
        .expect("check runs");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains(": ip: ip=10.2.0.2/33"), "{}", text(&out.stderr));
}

#[test]
fn the_daemons_systemd_unit_verifies_and_drains_on_stop() {
    let unit = std::fs::read_to_string(configs().join("daemon").join("slimtcp-vhost.service")).expect("unit");
    for line in ["ExecReload=/bin/kill -HUP $MAINPID", "KillSignal=SIGTERM", "RuntimeDirectory=slimtcp"] {
        assert!(unit.contains(line), "the unit lacks {line}");
    }
    let missing = Command::new("systemd-analyze").arg("--version").output().err();
    if skip_because("vmm_configs systemd unit", missing.map(|e| format!("systemd-analyze: {e}"))) {
        return;
    }
    let dir = TempDir::new("daemon-unit");
    let copy = dir.0.join("slimtcp-vhost.service");
    let bin = slimtcp_vhost_bin();
    std::fs::write(&copy, unit.replace("/usr/local/bin/slimtcp-vhost", bin.to_str().expect("utf-8 path")))
        .expect("unit copy");
    let out = Command::new("systemd-analyze").arg("verify").arg(&copy).output().expect("systemd-analyze");
    assert!(out.status.success() && text(&out.stderr).trim().is_empty(), "{}", text(&out.stderr));
}
