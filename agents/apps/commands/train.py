"""``routing-gym train``: train a policy with REINFORCE (:class:`agents.training.reinforce.Trainer`), or go on
with a run from its checkpoint (``--resume``)."""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from routing_gym.problems import get_problem

from .common import (EXIT_INTERRUPTED, EXIT_REFUSED, PROBLEM_CHOICES, VARIANT_OPTIONS, add_command, add_variant_args,
                     augment_count, device_name, flag, folder_arg, input_file, one_line, os_error_message, positive_int,
                     variant_of)

MODEL_OPTIONS = ("embed_dim", "n_layers", "ff_hidden")  # train options that set AttentionModelConfig fields
RESUME_CHANGEABLE = ("epochs", "batch_size", "out_dir", "device", "max_minutes")  # what --resume may change
WRITES_AND_READS = None  # its files are in --out-dir, which the trainer guards (a run owns its folder)


def add_parser(sub) -> None:
    """The ``train`` subcommand, its options in --help's order: the problem and the schedule, the baseline
    and the network, then the run (data, device, folder, budget, resume)."""
    t = add_command(sub, "train", "train a policy with REINFORCE",
                    "Train the Attention Model (or the Pointer Network) with REINFORCE; the defaults are the paper's.")
    add_schedule_args(t)
    add_model_args(t)
    add_run_args(t)
    t.set_defaults(func=run)


def trained(name: str) -> str:
    """``(default: X)`` from :class:`TrainConfig` (train's options default to None: the config fills them)."""
    from ...training.config import TrainConfig

    return f"(default: {TrainConfig.__dataclass_fields__[name].default})"


def add_schedule_args(t) -> None:
    """The problem, its size and options, the epochs and the learning rate's schedule."""
    from ...training.config import LR_SCHEDULES

    t.add_argument("--problem", choices=PROBLEM_CHOICES, help=trained("problem"))
    t.add_argument("--num-nodes", type=int, help="customers (TSP: nodes) per instance " + trained("num_nodes"))
    t.add_argument("--mixed-sizes", type=positive_int, nargs="+", metavar="N",
                   help="train on mixed sizes: each batch has one of these sizes, drawn uniformly (validation and "
                   "the rollout baseline's test stay at --num-nodes; not with --baseline pomo or --imitate)")
    add_variant_args(t)
    t.add_argument("--epochs", type=int, help=trained("epochs"))
    t.add_argument("--epoch-size", type=int, help="fresh training instances per epoch " + trained("epoch_size"))
    t.add_argument("--batch-size", type=int, help="instances per gradient step " + trained("batch_size"))
    t.add_argument("--lr", type=float, help="Adam learning rate " + trained("lr"))
    t.add_argument("--lr-decay", type=float, help="learning rate multiplied by this after every epoch "
                   + trained("lr_decay"))
    t.add_argument("--lr-schedule", choices=LR_SCHEDULES,
                   help="the learning rate over the run's budget (--epochs x --epoch-size instances, or --max-minutes "
                   "when that ends first): constant (times --lr-decay per epoch), cosine or linear (down to 0) "
                   + trained("lr_schedule"))
    t.add_argument("--lr-warmup", type=float, help="fraction of the budget over which the learning rate first rises "
                   "linearly from 0 " + trained("lr_warmup"))


