"""Regions on real frames: masks take the object's pixels without depth (by colour), not the depth shadow
on the table; folds of a cloth are not objects; objects against a wall are found without it; an object on
the table under the gripper is found without the arm."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from real2sim.holes import fill_depth_holes, fill_enclosed, round_floors

from ._render import best_region_iou, render_objects


def _scene() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A red object (columns 30-49) on a grey table, 100 x 100 px at 1 m: its columns 30-33 have no depth
    (a grazing side), and so do the table's columns 50-57 (the depth shadow beside it)."""
    rgb = np.full((100, 100, 3), 120, np.uint8)
    rgb[20:80, 30:50] = (200, 30, 30)
    depth = np.full((100, 100), 1.0, np.float32)
    depth[20:80, 30:34] = 0.0
    depth[20:80, 50:58] = 0.0
    mask = np.zeros((100, 100), bool)
    mask[20:80, 34:50] = True
    background = (depth > 0) & ~mask
    return rgb, depth, mask, background


def test_a_mask_takes_its_own_pixels_without_depth_and_not_the_shadow() -> None:
    rgb, depth, mask, background = _scene()
    (grown,) = fill_depth_holes([mask], rgb, depth, background, focal_px=500.0)
    assert grown[20:80, 30:50].all()  # the object's side without depth is in the mask
    assert not grown[:, 50:].any()  # the shadow on the table is not
    assert not grown[:20].any() and not grown[80:].any()


def test_growth_is_bounded_by_the_reach() -> None:
    rgb, depth, mask, background = _scene()
    depth[20:80, 10:34] = 0.0  # a wide hole of the object's colour
    rgb[20:80, 10:30] = (200, 30, 30)
    background = (depth > 0) & ~mask
    (grown,) = fill_depth_holes([mask], rgb, depth, background, focal_px=100.0, reach_m=0.05)
    assert grown[40, 29:34].all()  # 5 px reach at 1 m, 100 px focal
    assert not grown[40, :28].any()


def test_masks_never_take_each_others_pixels() -> None:
    rgb, depth, mask, background = _scene()
    other = np.zeros_like(mask)
    other[20:80, 58:70] = True
    rgb[20:80, 50:70] = (200, 30, 30)  # the shadow now has both objects' colour
    a, b = fill_depth_holes([mask, other], rgb, depth, background & ~other, focal_px=500.0)
    assert not (a & b).any()
    assert (a | b)[20:80, 50:58].all()
    assert not (a & other).any() and not (b & mask).any()


def test_what_a_mask_encloses_is_its_own_but_the_table_seen_through_it() -> None:
    ring = np.zeros((40, 60), bool)
    ring[5:35, 5:55] = True
    ring[10:30, 10:25] = False  # a hole: print or a glint, no depth or a colour cut
    ring[10:30, 35:50] = False  # a hole where the table shows through (a mug's handle)
    table = np.zeros_like(ring)
    table[10:30, 35:50] = True
    other = np.zeros_like(ring)
    other[12:16, 12:16] = True  # a small object of its own, seen inside the first one's outline
    grown, kept = fill_enclosed([ring, other], table)
    assert grown[10:30, 10:25].sum() == 20 * 15 - 16 and not grown[12:16, 12:16].any()
    assert not grown[10:30, 35:50].any() and np.array_equal(kept, other)


