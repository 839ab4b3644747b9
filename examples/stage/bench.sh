#!/usr/bin/env bash
# bench.sh times examples/stage against the usual ways to copy a tree, on
# the standard benchmark tree (internal/treegen Standard: 2,000 files,
# about 25 MB), over a throwaway OpenSSH sshd on 127.0.0.1 and locally:
#
#   1. first copy over SSH, into an empty destination:
#      examples/stage, tar c | ssh tar x, rsync -a -e ssh, scp -r
#   2. unchanged re-stage vs rsync's no-op
#   3. one changed file vs rsync and a bare `ssh true`, cold (a process
#      each) and warm (one open remote.Host; rsync over ControlMaster)
#   4. local target vs cp -a
#
# Every command is timed whole (process start, SSH handshake, copy). It
# uses hyperfine when installed (--runs RUNS, --export-json into the work
# directory; hyperfine runs one contender's runs back to back), else a
# bash loop that alternates the contenders run by run; it prints a
# markdown table of medians and ratios (NO_HYPERFINE=1 forces the loop).
# It installs nothing: a missing
# tool is skipped with a message. Nothing outside the work directory
# (under $TMPDIR, removed on exit unless KEEP=1) is touched.
#
# SHAPE=pages uses the 38,000-file tree (internal/treegen Pages) instead;
# TMPDIR picks the file system of the host tree and of the sandbox;
# SCENARIOS="ssh-one-changed ssh-unchanged" runs only those; NO_SCP=1 leaves
# scp -r out (minutes on a 38,000-file tree on disk); BASE_BIN=path times
# another commit's examples/stage beside it, as "airlock-base"; FLOOR=1
# adds to the first copy a tar file made beforehand and sent to tar x over
# ssh (the sandbox's side alone).
#
#   examples/stage/bench.sh            # RUNS=10
#   RUNS=5 TMPDIR=/dev/shm examples/stage/bench.sh
#   RUNS=5 SHAPE=pages TMPDIR=/var/tmp examples/stage/bench.sh
#
# EXT4_RAM=1 (root, Linux) runs on an ext4 file system made for the run on
# a loop device backed by a file on /dev/shm, mounted under the work
# directory's parent and removed at exit: ext4's own costs without a
# disk's write-back, which on a VM sets every contender's time.
#   EXT4_RAM=1 RUNS=11 SHAPE=pages examples/stage/bench.sh
set -euo pipefail

RUNS=${RUNS:-10}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
ext4_mnt=""
ext4_img=""
if [[ ${EXT4_RAM:-0} == 1 ]]; then
	for t in mkfs.ext4 mount umount; do
		command -v "$t" >/dev/null 2>&1 || { echo "bench.sh: EXT4_RAM=1 needs $t" >&2; exit 1; }
	done
	[[ $(id -u) == 0 ]] || { echo "bench.sh: EXT4_RAM=1 needs root (mount -o loop)" >&2; exit 1; }
	ext4_img=$(mktemp /dev/shm/airlock-bench-ext4.XXXXXX)
	ext4_mnt=$(mktemp -d /tmp/airlock-bench-ext4.XXXXXX)
	truncate -s "${EXT4_SIZE:-6G}" "$ext4_img"
	mkfs.ext4 -q -F "$ext4_img"
	if ! mount -o loop "$ext4_img" "$ext4_mnt"; then
		rm -f "$ext4_img"; rmdir "$ext4_mnt"
		echo "bench.sh: EXT4_RAM=1: mount -o loop failed (no loop devices here?)" >&2
		exit 1
	fi
	export TMPDIR=$ext4_mnt
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/airlock-bench.XXXXXX")
sshd_pid=""

