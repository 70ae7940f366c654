"""MTVRP's frames (issue 30, item 4): every depot a depot, backhaul customers told apart, open routes
without their return arc, routes back to the depot they left; and ``nearest`` keeps off every depot."""
import os

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

import gymnasium as gym
import numpy as np
import torch

import routing_gym  # noqa: F401
from agents.apps.visual import nearest_policy, refusal
from routing_gym import render
from routing_gym.problems import get_problem
from routing_gym.problems.base import step
from routing_gym.render import DEPOT_COLOUR, NODE_COLOUR, ROUTE_COLOURS

MTVRP = get_problem("mtvrp")
SIZE = (400, 400)
PAPER = (255, 255, 255)


def frame_after(data: dict, tour: list[int]):
    """(snapshot, frame) of the hand-made instance ``data`` after the actions ``tour``."""
    state = MTVRP.reset(MTVRP.instance_from(data))
    cost = 0.0
    for a in tour:
        state, reward, invalid = step(MTVRP, state, torch.tensor([a]))
        assert not bool(invalid[0]), f"action {a} is masked"
        cost -= float(reward[0])
    surf = render.render_surface(MTVRP, state, tour, cost, SIZE)
    return render.snapshot(MTVRP, state, tour, cost), render.surface_to_array(surf)


def close(frame, xy, colour, tol=40) -> bool:
    return float(np.linalg.norm(frame[xy[1], xy[0]].astype(float) - np.array(colour, float))) < tol


def line_at(frame, xy, colour) -> bool:
    """A line of ``colour`` passes within a pixel of ``xy``."""
    return any(close(frame, (xy[0] + dx, xy[1] + dy), colour) for dx in (-1, 0, 1) for dy in (-1, 0, 1))


def paper_at(frame, xy) -> bool:
    """Nothing drawn within a pixel of ``xy``."""
    return all(close(frame, (xy[0] + dx, xy[1] + dy), PAPER, tol=10) for dx in (-1, 0, 1) for dy in (-1, 0, 1))


def along(locs, a, b, fractions=(0.25, 0.35, 0.65, 0.75)):
    """Pixels along the segment from node a to node b (off its middle, where an arrowhead lies)."""
    pa, pb = render.to_pixel(locs, SIZE, MTVRP)[[a, b]].astype(float)
    return [tuple(np.rint(pa + f * (pb - pa)).astype(int)) for f in fractions]


# two depots (0, 1) in opposite corners, a customer near each; nothing else on the paper
TWO_DEPOTS = dict(locs=np.array([[0.1, 0.1], [0.9, 0.9], [0.2, 0.35], [0.75, 0.6]]),
                  demand_linehaul=np.array([0.0, 0.0, 0.3, 0.3]), num_depots=2)
# one depot; the return from customer 2 to the depot would cross empty paper
OPEN = dict(locs=np.array([[0.1, 0.1], [0.5, 0.9], [0.9, 0.5]]), demand_linehaul=np.array([0.0, 0.3, 0.3]))


def test_mtvrp_render__every_depot_is_drawn_as_a_depot_square():
    data = dict(TWO_DEPOTS, locs=np.array([[0.1, 0.1], [0.9, 0.9], [0.1, 0.9], [0.5, 0.5], [0.75, 0.3]]),
                demand_linehaul=np.array([0.0, 0.0, 0.0, 0.3, 0.3]), num_depots=3)
    snap, frame = frame_after(data, [])
    assert snap.depots.tolist() == [True, True, True, False, False]
    pix = render.to_pixel(snap.locs, SIZE, MTVRP)
    for i in (1, 2):  # not the current node (depot 0 wears the current ring): the square's centre
        assert close(frame, pix[i], DEPOT_COLOUR, tol=10), i
    for i in (3, 4):
        assert close(frame, pix[i], NODE_COLOUR, tol=10), i
    assert ("depot", "depot") in render.frame_legend(snap)


def test_mtvrp_render__each_route_returns_to_the_depot_it_left_and_a_depot_move_is_no_route():
    snap, frame = frame_after(TWO_DEPOTS, [2, 0, 1, 3])  # a route from depot 0, a move to depot 1, one from it
    assert snap.done and render.routes(snap) == [[0, 2, 0], [1, 3, 1]]
    for xy in along(snap.locs, 1, 3):
        assert line_at(frame, xy, ROUTE_COLOURS[1]), xy
    for a, b in ((0, 1), (3, 0)):  # no line between the depots, none from the second route to depot 0
        for xy in along(snap.locs, a, b):
            assert paper_at(frame, xy), (a, b, xy)
    assert render.footer_text(snap).startswith("2 routes")


