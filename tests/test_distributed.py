"""Data-parallel training under torch.distributed (gloo, 2 CPU processes)."""
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from agents.inference.rollout import make_env, rollout
from agents.training.config import TrainConfig
from agents.training.reinforce import RANK_SEED_STRIDE, Trainer

WORLD = 2
MODEL = {"embed_dim": 16, "n_heads": 2, "n_layers": 1, "ff_hidden": 32}


def config(out_dir, epochs=1):
    return TrainConfig(problem="cvrp", num_nodes=6, epochs=epochs, epoch_size=64, batch_size=32, eval_size=32,
                       val_size=32, baseline="exponential", lr=1e-3, model=MODEL, seed=5, out_dir=str(out_dir))


def flat_params(trainer):
    return torch.cat([p.detach().flatten() for p in trainer.policy.parameters()])


def worker(rank, init_file, out_dir, resume):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    try:
        if resume:
            trainer = Trainer.resume(os.path.join(out_dir, "last.pt"), epochs=2)
        else:
            trainer = Trainer(config(out_dir))
        identical, grads = [], []
        step = trainer.optimizer.step

        def recorded_step(*args, **kwargs):  # the (DDP-averaged) gradient of every step
            grads.append(torch.cat([p.grad.flatten() for p in trainer.policy.parameters()]))
            result = step(*args, **kwargs)
            mine = flat_params(trainer)  # after every step, all ranks must hold the same parameters
            parts = [torch.empty_like(mine) for _ in range(WORLD)]
            dist.all_gather(parts, mine)
            identical.append(all(torch.equal(parts[0], p) for p in parts[1:]))
            return result

        trainer.optimizer.step = recorded_step
        trainer.fit(progress=False, log=False)
        torch.save({"params": flat_params(trainer), "grad0": grads[0], "identical": identical, "epoch": trainer.epoch},
                   os.path.join(out_dir, f"rank{rank}{'-resumed' if resume else ''}.pt"))
        dist.barrier()  # no rank tears gloo down while another still uses it
    finally:
        dist.destroy_process_group()


def emulate(out_dir):
    """The same global batch in one process: each step rolls out the two ranks' instance streams and
    averages their losses, as DDP averages their gradients."""
    cfg = config(out_dir)
    trainer = Trainer(cfg)
    local = cfg.batch_size // WORLD
    env = make_env(cfg.problem, cfg.num_nodes, local)
    streams = [torch.Generator().manual_seed(cfg.seed + RANK_SEED_STRIDE * r) for r in range(WORLD)]
    grads, value = [], None
    for _ in range(cfg.epoch_size // cfg.batch_size):
        trainer.policy.train()
        outs = []
        for g in streams:
            instances = trainer.problem.generate(local, cfg.num_nodes, generator=g)
            outs.append(rollout(trainer.policy, env, instances, strategy="sample", generator=g))
        mean = sum(float(o.cost.mean()) for o in outs) / WORLD
        value = mean if value is None else cfg.exp_beta * value + (1 - cfg.exp_beta) * mean
        loss = sum(((o.cost - value).detach() * o.log_likelihood).mean() for o in outs) / WORLD
        trainer.optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainer.policy.parameters(), cfg.max_grad_norm)
        grads.append(torch.cat([p.grad.flatten() for p in trainer.policy.parameters()]))
        trainer.optimizer.step()
    return flat_params(trainer), grads[0]


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available")
def test_ddp__two_gloo_ranks_stay_identical_and_match_one_process(tmp_path):
    mp.spawn(worker, args=(str(tmp_path / "init"), str(tmp_path), False), nprocs=WORLD, join=True)
    results = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(WORLD)]
    for r in results:
        assert r["identical"] == [True, True] and r["epoch"] == 1
    params, grad0 = emulate(tmp_path / "single")
    assert torch.allclose(results[0]["grad0"], grad0, atol=1e-6, rtol=1e-4)  # DDP averages = global batch
    diff = (results[0]["params"] - params).abs()
    # Adam turns rounding noise in a gradient that is zero in exact arithmetic (the bias just before a
    # normalisation) into steps of up to lr; every other parameter agrees to float precision.
    assert diff.max() <= 2 * 2 * 1e-3 and (diff <= 1e-5).float().mean() > 0.99
    assert (tmp_path / "last.pt").exists() and not (tmp_path / "rank1-last.pt").exists()

    mp.spawn(worker, args=(str(tmp_path / "init2"), str(tmp_path), True), nprocs=WORLD, join=True)
    resumed = [torch.load(tmp_path / f"rank{r}-resumed.pt", weights_only=True) for r in range(WORLD)]
    assert all(r["epoch"] == 2 and r["identical"] == [True, True] for r in resumed)
    assert not torch.equal(resumed[0]["params"], results[0]["params"])


def imitation_worker(rank, init_file, out_dir, labels):
    """Two ranks imitating labels (then REINFORCE) under a minutes budget, whose rate and deadline rank 0
    decides for both: after every step of either kind all ranks must hold the same parameters, and both
    stop at the same step (a rank that went on alone would wait for the other forever)."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    try:
        cfg = TrainConfig(problem="tsp", num_nodes=6, epochs=10_000, epoch_size=64, batch_size=32, eval_size=32,
                          val_size=32, lr=1e-3, model=MODEL, seed=5, out_dir=str(out_dir), imitate=labels,
                          imitation_epochs=1, lr_schedule="cosine", max_minutes=0.25)  # the clock ends the run
        trainer = Trainer(cfg)
        identical = []

        step = trainer.optimizer.step

        def checked_step(*args, **kwargs):  # a step of either kind
            result = step(*args, **kwargs)
            mine = flat_params(trainer)
            parts = [torch.empty_like(mine) for _ in range(WORLD)]
            dist.all_gather(parts, mine)
            identical.append(all(torch.equal(parts[0], p) for p in parts[1:]))
            return result

        trainer.optimizer.step = checked_step
        rows = trainer.fit(progress=False, log=False)
        torch.save({"identical": identical, "nll": "train_nll" in rows[0], "cost": "train_cost" in rows[1],
                    "epochs": len(rows)},
                   os.path.join(out_dir, f"imitation-rank{rank}.pt"))
        dist.barrier()
    finally:
        dist.destroy_process_group()


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available")
def test_ddp__imitation_and_a_clock_driven_schedule_keep_the_ranks_identical(tmp_path):
    from agents.references.exact import held_karp
    from routing_gym.data import save_dataset
    from routing_gym.problems import get_problem

    instances = get_problem("tsp").generate(64, 6, generator=torch.Generator().manual_seed(1))
    cost, tours = held_karp(instances.locs)
    save_dataset(tmp_path / "labels.npz", instances, ref_cost=cost.numpy(), ref_tours=tours.numpy())
    mp.spawn(imitation_worker, args=(str(tmp_path / "init"), str(tmp_path), str(tmp_path / "labels.npz")),
             nprocs=WORLD, join=True)
    epochs = []
    for r in range(WORLD):
        result = torch.load(tmp_path / f"imitation-rank{r}.pt", weights_only=True)
        assert len(result["identical"]) > 4 and all(result["identical"]) and result["nll"] and result["cost"]
        epochs.append(result["epochs"])
    assert epochs[0] == epochs[1]
