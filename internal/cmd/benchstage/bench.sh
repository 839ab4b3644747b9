#!/usr/bin/env bash
# bench.sh — airlock's first Stage and Materialize against cp -a and
# tar c | tar x: whole processes, each run from an empty destination, timed
# by hyperfine side by side, plus peak RSS (/usr/bin/time -v).
#
#   internal/cmd/benchstage/bench.sh [shape...]
#
# shapes: standard (20x100, ~25 MB), pages (38,000 files of 128 B–4 KiB,
#         ~80 MB), files100k (100,000 x 1 KiB),
#         large1g (one 1 GiB file; also timed: openssl dgst -sha256 of
#         it, one SHA-256 stream, the floor for hashing it). Default: all
#         four.
#
# The machine may be shared, so each shape is measured in ROUNDS rounds of
# hyperfine over all commands, and the medians (wall time, and CPU time
# user+sys) are taken over every run of every round; ratios are to cp -a in
# the same rounds.
#
# Environment:
#   FS="/dev/shm /var/tmp"  file systems to run on (tmpfs, then disk)
#   RUNS=5 ROUNDS=4         hyperfine --runs per round, rounds
#   RUNS_LARGE=3            --runs per round for large1g
#   BASE_BIN=path           also time this (older) benchstage binary, to
#                           compare before and after in the same rounds
#   MODES="stage materialize"
set -euo pipefail

cd "$(dirname "$0")/../../.."
FS=${FS:-"/dev/shm /var/tmp"}
RUNS=${RUNS:-5}
ROUNDS=${ROUNDS:-4}
RUNS_LARGE=${RUNS_LARGE:-3}
MODES=${MODES:-"stage materialize"}
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=(standard pages files100k large1g)

work=$(mktemp -d /tmp/benchstage.XXXXXX)
BIN=$work/benchstage
go build -o "$BIN" ./internal/cmd/benchstage
base=
cleanup() { rm -rf "$work"; [ -z "$base" ] || rm -rf "$base"; }
trap cleanup EXIT

# peak_kib CMD...: peak RSS of one run of CMD, KiB.
peak_kib() {
	if [ -x /usr/bin/time ]; then
		/usr/bin/time -v "$@" 2>&1 >/dev/null | awk -F': ' '/Maximum resident set size/ {print $2}'
	else
		"$@" -rss 2>&1 >/dev/null | awk '/maxrss_kib/ {print $2}'
	fi
}

for fs in $FS; do
	for shape in "${shapes[@]}"; do
		base=$(mktemp -d "$fs/benchstage.XXXXXX")
		if [ "$shape" = large1g ]; then
			avail=$(df -k --output=avail "$fs" | tail -1)
			if [ "$avail" -lt $((4 * 1024 * 1024)) ]; then
				echo "skipping large1g on $fs: less than 4 GiB free"
				rm -rf "$base"; base=; continue
			fi
		fi
		src=$base/src dst=$base/dst
		"$BIN" -mode gen -shape "$shape" -dst "$src" >/dev/null
		runs=$RUNS
		[ "$shape" = large1g ] && runs=$RUNS_LARGE
		cmds=(
			"cp -a $src $dst/tree"
			"mkdir $dst/tree && tar -C $src -cf - . | tar -C $dst/tree -xf -"
		)
		names=("cp -a" "tar c | tar x")
		if [ "$shape" = large1g ]; then
			# The floor for one large file: a single SHA-256 stream of it
			# (every byte must be hashed once, and one stream is serial).
			cmds+=("openssl dgst -sha256 $(find "$src" -type f -size +1M)")
			names+=("openssl dgst -sha256")
		fi
		for m in $MODES; do
			cmds+=("$BIN -mode $m -src $src -dst $dst")
			names+=("airlock $m")
			if [ -n "${BASE_BIN:-}" ]; then
				cmds+=("$BASE_BIN -mode $m -src $src -dst $dst")
				names+=("airlock $m (base)")
			fi
		done
		echo
		echo "=== $shape on $fs ($(df -T "$fs" | awk 'NR==2 {print $2}')): $(du -sh "$src" | cut -f1), $(find "$src" -type f | wc -l) files; $ROUNDS rounds x $runs runs; load $(cut -d' ' -f1-3 /proc/loadavg)"
		for r in $(seq "$ROUNDS"); do
			hyperfine --style none --warmup 1 --runs "$runs" \
				--prepare "rm -rf $dst; mkdir $dst" \
				--export-json "$work/h$r.json" "${cmds[@]}" >/dev/null
		done
		peaks=()
		for i in "${!cmds[@]}"; do
			rm -rf "$dst"; mkdir "$dst"
			# shellcheck disable=SC2086
			if [ "$i" -ge 2 ]; then kib=$(peak_kib ${cmds[$i]}); else kib=$(peak_kib sh -c "${cmds[$i]}"); fi
			peaks+=("${kib:-0}")
		done
		rm -rf "$dst"
		python3 - "$work" "$ROUNDS" "${peaks[*]}" "${names[@]}" <<'PY'
import json, statistics, sys
work, rounds, peaks, names = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4:]
wall = [[] for _ in names]; cpu = [[] for _ in names]
for r in range(1, rounds + 1):
    for i, res in enumerate(json.load(open(f"{work}/h{r}.json"))["results"]):
        wall[i] += res["times"]
        cpu[i] += [u + s for u, s in zip(res["user"] if isinstance(res["user"], list) else [res["user"]] * len(res["times"]),
                                         res["system"] if isinstance(res["system"], list) else [res["system"]] * len(res["times"]))]
med = lambda xs: statistics.median(xs) * 1e3
w0, c0 = med(wall[0]), med(cpu[0])
print(f"{'command':<26} {'wall ms':>9} {'ratio':>7} {'cpu ms':>9} {'ratio':>7} {'peak MiB':>9}")
for i, n in enumerate(names):
    print(f"{n:<26} {med(wall[i]):9.1f} {med(wall[i])/w0:6.2f}x {med(cpu[i]):9.1f} {med(cpu[i])/c0:6.2f}x {int(peaks[i])/1024:9.1f}")
if "openssl dgst -sha256" in names:
    k = names.index("openssl dgst -sha256")
    for i, n in enumerate(names):
        if n.startswith("airlock"):
            print(f"{n} / openssl dgst -sha256: wall {med(wall[i])/med(wall[k]):.2f}x, cpu {med(cpu[i])/med(cpu[k]):.2f}x")
PY
		rm -rf "$base"; base=
	done
done
