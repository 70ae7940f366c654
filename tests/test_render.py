"""Rendering (routing_gym.render) and visual rollouts (agents.apps.visual), headless."""
import os

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

import ast
import inspect
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch

import routing_gym  # noqa: F401
import routing_gym.vector
from agents.apps import visual
from agents.apps.visual import builtin_policy, nearest_policy, node_at, play, random_policy, record
from routing_gym import render
from routing_gym.render import CURRENT_COLOUR, DEPOT_COLOUR, ROUTE_COLOURS, Viewer, save_png, to_pixel
from frames import episode_snapshots

PROBLEMS = tuple(routing_gym.PROBLEMS)  # every problem in the registry
SIZE = (240, 200)


def make(problem, n=8, size=SIZE, render_mode="rgb_array"):
    return gym.make(f"routing/{problem.upper()}-v0", num_nodes=n, render_mode=render_mode, render_size=size)


def pixel(frame, xy):
    return tuple(int(v) for v in frame[xy[1], xy[0]])


def colour_count(frame, colour, min_pixels=10) -> bool:
    return int(np.all(frame == np.array(colour, dtype=np.uint8), axis=-1).sum()) >= min_pixels


def test_to_pixel__unit_square_corners_inside_frame_y_up():
    for size in ((600, 600), (800, 300), (200, 500)):
        (x0, y0), (x1, y1) = to_pixel(np.array([[0.0, 0.0], [1.0, 1.0]]), size)
        assert 0 <= x0 < x1 < size[0] and 0 <= y1 < y0 < size[1]
        assert abs((x1 - x0) - (y0 - y1)) <= 1  # a square, not stretched


@pytest.mark.parametrize("problem", PROBLEMS)
def test_render__rgb_array_frame_is_hxw3_uint8(problem):
    env = make(problem)
    obs, _ = env.reset(seed=1)
    done = False
    while True:
        frame = env.render()
        assert frame.shape == (SIZE[1], SIZE[0], 3) and frame.dtype == np.uint8
        if done:
            break
        obs, _, done, _, _ = env.step(nearest_policy(env, obs))
    env.close()


@pytest.mark.parametrize("problem", PROBLEMS)
def test_render__frames_deterministic_for_seed(problem):
    def frames(seed):
        env = make(problem)
        obs, _ = env.reset(seed=seed)
        out = [env.render()]
        for _ in range(3):
            obs, *_ = env.step(nearest_policy(env, obs))
            out.append(env.render())
        return out

    a, b, c = frames(5), frames(5), frames(6)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a[0], c[0])


@pytest.mark.parametrize("problem", PROBLEMS)
def test_render__depot_and_current_node_pixels_have_their_colours(problem):
    env = make(problem, n=10, size=(400, 400))
    obs, _ = env.reset(seed=0)
    for _ in range(2):
        obs, *_ = env.step(nearest_policy(env, obs))
    while int(obs["current_node"]) == 0:  # back at the depot (nothing else was allowed): one step more
        obs, *_ = env.step(nearest_policy(env, obs))
    frame = env.render()
    unit = env.unwrapped
    pix = to_pixel(unit.problem.layout(unit.state.instance)[0].numpy(), (400, 400), problem)  # where nodes are drawn
    current = int(obs["current_node"])
    assert current != 0
    assert pixel(frame, pix[current]) == CURRENT_COLOUR
    if unit.problem.has_depot:
        assert pixel(frame, pix[0]) == DEPOT_COLOUR
    env.close()


def test_render__cvrp_route_colours_equal_routes_so_far():
    env = make("cvrp", n=20, size=(300, 300))
    obs, _ = env.reset(seed=3)
    tour, done, seen_routes = [], False, set()
    while not done:
        obs, _, done, _, _ = env.step(a := nearest_policy(env, obs))
        tour.append(a)
        routes = len([r for r in " ".join(map(str, tour)).split(" 0") if r.strip(" 0")])  # non-empty routes
        frame = env.render()
        shown = sum(colour_count(frame, c) for c in ROUTE_COLOURS)
        assert shown == min(routes, len(ROUTE_COLOURS)), (tour, shown)
        seen_routes.add(routes)
    assert max(seen_routes) >= 2
    env.close()


