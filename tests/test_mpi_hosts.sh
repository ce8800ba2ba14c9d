#!/usr/bin/env bash
# Data parallelism across hosts, for real: three "hosts" of the test's own
# on this machine (network namespaces, each with its own hostname and
# temporary directory, joined by veth pairs to a bridge in a fourth), and
# Open MPI over TCP between them (`--mca btl tcp,self`: no shared memory),
# mpirun starting its daemons on each host through a launch agent that
# enters the host's namespace where ssh would log in. Checks:
#  - one rank runs on each host, and the training traffic crosses the veth
#    links (the bytes they carried);
#  - tests/mpi_check equal on 2 and 3 hosts: N ranks with batch 12/N train
#    as one process with batch 12 (SGD and Adam, static and eager);
#  - tests/mpi_check train on 3 hosts: nb_train over the ranks, checkpoint
#    and resume;
#  - tests/mpi_check lost on 3 hosts (`mpirun --enable-recovery`): the rank
#    on host 2 kills itself in the middle of epoch 2, the others stop
#    within the 3 s timeout naming it.
# Skipped, saying so, without root, without `ip netns` (containers often
# forbid it), or without MPI. The namespaces are always removed.
set -euo pipefail
build=$1
src=$2
source "$(dirname "$0")/mpi_env.bash"
skip() { echo "skipped: $*"; exit 0; }
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root"
if grep -q '^NABLA_TSAN:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
    skip "Open MPI's TCP transport takes its own locks in an order ThreadSanitizer reports" \
        "(mca_btl_tcp_add_procs); the plain and ASan+UBSan builds run this test"
fi
command -v ip >/dev/null || skip "ip is not installed (make test installs iproute2)"

hosts=3
tag=nb$$ # names of this run's namespaces and links
net=10.77.0
out=$(mktemp -d)
made=()
cleanup() {
    for ns in "${made[@]}"; do
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
        ip netns del "$ns" 2>/dev/null || true
    done
    rm -rf "$out"
}
trap cleanup EXIT
addns() { ip netns add "$1" 2>"$out/err" && made+=("$1"); }
addns "${tag}sw" || skip "ip netns add is not permitted here: $(cat "$out/err")"
ip -n "${tag}sw" link add br0 type bridge 2>"$out/err" || skip "no bridge in a namespace: $(cat "$out/err")"
ip -n "${tag}sw" link set br0 up
for i in $(seq 0 $((hosts - 1))); do
    ns=${tag}h$i
    addns "$ns" || skip "ip netns add: $(cat "$out/err")"
    ip link add "${tag}v$i" type veth peer name eth0 netns "$ns" 2>"$out/err" ||
        skip "no veth pairs here: $(cat "$out/err")"
    ip link set "${tag}v$i" netns "${tag}sw"
    ip -n "${tag}sw" link set "${tag}v$i" master br0 up
    ip -n "$ns" addr add "$net.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    mkdir -p "$out/tmp$i"
    echo "$net.$((i + 1)) slots=2" >>"$out/hostfile"
done

# Each host its own hostname where unshare can give one (Open MPI tells
# nodes apart by name) and its own temporary directory (session files).
uts=""
unshare --uts true 2>/dev/null && uts="unshare --uts"
# The launch agent, called as `agent HOST COMMAND...` with a command for a
# remote shell, as ssh is.
cat >"$out/agent" <<AGENT
#!/usr/bin/env bash
host=\$1; shift
i=\$(( \${host##*.} - 1 ))
exec ip netns exec ${tag}h\$i $uts sh -c "${uts:+hostname host\$i; }export TMPDIR=$out/tmp\$i; \$*"
AGENT
chmod +x "$out/agent"
# mpirun on host 0, its daemons on the others, every byte over TCP on the
# veth network.
mpirun_hosts() { # NP COMMAND...
    local np=$1
    shift
    timeout 180 ip netns exec "${tag}h0" $uts sh -c "${uts:+hostname host0; }export TMPDIR=$out/tmp0; exec \"\$@\"" sh \
        mpirun --hostfile "$out/hostfile" -np "$np" --map-by node --mca plm_rsh_agent "$out/agent" \
        --mca btl tcp,self --mca btl_tcp_if_include "$net.0/24" --mca oob_tcp_if_include "$net.0/24" "$@"
}
rx() { ip netns exec "${tag}h$1" cat /sys/class/net/eth0/statistics/rx_bytes; }
pass=0 fail=0
expect() { # NAME COUNT FILE RC
    local oks
    oks=$(grep -c ': ok ' "$3" || true)
    if [ "$oks" -eq "$2" ] && ! grep -Eq 'FAIL|Sanitizer|runtime error' "$3" && [ "$4" -eq 0 ]; then
        echo "ok   $1 ($oks checks)"; pass=$((pass + 1))
    else
        echo "FAIL $1: $oks of $2 checks passed (exit $4)"; cat "$3"; fail=$((fail + 1))
    fi
}

rc=0
before=$(rx 1)
mpirun_hosts $hosts sh -c 'echo "rank $OMPI_COMM_WORLD_RANK on $(hostname) at $(ip -o -4 addr show eth0 | awk "{print \$4}")"' \
    >"$out/where" 2>&1 || rc=$?
placed=$(grep -c '^rank [0-9] on .* at 10\.77\.0\.[0-9]*/24$' "$out/where" || true)
addresses=$(sed -n 's/.* at //p' "$out/where" | sort -u | wc -l)
launch=$(( $(rx 1) - before )) # what starting a job alone carries
if [ $rc -eq 0 ] && [ "$placed" -eq $hosts ] && [ "$addresses" -eq $hosts ]; then
    echo "ok   one rank on each of $hosts hosts ($launch bytes to host 1 to start it): $(sort "$out/where" | tr '\n' ';')"
    pass=$((pass + 1))
else
    echo "FAIL placement: $placed ranks placed on $addresses addresses (exit $rc)"; cat "$out/where"; fail=$((fail + 1))
fi

for np in 2 $hosts; do
    before=$(rx 1)
    rc=0
    mpirun_hosts $np "$build/tests/mpi_check" equal >"$out/equal$np" 2>&1 || rc=$?
    moved=$(( $(rx 1) - before ))
    expect "equal over TCP, $np hosts (host 1 received $moved bytes)" $((np * 4)) "$out/equal$np" $rc
    if [ "$moved" -lt $((launch + 50000)) ]; then
        echo "FAIL host 1's link carried $moved bytes, starting a job $launch: the ranks did not talk over it"
        fail=$((fail + 1))
    fi
done
mkdir -p "$out/train"
rc=0
mpirun_hosts $hosts "$build/tests/mpi_check" train "$out/train" >"$out/train.log" 2>&1 || rc=$?
expect "train over TCP, $hosts hosts" $hosts "$out/train.log" $rc
mkdir -p "$out/lost"
rc=0
NABLA_COMM_TIMEOUT=3 mpirun_hosts $hosts -x NABLA_COMM_TIMEOUT --enable-recovery "$build/tests/mpi_check" lost "$out/lost" \
    $((hosts - 1)) >"$out/lost.log" 2>&1 || rc=$?
[ $rc -ne 124 ] || echo "mpirun timed out: a rank hung" >>"$out/lost.log"
expect "rank $((hosts - 1)) killed over TCP: the $((hosts - 1)) others stop naming it" $((hosts - 1)) "$out/lost.log" 0
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
