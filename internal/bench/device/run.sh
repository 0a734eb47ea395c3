#!/usr/bin/env bash
# Issue 25's measurements on a many-core machine, in order of priority. Every step's output is
# appended to $OUT/steps.txt as it is printed (a timeout still returns what finished), so the
# run returns at most 7 files (the device tool brings back 8):
#
#   OUT=/some/dir internal/bench/device/run.sh NEW_BENCH NEW_ROLLUP [BASE_BENCH BASE_ROLLUP]
#
# NEW_BENCH and NEW_ROLLUP are static rollup-bench and rollup binaries (CGO_ENABLED=0 go build;
# see README.md here); the scale steps run NEW_ROLLUP as the store and serve (--rollup). The
# baseline (optional, run last if time is left) is BASE_BENCH and BASE_ROLLUP; one from before
# the benchmarks had their own binary (its rollup has the bench subcommand) is given as the
# same binary twice and run as `BASE_ROLLUP bench ...`. Budget: BUDGET_S (default 480 s); a
# step that would not fit in what is left is skipped and says so in $OUT/skipped.txt.
# SIZE=tiny runs every step at toy sizes (a dry run of the script, seconds each).
set -u -o pipefail

USAGE="usage: OUT=dir run.sh NEW_BENCH NEW_ROLLUP [BASE_BENCH BASE_ROLLUP]"
NEW_BENCH=${1:?$USAGE}
NEW=${2:?$USAGE}
BASE_BENCH=${3:-}
BASE=${4:-}
OUT=${OUT:?set OUT to the output directory}
BUDGET_S=${BUDGET_S:-480}
SIZE=${SIZE:-full}
mkdir -p "$OUT"
START=$(date +%s)

for b in "$NEW_BENCH" "$NEW" ${BASE_BENCH:+"$BASE_BENCH"} ${BASE:+"$BASE"}; do
	[ -x "$b" ] || { echo "not an executable: $b" | tee "$OUT/error.txt"; exit 2; }
done
# NEWB and BASEB run a benchmark (NEWB scale ...); NEWS and BASES follow a scale command line:
# the rollup binary it runs.
NEWB=("$NEW_BENCH") NEWS=(--rollup "$NEW") BASEB=() BASES=()
if [ -n "$BASE" ] && [ "$BASE_BENCH" = "$BASE" ]; then
	BASEB=("$BASE" bench)
elif [ -n "$BASE" ]; then
	BASEB=("$BASE_BENCH") BASES=(--rollup "$BASE")
fi
# Without taskset (util-linux) the pinned steps are skipped (named in skipped.txt); the rest runs.
HAVE_TASKSET=$(command -v taskset >/dev/null && [ "${NO_TASKSET:-}" != 1 ] && echo 1 || echo 0)

NCPU=$(nproc --all)
{
	date -u
	uname -a
	echo "nproc --all: $NCPU; taskset: $HAVE_TASKSET; this shell's CPUs: $(grep Cpus_allowed_list /proc/self/status)"
	grep -m1 'model name' /proc/cpuinfo
	free -g | head -2
	echo "new: $NEW_BENCH ($(sha256sum "$NEW_BENCH" | cut -c1-16)), $NEW ($(sha256sum "$NEW" | cut -c1-16))"
	[ -n "$BASE" ] && echo "baseline: $BASE_BENCH ($(sha256sum "$BASE_BENCH" | cut -c1-16)), $BASE ($(sha256sum "$BASE" | cut -c1-16))"
} >"$OUT/machine.txt" 2>&1

# Sizes: one run of (a) is about 20 s on 2 cores.
if [ "$SIZE" = tiny ]; then
	A_LEAVES=2000 A_TICKS=1 C_PROJECTS=4 C_LEAVES=200 TICKS=1
	INGEST="--agents 200 --leaves 10 --ticks 1"
	BASELINES="--groups 2 --servers 10 --processes 10 --ticks 1"
else
	A_LEAVES=100000 A_TICKS=4 C_PROJECTS=100 C_LEAVES=1000 TICKS=2
	INGEST="--agents 10000 --leaves 10 --ticks 2"
	BASELINES="--ticks 2"
fi

left() { echo $((BUDGET_S - ($(date +%s) - START))); }

