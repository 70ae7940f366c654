"""Pictures a reader understands (issue 33): what each frame, legend, caption and gauge tells a reader."""
import os

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

import gymnasium as gym
import numpy as np

import routing_gym  # noqa: F401
from agents.apps.visual import nearest_policy
from routing_gym import render
from frames import episode_snapshots


def test_cvrp__node_area_grows_with_demand_and_the_legend_says_so():
    (first, _), *_, (last, _) = episode_snapshots("cvrp", n=12)
    demand = first.fields["demand"][1:]
    radii = render._radii(first, 1.0)[1:]
    assert np.ptp(demand) > 0 and np.all(np.diff(radii[np.argsort(demand)]) >= 0)  # more demand, larger node
    assert radii[np.argmax(demand)] > radii[np.argmin(demand)]
    for snap in (first, last):  # demand does not change: every frame shows it, first to last
        assert ("size", "demand") in render.frame_legend(snap)


def near(frame, xy, colour, tol=60) -> bool:
    return float(np.linalg.norm(frame[xy[1], xy[0]].astype(float) - np.array(colour, float))) < tol


def test_sdvrp__a_customer_served_by_several_routes_wears_their_colours_and_the_legend_says_so():
    shots = episode_snapshots("sdvrp", n=20, seed=1, size=(600, 600))
    final, frame = shots[-1]
    drawn = render.look(final)
    assert drawn.split, "this episode splits a delivery"
    for i, routes in drawn.split.items():
        visits = [k for k, path in enumerate(drawn.paths) if i in path]
        assert len(routes) >= 2 and routes == [k % len(render.ROUTE_COLOURS) for k in visits]
        x, y = render.to_pixel(final.locs, (600, 600), "sdvrp")[i]
        reach = round(render.node_radius(len(final.locs), (600, 600), "sdvrp") * 0.55) + 3  # on the rim
        left, right = render.ROUTE_COLOURS[routes[0]], render.ROUTE_COLOURS[routes[1]]
        assert near(frame, (x - reach, y), left) and near(frame, (x + reach, y), right), (i, routes)
    assert ("split", "split delivery") in render.frame_legend(final)
    first = shots[0][0]  # nothing split yet: no entry
    assert not render.look(first).split and "split" not in [e.glyph for e in render.frame_legend(first)]
    for problem in ("cvrp", "tsp"):  # one visit per customer: never marked
        assert not any(render.look(s).split for s, _ in episode_snapshots(problem, n=12))


def test_spctsp__legend_says_node_area_is_the_expected_prize_and_the_gauge_the_real_one():
    shots = episode_snapshots("spctsp", n=20, seed=1)
    first = shots[0][0]
    assert ("size", "expected prize") in render.frame_legend(first)
    assert render.look(first).sized  # node areas differ
    radii = render._radii(first, 1.0)
    expected, real = first.fields["prize"], first.fields["real_prize"]
    assert np.argmax(radii[1:]) == np.argmax(expected[1:]) != np.argmax(real[1:])  # sized by the expected prize
    for snap, _ in shots:
        text = snap.gauge[1]
        assert text.startswith("real prize "), text
    collected = sum(float(real[i]) for i in set(shots[-1][0].tour) if i)
    assert f"real prize {collected:.2f}" in shots[-1][0].gauge[1]
    assert ("size", "prize") in render.frame_legend(episode_snapshots("pctsp", n=20, seed=1)[0][0])  # PCTSP's own


def test_cvrp__a_finished_panel_counts_routes_and_customers_served_not_a_load():
    for problem in ("cvrp", "sdvrp"):
        shots = episode_snapshots(problem, n=12)
        running, final = shots[3][0], shots[-1][0]
        assert running.gauge[1].startswith("load ")
        fraction, text, reached = final.gauge
        assert "load" not in text and text == "served 12 / 12" and fraction == 1.0 and reached
        routes = sum(1 for p in render.routes(final) if len(p) > 1)
        assert render.footer_text(final) == f"{routes} routes    served 12 / 12"
        assert render.footer_text(running) == running.gauge[1]


