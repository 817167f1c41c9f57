#!/usr/bin/env bash
# The main job on the embedded default data: installs what is missing,
# builds, cuts WN18 (its 40,943 synsets) from WordNet 3.0 in wordnet-base,
# partitions it in 2 with METIS, starts 2 servers and 2 trainers on this
# machine, trains TransE_l2, evaluates on test and prints MRR / Hits@k.
#   deploy/quickstart.sh [WORK_DIR]     (default: ./quickstart)
# Environment: QS_STEPS (steps per trainer), QS_DIM, QS_TRANSPORT (auto).
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
work=$(mkdir -p "${1:-quickstart}" && cd "${1:-quickstart}" && pwd)
steps=${QS_STEPS:-4000}
dim=${QS_DIM:-400}
transport=${QS_TRANSPORT:-auto}

say() { printf '\n== %s\n' "$*"; }

say "installing missing packages"
deploy/install-deps.sh

say "building"
cmake -S "$src" -B "$src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$src/build"
rdps=$src/build/rdps

if [ ! -f "$work/wn18/train.txt" ]; then
	say "building the WordNet dataset"
	"$rdps" dataset wordnet "$work/wn18"
fi
if [ ! -f "$work/wn18-part2/partition.json" ]; then
	say "partitioning it in 2 (METIS)"
	"$rdps" partition --data "$work/wn18" -k 2 --method metis --out "$work/wn18-part2"
fi

# A free pair of ports on loopback.
port=30050
while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || (exec 3<>"/dev/tcp/127.0.0.1/$((port + 1))") 2>/dev/null; do
	port=$((port + 2))
done
printf '# quickstart: 2 servers on this machine\n127.0.0.1 %d 2\n' "$port" >"$work/ip_config.txt"

# rdps launch starts the servers and trainers of every ip_config machine on
# this one, stops them all if one fails or on Ctrl-C, and says what failed.
say "training: 2 servers and 2 trainers via rdps launch (logs in $work/logs)"
"$rdps" launch --backend local --ip_config "$work/ip_config.txt" --num_client_proc 2 \
	--log_dir "$work/logs" -- \
	--data "$work/wn18" --partition "$work/wn18-part2" --transport "$transport" \
	--model_name TransE_l2 --hidden_dim "$dim" --gamma 6.0 --lr 0.1 \
	--batch_size 1024 --neg_sample_size 256 -adv --regularization_coef 1e-7 \
	--max_step "$steps" --log_interval 500 --test --save_path "$work/embeddings"
say "embeddings in $work/embeddings (numpy: np.load('.../wn18_TransE_l2_entity.npy'))"
