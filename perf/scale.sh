#!/usr/bin/env bash
# perf/scale.sh: issue 16's figures, from a Freebase-shaped graph
# (`rdps dataset synth --like freebase86m --scale F`) to trained embeddings.
#
#   perf/scale.sh [--scales LIST] [--train-scales LIST] [--big-scale F]
#                 [--steps N] [--no-namespaces] [--quick] [--data DIR]
#                 [--build DIR]
#
#   --scales LIST        partitioned graphs (default 0.01,0.03,0.1,0.3,1.0;
#                        1.0 only if the disk has room: about 25 GB)
#   --train-scales LIST  the cost curve's training runs (default 0.01,0.03,0.1)
#   --big-scale F        the graph trained and evaluated at length, over TCP on
#                        this machine and across 4 network namespaces
#                        (default 0.1: 8.6M entities, 33.9M triples)
#   --steps N            steps of each trainer in the cost curve (default 3000)
#   --no-namespaces      skip the 4-namespace run (it needs root)
#   --quick              tiny scales (0.001,0.002; a few minutes; for trying it)
#   --data DIR           scratch for datasets and partitions (default
#                        /tmp/rdps-scale; needs the disk the scales need)
#   --build DIR          build directory (default <repo>/build)
#   --big-epochs N       epochs of the --big-scale run (default 10: one epoch
#                        leaves the degree-1..2 entities, most of them, with a
#                        step or two each, and its sampled MRR near random)
#   --methods LIST       partitioning methods of --scales (default metis,random)
#   --add                with --only partition: keep the results on record, the
#                        runs asked for replacing only their own lines (e.g.
#                        --scales 1.0 --methods random --only partition --add)
#   --only PHASE         partition (generation and partitioning of --scales),
#                        train (the training runs; their graphs are made if
#                        missing), or big (the --big-scale runs only): one part,
#                        keeping the others' results
#
# For every F: generation time; the METIS partition (k = 2, coarsened past
# 2^22 adjacency entries) and a random one: wall time, peak RSS against the
# CSR graph (xadj, two vertex weights, 2 x 32-bit words per direction of each
# triple), local-triple fraction. For the training scales: 2 servers + 2
# trainers over TCP on this machine (TransE_l2, dim 100, batch 1024, neg
# 200, --steps steps each): pos triples/s, time per 1M training triples,
# servers' peak RSS per row against the bytes rows and optimizer state need,
# loading of the partition with io_uring against pread. At --big-scale: the
# same job trained --big-epochs epochs and evaluated as DGL-KE evaluates Freebase
# (--neg_sample_size_eval 1000 on a share of test), against the same
# evaluation of the untrained model; then across 4 namespaces (2 server
# hosts + 2 trainer hosts joined by a bridge).
#
# Results: JSON lines in perf/results/scale/, shown by perf/report.py in
# perf/report.md with a plot (perf/scale-cost.png). Takes about 2.5 hours on
# this 2-core machine with 1.0 included: the partition phase about 2 hours
# (F = 1.0's METIS partition alone 64 minutes, its generation 4.5), the
# train phase about 30 minutes (the 10 epochs at F = 0.1: 22); --quick a
# few minutes.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build
DATA=/tmp/rdps-scale
SCALES=0.01,0.03,0.1,0.3,1.0
TRAIN_SCALES=0.01,0.03,0.1
BIG=0.1
STEPS=3000
NS=1
ONLY=
BIG_EPOCHS=10
METHODS=metis,random
ADD=0
while (($#)); do
	case $1 in
	--scales) SCALES=${2:?}; shift ;;
	--train-scales) TRAIN_SCALES=${2:?}; shift ;;
	--big-scale) BIG=${2:?}; shift ;;
	--steps) STEPS=${2:?}; shift ;;
	--no-namespaces) NS=0 ;;
	--quick) SCALES=0.001,0.002; TRAIN_SCALES=0.001,0.002; BIG=0.002; STEPS=200 ;;
	--data) DATA=${2:?}; shift ;;
	--build) BUILD=${2:?}; shift ;;
	--big-epochs) BIG_EPOCHS=${2:?}; shift
		[[ $BIG_EPOCHS =~ ^[1-9][0-9]*$ ]] || { echo "perf/scale.sh: --big-epochs wants a positive integer" >&2; exit 2; } ;;
	--methods) METHODS=${2:?}; shift
		[[ $METHODS =~ ^(metis|random)(,(metis|random))*$ ]] || { echo "perf/scale.sh: --methods takes metis and/or random" >&2; exit 2; } ;;
	--add) ADD=1 ;;
	--only) ONLY=${2:?}; shift; [[ $ONLY == partition || $ONLY == train || $ONLY == big ]] || { echo "perf/scale.sh: --only partition|train|big" >&2; exit 2; } ;;
	-h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "perf/scale.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done