def test_routes__cvrp_split_at_depot_and_closed_when_done():
    env = make("cvrp", n=6)
    obs, _ = env.reset(seed=0)
    done = False
    while not done:
        obs, _, done, _, info = env.step(nearest_policy(env, obs))
    snap = render.snapshot("cvrp", env.unwrapped.state, info["tour"][info["tour"] >= 0], info["cost"])
    paths = render.routes(snap)
    assert all(p[0] == 0 and p[-1] == 0 for p in paths)
    assert sorted(i for p in paths for i in p if i) == list(range(1, 7))


def test_vector_render__frame_of_sub_env_zero_is_the_single_envs():
    venv = gym.make_vec("routing/CVRP-v0", num_envs=3, vectorization_mode="vector_entry_point", num_nodes=8,
                        render_mode="rgb_array")
    env = make("cvrp", size=(600, 600))
    vobs, _ = venv.reset(seed=4)
    obs, _ = env.reset(seed=4)
    for _ in range(3):
        a = nearest_policy(env, obs)
        actions = np.array([a] + [int(np.flatnonzero(m)[0]) for m in vobs["action_mask"][1:]])
        vobs, *_ = venv.step(actions)
        obs, *_ = env.step(a)
    frame = venv.render()[0]  # one frame per sub-env
    assert frame.shape == (600, 600, 3) and frame.dtype == np.uint8
    assert np.array_equal(frame, env.render())
    venv.close()
    env.close()


def test_viewer__human_mode_runs_episode_and_closes():
    env = make("tsp", n=5, render_mode="human")
    env.unwrapped.metadata = {**env.unwrapped.metadata, "render_fps": 1000}
    obs, _ = env.reset(seed=0)
    done = False
    while not done:
        assert env.render() is None
        obs, _, done, _, _ = env.step(nearest_policy(env, obs))
    env.close()
    env.close()


def test_viewer__window_close_button_closes_cleanly():
    import pygame

    env = make("op", n=5)
    env.reset(seed=0)
    state = env.unwrapped.state
    viewer = Viewer("op", render_mode="human", fps=1000, size=(200, 200))
    assert viewer.draw(state, [], 0.0) is None
    assert pygame.display.get_surface() is not None
    pygame.event.post(pygame.event.Event(pygame.QUIT))
    assert viewer.draw(state, [], 0.0) is None
    assert not pygame.display.get_init()
    assert viewer.draw(state, [], 0.0) is None  # no-op, no crash
    viewer.close()


def test_render__pygame_imported_lazily_not_at_module_level():
    for module in (render, routing_gym.env, routing_gym.vector, visual):
        tree = ast.parse(inspect.getsource(module))
        top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        names = [a.name for n in top for a in n.names] + [n.module or "" for n in top if isinstance(n, ast.ImportFrom)]
        assert not any(name.split(".")[0] == "pygame" for name in names), module.__name__


def test_render__missing_pygame_raises_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "pygame", None)
    with pytest.raises(ImportError, match="pip install pygame"):
        Viewer("tsp", render_mode="rgb_array", fps=4)


def test_save_png__writes_picture_of_requested_size(tmp_path):
    import pygame

    env = make("pctsp", n=6)
    obs, _ = env.reset(seed=0)
    done = False
    while not done:
        obs, _, done, _, info = env.step(nearest_policy(env, obs))
    path = save_png(env.unwrapped.problem, env.unwrapped.state, info["tour"][info["tour"] >= 0], info["cost"],
                    tmp_path / "s.png", size=(300, 200))
    assert pygame.image.load(path).get_size() == (300, 200)


