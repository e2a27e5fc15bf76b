#!/usr/bin/env bash
# Deletes network namespaces and interfaces left behind by crashed tests. Only names starting
# with the project prefix (slimt) are touched; safe to run any time, also with nothing to do.
set -uo pipefail

PREFIX=${SLIMTCP_NETNS_PREFIX:-slimt}
removed=0

# Namespaces (deleting one also deletes the interfaces inside it).
while read -r ns _; do
    [[ $ns == "$PREFIX"* ]] || continue
    # Stop processes still inside it (by pid, only those in this namespace).
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    if ip netns del "$ns" 2>/dev/null; then removed=$((removed + 1)); else echo "cleanup-netns: could not delete namespace $ns" >&2; fi
done < <(ip netns list 2>/dev/null)

# Interfaces in the root namespace (TAPs, veth ends).
while read -r dev; do
    [[ $dev == "$PREFIX"* ]] || continue
    # Deleting one veth end removes its peer too.
    ip link show dev "$dev" >/dev/null 2>&1 || continue
    if ip link del "$dev" 2>/dev/null; then removed=$((removed + 1)); else echo "cleanup-netns: could not delete interface $dev" >&2; fi
done < <(ip -o link show 2>/dev/null | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }')

echo "cleanup-netns: removed $removed leftover namespace(s)/interface(s) named $PREFIX*"
exit 0
