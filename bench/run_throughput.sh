#!/usr/bin/env bash
# titan against plain PyTorch (bench/reference), eager and under torch.compile, side by side on
# this machine: the same model, weights, data, shapes, steps, threads, dtype (float32) and BLAS,
# run alternately, several repetitions. Prints one table (bench/throughput_table.py) and keeps
# every measurement in bench/results/throughput-<date>-<time>.jsonl (see bench/README.md).
#
#   bench/run_throughput.sh [--reps N] [--steps N] [--configs debug,100m] [--layouts 1x2,2x1]
#                           [--impls titan,titan-compile,eager,compile] [--load N]
#                           [--out FILE]
#
# Configs (issue 7): debug = llama3 debugmodel at seq 2048 x local batch 2; 100m = llama3 100M
# flavor (dim 768, 12 layers, 12 heads, 4 KV heads) at seq 1024 x local batch 4. Layouts:
# RANKSxTHREADS; two ranks are data parallel (titan DDP, i.e. replicate 2 x shard 1, like the
# reference's DistributedDataParallel; TITAN_DP=fsdp runs titan's default FSDP instead).
# Implementations: titan (eager), titan-compile (titan with compile.enable: fused kernels and
# fused loss), eager and compile (the PyTorch reference, eager and under torch.compile).
# Step 1 of each run is warm-up and not counted; a run's tokens/s uses the median of the other
# steps. Runs at nice 10. --load N keeps N CPU-bound processes (nice 0) running for the whole
# benchmark, so both sides share the cores with the same competing load (issue 12: a shared
# machine). torch.compile's first step includes compiling (it is the warm-up step). Needs a
# built build/titan and the Python environment of scripts/setup.sh.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/setup.sh"
titan_python_env
titan="${TITAN_BIN:-$root/build/titan}"
python=$TITAN_PYTHON
reps=3 steps=4 configs=debug,100m layouts=1x2,2x1 impls=titan,titan-compile,eager,compile load=0
out="$root/bench/results/throughput-$(date +%Y%m%d-%H%M%S).jsonl"
while (($#)); do
  case $1 in
    --reps) reps=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --layouts) layouts=$2; shift 2 ;;
    --impls) impls=$2; shift 2 ;;
    --load) load=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: $0 [--reps N] [--steps N] [--configs debug,100m] [--layouts 1x2,2x1]" \
         "[--impls titan,titan-compile,eager,compile] [--load N] [--out FILE]" >&2; exit 2 ;;
  esac
done
((steps >= 2)) || { echo "--steps must be at least 2 (step 1 is warm-up)" >&2; exit 2; }
[[ -x $titan ]] || { echo "$titan not built: run ./run_tests.sh or scripts/setup.sh" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "/usr/bin/time missing: apt-get install time" >&2; exit 2; }

work="$(mktemp -d)"
load_pids=()
trap 'rm -rf "$work"; ((${#load_pids[@]})) && kill "${load_pids[@]}" 2>/dev/null' EXIT
mkdir -p "$(dirname "$out")"
: > "$out"

# roof CONFIG LAYOUT RANKS THREADS WHEN: the fp32 GEMM roof per rank, every rank's process
# measuring at once as in training (median over ranks), appended as one JSON line. Measured
# before every run: the table takes the best as the roof, and a low one flags other load.
roof() {
  local r pids=()
  for ((r = 0; r < $3; r++)); do
    OMP_NUM_THREADS=$4 nice -n 10 $python "$root/bench/gemm_peak.py" --threads "$4" \
      > "$work/gemm_$r" &
    pids+=($!)
  done
  wait "${pids[@]}"
  cat "$work"/gemm_* | $python -c '
import json, statistics, sys
rows = [json.loads(l) for l in sys.stdin]
print(json.dumps({"impl": "gemm", "config": sys.argv[1], "layout": sys.argv[2],
                  "when": sys.argv[3],
                  "gflops_per_rank": statistics.median(r["gflops"] for r in rows),
                  "blas_kernels": rows[0]["core"]}))' "$1" "$2" "$5" >> "$out"
  rm -f "$work"/gemm_*
}