def test_nearest_policy__picks_nearest_unvisited_node_from_node_zero():
    env = make("tsp", n=7)
    obs, _ = env.reset(seed=2)
    locs, tour, done = obs["locs"].astype(np.float64), [], False
    while not done:
        a = nearest_policy(env, obs)
        if tour:
            d = np.linalg.norm(locs - locs[tour[-1]], axis=1)
            d[tour] = np.inf
            assert a == int(np.argmin(d))
        else:
            assert a == 0
        tour.append(a)
        obs, _, done, _, _ = env.step(a)
    assert sorted(tour) == list(range(7))


def test_random_policy__stays_in_mask_and_is_seeded():
    def episode(seed):
        env, policy = make("cvrp", n=8), random_policy(seed)
        obs, _ = env.reset(seed=0)
        tour, done = [], False
        while not done:
            a = policy(env, obs)
            assert obs["action_mask"][a] == 1
            obs, _, done, _, info = env.step(a)
            tour.append(a)
        assert not info["invalid_action"]
        return tour

    assert episode(1) == episode(1)
    assert builtin_policy("nearest") is nearest_policy
    with pytest.raises(ValueError, match="random"):
        builtin_policy("greedy")


def test_record__gif_has_one_frame_per_step_plus_final(tmp_path):
    Image = pytest.importorskip("PIL.Image")
    out = tmp_path / "tsp.gif"
    costs = record("tsp", 5, [nearest_policy], seed=0, out=str(out), size=(160, 160))
    with Image.open(out) as gif:
        assert gif.n_frames == 5 + 1 and gif.size == (160, 160)
    env = make("tsp", n=5)
    obs, _ = env.reset(seed=0)
    actions = []
    for _ in range(5):
        actions.append(nearest_policy(env, obs))
        obs, _, _, _, info = env.step(actions[-1])
    expected = float(routing_gym.tour_cost(routing_gym.TSP, env.unwrapped.state.instance, torch.tensor([actions]))[0])
    assert costs["nearest"] == pytest.approx(expected, rel=1e-5)


def test_record__side_by_side_pads_shorter_episode(tmp_path):
    Image = pytest.importorskip("PIL.Image")
    out = tmp_path / "op.gif"
    costs = record("op", 8, [nearest_policy, random_policy(0)], seed=1, out=str(out), size=(160, 160))
    steps = [len(visual.run_episode(p, "op", 8, 1, frames="none").tour) for p in (nearest_policy, random_policy(0))]
    with Image.open(out) as gif:
        assert gif.n_frames == max(steps) + 1
        assert gif.size[0] == 2 * 160 and gif.size[1] > 160
    assert set(costs) == {"nearest", "random"}


def test_record__mp4_without_encoder_says_what_to_install(monkeypatch, tmp_path):
    real = visual.importlib.util.find_spec
    monkeypatch.setattr(visual.importlib.util, "find_spec", lambda m: None if m == "imageio_ffmpeg" else real(m))
    with pytest.raises(ImportError, match="pip install imageio-ffmpeg"):
        record("tsp", 4, [nearest_policy], seed=0, out=str(tmp_path / "x.mp4"))


def scripted_events(monkeypatch, batches):
    """Replace pygame.event.get with one returning each batch in turn, then QUIT forever."""
    import pygame

    queue = list(batches)

    def get(*args, **kwargs):
        return queue.pop(0) if queue else [pygame.event.Event(pygame.QUIT)]

    monkeypatch.setattr(pygame.event, "get", get)


def test_record__window_playback_exits_on_close(monkeypatch):
    scripted_events(monkeypatch, [[]] * 3)
    costs = record("pctsp", 5, [nearest_policy], seed=0, out=None, fps=1000, size=(160, 160))
    assert set(costs) == {"nearest"}


def test_node_at__nearest_node_within_radius_else_none():
    locs = np.array([[0.1, 0.1], [0.5, 0.5], [0.52, 0.5], [0.9, 0.2]])
    size = (400, 300)
    pix = to_pixel(locs, size)
    for i in (0, 1, 3):
        assert node_at(tuple(pix[i]), locs, size, radius=8) == i
        assert node_at((pix[i][0] - 3, pix[i][1] + 3), locs, size, radius=8) == i
    assert node_at((pix[2][0] + 1, pix[2][1]), locs, size, radius=8) == 2  # the nearer of two close nodes
    assert node_at((pix[0][0] + 30, pix[0][1]), locs, size, radius=8) is None


