#!/usr/bin/env bash
# ctest softroce/verbs: the verbs test suite on real soft-RoCE, in qemu guests.
#   verbs.sh BUILD_DIR OUT_DIR
# 1. One guest: the verbs-only suite (guest_verbs.c), the integration
#    suite and the load-and-faults test over verbs, servers and clients on
#    the guest's rxe address; the graph suite over verbs and one-sided
#    sampling with the graph's servers stopped (guest_graph.c); the
#    integration suites (tables, exact sums, bad input, auth, faults) over
#    ofi with libfabric's verbs;ofi_rxm.
# 2. Two guests as two hosts: 2 servers in guest a, the integration suite's
#    3 clients in guest b (RDPS_TEST_REMOTE_PORT), over verbs.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD=$(cd "${1:?build dir}" && pwd)
OUT=${2:?out dir}
mkdir -p "$OUT"
rc=0

# The WordNet node graph in 2 parts for guest_graph.c, made here on the
# host (seconds; minutes under TCG): the guest sees this directory.
GRAPH=""
mkdir -p "$OUT/graph"
if "$BUILD/rdps" dataset wordnet-nodes "$OUT/graph/wn" --force >"$OUT/graph.log" 2>&1 &&
   "$BUILD/rdps" partition --data "$OUT/graph/wn" -k 2 --out "$OUT/graph/parts" \
	--balance_train --balance_edges --force >>"$OUT/graph.log" 2>&1; then
	GRAPH=$OUT/graph/parts
else
	echo "verbs.sh: could not make the graph partition on the host (see $OUT/graph.log);" \
		"guest_graph makes its own in the guest"
fi

cat >"$OUT/single.sh" <<SCRIPT
#!/usr/bin/env bash
set -euo pipefail
cd "$BUILD"
export RDPS_TEST_HOST=\$RDPS_GUEST_ADDR
echo "== verbs-only suite"
tests/softroce_guest_verbs --jobs 1 --verbose
echo "== session binding: one-use tokens, queue pairs live and die with their control connection"
tests/softroce_guest_sessions --jobs 1 --verbose
echo "== scale: 64 client connections on one server; clients killed with pushes in flight"
tests/softroce_guest_scale --jobs 1 --verbose
echo "== scale again, the server in 4 threads (each its own CQ, receive queue and credits)"
RDPS_TEST_SERVER_THREADS=4 tests/softroce_guest_scale --jobs 1 --verbose
echo "== server threads over verbs: 8 clients through 4 threads, a checkpoint while they push"
RDPS_TEST_TRANSPORTS=verbs tests/kvstore_test_server_threads --jobs 1 --verbose --filter 'server_threads/verbs*'
echo "== tables made by clients over verbs (regions registered while serving)"
RDPS_TEST_TRANSPORTS=verbs tests/integration_test_tables --jobs 1 --verbose
echo "== integration suite over verbs (one host)"
RDPS_TEST_TRANSPORTS=verbs tests/integration_test_cluster --jobs 1 --verbose
echo "== load and faults over verbs: 8 clients, a server killed and restarted from its checkpoint"
RDPS_TEST_TRANSPORTS=verbs tests/integration_test_faults --jobs 1 --verbose
echo "== graph suite over verbs: structure, sampling both ways, uniform picks, hostile requests"
RDPS_TEST_TRANSPORTS=verbs tests/graph_test_graph --jobs 1 --verbose
echo "== heterogeneous graph over verbs: every typed datum exactly, typed sampling both ways, in and out"
RDPS_TEST_TRANSPORTS=verbs tests/graph_test_graph_hetero --jobs 1 --verbose
echo "== one-sided sampling: 2 graph servers stopped (SIGSTOP), READ sampling still works"
RDPS_TEST_GRAPH_PARTS="$GRAPH" tests/softroce_guest_graph --jobs 1 --verbose
echo "== ofi over verbs;ofi_rxm: tables made by clients, then the integration suite"
FI_PROVIDER="verbs;ofi_rxm" RDPS_TEST_TRANSPORTS=ofi tests/integration_test_tables --jobs 1 --verbose
FI_PROVIDER="verbs;ofi_rxm" RDPS_TEST_TRANSPORTS=ofi tests/integration_test_cluster --jobs 1 --verbose
echo "== ofi over verbs;ofi_rxm: bad input, authentication, load and faults"
FI_PROVIDER="verbs;ofi_rxm" RDPS_TEST_TRANSPORTS=ofi tests/integration_test_badinput --jobs 1 --verbose
FI_PROVIDER="verbs;ofi_rxm" RDPS_TEST_TRANSPORTS=ofi tests/integration_test_auth --jobs 1 --verbose
FI_PROVIDER="verbs;ofi_rxm" RDPS_TEST_TRANSPORTS=ofi tests/integration_test_faults --jobs 1 --verbose
echo "== deterministic training: tcp and verbs give bit-identical embeddings"
d=\$(mktemp -d)
./rdps dataset synth "\$d/kg" --entities 2000 --relations 16 --triples 20000 --communities 8 --seed 3 >/dev/null
port=\$((31000 + RANDOM % 2000))
for tr in tcp verbs; do
	port=\$((port + 1))
	echo "\$RDPS_GUEST_ADDR \$port 1" >"\$d/ipc-\$tr"
	timeout 300 ./rdps server --ip_config "\$d/ipc-\$tr" --server_id 0 --transport \$tr --quiet \
		--table entity:2000:32 --table relation:16:32 --gamma 6 --lr 0.1 --seed 9 &
	timeout 300 ./rdps train --data "\$d/kg" --ip_config "\$d/ipc-\$tr" --transport \$tr \
		--model_name TransE_l2 --hidden_dim 32 --gamma 6 --batch_size 256 --neg_sample_size 32 \
		--max_step 200 --log_interval 0 --seed 5 --sync --save_path "\$d/out-\$tr"
	wait