def test_mtvrp_render__an_open_routes_final_frame_has_no_return_arc():
    closed, closed_frame = frame_after(OPEN, [1, 2])
    opened, open_frame = frame_after(dict(OPEN, open_route=True), [1, 2])
    assert closed.done and opened.done
    assert render.routes(closed) == [[0, 1, 2, 0]] and render.routes(opened) == [[0, 1, 2]]
    for xy in along(closed.locs, 2, 0):  # the would-be return: drawn when closed, empty paper when open
        assert line_at(closed_frame, xy, ROUTE_COLOURS[0]), xy
        assert paper_at(open_frame, xy), xy
    for xy in along(opened.locs, 1, 2):  # the rest of the route is drawn
        assert line_at(open_frame, xy, ROUTE_COLOURS[0]), xy
    # an open route's return action ends the route without a line: two routes, neither back to the depot
    data = dict(OPEN, locs=np.array([[0.1, 0.1], [0.5, 0.9], [0.9, 0.5], [0.9, 0.1]]),
                demand_linehaul=np.array([0.0, 0.6, 0.6, 0.3]), open_route=True)
    snap, _ = frame_after(data, [1, 0, 2, 3])
    assert render.routes(snap) == [[0, 1], [0, 2, 3]]


def test_mtvrp_render__backhaul_customers_are_triangles_and_the_legend_says_so():
    data = dict(locs=np.array([[0.5, 0.5], [0.2, 0.2], [0.8, 0.2], [0.2, 0.8], [0.8, 0.8]]),
                demand_linehaul=np.array([0.0, 0.3, 0.3, 0.0, 0.0]),
                demand_backhaul=np.array([0.0, 0.0, 0.0, 0.3, 0.3]))
    snap, frame = frame_after(data, [])
    assert snap.kind.tolist() == [False, False, False, True, True]
    pix = render.to_pixel(snap.locs, SIZE, MTVRP)
    r = render.node_radius(len(snap.locs), SIZE, MTVRP)
    for i in (1, 2, 3, 4):
        above = (pix[i][0], pix[i][1] - round(1.3 * r))  # inside a triangle's top vertex, outside a disc
        assert close(frame, pix[i], NODE_COLOUR, tol=10), i
        assert close(frame, above, NODE_COLOUR if snap.kind[i] else PAPER, tol=60), i
    assert ("kind", "backhaul (pickup)") in render.frame_legend(snap)
    served, _ = frame_after(data, [1, 2, 0, 3, 4])  # still told apart once served (in the route's colour)
    assert served.done and served.kind.tolist() == snap.kind.tolist()
    assert ("kind", "backhaul (pickup)") in render.frame_legend(served)
    plain, _ = frame_after(dict(data, demand_linehaul=np.full(5, 0.2) * (np.arange(5) > 0),
                                demand_backhaul=np.zeros(5)), [])
    assert not plain.kind.any() and "kind" not in [e.glyph for e in render.frame_legend(plain)]


def test_mtvrp_render__the_footer_shows_the_clock_against_the_depots_closing_time():
    env = gym.make("routing/MTVRP-v0", num_nodes=10, variant="VRPTW", render_mode="rgb_array")
    env.reset(seed=0)
    state = env.unwrapped.state
    horizon = float(state.instance.time_windows[0, 0, 1])
    assert np.isfinite(horizon) and f"time 0.00 / {horizon:.2f}" in MTVRP.gauge(state)[1]
    env = gym.make("routing/MTVRP-v0", num_nodes=10, variant="CVRP")
    env.reset(seed=0)
    assert "time 0.00    " in MTVRP.gauge(env.unwrapped.state)[1]  # no windows: the clock alone


def test_nearest__with_several_depots_visits_no_depot_while_a_customer_is_allowed():
    moved = 0
    for seed in range(6):
        env = gym.make("routing/MTVRP-v0", num_nodes=20, variant="MDCVRP", render_mode="rgb_array")
        obs, _ = env.reset(seed=seed)
        done = False
        while not done:
            action = nearest_policy(env, obs)
            depots = obs["is_depot"] > 0
            if depots[action]:
                assert not (obs["action_mask"].astype(bool) & ~depots).any(), (seed, action)
            moved += int(depots[action] and depots[int(obs["current_node"])])
            obs, _, done, _, _ = env.step(action)
    assert moved == 0  # at a depot a customer is always allowed: never a move between depots


def test_refusal__a_click_on_any_depot_gets_the_depot_refusal():
    depots = np.array([True, True, False, False])
    assert refusal("mtvrp", 1, np.zeros(4, bool), depots) == MTVRP.drawing.depot_refusal
    assert refusal("mtvrp", 2, np.zeros(4, bool), depots) == MTVRP.drawing.node_refusal.format(i=2)