RDPS=$BUILD/rdps
OUT=$ROOT/perf/results/scale
T0=$SECONDS
step() { echo "== [$((SECONDS - T0))s] $*" >&2; }
die() { echo "perf/scale.sh: $*" >&2; exit 1; }

[[ -x $RDPS ]] || die "$RDPS is missing: build first (cmake --build $BUILD)"
command -v /usr/bin/time >/dev/null || die "/usr/bin/time is missing (apt-get install time)"
mkdir -p "$OUT" "$DATA"
if ((ADD)); then
	[[ $ONLY == partition ]] || die "--add goes with --only partition"
	ONLY=add-partition
fi
case $ONLY in
add-partition) ;;
partition) rm -f "$OUT"/gen.jsonl "$OUT"/partition.jsonl "$OUT"/gen-*.log "$OUT"/partition-*.log ;;
train) rm -f "$OUT"/train.jsonl "$OUT"/load-*.jsonl "$OUT"/train-*.log "$OUT"/load-*.log ;;
big) rm -f "$OUT"/train-big*.log
	[[ -f $OUT/train.jsonl ]] && /usr/bin/python3 -c "import json,sys; p=sys.argv[1]; L=[l for l in open(p) if not json.loads(l)['label'].startswith('big')]; open(p,'w').writelines(L)" "$OUT/train.jsonl" ;;