# step NAME LIMIT_S CMD...: runs CMD (stdout and stderr, appended to $OUT/steps.txt under a
# "=== NAME" line) under a timeout of LIMIT_S (or what is left of the budget, when less),
# unless less than half of LIMIT_S is left.
step() {
	local name=$1 limit=$2
	shift 2
	local l
	if [ "$HAVE_TASKSET" = 0 ] && [[ "$*" == taskset* || "$*" == *--cpus* ]]; then
		echo "$name: skipped, taskset is not installed" >>"$OUT/skipped.txt"
		return
	fi
	l=$(left)
	if [ "$((2 * l))" -lt "$limit" ]; then
		echo "$name: skipped, ${l}s of the budget left, it needs up to ${limit}s" >>"$OUT/skipped.txt"
		return
	fi
	[ "$l" -lt "$limit" ] && limit=$l
	local t0 rc
	t0=$(date +%s)
	{
		echo "=== $name"
		echo "\$ $*"
	} >>"$OUT/steps.txt"
	timeout --kill-after=5 "$limit" "$@" >>"$OUT/steps.txt" 2>&1
	rc=$?
	echo "exit $rc after $(($(date +%s) - t0))s" >>"$OUT/steps.txt"
	echo "$name: exit $rc after $(($(date +%s) - t0))s" >>"$OUT/summary.txt"
}

# (a) The cores curve: one serve, the embedded store, subprocesses (as the issue measured it),
# the whole benchmark pinned to 2 cores, then on every core, with serve's default workers and
# with 8 bulk writes and 8 recompute chunks in flight; then 1, 4 and 8 cores for the fit.
A=(scale --leaves "$A_LEAVES" --ticks "$A_TICKS")
W8=(--bulk-workers 8 --recompute-workers 8)
step a-new-pin2 60 taskset -c 0,1 "${NEWB[@]}" "${A[@]}" "${NEWS[@]}"
step "a-new-all$NCPU" 60 "${NEWB[@]}" "${A[@]}" "${NEWS[@]}"
step "a-new-all$NCPU-w8" 60 "${NEWB[@]}" "${A[@]}" "${W8[@]}" "${NEWS[@]}"
step a-new-pin2-w8 60 taskset -c 0,1 "${NEWB[@]}" "${A[@]}" "${W8[@]}" "${NEWS[@]}"
if [ "$NCPU" -ge 8 ]; then
	step a-new-pin8 60 taskset -c 0-7 "${NEWB[@]}" "${A[@]}" "${NEWS[@]}"
	step a-new-pin4 60 taskset -c 0-3 "${NEWB[@]}" "${A[@]}" "${NEWS[@]}"
fi
step a-new-pin1 80 taskset -c 0 "${NEWB[@]}" "${A[@]}" "${NEWS[@]}"

# (c) The store on cores of its own, 1 against 2 serve instances each with cores of its own;
# the harness (agents, proxy) on the rest.
if [ "$NCPU" -ge 8 ]; then
	q=$((NCPU / 4))           # store: a quarter of the cores
	s=$(((NCPU - q - 2) / 2)) # each serve: half of what is left but 2 for the harness
	STORE="0-$((q - 1))" S1="$q-$((q + s - 1))" S2="$((q + s))-$((q + 2 * s - 1))" HARNESS="$((q + 2 * s))-$((NCPU - 1))"
else
	STORE=0 S1=1 S2=1 HARNESS="0-$((NCPU - 1))"
fi
C=(scale --projects "$C_PROJECTS" --leaves "$C_LEAVES" --instances 1,2 --partitions 8 --ticks "$TICKS" --cpus "store=$STORE/serve=$S1/serve=$S2")
step c-new-cpus 110 taskset -c "$HARNESS" "${NEWB[@]}" "${C[@]}" "${NEWS[@]}"

# (d) rollup's own overhead: bench ingest (against raw driver bulk upserts) with 1,024 requests
# in flight (the raw path keeps 8 batches of 8,000 leaves in flight: docs/benchmarks.md).
step d-new-ingest-conns 60 "${NEWB[@]}" ingest $INGEST --conns 1024

# (e) Where the new binary waits on every core (mutex, block and CPU profiles, in-process);
# read with go tool pprof -top.
step e-new-profiles 50 "${NEWB[@]}" scale --leaves "$A_LEAVES" --ticks 2 --inprocess \
	--mutexprofile "$OUT/e-mutex.pprof" --blockprofile "$OUT/e-block.pprof" --cpuprofile "$OUT/e-cpu.pprof"

# If time is left: (c) with 8 workers, the default ingest, the baselines, the base binary.
step c-new-cpus-w8 110 taskset -c "$HARNESS" "${NEWB[@]}" "${C[@]}" "${W8[@]}" "${NEWS[@]}"
step d-new-ingest 60 "${NEWB[@]}" ingest $INGEST
step d-new-baselines 90 "${NEWB[@]}" baselines $BASELINES
if [ -n "$BASE" ]; then
	step a-base-pin2 60 taskset -c 0,1 "${BASEB[@]}" "${A[@]}" ${BASES[@]+"${BASES[@]}"}
	step "a-base-all$NCPU" 60 "${BASEB[@]}" "${A[@]}" ${BASES[@]+"${BASES[@]}"}
fi

echo "done after $(($(date +%s) - START))s" >>"$OUT/summary.txt"