def _round_object_seen(profile: list[tuple[float, float]], painted_table: bool) -> tuple[Any, ...]:
    """A red solid of revolution (``profile``: (radius, height) pairs, m) on a grey table seen from above
    at a slant (the table red too when ``painted_table``): its region above the table's 8 mm band with its
    top (m), every pixel's top-view point (m) and height band, the colours (Lab), the camera, its pixels."""
    import trimesh

    from real2sim.overlays import look_at

    from ._render import seen_on_table

    K = np.array([[600.0, 0.0, 160.0], [0.0, 600.0, 120.0], [0.0, 0.0, 1.0]])
    T = look_at(np.array([-0.4, -0.1, 0.35]), np.array([0.0, 0.0, 0.02]))
    frame, pixels, _ = seen_on_table(trimesh.creation.revolve(np.array(profile), sections=64), T, K, 240, 320)
    v, u = np.mgrid[:240, :320]
    rays = np.stack([(u - K[0, 2]) / K[0, 0], (v - K[1, 2]) / K[1, 1], np.ones(u.shape)], -1)
    world = (rays * frame.depth[..., None]) @ T[:3, :3].T + T[:3, 3]
    low = np.abs(world[..., 2]) <= 0.008
    red, grey = np.array([60.0, 170.0, 160.0]), np.array([60.0, 128.0, 128.0])
    lab = np.where((pixels | painted_table)[..., None], red, grey)
    region = pixels & ~low
    return (region, float(world[region, 2].max())), world[..., :2], low, lab, grey, K, T, pixels


@pytest.mark.parametrize("painted_table", [False, True])
def test_a_bowls_floor_read_at_the_tables_height_is_its_own_and_the_table_around_it_is_not(
    painted_table: bool,
) -> None:
    """A bowl whose floor lies 2 mm above the table (as PoseCNN 000003's red bowl's reads): the pixels seen
    through its rim at the table's height are its floor; no table pixel is, even where the table has its
    colour, and a can (a solid of revolution, its inside unseen) gets none."""
    bowl = [(0.0, 0.0), (0.045, 0.0), (0.07, 0.05), (0.066, 0.05), (0.041, 0.002), (0.0, 0.002)]
    region, xy, low, lab, grey, K, T, pixels = _round_object_seen(bowl, painted_table)
    (floor,) = round_floors([region], xy, low, lab, grey, K, T, 80)
    seen_floor = pixels & low & (np.linalg.norm(xy, axis=-1) < 0.044)  # inside: not its outer wall's foot
    assert seen_floor.sum() > 1000  # the test's premise: much of the bowl reads at the table's height
    assert (floor & seen_floor).sum() >= 0.95 * seen_floor.sum() and not (floor & ~pixels).any()
    can = [(0.0, 0.0), (0.035, 0.0), (0.035, 0.1), (0.0, 0.1)]
    region, xy, low, lab, grey, K, T, _ = _round_object_seen(can, painted_table)
    assert not round_floors([region], xy, low, lab, grey, K, T, 80)[0].any()


def test_real_frame_masks_cover_the_annotated_objects() -> None:
    """ClearGrasp's annotation (used here only to check): each object's best region covers it with an IoU of
    at least 0.89 once the pixels without depth along it are given back and the holes it encloses filled
    (0.86-0.92 without the holes, 0.75-0.80 without either), adding little outside; its silhouette, snapped
    to the colour edges, with an IoU of at least 0.93 (0.94-0.97 measured)."""
    from real2sim.datasets import SharedDataMissing, read_any_frame, reference_masks, shared_data_dir
    from real2sim.regions import find_clusters
    from real2sim.table import fit_table

    try:
        path = shared_data_dir("rgbd/cleargrasp/000000080-opaque-rgb-img.jpg")
    except SharedDataMissing as err:
        pytest.skip(f"shared data absent: {err}")
    frame = read_any_frame(path)
    clusters = find_clusters(frame, fit_table(frame))
    refs = reference_masks(path)
    assert refs is not None and len(refs) == 4
    for ref in refs:
        best = max(clusters, key=lambda c: int((c.mask & ref).sum()))
        iou = (best.mask & ref).sum() / (best.mask | ref).sum()
        assert iou >= 0.89, iou
        assert (best.mask & ~ref).sum() <= 0.05 * ref.sum()
        assert best.silhouette is not None
        snapped = (best.silhouette & ref).sum() / (best.silhouette | ref).sum()
        assert snapped >= 0.93 and snapped > iou + 0.01, (snapped, iou)