free_port() {
  $python -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'
}

# launch RANKS THREADS DIR CMD...: starts RANKS copies of CMD with torchrun's variables, each
# under /usr/bin/time (max RSS in DIR/rss_<r>) and a timeout (RUN_TIMEOUT seconds, default
# 3600), waits for all; fails if one fails.
launch() {
  local ranks=$1 threads=$2 dir=$3
  shift 3
  local port pids=() r status=0
  port=$(free_port)
  mkdir -p "$dir"
  for ((r = 0; r < ranks; r++)); do
    RANK=$r LOCAL_RANK=$r WORLD_SIZE=$ranks LOCAL_WORLD_SIZE=$ranks MASTER_ADDR=127.0.0.1 \
      MASTER_PORT=$port OMP_NUM_THREADS=$threads \
      nice -n 10 /usr/bin/time -f %M -o "$dir/rss_$r" \
      timeout --kill-after=10 "${RUN_TIMEOUT:-3600}" "$@" > "$dir/out_$r" 2>&1 &
    pids+=($!)
  done
  for r in "${pids[@]}"; do wait "$r" || status=$?; done
  if ((status)); then
    echo "run failed ($dir), last output:" >&2
    tail -20 "$dir/out_0" >&2
    exit 1
  fi
}

# record IMPL CONFIG LAYOUT REP DIR METRICS: appends one JSON line for a finished run.
record() {
  $python - "$@" "$steps" "$out" <<'EOF'
import json, statistics, sys, os
impl, config, layout, rep, d, metrics, steps, out = sys.argv[1:9]
rows = [json.loads(l) for l in open(metrics)]
assert len(rows) == int(steps), f"{metrics}: {len(rows)} steps logged, expected {steps}"
timed = rows[1:]  # step 1 is warm-up
step_time = statistics.median(r["step_time_s"] for r in timed)
tokens = timed[0]["tps"] * timed[0]["step_time_s"]  # local tokens per step
ranks = int(layout.split("x")[0])
rss = [int(open(f"{d}/rss_{r}").read().split()[-1]) / 2**20 for r in range(ranks)]
rec = {"impl": impl, "config": config, "layout": layout, "rep": int(rep),
       "tps_per_rank": tokens / step_time, "step_time_s": step_time,
       "step_times_s": [r["step_time_s"] for r in timed], "losses": [r["loss"] for r in rows],
       "max_rss_gib": max(rss)}
if impl.startswith("titan"):
    manifest = json.load(open(f"{d}/dump/run_manifest.json"))
    rec["flops_per_token"] = manifest["model"]["flops_per_token"]
    rec["titan_peak_flops"] = manifest["peak_flops"]
    rec["titan_memory_gib"] = max(r["memory_gib"] for r in rows)
    rec["blas_kernels"] = manifest["versions"]["blas"]["kernels"]
    if "fsdp_wait_s" in timed[0]:  # data parallel: the FSDP/DDP communication left exposed
        rec["fsdp_wait_s"] = statistics.median(r["fsdp_wait_s"] for r in timed)
else:
    rec["flops_per_token"] = rows[0]["flops_per_token"]
with open(out, "a") as f:
    f.write(json.dumps(rec) + "\n")
print(f"  {impl:9s} {config} {layout} rep {rep}: {rec['tps_per_rank']:8.1f} tokens/s/rank, "
      f"step {step_time:.2f} s, max RSS {max(rss):.2f} GiB", flush=True)
EOF
}

# machine EVENT: one JSON line on the machine, what else ran (load average) and the settings.
machine() {
  $python - "$1" "$root" "$reps" "$steps" "$load" <<'EOF' | tee -a "$out"
import json, os, subprocess, sys, time, torch
event, root, reps, steps, load = sys.argv[1:]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
            if l.startswith("model name")), "")
rev = subprocess.run(["git", "-C", root, "describe", "--always", "--dirty"], capture_output=True,
                     text=True).stdout.strip()
