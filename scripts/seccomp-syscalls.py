#!/usr/bin/env python3
"""The system calls slimtcp-vhost's filtered threads made, from an `strace -f` log.

How the allow-lists in backend/src/sandbox/allow.rs are derived (docs/operating.md, "Sandboxing"):

    strace -f -qq -o /tmp/trace.txt target/release/slimtcp-vhost ...        # the binary
    strace -f -qq -o /tmp/trace.txt target/release/deps/e2e_guest_tap-...   # an in-process test
    scripts/seccomp-syscalls.py [-v] /tmp/trace.txt [more traces ...]

A thread counts from the moment it installs a filter (its `seccomp(SECCOMP_SET_MODE_FILTER, ...)`
call): a thread named `*-worker` is a worker, any other a control thread. A thread cloned by a
filtered thread inherits its kind (the filter goes with it). Calls made before the filter (the
set-up) do not count. Prints, per kind, every system call made with its count, and the calls
that the filter refused (SIGSYS), which are the ones to add if they are legitimate. With -v,
also the first line of each call (its arguments tell what it was for).
"""

import re
import sys
from collections import Counter, defaultdict

LINE = re.compile(r"^(\d+)\s+(.*)$")
CALL = re.compile(r"^([a-z_0-9]+)\(")
RESUMED = re.compile(r"^<\.\.\. ([a-z_0-9]+) resumed>.*=\s*(-?\d+)")
RETURN = re.compile(r"=\s*(-?\d+)(?:\s|$)")
NAME = re.compile(r'^prctl\(PR_SET_NAME, "([^"]*)"')
SIGSYS = re.compile(r"^--- SIGSYS \{.*si_syscall=(?:__NR_)?([a-z_0-9]+)")


def analyse(paths):
    kind = {}  # tid -> "worker" | "control"
    name = {}  # tid -> thread name
    calls = defaultdict(Counter)
    first = defaultdict(dict)
    refused = defaultdict(Counter)
    threads = defaultdict(set)
    pending_clone = {}  # tid -> True while its clone/clone3 is unfinished

    def child(tid, ret):
        if tid in kind and ret > 0:
            kind[ret] = kind[tid]
            threads[kind[tid]].add(f"{ret} (cloned by {name.get(tid, tid)})")

    for path in paths:
        with open(path, errors="replace") as f:
            for raw in f:
                m = LINE.match(raw.rstrip("\n"))
                if not m:
                    continue
                tid, rest = int(m.group(1)), m.group(2)
                if rest.startswith("<..."):
                    r = RESUMED.match(rest)
                    if r and r.group(1) in ("clone", "clone3") and pending_clone.pop(tid, None):
                        child(tid, int(r.group(2)))
                    continue
                s = SIGSYS.match(rest)
                if s and tid in kind:
                    refused[kind[tid]][s.group(1)] += 1
                    continue
                c = CALL.match(rest)
                if not c:
                    continue
                call = c.group(1)
                n = NAME.match(rest)
                if n:
                    name[tid] = n.group(1)
                if call == "seccomp" and "SECCOMP_SET_MODE_FILTER" in rest:
                    length = re.search(r"len=(\d+)", rest)
                    k = "control" if length and int(length.group(1)) < 32 else "worker"
                    if tid not in kind:
                        kind[tid] = k
                        threads[k].add(f"{tid} ({name.get(tid, '?')})")
                    continue
                if tid in kind:
                    calls[kind[tid]][call] += 1
                    first[kind[tid]].setdefault(call, f"{name.get(tid, tid)}: {rest[:160]}")
                if call in ("clone", "clone3"):
                    if "<unfinished" in rest:
                        pending_clone[tid] = True
                    else:
                        r = RETURN.search(rest)
                        if r:
                            child(tid, int(r.group(1)))
    return calls, refused, threads, first


def main():
    args = sys.argv[1:]
    verbose = bool(args) and args[0] == "-v"
    args = args[1:] if verbose else args
    if not args:
        sys.exit(__doc__)
    calls, refused, threads, first = analyse(args)
    for k in ("worker", "control"):
        print(f"== {k}: {len(threads[k])} threads, {len(calls[k])} distinct system calls")
        for call, n in sorted(calls[k].items()):
            print(f"  {call:24} {n}" + (f"    {first[k][call]}" if verbose else ""))
        if refused[k]:
            print(f"  refused (SIGSYS): {', '.join(sorted(refused[k]))}")


if __name__ == "__main__":
    main()