def add_model_args(t) -> None:
    """The baseline and the network."""
    from ...training.baselines import BASELINES

    t.add_argument("--baseline", choices=tuple(BASELINES),
                   help="rollout (Kool et al.), exponential, pomo (Kwon et al.) or critic (Bello et al.) "
                   + trained("baseline"))
    t.add_argument("--warmup-epochs", type=int, help="epochs during which an exponential moving average stands in "
                   "for the rollout baseline (0 when fine-tuning a trained policy) " + trained("warmup_epochs"))
    t.add_argument("--augment", type=augment_count, help="with --baseline pomo: also roll every instance out on this "
                   "many of its 8 symmetric copies, all sharing one baseline (POMO's augmentation in training, "
                   "Sym-NCO's symmetricity) " + trained("augment"))
    t.add_argument("--reward-norm", choices=("none", "variant"), help="variant: divide each instance's advantage by a "
                   "moving average of its variant's mean cost (RouteFinder's per-variant normalisation; MTVRP) "
                   + trained("reward_norm"))
    t.add_argument("--critic-lr", type=float, help="Adam learning rate of the critic (--baseline critic) "
                   + trained("critic_lr"))
    t.add_argument("--policy", choices=("attention", "pointer"), help="network to train " + trained("policy"))
    t.add_argument("--distance-bias", action="store_true", help="attention model: distance-biased encoder")
    t.add_argument("--embed-dim", type=positive_int, help="attention model: embedding width (default: the paper's 128)")
    t.add_argument("--n-layers", type=positive_int, help="attention model: encoder layers (default: the paper's 3)")
    t.add_argument("--ff-hidden", type=positive_int,
                   help="attention model: hidden units of the encoder's feed-forward sublayers "
                   "(default: the paper's 512)")


def add_run_args(t) -> None:
    """The run: evaluation sets, seed, device, folder, starting weights, imitation, budget, resume."""
    from ...inference.device import DEVICE_HELP

    t.add_argument("--eval-size", type=int, help="instances in the rollout baseline's evaluation set "
                   + trained("eval_size"))
    t.add_argument("--val-size", type=int, help="instances in the fixed validation set " + trained("val_size"))
    t.add_argument("--seed", type=int, help="seed of the training stream " + trained("seed"))
    t.add_argument("--device", type=device_name, help=DEVICE_HELP + " " + trained("device"))
    t.add_argument("--bf16", action="store_true", default=None,
                   help="bf16 autocast for the forward passes, on CUDA or a CPU with bf16 matrix units (default: off)")
    t.add_argument("--out-dir", type=folder_arg,
                   help="where checkpoints and metrics.csv go (default: runs/PROBLEMNUM_NODES, "
                   "e.g. runs/tsp20)")
    t.add_argument("--init-from", help="start from the weights of this policy file or trainer checkpoint (e.g. "
                   "agents/weights/tsp20.pt), with their model settings; optimiser and baseline start afresh")
    t.add_argument("--imitate", type=input_file,
                   help="a labelled dataset (routing-gym solve --save writes one) whose tours the policy first "
                   "imitates by teacher forcing, for --imitation-epochs epochs of --epoch-size labelled instances; "
                   "REINFORCE follows (default: none)")
    t.add_argument("--imitation-epochs", type=int, help="supervised epochs at the start of the run, with --imitate "
                   + trained("imitation_epochs"))
    t.add_argument("--max-minutes", type=float,
                   help="wall-clock budget of the run in minutes: training, baseline tests, validation and "
                   "checkpoints (each epoch's end is set aside in it, and the start says how long it takes); with "
                   "--resume it counts the checkpoint's earlier minutes too (default: none)")
    t.add_argument("--val-dataset", help="validate on this dataset file instead of --val-size generated instances "
                   "(with reference costs, metrics.csv also gets val_gap)")
    t.add_argument("--resume", help="a trainer checkpoint (OUT_DIR/last.pt or best.pt) to continue from, writing "
                   "into its folder unless --out-dir is given; --epochs, --batch-size, --out-dir, --device and "
                   "--max-minutes may be changed, the other settings are the checkpoint's")
    t.add_argument("--overwrite", action="store_true",
                   help="replace the run already in --out-dir (without it, an existing run is never touched)")
    t.add_argument("--no-progress", action="store_true", help="no progress bars")
    t.add_argument("--distributed", action="store_true", help="data-parallel under torchrun (DDP)")


