#!/usr/bin/env bash
# Issue 25's measurements on a many-core machine, in order of priority, each result in its own
# file under $OUT as soon as it is written (a timeout still returns what finished).
#
#   OUT=/some/dir internal/bench/device/run.sh NEW_BENCH NEW_ROLLUP BASE_BENCH BASE_ROLLUP
#
# NEW_BENCH and NEW_ROLLUP are static rollup-bench and rollup binaries (CGO_ENABLED=0 go build;
# see README.md here), the scale steps run NEW_ROLLUP as the store and serve (--rollup);
# BASE_BENCH and BASE_ROLLUP the baseline's. A baseline from before the benchmarks had their own
# binary (its rollup has the bench subcommand) is given as the same binary twice: it is then
# run as `BASE_ROLLUP bench ...`. Budget: about 7.5 minutes in all (BUDGET_S, default 450); a step that would
# not fit in what is left is skipped and says so in $OUT/skipped.txt. SIZE=tiny runs every
# step at toy sizes (a dry run of the script, seconds each).
set -u -o pipefail

USAGE="usage: OUT=dir run.sh NEW_BENCH NEW_ROLLUP BASE_BENCH BASE_ROLLUP"
NEW_BENCH=${1:?$USAGE}
NEW=${2:?$USAGE}
BASE_BENCH=${3:?$USAGE}
BASE=${4:?$USAGE}
OUT=${OUT:?set OUT to the output directory}
BUDGET_S=${BUDGET_S:-450}
SIZE=${SIZE:-full}
mkdir -p "$OUT"
START=$(date +%s)

for b in "$NEW_BENCH" "$NEW" "$BASE_BENCH" "$BASE"; do
	[ -x "$b" ] || { echo "not an executable: $b" | tee "$OUT/error.txt"; exit 2; }
done
# NEWB and BASEB run a benchmark (NEWB scale ...); NEWS and BASES follow a scale command line:
# the rollup binary it runs.
NEWB=("$NEW_BENCH") NEWS=(--rollup "$NEW")
if [ "$BASE_BENCH" = "$BASE" ]; then
	BASEB=("$BASE" bench) BASES=()
else
	BASEB=("$BASE_BENCH") BASES=(--rollup "$BASE")
fi
# Without taskset (util-linux) the pinned steps are skipped (named in skipped.txt); the rest runs.
HAVE_TASKSET=$(command -v taskset >/dev/null && [ "${NO_TASKSET:-}" != 1 ] && echo 1 || echo 0)

NCPU=$(nproc --all)
ALL="0-$((NCPU - 1))"
{
	date -u
	uname -a
	echo "nproc --all: $NCPU; taskset: $HAVE_TASKSET; this shell's CPUs: $(grep Cpus_allowed_list /proc/self/status)"
	grep -m1 'model name' /proc/cpuinfo
	free -g | head -2
	echo "new: $NEW_BENCH ($(sha256sum "$NEW_BENCH" | cut -c1-16)), $NEW ($(sha256sum "$NEW" | cut -c1-16))"
	echo "baseline: $BASE_BENCH ($(sha256sum "$BASE_BENCH" | cut -c1-16)), $BASE ($(sha256sum "$BASE" | cut -c1-16))"
} >"$OUT/machine.txt" 2>&1

# Sizes: each run of (a) at most ~40 s on 2 cores (the issue's 2-core rate was ~34k leaves/s).
if [ "$SIZE" = tiny ]; then
	A_LEAVES=2000 A_TICKS=1 B_PROJECTS=4 B_LEAVES=200 C_PROJECTS=4 C_LEAVES=200 TICKS=1
	INGEST="--agents 200 --leaves 10 --ticks 1"
	BASELINES="--groups 2 --servers 10 --processes 10 --ticks 1"
else
	A_LEAVES=100000 A_TICKS=2 B_PROJECTS=100 B_LEAVES=1000 C_PROJECTS=100 C_LEAVES=1000 TICKS=2
	INGEST="--agents 10000 --leaves 10 --ticks 2"
	BASELINES="--ticks 2"
fi

left() { echo $((BUDGET_S - ($(date +%s) - START))); }