def test_play__clicks_build_tour_refuse_masked_and_exit_on_close(monkeypatch):
    import pygame

    size = (300, 300)
    env = make("tsp", n=5)
    obs, _ = env.reset(seed=0)
    pix = to_pixel(obs["locs"], size, "tsp")

    def click(i):
        return pygame.event.Event(pygame.MOUSEBUTTONDOWN, button=1, pos=tuple(int(v) for v in pix[i]))

    backspace = pygame.event.Event(pygame.KEYDOWN, key=pygame.K_BACKSPACE)
    # 0, 3, then 3 again (refused: visited), 1 taken back, then 4, 1, 2 to finish
    scripted_events(monkeypatch, [[click(0)], [click(3)], [click(3)], [click(1), backspace], [click(4)],
                                  [click(1)], [click(2)], []])
    result = play("tsp", 5, seed=0, size=size)
    tour = torch.tensor([[0, 3, 4, 1, 2]])
    expected = float(routing_gym.tour_cost(routing_gym.TSP, env.unwrapped.state.instance, tour)[0])
    assert result["you"] == pytest.approx(expected, rel=1e-5)
    assert result["nearest"] > 0
    assert not pygame.display.get_init()


def test_play__closing_before_finishing_returns_none(monkeypatch):
    scripted_events(monkeypatch, [[]])
    result = play("cvrp", 4, seed=0, size=(200, 200))
    assert result["you"] is None and result["nearest"] > 0


def test_refusal__names_the_reason():
    assert visual.refusal("cvrp", 0, np.zeros(4, bool)).startswith("the depot")
    assert "already visited" in visual.refusal("op", 2, np.array([0, 0, 1, 0], bool))


@pytest.mark.parametrize("problem", PROBLEMS)
def test_nearest_policy__is_the_heuristic_the_compare_table_runs(problem):
    """The picture's "nearest" (the single-env built-in) takes the tours of the table's
    (heuristic_tours(..., "nearest")) on the same instances."""
    from agents.references.heuristics import heuristic_tours

    unit = routing_gym.PROBLEMS[problem]
    tours, costs, instances = [], [], []
    for seed in range(8):
        env = make(problem, n=12, render_mode=None)
        obs, _ = env.reset(seed=seed)
        instances.append(env.unwrapped.state.instance)
        tour, cost, done = [], 0.0, False
        while not done:
            tour.append(builtin_policy("nearest")(env, obs))
            obs, reward, done, _, _ = env.step(tour[-1])
            cost -= reward
        tours.append(tour)
        costs.append(cost)
        env.close()
    batch = type(instances[0])(*(torch.cat(fields) for fields in zip(*instances)))
    expected = heuristic_tours(unit, batch, "nearest")
    for tour, planned in zip(tours, expected.tolist()):
        assert planned[:len(tour)] == tour  # then the no-op of a finished episode
    assert np.allclose(costs, routing_gym.tour_cost(unit, batch, expected).numpy(), atol=1e-5)


def test_refusal__texts_are_the_problems_declarations():
    for name, unit in routing_gym.PROBLEMS.items():
        visited = np.zeros(4, bool)
        if unit.has_depot:
            assert visual.refusal(name, 0, visited) == unit.drawing.depot_refusal
        assert visual.refusal(name, 2, visited) == unit.drawing.node_refusal.format(i=2)
    assert "vehicle is full" in visual.refusal("sdvrp", 3, np.zeros(4, bool))
    assert visual.refusal("spctsp", 0, np.zeros(4, bool)) == visual.refusal("pctsp", 0, np.zeros(4, bool))