def run(args) -> int:
    """Train (or go on with ``--resume``); exit 1 when the run is refused or stops (a folder in use,
    nothing left to train, a diverged run, a write that failed mid-run), saying how to go on."""
    from ...training.distributed import init_distributed
    from ...training.reinforce import NothingLeft, TrainingDiverged

    if args.distributed:
        args.device = init_distributed(args.device)
    trainer = resumed_trainer(args) if args.resume else new_trainer(args)
    first_epoch = trainer.epoch
    try:
        trainer.fit(progress=not args.no_progress, overwrite=args.overwrite)
    except (FileExistsError, NothingLeft, TrainingDiverged) as e:
        print(f"routing-gym train: error: {one_line(str(e))}", file=sys.stderr)
        return EXIT_REFUSED
    except KeyboardInterrupt:
        print(f"routing-gym train: interrupted (Ctrl-C); {how_to_go_on(trainer)}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as e:  # a write failed mid-run (a full disk, a folder made read-only): the run stopped
        if trainer.epoch == first_epoch:  # before any training: the folder cannot be used (a usage error)
            raise
        print(f"routing-gym train: error: {one_line(os_error_message(e))}; {how_to_go_on(trainer)}", file=sys.stderr)
        return EXIT_REFUSED
    return 0


def resumed_trainer(args):
    """The trainer of ``--resume``'s checkpoint, with the few settings a resumed run may change;
    ``ValueError`` naming any other setting given."""
    from ...training.config import TrainConfig
    from ...training.reinforce import Trainer

    fixed = [f.name for f in dataclasses.fields(TrainConfig) if f.name not in RESUME_CHANGEABLE
             and getattr(args, f.name, None) is not None] + (["distance_bias"] if args.distance_bias else []) \
        + [k for k in (*VARIANT_OPTIONS, *MODEL_OPTIONS) if getattr(args, k, None) is not None]
    if fixed:
        named = ", ".join("--" + flag(k) for k in fixed)
        raise ValueError(f"--resume continues the checkpoint's settings; only --epochs, --batch-size, --out-dir, "
                         f"--device and --max-minutes may be changed, not {named}")
    overrides = {k: getattr(args, k) for k in RESUME_CHANGEABLE if getattr(args, k) is not None}
    return Trainer.resume(args.resume, **overrides)


def new_trainer(args):
    """A trainer of the options given, :class:`TrainConfig`'s defaults filling the others (the network of
    ``--init-from``'s weights; the folder ``runs/PROBLEMNUM_NODES``)."""
    from ...training.config import TrainConfig
    from ...training.reinforce import Trainer

    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    given = {k: v for k, v in vars(args).items() if k in fields and v is not None}
    if args.init_from is not None and args.policy is None:  # the weights choose the network
        given["policy"] = network_of_file(args.init_from)
    given["model"] = {k: getattr(args, k) for k in MODEL_OPTIONS if getattr(args, k) is not None}
    if args.distance_bias:
        given["model"]["distance_bias"] = True
    given["variant"] = variant_of(args, get_problem(given.get("problem", TrainConfig.problem)))
    config = TrainConfig(**given)  # its defaults fill what was not given
    if args.imitation_epochs is not None and args.imitate is None:
        raise ValueError("--imitation-epochs counts the epochs of --imitate; give the labelled dataset too")
    if args.out_dir is None:
        config = dataclasses.replace(config, out_dir=f"runs/{config.problem}{config.num_nodes}")
    return Trainer(config)


def how_to_go_on(trainer) -> str:
    """After an interrupted run: where its last finished epoch is kept, and the command that continues it."""
    from ...policies.checkpoint import load_checkpoint

    last = Path(trainer.cfg.out_dir) / "last.pt"
    try:  # what the file holds (an epoch whose save failed or was interrupted is not in it)
        epoch = load_checkpoint(last, kind="trainer")["epoch"] - 1 if last.is_file() else None
    except (ValueError, KeyError, OSError):
        epoch = None
    if epoch is None or epoch < 0:
        return "no epoch had finished: nothing was saved, and the same command starts again"
    return f"{last} keeps epoch {epoch}: continue with routing-gym train --resume {last}"


def network_of_file(path: str) -> str:
    """The network (``attention`` or ``pointer``) of a policy file or checkpoint."""
    from ...policies.pretrained import load_policy_file
    from ...policies.registry import network_of

    return network_of(load_policy_file(path))