def test_table_roughness_is_the_median_height_of_the_table_around_a_region() -> None:
    from real2sim.regions import table_roughness

    rng = np.random.default_rng(0)
    height = np.abs(rng.normal(0.0, 0.003, (80, 80)))  # a rough table: about 2 mm median
    mask = np.zeros((80, 80), bool)
    mask[30:50, 30:50] = True
    height[mask] = 0.05
    near = ~mask
    rough = table_roughness(mask, height, near, band_m=0.008)
    assert 0.0015 < rough < 0.0025
    assert table_roughness(mask, np.where(mask, 0.05, 0.0), near, band_m=0.008) == 0.0


def test_folds_of_a_far_cloth_are_not_objects() -> None:
    """ClearGrasp 153: the table cloth rises and folds far from the camera; before the clearance rule ten
    regions 1-2 cm tall stood there, then one 3.6 cm tall where the cloth rises. What is left: the three
    bottles (the two touching ones apart, issue 16) and the thing at the image's top right edge. The
    annotation joins the touching bottles in one mask: the regions within it cover it together."""
    from real2sim.datasets import SharedDataMissing, read_any_frame, reference_masks, shared_data_dir
    from real2sim.regions import find_clusters
    from real2sim.table import fit_table

    try:
        path = shared_data_dir("rgbd/cleargrasp/000000153-opaque-rgb-img.jpg")
    except SharedDataMissing as err:
        pytest.skip(f"shared data absent: {err}")
    frame = read_any_frame(path)
    clusters = find_clusters(frame, fit_table(frame))
    assert len(clusters) <= 4
    assert all(c.height_m > 0.03 for c in clusters)
    for ref in reference_masks(path) or []:
        inside = [c.mask for c in clusters if (c.mask & ref).sum() >= 0.5 * c.mask.sum()]
        assert (np.logical_or.reduce(inside) & ref).sum() >= 0.8 * ref.sum()


def _real_clusters(name: str) -> list[Any]:
    """The regions of the shared data's frame ``rgbd/<name>``; the test skips where the data is absent."""
    from real2sim.datasets import SharedDataMissing, read_any_frame, shared_data_dir
    from real2sim.regions import find_clusters
    from real2sim.table import fit_table

    try:
        path = shared_data_dir(f"rgbd/{name}")
    except SharedDataMissing as err:
        pytest.skip(f"shared data absent: {err}")
    frame = read_any_frame(path)
    return find_clusters(frame, fit_table(frame))


def test_objects_against_a_wall_are_found_without_the_wall() -> None:
    """ClearGrasp 130: a mug and an apple stand by the wall, joined to it in depth; the wall made one region
    with them, dropped as a tall structure, so neither was found. Without the wall's plane they are. The foot
    of the wall behind the mug, cut off from the rest by it (800 px, 0.6 cm thick: in the wall's plane), was
    a ninth region; the eight are the frame's objects counted by hand."""
    clusters = _real_clusters("cleargrasp/000000130-opaque-rgb-img.jpg")
    mug = [c for c in clusters if c.mask[430, 500]]
    apple = [c for c in clusters if c.mask[445, 350]]
    assert len(mug) == 1 and len(apple) == 1 and mug[0] is not apple[0]
    assert 0.09 < mug[0].height_m < 0.15 and mug[0].footprint_m[0] < 0.12  # the mug, not the wall
    assert apple[0].height_m < 0.1 and apple[0].footprint_m[0] < 0.12
    assert len(clusters) == 8


def test_a_strip_of_the_wall_is_no_object() -> None:
    """ClearGrasp 130 with glasses: a strip along the wall's foot (6000 px, 0.7 cm thick, 26 cm long) was an
    object. Its points lie 1.4 cm (median) from the wall's plane as RANSAC's three points set it, 4 mm from
    that plane refitted to its inliers: now in it, so a piece of the wall."""
    clusters = _real_clusters("cleargrasp/000000130-transparent-rgb-img.jpg")
    assert not any(c.mask[100:120, 490:510].any() for c in clusters)
    assert any(c.mask[430, 500] for c in clusters)  # the mug by the wall is still found