@pytest.mark.parametrize("size", [(600,), (10, 10), (63, 600), (600.5, 600), 600])
def test_render_size__one_check_for_the_single_env_the_vector_env_and_the_viewer(size):
    with pytest.raises(ValueError, match="render_size must be"):
        make("tsp", size=size)
    with pytest.raises(ValueError, match="render_size must be"):
        gym.make_vec("routing/TSP-v0", num_envs=2, vectorization_mode="vector_entry_point", render_mode="rgb_array",
                     render_size=size)
    with pytest.raises(ValueError, match="render_size must be"):
        Viewer("tsp", render_mode="rgb_array", fps=4, size=size)


def test_render_size__the_smallest_frames_draw_alike_in_both_envs():
    env = make("tsp", n=5, size=(64, 80))
    venv = gym.make_vec("routing/TSP-v0", num_envs=2, vectorization_mode="vector_entry_point", num_nodes=5,
                        render_mode="rgb_array", render_size=(64, 80))
    env.reset(seed=0)
    venv.reset(seed=0)
    assert np.array_equal(env.render(), venv.render()[0]) and env.render().shape == (80, 64, 3)  # one frame per sub-env


# -- what a reader sees: legend, colours, arrowheads, margins, numbers ---------------------------------
def near(frame, colour, tol=40) -> int:
    """How many pixels lie within ``tol`` (Euclidean, RGB) of ``colour``."""
    return int((np.linalg.norm(frame.astype(float) - np.array(colour, float), axis=-1) < tol).sum())


@pytest.mark.parametrize("problem", PROBLEMS)
def test_legend__current_node_entry_only_on_frames_that_show_one(problem):
    unit = routing_gym.PROBLEMS[problem]
    shots = episode_snapshots(problem)
    for snap, frame in shots:
        glyphs = [e.glyph for e in render.frame_legend(snap)]
        has_current = not snap.done and (unit.has_depot or snap.step > 0)
        assert ("current" in glyphs) == has_current, (snap.step, glyphs)
        assert not any("current" in e.text for e in render.frame_legend(snap) if e.glyph != "current")
    final_snap, final = shots[-1]
    assert final_snap.done and near(final, render.CURRENT_COLOUR) == 0  # neither the node nor its legend entry
    assert near(shots[1][1], render.CURRENT_COLOUR) > 0


def test_legend__problem_words_become_the_renderers_glyphs():
    entries = render.legend_entries("cvrp")
    assert [(e.glyph, e.text) for e in entries] == [
        ("depot", "depot"), ("current", "current node"), ("routes", "one colour per route"), ("size", "demand"),
        ("unavailable", "does not fit")]
    assert [(e.glyph, e.text) for e in render.legend_entries("tsp")] == [
        ("start", "start"), ("current", "current node"), ("unavailable", "not allowed now")]
    assert [e.glyph for e in render.legend_entries("pctsp")] == ["depot", "current", "size", "ring", "unavailable"]
    for problem in PROBLEMS:  # every entry has the glyph the frame draws; none is the bare colour word
        for entry in render.legend_entries(problem):
            assert entry.glyph in render.LEGEND_GLYPHS + ("",) and "=" not in entry.text, (problem, entry)  # "": text only


def test_legend__entries_follow_what_the_frame_shows():
    first, *_, last = episode_snapshots("cvrp", n=12)
    assert [e.glyph for e in render.frame_legend(first[0])] == ["depot", "current", "size"]  # no route, no hollow node yet
    assert [e.glyph for e in render.frame_legend(last[0])] == ["depot", "routes", "size"]
    hollow = [s for s, _ in episode_snapshots("cvrp", n=12) if render.look(s).hollow.any()]
    assert hollow and all(("unavailable", "does not fit") in render.frame_legend(s) for s in hollow)
    pctsp_final = episode_snapshots("pctsp", n=12, seed=1)[-1][0]
    assert render.look(pctsp_final).hollow.any()  # the nodes left out
    assert ("unavailable", render.NOT_VISITED) in render.frame_legend(pctsp_final)
    sdvrp_final = episode_snapshots("sdvrp", n=8)[-1][0]  # every demand delivered: sizes no longer differ
    assert "size" not in [e.glyph for e in render.frame_legend(sdvrp_final)]