def test_first_frame__shows_no_cost_before_the_first_action(tmp_path, monkeypatch):
    from agents.apps import visual

    (first, _), (second, _), *_ = episode_snapshots("tsp", n=6)
    assert render.header_text(first) == "    step 0    cost -" and "0.000" not in render.header_text(first)
    assert render.header_text(second) == f"    step 1    cost {render.format_cost(second.cost)}"
    assert render.cost_text(0.0, 0) == "-" and render.cost_text(-0.0, 3) == "0.000"
    captions = []
    monkeypatch.setattr(visual, "side_by_side", lambda frames, caps, **kw: captions.append(caps) or frames[0])
    monkeypatch.setattr(visual, "write_video", lambda frames, path, fps=4: path)
    visual.record("tsp", 6, [nearest_policy, visual.random_policy(0)], seed=0, out=str(tmp_path / "x.gif"))
    assert captions[0] == ["nearest: cost -", "random: cost -"]
    assert all("cost -" not in c for caps in captions[1:] for c in caps)


def test_render_compare__panels_of_a_frame_share_one_legend(monkeypatch):
    from agents.apps import visual

    calls = []
    real = visual.render_surface
    monkeypatch.setattr(visual, "render_surface", lambda *a, **kw: calls.append(kw.get("legend")) or real(*a, **kw))
    monkeypatch.setattr(visual, "show", lambda frames, fps, title: None)
    visual.record("cvrp", 10, [nearest_policy, visual.random_policy(3)], seed=2, out=None, size=(240, 240))
    pairs = list(zip(calls[::2], calls[1::2]))
    assert pairs and all(a is not None and a == b for a, b in pairs)  # one legend per frame, the same in both panels
    # ... and it is the union of what either panel shows: a panel's own legend differs from the other's somewhere
    runs = [visual.run_episode(p, "cvrp", 10, 2, frames="none", states=True)
            for p in (nearest_policy, visual.random_policy(3))]
    own = []
    for t in range(max(len(r.states) for r in runs)):
        snaps = [render.snapshot("cvrp", *r.states[min(t, len(r.states) - 1)]) for r in runs]
        own.append([render.frame_legend(s) for s in snaps])
        assert render.shared_legend(snaps) == pairs[t][0]
        assert all(set(entries) <= set(pairs[t][0]) for entries in own[-1])
    assert any(a != b for a, b in own), "these episodes show different entries at some step"


def test_render__png_is_the_final_frame(tmp_path, capsys):
    from PIL import Image

    from agents.apps import visual
    from agents.apps.cli import main

    out = tmp_path / "final.png"
    assert visual.check_writer(str(out)) == "pygame"
    visual.record("op", 8, [nearest_policy], seed=1, out=str(out), size=(240, 200))
    final = visual.run_episode(nearest_policy, "op", 8, 1, (240, 200), frames="last").frames[-1]
    assert np.array_equal(np.asarray(Image.open(out).convert("RGB")), final)
    both = tmp_path / "both.png"
    assert main(["render", "--problem", "tsp", "--num-nodes", "6", "--policy", "nearest", "--policy", "random",
                 "--compare", "--out", str(both)]) == 0
    assert "saved" in capsys.readouterr().out
    picture = np.asarray(Image.open(both).convert("RGB"))
    assert picture.shape[1] == 2 * 600 and picture.shape[0] > 600  # two final panels under their captions


