"""``python -m agents.train ...`` = ``routing-gym train ...`` (:mod:`agents.apps.cli`, of which this is a thin
entry point in the apps layer); under ``torchrun`` it trains data-parallel:

    torchrun --nproc_per_node 4 -m agents.train --problem tsp --num-nodes 50
    torchrun --nnodes 2 --nproc_per_node 8 --rdzv_backend c10d --rdzv_endpoint HOST:29500 -m agents.train ...
"""
import os
import sys

from .apps.cli import main

if __name__ == "__main__":
    argv = ["train", *sys.argv[1:]]
    if "WORLD_SIZE" in os.environ and "--distributed" not in argv:
        argv.append("--distributed")
    sys.exit(main(argv))