def test_legend__readable_size_and_contrast():
    def luminance(rgb):
        c = np.array(rgb) / 255
        c = np.where(c <= 0.03928, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
        return float(c @ [0.2126, 0.7152, 0.0722])

    lum = sorted([luminance(render.LEGEND_TEXT_COLOUR), luminance(render.BACKGROUND)])
    assert (lum[1] + 0.05) / (lum[0] + 0.05) >= 7  # WCAG AAA for text
    for problem in PROBLEMS:
        for side, least in ((600, 14), (360, 11)):  # legend text, in pixels of the frame
            rows, px = render.legend_plan(problem, side, side)
            assert rows in (1, 2) and px / render.SUPERSAMPLE >= least, (problem, side, px)


def test_fonts__bold_is_a_true_face_not_pygames_synthetic_bold(monkeypatch):
    """pygame's set_bold thickens letters without widening their advance, leaving gaps ("ship ped"):
    the bold text is set in a bold face of its own instead."""
    import pygame

    pygame.font.init()
    regular, bold = render._font_file(pygame, False), render._font_file(pygame, True)
    assert bold is None or bold != regular  # None: pygame's own font, itself a bold face
    calls = []

    class Font(pygame.font.Font):
        def set_bold(self, value):
            calls.append(value)
            super().set_bold(value)

    monkeypatch.setattr(pygame.font, "Font", Font)
    monkeypatch.setattr(render.text, "_FONTS", {})
    env = make("cvrp", n=5)
    env.reset(seed=0)
    render.render_surface("cvrp", env.unwrapped.state, [], 0.0, SIZE)
    assert render.text._FONTS and not any(calls)


def test_format_cost__no_negative_zero():
    assert render.format_cost(-0.0) == "0.000"
    assert render.format_cost(-0.0004) == "0.000"
    assert render.format_cost(-0.0006) == "-0.001"
    assert render.format_cost(2.5) == "2.500" and render.format_cost(-1.25) == "-1.250"
    env = make("tsp", n=6)
    env.reset(seed=0)
    state = env.unwrapped.state
    frames = [render.surface_to_array(render.render_surface("tsp", state, [], c, SIZE)) for c in (0.0, -0.0, -1e-6)]
    assert np.array_equal(frames[0], frames[1]) and np.array_equal(frames[0], frames[2])


def test_arrow_edges__a_route_there_and_back_has_one_arrowhead():
    assert render.arrow_edges([[0, 3, 0]]) == [[True, False]]
    assert render.arrow_edges([[0, 1, 2, 0], [0, 3, 0]]) == [[True, True, True], [True, False]]
    assert render.arrow_edges([[4, 4]]) == [[False]]


def test_render__depot_and_back_route_draws_one_arrowhead_pointing_out():
    """CVRP with one customer due east of the depot: the route 0 -> 1 -> 0 draws both edges on one line;
    the arrowhead is a single triangle pointing away from the depot (its back wider than its tip), not two
    opposite ones on top of each other (a symmetric bow tie)."""
    size = (600, 600)
    env = make("cvrp", n=1, size=size)
    inst = {"locs": np.array([[0.1, 0.5], [0.9, 0.5]], np.float32), "demand": np.array([0.0, 0.5], np.float32)}
    env.reset(options={"instance": inst})
    *_, done, _, _ = env.step(1)
    assert done and render.routes(render.snapshot("cvrp", env.unwrapped.state, [1], 0.0)) == [[0, 1, 0]]
    frame = env.render()
    (x0, y), (x1, _) = to_pixel(inst["locs"], size, "cvrp")
    band = frame[y - 15:y + 16, x0 + 20:x1 - 20]
    heights = (np.linalg.norm(band.astype(float) - np.array(ROUTE_COLOURS[0], float), axis=-1) < 60).sum(axis=0)
    line = int(np.median(heights))
    head = np.flatnonzero(heights > line)  # the columns of the arrowhead
    assert len(head) >= 6, heights
    span = heights[head[0]:head[-1] + 1]
    quarter = max(1, len(span) // 4)
    assert span[:quarter].mean() > span[-quarter:].mean() + 2, span  # wide back to the left, tip to the right


@pytest.mark.parametrize("problem", ["tsp", "cvrp", "op", "pctsp"])
@pytest.mark.parametrize("size", [(600, 600), (240, 200), (200, 400)])
def test_layout__nodes_on_the_unit_squares_edge_are_drawn_inside_the_frame(problem, size):
    """Nodes at the corners and edge midpoints of the unit square, at their largest (prize, penalty ring,
    start diamond, current ring, depot): the frame line and the pixels just inside and outside it are the
    same as in a frame whose nodes all sit in the middle."""
    unit = routing_gym.PROBLEMS[problem]
    edge = [[1, 1], [0, 1], [1, 0], [0.5, 0], [0, 0.5], [1, 0.5], [0.5, 1]]
    env = gym.make(f"routing/{unit.label}-v0", num_nodes=8 if not unit.has_depot else 7, render_mode="rgb_array",
                   render_size=size)
    env.reset(seed=0)
    base = env.unwrapped.state.instance

    def frames(locs):
        fields = {"locs": torch.tensor([locs], dtype=torch.float32)}
        for name in ("prize", "penalty"):
            if name in base._fields:  # all equal: every node at its largest, every ring at its widest
                fields[name] = torch.where(torch.arange(len(locs)) > 0, 0.2, 0.0)[None].float()
        if "max_length" in base._fields:
            fields["max_length"] = torch.tensor([10.0])
        env.reset(options={"instance": base._replace(**fields)})
        out = [env.render()]
        for a in (0, 1) if not unit.has_depot else (1,):  # a step to the corner (1, 1): the current ring there
            env.step(a)
            out.append(env.render())
        return out

    at_edges = frames([[0.0, 0.0]] + edge)
    in_middle = frames([[0.0, 0.0] if unit.has_depot else [0.5, 0.5]] + [[0.5, 0.5]] * 7)
    if unit.has_depot:  # the depot stays at the corner in both: compare against a frame without it there
        in_middle = frames([[0.5, 0.5]] * 8)
    x, y, w, h = render.paper_rect(size, problem)
    mask = np.zeros((size[1], size[0]), bool)
    for r in (-1, 0, 1, 2):  # one pixel outside the frame line, the line, two inside
        mask[y + r, x - 1:x + w + 1] = mask[y + h - 1 - r, x - 1:x + w + 1] = True
        mask[y - 1:y + h + 1, x + r] = mask[y - 1:y + h + 1, x + w - 1 - r] = True
    for a, b in zip(at_edges, in_middle):
        assert np.array_equal(a[mask], b[mask]), np.argwhere(mask & (a != b).any(-1))[:5]
    lay = render.layout(size, problem)
    assert lay.margin >= render.NODE_REACH * lay.side  # the margin holds the largest node glyph
    env.close()


def test_checkpoint_labels__tell_checkpoints_of_one_name_apart():
    from agents.apps.visual import checkpoint_labels

    assert checkpoint_labels(["runs/a/last.pt", "runs/b/last.pt"]) == ["a/last.pt", "b/last.pt"]
    assert checkpoint_labels(["runs/a/last.pt", "runs/a/best.pt", "nearest", "pretrained"]) == \
        ["a/last.pt", "a/best.pt", "nearest", "pretrained"]
    assert checkpoint_labels(["x/a/last.pt", "y/a/last.pt"]) == ["x/a/last.pt", "y/a/last.pt"]
    assert checkpoint_labels(["runs/a/last.pt", "runs/a/last.pt"]) == ["a/last.pt", "a/last.pt"]  # record numbers them
    assert checkpoint_labels(["policy.pt", "/tmp/m.pt"]) == ["policy.pt", "tmp/m.pt"]  # a file reads as one
