#!/bin/sh
# A conformance campaign as a Slurm job array: sbatch --array=0-15 this
# file. Each task is one shard of the same run; `--shard 16` takes the
# index from SLURM_ARRAY_TASK_ID (minus SLURM_ARRAY_TASK_MIN). Then:
#   inaemu merge reports/shard-*.json
#SBATCH --job-name=inaemu-conformance
#SBATCH --cpus-per-task=1
#SBATCH --mem=2G
mkdir -p reports
inaemu conformance --count 100000 --seed 42 --shard 16 --out "reports/cex-$SLURM_ARRAY_TASK_ID" --json \
	> "reports/shard-$SLURM_ARRAY_TASK_ID.json"
test $? -le 1
