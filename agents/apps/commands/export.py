"""``routing-gym export``: a trainer checkpoint's policy written as a small policy file, with its metadata
record."""
from __future__ import annotations

from .common import add_command, input_file, output_file

WRITES_AND_READS = ("out", ("checkpoint", "average"))  # never --out over the checkpoint read


def add_parser(sub) -> None:
    """The ``export`` subcommand: the checkpoint read and the policy file written."""
    x = add_command(sub, "export", "write a checkpoint's policy as a small policy file",
                    "Write a trainer checkpoint's policy as a small policy file, with its metadata record.")
    x.add_argument("--checkpoint", type=input_file, required=True, help="a trainer checkpoint (OUT_DIR/last.pt)")
    x.add_argument("--average", type=input_file, nargs="+", metavar="POLICY",
                   help="write the uniform average of the checkpoint's weights and these policies' (policy files or "
                        "trainer checkpoints of the same architecture, e.g. earlier checkpoints of the run or the "
                        "model it continued): a model soup")
    x.add_argument("--out", type=output_file, required=True, help="e.g. agents/weights/tsp20.pt")
    x.set_defaults(func=run)


def run(args) -> int:
    """Write the policy file and say what it holds."""
    from ...policies.pretrained import export_policy

    meta = export_policy(args.checkpoint, args.out, args.average)
    print(f"wrote {args.out}: {meta['problem']}-{meta['num_nodes']}, {meta['instances_seen']} instances seen, "
          f"validation cost {meta['val_cost']}")
    return 0