def test_a_brush_under_the_gripper_is_found_and_a_wall_behind_the_table_is_not() -> None:
    """sweeping_sand: the gripper hangs 1 cm over the brush, so in depth the brush is one tall structure with
    the arm and was dropped with it (the brush's label then went to a piece of the sand). An object on the
    table under the structure is now found; the wall at the back of ClearGrasp 080, which rests on the table
    too but leaves the image at its top, is still no object."""
    from real2sim.datasets import SharedDataMissing, read_any_frame, shared_data_dir
    from real2sim.regions import find_clusters
    from real2sim.table import fit_table
    from simpact.tasks import load_task
    from solvers.world import make_world

    scene = load_task("sweeping_sand").scene(0)
    frame = make_world(scene).render()
    brush = frame.masks == {n: i for i, n in frame.mask_names.items()}["brush"]
    best = max(
        (
            int((c.mask & brush).sum()) / int((c.mask | brush).sum())
            for c in find_clusters(frame, fit_table(frame))
        ),
        default=0.0,
    )
    assert best >= 0.8, best
    try:
        path = shared_data_dir("rgbd/cleargrasp/000000080-opaque-rgb-img.jpg")
    except SharedDataMissing as err:
        pytest.skip(f"shared data absent: {err}")
    real = read_any_frame(path)
    assert not any(c.mask[:2].any() for c in find_clusters(real, fit_table(real)))


def test_a_low_bump_of_the_table_s_colour_is_no_object_but_a_low_object_of_another_is() -> None:
    """UOIS 0007 and 0008: slivers 1.2-2.2 cm high of the table's own colour (mixed depth at a mug's foot,
    the warped far edge of the table) were objects, simulated as obstacles. A low region of the table's
    colour is now a bump of the table, also where the table around it is lighter than elsewhere; a red one as
    low is still an object. The bump here rises from the table in two steps of 9 mm (a 1.8 cm block on an
    8 cm plate), not one steep side: a low object of the table's colour with sides is an object (the dough,
    below)."""
    import trimesh

    from real2sim.regions import find_clusters
    from real2sim.table import fit_table

    from .test_segment import cast_frame

    table = trimesh.creation.box([1.2, 1.2, 0.02])
    table.apply_translation([0.0, 0.0, -0.01])
    plate = trimesh.creation.box([0.08, 0.08, 0.009])
    plate.apply_translation([0.0, 0.0, 0.0045])
    block = trimesh.creation.box([0.04, 0.04, 0.018])
    block.apply_translation([0.0, 0.0, 0.009])
    bump = trimesh.util.concatenate([plate, block])
    frame = cast_frame([table, bump], np.array([-0.6, 0.0, 0.5]), np.array([0.0, 0.0, 0.0]))
    assert frame.masks is not None
    assert find_clusters(frame, fit_table(frame)) == []  # grey on grey: the table's colour
    # in a highlight of a white cloth (ClearGrasp 153): brighter than the table as a whole, not than around it
    v, u = np.nonzero(frame.masks == 1)
    frame.rgb[v.min() - 15 : v.max() + 15, u.min() - 15 : u.max() + 15] = 230
    assert find_clusters(frame, fit_table(frame)) == []
    frame.rgb[frame.masks == 1] = (200, 30, 30)
    (found,) = find_clusters(frame, fit_table(frame))
    truth = frame.masks == 1
    assert (found.mask & truth).sum() / (found.mask | truth).sum() > 0.8