print(json.dumps({"impl": "machine", "event": event, "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
                  "loadavg_1m": os.getloadavg()[0], "cpu": cpu, "cores": os.cpu_count(),
                  "titan_revision": rev, "torch": torch.__version__,
                  "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                  "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", ""),
                  "reps": int(reps), "steps": int(steps), "competing_load": int(load)}))
EOF
}

echo "titan vs PyTorch ($impls); results -> $out"
machine start
for ((i = 0; i < load; i++)); do
  $python -c 'while True: pass' &
  load_pids+=($!)
done
if ((load == 0)) &&
   $python -c 'import os, sys; sys.exit(0 if os.getloadavg()[0] > 0.5 else 1)'; then
  echo "warning: load average above 0.5 before starting: other work shares the CPUs, so the" \
    "figures will be low and noisy" >&2
fi
IFS=, read -ra config_list <<< "$configs"
IFS=, read -ra layout_list <<< "$layouts"
IFS=, read -ra impl_list <<< "$impls"
for config in "${config_list[@]}"; do
  case $config in
    debug) shape=(--model.flavor debugmodel --training.seq_len 2048
                  --training.local_batch_size 2) ;;
    100m) shape=(--model.flavor 100M --training.seq_len 1024 --training.local_batch_size 4) ;;
    *) echo "unknown config $config (debug, 100m)" >&2; exit 2 ;;
  esac
  common=(--module llama3 --config llama3_debugmodel "${shape[@]}" --training.steps "$steps"
          --metrics.log_freq 1)
  # Step-0 weights for the reference (titan initialises the same ones from training.seed) and
  # the token cache both read.
  seed_out=$(OMP_NUM_THREADS=2 nice -n 10 "$titan" train "${common[@]}" --checkpoint.enable \
    --checkpoint.create_seed_checkpoint --job.dump_folder "$work/seed-$config" 2>&1) \
    || { echo "$seed_out" >&2; exit 1; }
  tokens=$(grep -o 'token cache [^ ]*\.tokens' <<< "$seed_out" | head -1 | cut -d' ' -f3)
  for layout in "${layout_list[@]}"; do
    ranks=${layout%x*} threads=${layout#*x}
    dp=()
    if ((ranks > 1)) && [[ ${TITAN_DP:-ddp} == ddp ]]; then
      dp=(--parallelism.data_parallel_replicate_degree "$ranks"
          --parallelism.data_parallel_shard_degree 1)
    fi
    "$titan" config "${common[@]}" "${dp[@]}" > "$work/$config-$layout.toml"
    for ((rep = 1; rep <= reps; rep++)); do
      # Alternate the order, so no side always runs on a warmer machine.
      order=("${impl_list[@]}")
      if ((rep % 2 == 0)); then
        order=()
        for ((i = ${#impl_list[@]} - 1; i >= 0; i--)); do order+=("${impl_list[i]}"); done
      fi
      for impl in "${order[@]}"; do
        roof "$config" "$layout" "$ranks" "$threads" "before $impl rep $rep"
        dir="$work/$config-$layout-$impl-$rep"
        if [[ $impl == titan* ]]; then
          compile=()
          [[ $impl == titan-compile ]] && compile=(--compile.enable)
          launch "$ranks" "$threads" "$dir" "$titan" train "${common[@]}" "${dp[@]}" \
            "${compile[@]}" --job.dump_folder "$dir/dump"
          record "$impl" "$config" "$layout" "$rep" "$dir" "$dir/dump/metrics.jsonl"
        else
          compile=()
          [[ $impl == compile ]] && compile=(--compile)
          launch "$ranks" "$threads" "$dir" "$python" "$root/bench/reference/train.py" \
            --config "$work/$config-$layout.toml" \
            --checkpoint "$work/seed-$config/checkpoint/step-0" \
            --tokens "$tokens" --metrics "$dir/ref.jsonl" "${compile[@]}"
          record "$impl" "$config" "$layout" "$rep" "$dir" "$dir/ref.jsonl"
        fi
        rm -rf "$dir"
      done
    done
  done
  rm -rf "$work/seed-$config"
done
machine end
$python "$root/bench/throughput_table.py" "$out"