cleanup() {
	if [[ -n $sshd_pid ]]; then kill "$sshd_pid" 2>/dev/null || true; wait "$sshd_pid" 2>/dev/null || true; fi
	if [[ ${KEEP:-0} == 1 ]]; then echo "kept $work" >&2; else rm -rf "$work"; fi
	if [[ -n $ext4_mnt ]]; then
		if [[ ${KEEP:-0} == 1 ]]; then
			echo "kept $ext4_mnt mounted (from $ext4_img): umount $ext4_mnt && rm $ext4_img" >&2
		else
			umount "$ext4_mnt" && rmdir "$ext4_mnt" && rm -f "$ext4_img"
		fi
	fi
}
trap cleanup EXIT

have() { command -v "$1" >/dev/null 2>&1; }
skip() { echo "bench.sh: skipping $1" >&2; }

have go || { echo "bench.sh: go is required" >&2; exit 1; }

echo "== building examples/stage and generating the tree in $work" >&2
(cd "$repo" && go build -o "$work/stage" ./examples/stage && go build -o "$work/gentree" ./examples/stage/internal/gentree)
"$work/gentree" "$work/src" "${SHAPE:-standard}" >&2
src=$work/src
dst=$work/dst
state=$work/state
mkdir -p "$dst"

# --- the throwaway sshd ------------------------------------------------------

sshd_bin=/usr/sbin/sshd
ssh_ok=1
for t in ssh ssh-keygen "$sshd_bin"; do
	have "$t" || { skip "the SSH benchmarks: $t is not installed"; ssh_ok=0; }
done

free_port() {
	local p
	for _ in $(seq 50); do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return 0; fi
	done
	return 1
}

if [[ $ssh_ok == 1 ]]; then
	s=$work/ssh
	mkdir -m 700 "$s"
	port=$(free_port)
	user=$(id -un)
	ssh-keygen -q -t ed25519 -N '' -C bench-host -f "$s/host_ed25519"
	ssh-keygen -q -t ed25519 -N '' -C bench-client -f "$s/id_ed25519"
	cp "$s/id_ed25519.pub" "$s/authorized_keys"
	echo "[127.0.0.1]:$port $(cat "$s/host_ed25519.pub")" >"$s/known_hosts"
	sftp_server=internal-sftp
	cat >"$s/sshd_config" <<-EOF
		Port $port
		ListenAddress 127.0.0.1
		HostKey $s/host_ed25519
		AuthorizedKeysFile $s/authorized_keys
		PidFile $s/sshd.pid
		UsePAM no
		StrictModes no
		PubkeyAuthentication yes
		PasswordAuthentication no
		KbdInteractiveAuthentication no
		PermitRootLogin prohibit-password
		Subsystem sftp $sftp_server
		LogLevel ERROR
	EOF
	cat >"$s/ssh_config" <<-EOF
		Host bench
		  HostName 127.0.0.1
		  Port $port
		  User $user
		  IdentityFile $s/id_ed25519
		  IdentitiesOnly yes
		  UserKnownHostsFile $s/known_hosts
		  StrictHostKeyChecking yes
		  BatchMode yes
		  ControlMaster no
		  ControlPath none
	EOF
	"$sshd_bin" -D -f "$s/sshd_config" -e 2>"$s/sshd.log" &
	sshd_pid=$!
	for _ in $(seq 50); do
		ssh -F "$s/ssh_config" bench true 2>/dev/null && break
		sleep 0.1
	done
	if ! ssh -F "$s/ssh_config" bench true; then
		skip "the SSH benchmarks: the throwaway sshd does not answer ($(tail -3 "$s/sshd.log"))"
		ssh_ok=0
	fi
	SSH="ssh -F $s/ssh_config"
	AIRLOCK_SSH="-ssh-config $s/ssh_config"
	to="ssh://bench"
fi

# --- timing ------------------------------------------------------------------

results=$work/results.tsv # scenario, contender, median seconds
: >"$results"