*) rm -f "$OUT"/*.jsonl "$OUT"/*.log ;;
esac

# Free loopback ports for a job's servers.
port_base() { echo $((20000 + (RANDOM % 200) * 50)); }

# Peak resident memory of processes while they run: samples the sum of
# VmRSS of the pids in $1 every 0.2 s, keeps the largest in $2 (KiB), until
# they are all gone.
rss_sampler() {
	local pids=$1 out=$2 max=0 v
	while :; do
		local alive=0 sum=0
		for p in $pids; do
			if v=$(awk '/VmRSS/ { print $2 }' /proc/"$p"/status 2>/dev/null) && [[ -n $v ]]; then
				alive=1
				sum=$((sum + v))
			fi
		done
		((sum > max)) && max=$sum
		echo "$max" >"$out"
		((alive)) || break
		sleep 0.2
	done
}

# With --add: drops the lines of file whose bench and scale (and method, if
# given) are those of the run about to append its own.
forget() { # file bench scale [method]
	((ADD)) && [[ -f $1 ]] || return 0
	/usr/bin/python3 -c "
import json, sys
p, bench, scale, method = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
keep = [l for l in open(p) if not (json.loads(l).get('bench') in (bench, 'scale_skip')
        and json.loads(l).get('scale') == scale
        and (not method or json.loads(l).get('method', method) == method))]
open(p, 'w').writelines(keep)" "$1" "$2" "$3" "${4:-}"
}

json() { # key=value ... -> one JSON object (numbers bare, the rest quoted)
	local first=1 kv k v
	printf '{'
	for kv in "$@"; do
		k=${kv%%=*}
		v=${kv#*=}
		((first)) || printf ','
		first=0
		if [[ $v =~ ^-?[0-9]+([.][0-9]+)?([eE][-+]?[0-9]+)?$ ]]; then
			printf '"%s":%s' "$k" "$v"
		else
			printf '"%s":"%s"' "$k" "$v"
		fi
	done
	printf '}\n'
}

# ---------------------------------------------------------------------------
# Datasets and partitions
dataset() { # F -> path (generated once)
	local f=$1 d=$DATA/fb-$1
	if [[ ! -f $d/entities.dict ]]; then
		step "generate F=$f"
		local s=$SECONDS
		/usr/bin/time -f "%M" -o "$DATA/gen-$f.rss" \
			"$RDPS" dataset synth "$d" --like freebase86m --scale "$f" --seed 1 --force \
			>"$OUT/gen-$f.log" 2>&1 || die "generation of F=$f failed: $(tail -3 "$OUT/gen-$f.log")"
		forget "$OUT/gen.jsonl" scale_gen "$f"
		json bench=scale_gen scale="$f" seconds=$((SECONDS - s)) \
			peak_rss_mib="$(awk '{ printf "%.1f", $1 / 1024 }' "$DATA/gen-$f.rss")" \
			>>"$OUT/gen.jsonl"
	fi
	echo "$d"
}

partition() { # F method -> partition dir
	local f=$1 m=$2 d p log
	d=$(dataset "$f")
	p=$DATA/fb-$f-$m
	log=$OUT/partition-$f-$m.log
	step "partition F=$f ($m)"
	/usr/bin/time -f "%e %M" -o "$DATA/part.time" \
		"$RDPS" partition --data "$d" -k 2 --out "$p" --method "$m" --force >"$log" 2>&1 ||
		die "partition of F=$f ($m) failed: $(tail -3 "$log")"
	read -r secs kib <"$DATA/part.time"
	forget "$OUT/partition.jsonl" scale_partition "$f" "$m"
	/usr/bin/python3 "$ROOT/perf/scale_parse.py" partition "$p/partition.json" "$secs" "$kib" \
		"$m" "$f" "$log" >>"$OUT/partition.jsonl"
	echo "$p"
}

IFS=, read -ra SC <<<"$SCALES"
[[ $ONLY == train || $ONLY == big ]] && SC=()
IFS=, read -ra METHOD_LIST <<<"$METHODS"
for f in "${SC[@]}"; do
	if [[ $f == 1.0 || $f == 1 ]]; then
		avail=$(df -Pk "$DATA" | awk 'NR == 2 { print $4 }')
		if ((avail < 25 * 1024 * 1024)); then
			echo "perf/scale.sh: F=$f skipped: $((avail / 1048576)) GiB free in $DATA, ~25 needed" >&2
			json bench=scale_skip scale="$f" reason="disk: $((avail / 1048576)) GiB free" >>"$OUT/partition.jsonl"
			continue
		fi
	fi
	for m in "${METHOD_LIST[@]}"; do
		partition "$f" "$m" >/dev/null
	done
	# The random partition is only for the comparison: its files go.
	rm -rf "$DATA/fb-$f-random"
	# Keep the largest datasets only while they are needed.
	case ",$TRAIN_SCALES,$BIG," in
	*",$f,"*) ;;
	*) rm -rf "$DATA/fb-$f" "$DATA/fb-$f-metis" ;;
	esac
done

# ---------------------------------------------------------------------------
# Training jobs: 2 servers + 2 trainers, TCP.
MODEL=(--model_name TransE_l2 --hidden_dim 100 --gamma 10 --lr 0.1)
TRAIN=(--batch_size 1024 --neg_sample_size 200 --log_interval 500 --no_save_emb)

# job F label steps [netns] -> appends a JSON line to $OUT/train.jsonl
job() {
	local f=$1 label=$2 steps=$3 nsmode=${4:-} d p ipc port log i
	d=$(dataset "$f")
	p=$DATA/fb-$f-metis
	[[ -f $p/partition.json ]] || p=$(partition "$f" metis)
	log=$OUT/train-$label
	port=$(port_base)
	local hosts=(127.0.0.1 127.0.0.1) thosts=("" "")
	if [[ $nsmode == ns ]]; then
		hosts=(10.232.0.1 10.232.0.2)
		thosts=(10.232.0.3 10.232.0.4)
	fi
	ipc=$DATA/ipc-$label
	printf '%s %d 1\n%s %d 1\n' "${hosts[0]}" "$port" "${hosts[1]}" "$((port + 1))" >"$ipc"
	local ns_s=("" "") ns_t=("" "")
	if [[ $nsmode == ns ]]; then
		ns_s=("ip netns exec rdpsscale0" "ip netns exec rdpsscale1")
		ns_t=("ip netns exec rdpsscale2" "ip netns exec rdpsscale3")
	fi
	local spids=() tpids=() eval_args=()
	[[ $label == big* ]] && eval_args=(--test --neg_sample_size_eval 1000 --eval_percent 0.05 --no_eval_filter)
	step "train $label: F=$f, $steps steps x 2 trainers${nsmode:+ across 4 namespaces}"
	for i in 0 1; do
		${ns_s[$i]} "$RDPS" server --ip_config "$ipc" --server_id "$i" --partition "$p" \
			--transport tcp "${MODEL[@]}" >"$log-server$i.log" 2>&1 &
		spids+=($!)
	done
	rss_sampler "${spids[*]}" "$DATA/rss-$label" &
	local sampler=$!
	for i in 0 1; do
		${ns_t[$i]} "$RDPS" train --data "$d" --partition "$p" --ip_config "$ipc" --transport tcp \
			--num_trainers 2 --rank "$i" "${MODEL[@]}" "${TRAIN[@]}" --max_step "$steps" \
			"${eval_args[@]}" >"$log-trainer$i.log" 2>&1 &
		tpids+=($!)
	done
	local rc=0
	for pid in "${tpids[@]}" "${spids[@]}"; do wait "$pid" || rc=1; done
	wait "$sampler" || true
	((rc == 0)) || die "job $label failed: see $log-*.log"
	/usr/bin/python3 "$ROOT/perf/scale_parse.py" train "$label" "$f" "$steps" "$p" \
		"$DATA/rss-$label" "$log" "${nsmode:-local}" >>"$OUT/train.jsonl"
}

if [[ $ONLY == *partition ]]; then
	step "report"
	/usr/bin/python3 "$ROOT/perf/report.py" "$ROOT/perf/results" "$ROOT/perf"
	step "done ($((SECONDS - T0)) s)"
	exit 0
fi

IFS=, read -ra TS <<<"$TRAIN_SCALES"
[[ $ONLY == big ]] && TS=()
for f in "${TS[@]}"; do
	job "$f" "cost-$f" "$STEPS"
	step "loading the partition of F=$f: io_uring against pread"
	"$RDPS" bench load --partition "$DATA/fb-$f-metis" --reps 5 >"$OUT/load-$f.jsonl" 2>"$OUT/load-$f.log" ||
		die "bench load failed: $(tail -3 "$OUT/load-$f.log")"
done

# The big scale: --big-epochs epochs (its train triples / (2 trainers x
# batch) steps each), and the untrained model evaluated the same way (0
# steps).
BIGP=$DATA/fb-$BIG-metis
[[ -f $BIGP/partition.json ]] || BIGP=$(partition "$BIG" metis)
EPOCH=$(python3 -c "import json,sys; j=json.load(open('$BIGP/partition.json')); print($BIG_EPOCHS * max(1, j['num_train'] // (2 * 1024)))")
job "$BIG" "big-untrained" 0
job "$BIG" "big-epoch" "$EPOCH"

if ((NS)); then
	[[ $(id -u) == 0 ]] || die "the namespace run needs root (or pass --no-namespaces)"
	step "4 network namespaces: 2 server hosts, 2 trainer hosts"
	# Four hosts and a switch: the bridge in a namespace of its own, so no
	# firewall or bridge-netfilter of the root namespace is in the path.
	cleanup_ns() { for i in 0 1 2 3 sw; do ip netns del rdpsscale$i 2>/dev/null || true; done; }
	cleanup_ns
	trap cleanup_ns EXIT
	ip netns add rdpsscalesw
	ip -n rdpsscalesw link add br0 type bridge
	ip -n rdpsscalesw link set br0 up
	for i in 0 1 2 3; do
		ip netns add rdpsscale$i
		ip -n rdpsscale$i link set lo up
		ip -n rdpsscale$i link add eth0 type veth peer name p$i netns rdpsscalesw
		ip -n rdpsscalesw link set p$i master br0 up
		ip -n rdpsscale$i addr add 10.232.0.$((i + 1))/24 dev eth0
		ip -n rdpsscale$i link set eth0 up
	done
	job "$BIG" "big-namespaces" "$STEPS" ns
	cleanup_ns
	trap - EXIT
fi

step "report"
/usr/bin/python3 "$ROOT/perf/report.py" "$ROOT/perf/results" "$ROOT/perf"
step "done ($((SECONDS - T0)) s)"
