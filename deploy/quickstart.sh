#!/usr/bin/env bash
# The main job on the embedded default data: installs the packages rdps
# needs to build and run, builds the rdps tool (only it), cuts WN18 (its
# 40,943 synsets) from WordNet 3.0 in wordnet-base, partitions it in 2 with
# METIS, starts 2 servers and 2 trainers on this machine, trains TransE_l2,
# evaluates on test and prints the filtered MRR / MR / Hits@k.
#   deploy/quickstart.sh [WORK_DIR]
# WORK_DIR (default: build/quickstart in the checkout, which git ignores like
# all of build/) gets the dataset, its partition, the ip_config, the logs and
# the embeddings; a second run reuses the dataset and the partition.
# Environment: QS_STEPS (steps per trainer, default 4000), QS_DIM (400),
# QS_TRANSPORT (auto: verbs where there is an RDMA device, else tcp),
# RDPS_BUILD_DIR (the build directory, as tests/run.sh takes it; default
# build in the checkout).
set -euo pipefail
src=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
build=${RDPS_BUILD_DIR:-build}
case $build in /*) ;; *) build=$src/$build ;; esac
work=${1:-$build/quickstart}
mkdir -p "$work"
work=$(cd "$work" && pwd) # relative to where it was run from
steps=${QS_STEPS:-4000}
dim=${QS_DIM:-400}
transport=${QS_TRANSPORT:-auto}

say() { printf '\n== %s\n' "$*"; }

# What building and running rdps needs (deploy/install-deps.sh also installs
# what the test suites use: qemu, a kernel image, spin, MPI, clang, ...).
pkgs="build-essential cmake ninja-build pkg-config libcriterion-dev liburing-dev libmetis-dev
libjansson-dev libxxhash-dev libssl-dev libibverbs-dev librdmacm-dev ibverbs-providers
libzmq3-dev wordnet-base"
if command -v dpkg-query >/dev/null; then
	missing=""
	for p in $pkgs; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			missing="$missing $p"
	done
	if [ -n "$missing" ]; then
		say "installing:$missing"
		sudo=""
		[ "$(id -u)" = 0 ] || sudo=sudo
		$sudo apt-get update -qq
		# shellcheck disable=SC2086
		$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
	fi
else
	echo "quickstart: not Debian: install the equivalents of: $pkgs" >&2
fi

say "building the rdps tool ($build/rdps)"
if [ -f "$build/CMakeCache.txt" ]; then # keep the generator and build type it was made with
	cmake -S "$src" -B "$build" >/dev/null
else
	cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build" --target rdps
rdps=$build/rdps

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

# rdps launch checks the train arguments, starts the servers and trainers of
# every ip_config machine on this one, stops them all if one fails or on
# Ctrl-C, and says what failed.
say "training: 2 servers and 2 trainers via rdps launch (logs in $work/logs)"
"$rdps" launch --backend local --ip_config "$work/ip_config.txt" --num_client_proc 2 \
	--log_dir "$work/logs" -- \
	--data "$work/wn18" --partition "$work/wn18-part2" --transport "$transport" \
	--model_name TransE_l2 --hidden_dim "$dim" --gamma 6.0 --lr 0.1 \
	--batch_size 1024 --neg_sample_size 256 -adv --regularization_coef 1e-7 \
	--max_step "$steps" --log_interval 500 --test --save_path "$work/embeddings"

say "filtered test metrics (the whole test set, as trainer 0 printed them)"
grep '^Test average' "$work/logs/trainer0.log"
say "embeddings in $work/embeddings (numpy: np.load('$work/embeddings/wn18_TransE_l2_entity.npy'))"