def test_a_mug_behind_a_can_is_found_through_the_depth_cameras_smeared_edge() -> None:
    """avoid_obstacle through a depth camera that smears edges over 2 px (simpact.bench.sensor_noise; the
    model's default, fitted to PoseCNN's camera, smears 0.4 px and leaves no gap): the mug's bottom is hidden
    by the can in front, and the smeared edge between them (mixed depths neither region keeps) put 5 px
    between the mug's lower border and the can; the search under it reached 4, and the mug was lost."""
    from real2sim.regions import find_clusters
    from real2sim.table import fit_table
    from simpact.bench.sensor_noise import SensorNoise, add_sensor_noise
    from simpact.tasks import load_task
    from solvers.world import make_world

    frame = make_world(load_task("avoid_obstacle").scene(0)).render()
    ids = {n: i for i, n in frame.mask_names.items()}
    noisy = add_sensor_noise(frame, 0, SensorNoise(smear_px=2.0))
    clusters = find_clusters(noisy, fit_table(noisy))
    for name in ("can", "mug"):
        truth = frame.masks == ids[name]
        best = max(int((c.mask & truth).sum()) / int((c.mask | truth).sum()) for c in clusters)
        assert best > 0.7, (name, best)


def test_a_sliver_seen_above_a_nearer_object_is_no_object() -> None:
    """A region that does not reach the table is kept when a nearer kept region hides its bottom, and only
    when it is large enough to be an object (UOIS 0006: a 149 px sliver of a tub between two cups)."""
    from real2sim.regions import _resting

    z = np.full((200, 200), 1.0)
    front = np.zeros((200, 200), bool)
    front[120:180, 60:140] = True
    z[front] = 0.8
    behind_big = np.zeros_like(front)
    behind_big[60:116, 70:130] = True  # 4 rows of smeared edge above the front object
    sliver = np.zeros_like(front)
    sliver[108:116, 62:77] = True
    regions = [(front, 0.1, 0.9), (behind_big, 0.15, 0.0), (sliver, 0.12, 0.0)]
    kept, small, _ = _resting(regions, z, 0.15, focal_px=600.0)
    assert [m is front or m is behind_big for m, _ in kept] == [True, True]
    assert [m is sliver for m, _ in small] == [True]  # left to join_insides, which finds no round whole
    far = np.zeros_like(front)
    far[60:110, 70:130] = True  # 10 rows above it: no longer seen to be hidden by it
    kept, small, _ = _resting([(front, 0.1, 0.9), (far, 0.15, 0.0)], z, 0.15, focal_px=600.0)
    assert len(kept) == 1 and not small


def test_a_bowls_front_wall_cut_off_at_its_rim_is_put_back() -> None:
    """bowl_stacking through the depth camera model: the projector's shadow along the white bowl's front rim
    cut its front wall off as a region of its own (mask IoU 0.63); it lies within the bowl's round footprint
    and is of its hue, so it is part of it (0.77; 0.79 from the exact depth)."""
    best = best_region_iou("bowl_stacking", 0, "white_bowl", noise=True)
    assert best > 0.72, best