# step NAME LIMIT_S CMD...: runs CMD (stdout and stderr) into $OUT/NAME.txt under a timeout of
# LIMIT_S (or what is left of the budget, when less), unless less than half of LIMIT_S is left.
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
	local t0=$(date +%s)
	{
		echo "\$ $*"
		timeout --kill-after=5 "$limit" "$@"
		echo "exit $? after $(($(date +%s) - t0))s"
	} >"$OUT/$name.txt" 2>&1
	echo "$name: $(tail -1 "$OUT/$name.txt")" >>"$OUT/summary.txt"
}

# (a) The cores curve: one serve, the embedded store, subprocesses (as the issue measured
# it), the whole benchmark pinned to 2 cores and then given every core; new and baseline
# interleaved.
for cores in 0,1 all; do
	if [ "$cores" = 0,1 ]; then
		tag=pin2 pin=(taskset -c 0,1)
	else
		tag="all$NCPU" pin=()
	fi
	step "a-new-$tag" 60 ${pin[@]+"${pin[@]}"} "${NEWB[@]}" scale --leaves "$A_LEAVES" --ticks "$A_TICKS" "${NEWS[@]}"
	step "a-base-$tag" 60 ${pin[@]+"${pin[@]}"} "${BASEB[@]}" scale --leaves "$A_LEAVES" --ticks "$A_TICKS" ${BASES[@]+"${BASES[@]}"}
done

# (b) More instances on 2 cores: root freshness with 1, 2 and 4 instances (issue 25, item 1).
step b-new-instances 100 taskset -c 0,1 "${NEWB[@]}" scale --projects "$B_PROJECTS" --leaves "$B_LEAVES" --instances 1,2,4 --partitions 8 --ticks "$TICKS" "${NEWS[@]}"
step b-base-instances 100 taskset -c 0,1 "${BASEB[@]}" scale --projects "$B_PROJECTS" --leaves "$B_LEAVES" --instances 1,2,4 --partitions 8 --ticks "$TICKS" ${BASES[@]+"${BASES[@]}"}

# (c) The store on cores of its own, 1 against 2 serve instances each with cores of its own
# (new binary only: the baseline has no --cpus); the harness (agents, proxy) on the rest.
if [ "$NCPU" -ge 8 ]; then
	q=$((NCPU / 4))               # store: a quarter of the cores
	s=$(((NCPU - q - 2) / 2))     # each serve: half of what is left but 2 for the harness
	STORE="0-$((q - 1))" S1="$q-$((q + s - 1))" S2="$((q + s))-$((q + 2 * s - 1))" HARNESS="$((q + 2 * s))-$((NCPU - 1))"
else
	STORE=0 S1=1 S2=1 HARNESS=$ALL
fi
step c-new-cpus 110 taskset -c "$HARNESS" "${NEWB[@]}" scale --projects "$C_PROJECTS" --leaves "$C_LEAVES" --instances 1,2 --partitions 8 --ticks "$TICKS" --cpus "store=$STORE/serve=$S1/serve=$S2" "${NEWS[@]}"

# (d) rollup's own overhead: bench ingest (against raw driver bulk upserts) and baselines.
step d-new-ingest 60 "${NEWB[@]}" ingest $INGEST
# The same with 1,024 requests in flight: the 16-core run of 2026-11-28 gave the raw path 8
# batches of 8,000 leaves in flight against at most 2,560 leaves on the ingest side
# (docs/benchmarks.md, "What the 0.9× needs on this machine").
step d-new-ingest-conns 60 "${NEWB[@]}" ingest $INGEST --conns 1024
step d-new-baselines 90 "${NEWB[@]}" baselines $BASELINES
step d-base-ingest 60 "${BASEB[@]}" ingest $INGEST

# (e) If time is left: where the new binary waits on 16 cores (mutex and block profiles,
# in-process) for docs/benchmarks.md; read with go tool pprof -top.
step e-new-profiles 50 "${NEWB[@]}" scale --leaves "$A_LEAVES" --ticks 1 --inprocess \
	--mutexprofile "$OUT/e-mutex.pprof" --blockprofile "$OUT/e-block.pprof" --cpuprofile "$OUT/e-cpu.pprof"

echo "done after $(($(date +%s) - START))s" >>"$OUT/summary.txt"