def test_training_curves__one_colour_per_recipe_across_panels_and_a_readable_legend(monkeypatch):
    import runpy
    from pathlib import Path

    import matplotlib.pyplot as plt

    root = Path(__file__).resolve().parents[1]
    monkeypatch.syspath_prepend(str(root / "benchmarks"))
    curves = runpy.run_path(str(root / "benchmarks" / "training_curves.py"))
    folders = ["cvrp20-rollout", "cvrp20-finetune", "op20-rollout", "op20-finetune", "tsp20-rollout", "tsp20-sl",
               "tsp20-sl-130min"]
    runs = [curves["read_run"](root / "training" / f) for f in folders]
    fig = curves["figure"](runs)
    colour_of = {}  # recipe -> the colour its runs are drawn in, in every panel
    by_label = {r["label"]: r["recipe"] for r in runs}
    for ax in fig.axes:
        for line in ax.get_lines():
            if line.get_label() in by_label:
                colour_of.setdefault(by_label[line.get_label()], set()).add(line.get_color())
    assert len(colour_of) == len({r["recipe"] for r in runs}) and all(len(c) == 1 for c in colour_of.values())
    assert len({next(iter(c)) for c in colour_of.values()}) == len(colour_of)  # recipes told apart
    assert runs[0]["recipe"] == runs[2]["recipe"] and runs[1]["recipe"] == runs[3]["recipe"]  # shared across panels
    legend, = fig.legends  # one legend for the figure, each recipe once
    texts = [t.get_text() for t in legend.get_texts()]
    assert len(texts) == len(set(texts)) == len(colour_of) + 1  # + the paper's line
    assert min(t.get_fontsize() for t in legend.get_texts()) >= 10
    sl = [line for ax in fig.axes for line in ax.get_lines() if by_label.get(line.get_label()) == runs[5]["recipe"]]
    assert len({line.get_linestyle() for line in sl}) == 2  # two runs of one recipe in one panel: two line styles
    plt.close(fig)


def test_time_windows__a_bar_under_each_customer_filled_where_its_window_is_open():
    instance = {"locs": np.array([[0.5, 0.5], [0.25, 0.3], [0.75, 0.7]], np.float32),
                "demand": np.array([0.0, 0.3, 0.3], np.float32),
                "time_windows": np.array([[0.0, 2.0], [0.0, 1.0], [1.0, 2.0]], np.float32),
                "service_time": np.zeros(3, np.float32)}
    size = (600, 600)
    env = gym.make("routing/CVRPTW-v0", num_nodes=2, render_mode="rgb_array", render_size=size)
    env.reset(options={"instance": instance})
    frame, snap = env.render(), render.snapshot("cvrptw", env.unwrapped.state, [], 0.0)
    env.close()
    assert snap.windows.tolist() == [[0.0, 1.0], [0.0, 0.5], [0.5, 1.0]]  # fractions of the horizon, the depot's 2.0
    pts = render.to_pixel(snap.locs, size, snap.problem)
    r = float(render._radii(snap, render.node_radius(3, size, snap.problem))[1])
    u = render.layout(size, snap.problem).scale
    for i, first_half_open in ((1, True), (2, False)):
        x, y = pts[i]
        bar_y = round(y + r + max(2, round(2.5 * u)) + 2 * u)  # the middle of the bar, below the node
        left, right = (round(x - 1.25 * r), bar_y), (round(x + 1.25 * r), bar_y)  # a quarter in from each end
        open_at, closed_at = (left, right) if first_half_open else (right, left)
        assert near(frame, open_at, render.NODE_COLOUR), (i, frame[open_at[1], open_at[0]])
        assert near(frame, closed_at, (225, 225, 222), tol=25), (i, frame[closed_at[1], closed_at[0]])
    assert ("window", "time window") in render.frame_legend(snap)
    plain = gym.make("routing/OVRPL-10", render_mode="rgb_array")  # no time windows: no bars, no legend entry
    plain.reset(seed=0)
    no_windows = render.snapshot("mtvrp", plain.unwrapped.state, [], 0.0)
    plain.close()
    assert no_windows.windows is None and all(e.glyph != "window" for e in render.frame_legend(no_windows))