# bench SCENARIO SETUP PREPARE NAME CMD [NAME CMD]...: times each CMD RUNS
# times, each run after PREPARE, after SETUP once, and appends the medians.
bench() {
	local scenario=$1 setup=$2 prepare=$3
	shift 3
	if [[ -n ${SCENARIOS:-} && " $SCENARIOS " != *" $scenario "* ]]; then return; fi
	local names=() cmds=()
	while (($#)); do names+=("$1"); cmds+=("$2"); shift 2; done
	echo "== $scenario" >&2
	if [[ ${NO_HYPERFINE:-0} != 1 ]] && have hyperfine; then
		local args=(--runs "$RUNS" --warmup 1 --style basic --export-json "$work/$scenario.json")
		[[ -n $setup ]] && args+=(--setup "$setup")
		[[ -n $prepare ]] && args+=(--prepare "$prepare")
		local i
		for i in "${!cmds[@]}"; do args+=(--command-name "${names[$i]}" "${cmds[$i]}"); done
		hyperfine "${args[@]}" >&2
		local medians
		mapfile -t medians < <(grep -o '"median": *[0-9.eE+-]*' "$work/$scenario.json" | sed 's/.*: *//')
		for i in "${!names[@]}"; do printf '%s\t%s\t%s\n' "$scenario" "${names[$i]}" "${medians[$i]}" >>"$results"; done
		return
	fi
	[[ -n $setup ]] && bash -c "$setup"
	local r i t0 t1
	declare -A times=()
	for ((r = 0; r <= RUNS; r++)); do # run 0 is the warmup
		for i in "${!cmds[@]}"; do    # alternate the contenders
			[[ -n $prepare ]] && bash -c "$prepare"
			t0=$(date +%s%N)
			bash -c "${cmds[$i]}" >/dev/null
			t1=$(date +%s%N)
			((r > 0)) && times[$i]+="$(((t1 - t0) / 1000)) "
		done
	done
	for i in "${!names[@]}"; do
		local med
		med=$(tr ' ' '\n' <<<"${times[$i]}" | grep . | sort -n | awk '{a[NR]=$1} END {m = NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2; printf "%.6f", m / 1e6}')
		printf '%s\t%s\t%s\n' "$scenario" "${names[$i]}" "$med" >>"$results"
	done
}

empty="rm -rf $dst $state $state-base && mkdir -p $dst"
stage_ssh="$work/stage -src $src -to $to$dst/airlock -state $state ${AIRLOCK_SSH:-}"
# BASE_BIN=path (an examples/stage binary of another commit) is timed too,
# as "airlock-base", into its own directory and index.
base=()
if [[ -n ${BASE_BIN:-} ]]; then
	base_ssh="$BASE_BIN -src $src -to $to$dst/base -state $state-base ${AIRLOCK_SSH:-}"
	base=(airlock-base "$base_ssh")
fi

if [[ $ssh_ok == 1 ]]; then
	cold=(airlock "$stage_ssh" "${base[@]}" "tar | ssh tar x" "tar -C $src -cf - . | $SSH bench 'mkdir -p $dst/tar && tar -C $dst/tar -xf -'")
	if have rsync; then cold+=("rsync -a -e ssh" "rsync -a -e '$SSH' $src/ bench:$dst/rsync/"); else skip "rsync: not installed"; fi
	if [[ ${NO_SCP:-0} == 1 ]]; then skip "scp -r: NO_SCP=1"; elif have scp; then cold+=("scp -r" "scp -q -r -F $s/ssh_config $src bench:$dst/scp"); else skip "scp: not installed"; fi
	# FLOOR=1 also times the sandbox's side alone: a tar file made before
	# the runs, sent by ssh to tar x (no host tree read, no hash): what any
	# tar-over-SSH copy pays for the SSH session, sshd's receive and tar's
	# extraction, when both ends share this machine's cores.
	if [[ ${FLOOR:-0} == 1 ]]; then
		tar -C "$src" -cf "$work/src.tar" .
		cold+=("floor: ready tar file | ssh tar x" "$SSH bench 'mkdir -p $dst/floor && tar -C $dst/floor -xf -' <$work/src.tar")
	fi
	bench ssh-first "" "$empty" "${cold[@]}"

	if have rsync; then
		# The first stage (setup) leaves the sandbox copy and the index record.
		both="$empty && $stage_ssh >/dev/null && rsync -a -e '$SSH' $src/ bench:$dst/rsync/"
		[[ -z ${BASE_BIN:-} ]] || both="$both && $base_ssh >/dev/null"
		bench ssh-unchanged "$both" "" airlock "$stage_ssh" "${base[@]}" "rsync no-op" "rsync -a -e '$SSH' $src/ bench:$dst/rsync/"

		# Each run first rewrites one file (same size, new bytes).
		one=$src/skill-03/file-005.txt
		size=$(stat -c %s "$one")
		change="head -c $size /dev/urandom >$one.new && mv $one.new $one"
		# "ssh true" is the floor of any tool that opens one SSH session.
		bench ssh-one-changed "$both" "$change" airlock "$stage_ssh" "${base[@]}" "rsync" "rsync -a -e '$SSH' $src/ bench:$dst/rsync/" "ssh true" "$SSH bench true"

		# The same on a warm connection, as a host process that keeps its
		# remote.Host open stages again (internal/cmd/benchwarm): rsync over
		# a ControlMaster connection beside it, and a bare command.
		if [[ -z ${SCENARIOS:-} || " $SCENARIOS " == *" ssh-one-changed-warm "* ]]; then
			echo "== ssh-one-changed-warm" >&2
			(cd "$repo" && go build -o "$work/benchwarm" ./internal/cmd/benchwarm)
			"$work/benchwarm" -ssh-config "$s/ssh_config" -src "$src" -root "$dst/warm" -file "$one" -rsync-dst "$dst/rsync-warm" -runs "$RUNS" |
				while IFS=$'\t' read -r name med; do
					[[ $name == "airlock (warm Host)" ]] && name=airlock
					printf 'ssh-one-changed-warm\t%s\t%s\n' "$name" "$med" >>"$results"
				done
		fi
	else
		skip "the re-stage benchmarks: rsync is not installed"
	fi
fi

if have cp; then
	bench local-first "" "$empty" airlock "$work/stage -src $src -to $dst/airlock -state $state" "cp -a" "cp -a $src $dst/cp"
fi

# --- the table -----------------------------------------------------------------

target() {
	case "$1/$2" in
	ssh-first/tar*) echo "≤ 1.00x" ;;
	ssh-first/rsync*) echo "≤ 0.67x" ;;
	ssh-unchanged/rsync*) echo "≤ 0.25x" ;;
	ssh-one-changed*/rsync*) echo "≤ 0.50x" ;;
	*) echo "—" ;;
	esac
}

echo
echo "Tree: $(find "$src" -type f | wc -l) files, $(find "$src" -type f -printf '%s\n' | awk '{s += $1} END {print s}') bytes; work directory on $(df -T "$work" | awk 'NR==2 {print $2}')${ext4_mnt:+ (EXT4_RAM: a loop device on /dev/shm)}; RUNS=$RUNS; $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
echo
echo "| scenario | command | median ms | examples/stage ÷ this | target |"
echo "|---|---|---:|---:|---|"
while IFS=$'\t' read -r scenario name med; do
	ours=$(awk -F'\t' -v s="$scenario" '$1 == s && $2 == "airlock" {print $3}' "$results")
	ratio=$(awk -v a="$ours" -v b="$med" 'BEGIN {printf "%.2fx", a / b}')
	[[ $name == airlock ]] && ratio="1.00x"
	printf '| %s | %s | %.1f | %s | %s |\n' "$scenario" "${name//|/\\|}" "$(awk -v m="$med" 'BEGIN {print m * 1000}')" "$ratio" "$(target "$scenario" "$name")"
done <"$results"
