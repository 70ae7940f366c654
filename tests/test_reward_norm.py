"""Per-variant reward normalisation (``TrainConfig.reward_norm``): the scales, the groups, and a run that
resumes with them."""
import pytest
import torch

from agents.training.config import TrainConfig
from agents.training.normalisation import GroupScale
from agents.training.reinforce import Trainer, reinforce_loss
from routing_gym.problems import MTVRP, get_problem
from routing_gym.problems.mtvrp import VARIANTS
from routing_gym.problems.mtvrp.unit import variant_names


def test_scale__first_batch_sets_it_then_an_exponential_mean_per_group():
    scale = GroupScale(4, torch.device("cpu"), alpha=0.1)
    first = scale.scale(torch.tensor([0, 0, 2]), torch.tensor([1.0, 3.0, 10.0]))
    assert first.tolist() == [2.0, 2.0, 10.0]  # group means of the first batch
    second = scale.scale(torch.tensor([0, 1]), torch.tensor([12.0, 5.0]))
    assert second.tolist() == pytest.approx([0.9 * 2.0 + 0.1 * 12.0, 5.0])  # group 1 appears: its own mean
    assert scale.mean[2].item() == 10.0  # absent from the batch: unchanged
    restored = GroupScale(4, torch.device("cpu"))
    restored.load_state_dict(scale.state_dict())
    assert torch.equal(restored.mean, scale.mean) and torch.equal(restored.seen, scale.seen)
    with pytest.raises(ValueError, match="groups"):
        GroupScale(3, torch.device("cpu")).load_state_dict(scale.state_dict())


def test_mtvrp_groups__one_code_per_variant():
    def code(flags):
        return sum(int(bool(f)) << i for i, f in enumerate(flags))

    assert len({code(f) for f in VARIANTS.values()}) == 48 and max(map(code, VARIANTS.values())) < 64
    for name in VARIANTS:
        inst = MTVRP.generate(4, 10, generator=torch.Generator().manual_seed(0), variant=name)
        group = MTVRP.reward_groups(inst)
        assert group.dtype == torch.int64 and MTVRP.num_reward_groups == 64
        # an instance's group is the variant it is (a "VRPB" draw without backhaul customers is a CVRP)
        assert group.tolist() == [code(VARIANTS[v]) for v in variant_names(inst)], name


def test_config__refuses_what_cannot_be_normalised():
    with pytest.raises(ValueError, match="reward_norm must be one of"):
        TrainConfig(problem="mtvrp", reward_norm="z")
    with pytest.raises(ValueError, match="not baseline='pomo'"):
        TrainConfig(problem="mtvrp", reward_norm="variant", baseline="pomo")
    tiny = dict(num_nodes=10, epochs=1, epoch_size=8, batch_size=8, eval_size=8, val_size=8, device="cpu")
    with pytest.raises(ValueError, match="TSP declares none"):
        Trainer(TrainConfig(problem="tsp", reward_norm="variant", **tiny))


def test_normalised_run__divides_the_advantage_and_resumes_with_its_scales(tmp_path):
    cfg = dict(problem="mtvrp", variant={"variant": "mixed"}, num_nodes=10, epochs=2, epoch_size=16, batch_size=8,
               eval_size=8, val_size=8, device="cpu", baseline="exponential", warmup_epochs=0,
               model={"embed_dim": 16, "n_layers": 1, "ff_hidden": 32, "n_heads": 2}, seed=5)
    plain, normed = Trainer(TrainConfig(**cfg)), Trainer(TrainConfig(reward_norm="variant", **cfg))
    normed.policy.load_state_dict(plain.policy.state_dict())
    loss_plain, cost_plain = reinforce_loss(plain)
    loss_normed, cost_normed = reinforce_loss(normed)
    assert cost_plain == cost_normed  # the same batch and samples
    assert normed.reward_scale.seen.sum() > 1 and not torch.isclose(loss_plain, loss_normed)

    run = Trainer(TrainConfig(reward_norm="variant", out_dir=str(tmp_path / "run"), **{**cfg, "epochs": 1}))
    run.fit(progress=False, log=False)
    resumed = Trainer.resume(tmp_path / "run" / "last.pt", epochs=2)
    assert torch.equal(resumed.reward_scale.mean, run.reward_scale.mean) and bool(run.reward_scale.seen.any())


def test_problems_without_groups_declare_none():
    assert get_problem("cvrp").num_reward_groups == 0
    with pytest.raises(NotImplementedError):
        get_problem("cvrp").reward_groups(None)