def test_only_a_part_of_the_round_regions_hue_within_its_circle_joins_it() -> None:
    from types import SimpleNamespace

    from real2sim.plateaus import merge_into_round

    h, w = 60, 120
    pts = np.zeros((h, w, 3))
    valid = np.ones((h, w), bool)
    lab = np.full((h, w, 3), 128.0)
    ring = np.zeros((h, w), bool)  # a bowl's back: its points on a circle of 7 cm about (0, 0)
    ring[:30, :100] = True
    angles = np.linspace(np.pi * 0.1, np.pi * 0.9, 100)
    pts[:30, :100, 0] = 0.07 * np.cos(angles)
    pts[:30, :100, 1] = 0.07 * np.sin(angles)
    front = np.zeros((h, w), bool)  # its front wall, on the circle's near side, 2 px below in the image
    front[32:40, 20:80] = True
    pts[32:40, 20:80, 0] = np.linspace(-0.05, 0.05, 60)
    pts[32:40, 20:80, 1] = -0.045
    table = SimpleNamespace(T_world_cam=np.eye(4))
    merged = merge_into_round([(ring, 0.05), (front, 0.05)], pts, valid, table, lab)
    assert len(merged) == 1 and (merged[0][0] == (ring | front)).all()
    # Of its hue but rising 4 cm over its rim: a can standing in the bowl stays an object.
    assert len(merge_into_round([(ring, 0.05), (front, 0.09)], pts, valid, table, lab)) == 2
    lab[front] = (128.0, 90.0, 170.0)  # another hue: an apple in the bowl stays an object
    assert len(merge_into_round([(ring, 0.05), (front, 0.05)], pts, valid, table, lab)) == 2
    pts[32:40, 20:80, 1] = -0.12  # outside the circle: a box before the bowl stays an object
    lab[front] = 128.0
    assert len(merge_into_round([(ring, 0.05), (front, 0.05)], pts, valid, table, lab)) == 2


def test_a_small_bowls_inside_seen_over_its_near_rim_is_the_bowls() -> None:
    """bowl_stacking: the depth steps at the green bowl's near rim (7 cm across), from the rim to the floor
    behind it, so its inside is a region of its own that stands on the floor, not on the table, and shows
    under 15 cm²: it was dropped and the bowl was its front wall (mask IoU 0.57 from the exact depth on seed
    2; 0.33 through the depth camera model on seed 1, the shape fitted to it 55 % too large)."""
    for seed, noisy, least in ((2, None, 0.9), (1, True, 0.6)):
        best = best_region_iou("bowl_stacking", seed, "green_bowl", noise=noisy)
        assert best > least, (seed, noisy, best)


def test_a_part_over_a_nearer_region_joins_it_only_as_a_round_whole_of_its_hue() -> None:
    from types import SimpleNamespace

    from real2sim.plateaus import join_insides

    h, w = 60, 120
    pts = np.zeros((h, w, 3))
    valid = np.ones((h, w), bool)
    lab = np.full((h, w, 3), 128.0)
    front = np.zeros((h, w), bool)  # a bowl's front wall: the near arc of a circle of 3.6 cm about (0, 0)
    front[32:40, :100] = True
    near_arc = np.linspace(np.pi * 1.1, np.pi * 1.9, 100)
    pts[32:40, :100, 0], pts[32:40, :100, 1] = 0.036 * np.cos(near_arc), 0.036 * np.sin(near_arc)
    inside = np.zeros((h, w), bool)  # its inside over the rim: the far arc, a 3 mm wall in
    inside[20:30, :100] = True
    far_arc = np.linspace(np.pi * 0.1, np.pi * 0.9, 100)
    pts[20:30, :100, 0], pts[20:30, :100, 1] = 0.033 * np.cos(far_arc), 0.033 * np.sin(far_arc)
    lab[front] = (60.0, 102.0, 147.0)  # the shaded outside: the lit inside's hue at half its chroma
    lab[inside] = (120.0, 76.0, 166.0)
    table = SimpleNamespace(T_world_cam=np.eye(4))
    ((joined, top),) = join_insides([(inside, 0.04)], [(front, 0.041)], pts, valid, table, lab)
    assert (joined == (front | inside)).all() and top == 0.041
    lab[inside] = (120.0, 166.0, 147.0)  # another hue (red): an apple seen over the rim stays apart
    assert join_insides([(inside, 0.04)], [(front, 0.041)], pts, valid, table, lab)[0][0] is front
    lab[inside] = (120.0, 76.0, 166.0)
    pts[20:30, :100, 0] += 0.07  # a second cup beside the first, of its hue: no round whole
    pts[20:30, :100, 1] -= 0.03
    assert join_insides([(inside, 0.04)], [(front, 0.041)], pts, valid, table, lab)[0][0] is front


