#!/bin/bash

# Parameters
#SBATCH --array=0-2%3
#SBATCH --cpus-per-task=1
#SBATCH --error=/work/main/results/distributed/two-ranks-slurm/submitit/%A_%a_0_log.err
#SBATCH --job-name=attnbench
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2
#SBATCH --open-mode=append
#SBATCH --output=/work/main/results/distributed/two-ranks-slurm/submitit/%A_%a_0_log.out
#SBATCH --partition=local
#SBATCH --signal=USR2@90
#SBATCH --time=1440
#SBATCH --wckey=submitit

# command
export SUBMITIT_EXECUTOR=slurm
srun --unbuffered --output /work/main/results/distributed/two-ranks-slurm/submitit/%A_%a_%t_log.out --error /work/main/results/distributed/two-ranks-slurm/submitit/%A_%a_%t_log.err /work/main/.venv/bin/python -u -m submitit.core._submit /work/main/results/distributed/two-ranks-slurm/submitit