done
cmp "\$d/out-tcp/kg_TransE_l2_entity.npy" "\$d/out-verbs/kg_TransE_l2_entity.npy"
cmp "\$d/out-tcp/kg_TransE_l2_relation.npy" "\$d/out-verbs/kg_TransE_l2_relation.npy"
echo "deterministic: tcp and verbs embeddings are bit-identical (\$(stat -c %s "\$d/out-tcp/kg_TransE_l2_entity.npy") bytes)"
SCRIPT
bash "$HERE/guest.sh" single --script "$OUT/single.sh" --out "$OUT/single" --timeout 1000 || rc=1
grep -hE "^== |Synthesis|\[FAIL\]|Assertion|rows re-read|dead server|deterministic|differ|faults test|64 clients|both ways alike|10 kills|server threads|stripe waits|checkpoint of|graph sampling" "$OUT/single/a.log" || true
grep -h -m1 "ofi provider verbs" "$OUT/single/a.log" || true

# Must match the arguments test_cluster.c gives its own servers.
PORT=$((30000 + RANDOM % 20000))
cat >"$OUT/servers.sh" <<SCRIPT
#!/usr/bin/env bash
set -euo pipefail
args=(--ip_config \$RDPS_RESULTS/ip_config.txt --transport verbs --table entity:997:13
      --table relation:13:8 --optimizer sgd --lr 1 --init zeros)
echo "\$RDPS_GUEST_ADDR $PORT 2" >\$RDPS_RESULTS/ip_config.txt
timeout 300 "$BUILD/rdps" server --server_id 0 "\${args[@]}" & s0=\$!
timeout 300 "$BUILD/rdps" server --server_id 1 "\${args[@]}" & s1=\$!
# Client 0 on the other host shuts both down when the suite is done.
wait \$s0
wait \$s1
SCRIPT
cat >"$OUT/clients.sh" <<SCRIPT
#!/usr/bin/env bash
set -euo pipefail
cd "$BUILD"
echo "== integration suite over verbs, servers on \$RDPS_PEER_ADDR"
RDPS_TEST_HOST=\$RDPS_PEER_ADDR RDPS_TEST_REMOTE_PORT=$PORT RDPS_TEST_TRANSPORTS=verbs \
	tests/integration_test_cluster --jobs 1 --verbose
SCRIPT
bash "$HERE/guest.sh" pair --script-a "$OUT/servers.sh" --script-b "$OUT/clients.sh" \
	--out "$OUT/pair" --timeout 360 || rc=1
grep -hE "Synthesis|\[FAIL\]|Assertion" "$OUT/pair/b.log" || true
grep -h "solved message count" "$OUT/pair/a.log" || true
exit "$rc"