def test_a_low_object_of_the_tables_colour_with_steep_sides_is_no_bump() -> None:
    """shape_dough seed 1: the beige dough (2.1 cm tall) on the wooden table was dropped as a bump of the
    table (low and of its colour); its sides rise from the table far more steeply than a warp's."""
    from real2sim.regions import find_clusters
    from real2sim.table import fit_table
    from simpact.tasks import load_task
    from solvers.world import make_world

    frame = make_world(load_task("shape_dough").scene(1)).render()
    truth = frame.masks == {n: i for i, n in frame.mask_names.items()}["dough"]
    clusters = find_clusters(frame, fit_table(frame))
    assert len(clusters) == 1 and int((clusters[0].mask & truth).sum()) / int(truth.sum()) > 0.8


def test_a_dip_at_the_edge_of_a_shadow_does_not_split_an_object() -> None:
    """sweeping_sand through the depth camera model: the gripper's shadow falls across the brush, and the
    cells at its edge read low (the depth there is the shadow edge's); the saddle test took that for a dip
    between two objects and split the brush in two (mask IoU 0.41, extent 45 %, 3.7 cm off)."""
    from real2sim.regions import find_clusters
    from real2sim.table import fit_table
    from simpact.bench.sensor_noise import add_sensor_noise
    from simpact.tasks import load_task
    from solvers.world import make_world

    frame = make_world(load_task("sweeping_sand").scene(0)).render()
    brush = frame.masks == {n: i for i, n in frame.mask_names.items()}["brush"]
    noisy = add_sensor_noise(frame, 0)
    best = max(
        int((c.mask & brush).sum()) / int((c.mask | brush).sum())
        for c in find_clusters(noisy, fit_table(noisy))
    )
    assert best > 0.75, best


def test_the_halo_a_cup_leaves_on_the_table_behind_it_is_no_object() -> None:
    """UOIS 0006: the smoothed depth raises the table behind the pink cup by 2-5 cm; the colour split cut that
    beige strip (rows 123-161, columns 303-360) off the cup as an object of its own. Every other region stays
    (12 before the halo test, 11 after)."""
    clusters = _real_clusters("uois/image_0006.npy")
    strip = np.zeros(clusters[0].mask.shape, bool)
    strip[123:162, 303:361] = True
    on_strip = [c for c in clusters if (c.mask & strip).sum() >= 0.5 * c.mask.sum()]
    assert not on_strip, [int(c.mask.sum()) for c in on_strip]
    assert len(clusters) == 11


def test_a_can_standing_in_a_bowl_of_its_colour_is_found_on_the_bowls_floor() -> None:
    """A can 12 cm tall standing on the floor (6 mm high) of a bowl of its colour, rendered, its depth
    smoothed as UOIS's camera smooths it (a Gaussian of 2 px): the depth cuts leave them one region. It is
    split in two, the can to be fitted standing on the floor it was found on (12 mm from the smoothed depth),
    and not merged back as the bowl's wall (it rises 4.6 cm over the rim). Before: one region over both."""
    import cv2

    from real2sim.regions import find_clusters
    from real2sim.table import fit_table
    from simpact.core.frame import Frame
    from simpact.core.scene import SceneObject

    teal = (0.2, 0.6, 0.55, 1.0)
    bowl = SceneObject("bowl", "bowl", (0.09, 0.08, 0.006), (0.55, 0.12, 0.0), rgba=teal, collides=False)
    can = SceneObject("can", "cylinder", (0.03, 0.12), (0.55, 0.12, 0.066), rgba=teal, collides=False)
    sharp = render_objects((bowl, can))
    assert sharp.masks is not None
    smooth = cv2.GaussianBlur(sharp.depth, (0, 0), 2.0)
    frame = Frame(sharp.rgb, smooth, sharp.K, sharp.T_base_cam, sharp.masks, dict(sharp.mask_names))
    truth = {n: sharp.masks == i for i, n in sharp.mask_names.items()}
    clusters = find_clusters(frame, fit_table(frame))
    best = {n: max(clusters, key=lambda c: int((c.mask & t).sum())) for n, t in truth.items()}
    assert best["bowl"] is not best["can"], "one region over the bowl and the can"
    for name, c in best.items():
        iou = (c.mask & truth[name]).sum() / (c.mask | truth[name]).sum()
        assert iou > 0.7, (name, iou)
    assert best["can"].support_m == pytest.approx(0.006, abs=0.008) and best["bowl"].support_m == 0.0


def test_a_thin_ramp_beside_a_taller_region_is_its_halo_but_not_a_level_strip() -> None:
    """UOIS 0000 and 0001 (the held-out frames): the smoothed depth leaves a strip 9 px wide along a toy
    drill's handle, falling from 3.5 to 1.2 cm away from it, that the depth cut parted from the drill (an
    object, `poor`, in each). A strip that falls so beside a region twice its height is its halo; a level one
    (a marker lying beside a box), a wide one or one beside a region not twice its height is not."""
    from real2sim.region_check import ramp_beside

    height = np.zeros((60, 100))
    box = np.zeros(height.shape, bool)
    box[10:50, 20:51] = True
    height[box] = 0.18
    strip = np.zeros(height.shape, bool)
    strip[12:48, 51:59] = True  # 8 px wide, touching the box
    height[:, 51:59] = np.linspace(0.035, 0.012, 8)
    regions = [(box, 0.18), (strip, 0.035)]
    assert ramp_beside(strip, regions, height)
    level = np.where(strip, 0.018, height)
    assert not ramp_beside(strip, [(box, 0.18), (strip, 0.018)], level)
    assert not ramp_beside(strip, [(box, 0.05), (strip, 0.035)], height)  # not twice its height
    wide = np.zeros(height.shape, bool)
    wide[12:48, 51:75] = True  # 24 px wide
    height[:, 51:75] = np.linspace(0.035, 0.005, 24)
    assert not ramp_beside(wide, [(box, 0.18), (wide, 0.035)], height)


def test_objects_seen_from_straight_above_are_found() -> None:
    """A calibrated camera 55 cm straight above the table: a can shows only its top (its outline drops 10 cm
    straight down to the table, no side seen) and a box runs off the image's top edge (there not a structure
    rising out of view, as it is for a camera looking from the front). Both are found; before, neither."""
    from real2sim.regions import find_clusters
    from real2sim.table import faces_image_up, fit_table
    from simpact.core.scene import SceneObject
    from solvers.mujoco.render import CameraSpec

    T = np.eye(4)
    T[:3, :3] = [[0.0, -1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, -1.0]]  # camera x, y, z as columns
    T[:3, 3] = [0.65, 0.15, 0.55]
    K = np.array([[600.0, 0.0, 320.0], [0.0, 600.0, 240.0], [0.0, 0.0, 1.0]])
    box = SceneObject("box", "box", (0.06, 0.12, 0.05), (0.86, 0.15, 0.025), rgba=(0.8, 0.3, 0.2, 1.0))
    can = SceneObject("can", "cylinder", (0.03, 0.1), (0.62, 0.2, 0.05), rgba=(0.2, 0.4, 0.8, 1.0))
    frame = render_objects((box, can), CameraSpec(640, 480, K, T))
    assert frame.masks is not None
    table = fit_table(frame)
    assert not faces_image_up(table.normal_cam)
    clusters = find_clusters(frame, table)
    for i, name in frame.mask_names.items():
        truth = frame.masks == i
        best = max((int((c.mask & truth).sum()) / int((c.mask | truth).sum()) for c in clusters), default=0.0)
        assert best > 0.9, (name, best)
    assert (frame.masks == {n: i for i, n in frame.mask_names.items()}["box"])[
        :2
    ].any()  # it runs off the top
