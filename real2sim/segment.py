"""Object segmentation back-ends, chosen by name: ``geometric`` (default), ``masks``, ``grounded_sam2``.

``segment(frame, table, labels, backend)`` returns one :class:`~real2sim.types.Segment` per label it found,
in the order of ``labels``; a label with no segment is left out (the caller reports it).

- ``geometric``: the pixels standing above the table plane, split into connected regions at depth
  discontinuities; regions that do not rest on the table (the robot arm, background clutter beyond the
  table's edge) are dropped. Regions are matched to labels by an ``assign(rgb, clusters, labels)``
  callable when one is given (e.g. a VLM), otherwise by the cues in the labels: colour and size words
  ("green bowl", "small box"), known or typical objects' sizes ("tomato soup can", "mug"), shape words
  against the region's top-view outline (box vs can); labels without any cue take the remaining regions
  in decreasing size (first label = largest region). Labels naming something flat (:data:`FLAT_WORDS`:
  "red square", "blue mat") are found instead as the largest table patch of the colour they name. A region
  whose top view is two plateaus with a step between them (a can lying against a taller one) is split in
  two; numbered copies of one object (``bean_00`` ... ``bean_19``) left with fewer regions than labels get
  those regions cut into as many pieces of equal footprint.
- ``masks``: the masks that came with the frame (e.g. rendered ground truth), matched to labels by name.
- ``grounded_sam2``: GroundingDINO boxes for the labels, refined into masks by SAM 2, loaded from local
  checkpoints named by environment variables (:mod:`real2sim.grounded_sam2`); nothing downloads.

The geometric back-end's regions come from :mod:`real2sim.regions`; this module matches them to labels.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from scipy.cluster.vq import kmeans2
from scipy.optimize import linear_sum_assignment

from real2sim.datasets import YCB_SIZES_M
from real2sim.grounded_sam2 import grounded_sam2_settings, segment_grounded_sam2
from real2sim.piles import grow_pile, is_granular
from real2sim.regions import Cluster, find_clusters
from real2sim.shape import kind_from_label
from real2sim.table import camera_points
from real2sim.types import Segment, SegmentationError, TablePlane, label_words
from simpact.core.frame import Frame

__all__ = [
    "COLOURS",
    "SEGMENTERS",
    "AssignFn",
    "Cluster",
    "SegmentationError",
    "find_clusters",
    "grounded_sam2_settings",
    "segment",
    "segmenter",
]


#: ``assign(rgb, clusters, labels) -> {cluster index: label}``: e.g. a VLM shown the regions.
AssignFn = Callable[[np.ndarray, Sequence[Cluster], Sequence[str]], Mapping[int, str]]

#: Colour words understood in labels, with a reference sRGB colour.
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (200, 30, 30),
    "green": (40, 160, 60),
    "blue": (30, 70, 200),
    "yellow": (230, 200, 40),
    "orange": (240, 130, 30),
    "white": (235, 235, 235),
    "black": (25, 25, 25),
    "grey": (128, 128, 128),
    "gray": (128, 128, 128),
    "silver": (170, 170, 175),
    "brown": (130, 80, 40),
    "purple": (120, 50, 150),
    "pink": (240, 130, 170),
    "cyan": (40, 180, 190),
    "teal": (40, 160, 160),
    "beige": (210, 185, 140),
    "tan": (210, 180, 140),
    "sand": (200, 175, 120),  # also a colour: the prior that finds a heap of sand among other regions
}
#: Typical real-world sizes (m, any order) of common objects, a prior for matching plain labels to regions.
TYPICAL_SIZES_M: dict[str, tuple[float, float, float]] = {
    "can": (0.066, 0.066, 0.122),  # a 330 ml drinks can
    "mug": (0.082, 0.082, 0.095),
    "cup": (0.075, 0.075, 0.09),
    "glass": (0.07, 0.07, 0.12),
    "bottle": (0.07, 0.07, 0.22),
    "carton": (0.07, 0.07, 0.2),  # a one-litre drinks carton
    # Objects of the YCB set and of any workshop or kitchen, typical sizes (a prior, not a reference).
    "drill": (0.06, 0.18, 0.19),  # a cordless drill lying on its side, battery on
    "banana": (0.035, 0.04, 0.19),
    "bleach": (0.065, 0.1, 0.25),  # a bleach cleanser bottle
    "clamp": (0.03, 0.12, 0.17),
    "scissors": (0.015, 0.09, 0.2),
    "hammer": (0.03, 0.12, 0.33),
    "marker": (0.018, 0.018, 0.12),
    "apple": (0.075, 0.075, 0.075),
    "orange": (0.073, 0.073, 0.073),
    "lemon": (0.055, 0.055, 0.068),
    "pear": (0.066, 0.066, 0.1),
    "tuna": (0.085, 0.085, 0.033),  # a tuna fish can
    "coffee can": (0.102, 0.102, 0.139),
    "master chef can": (0.102, 0.102, 0.139),  # YCB's coffee can
    "pitcher": (0.14, 0.17, 0.24),
    "plate": (0.26, 0.26, 0.025),
    "sponge": (0.014, 0.072, 0.114),
}

#: Words naming flat things lying on the table (found by colour among the table's pixels, not by height).
FLAT_WORDS = frozenset("square area mat marker sheet paper region zone patch target pad coaster".split())
_SMALL = frozenset({"small", "little", "tiny", "mini", "short", "narrow", "smaller", "smallest"})
_LARGE = frozenset({"large", "big", "wide", "tall", "huge", "larger", "bigger", "largest", "biggest", "wall"})


def _normalise(name: str) -> str:
    return " ".join(label_words(name))


# --- masks --------------------------------------------------------------------------------------------------


def _segment_masks(frame: Frame, table: TablePlane, labels: Sequence[str], **options: Any) -> list[Segment]:
    if options:
        raise SegmentationError(f"segmenter 'masks' takes no options, got {sorted(options)}")
    if frame.masks is None:
        raise SegmentationError("segmenter 'masks' needs a frame with masks (Frame.masks is None)")
    by_name: dict[str, int] = {}
    for obj_id, name in sorted(frame.mask_names.items()):
        by_name.setdefault(_normalise(name), obj_id)
    wanted = list(labels) if labels else [frame.mask_names[i] for i in sorted(frame.mask_names)]
    out = []
    for label in wanted:
        found = by_name.get(_normalise(label))
        if found is None:
            raise SegmentationError(
                f"label {label!r} names no mask of the frame; "
                f"its masks are {sorted(frame.mask_names.values())}"
            )
        mask = frame.masks == found
        if mask.any():
            out.append(Segment(label=label, mask=mask, score=1.0, source="masks"))
    return out


# --- geometric ----------------------------------------------------------------------------------------------


def _lab(rgb: Sequence[float]) -> np.ndarray:
    import cv2

    px = np.asarray(rgb, dtype=np.float32).reshape(1, 1, 3) / 255.0
    return np.asarray(cv2.cvtColor(px, cv2.COLOR_RGB2Lab)[0, 0], dtype=np.float64)


def _colour_cost(cluster_rgb: Sequence[float], word: str) -> float:
    """How unlike the colour word a region's colour is, about [0, 1]: for chromatic words the hue angle in
    Lab (shading changes lightness, not hue), for white/grey/black the chroma and lightness."""
    a, b = _lab(cluster_rgb), _lab(COLOURS[word])
    chroma_a, chroma_b = float(np.hypot(a[1], a[2])), float(np.hypot(b[1], b[2]))
    if chroma_b < 10.0:  # achromatic word
        return float(chroma_a / 60.0 + 0.5 * abs(a[0] - b[0]) / 100.0)
    dh = abs(np.arctan2(a[2], a[1]) - np.arctan2(b[2], b[1]))
    dh = min(dh, 2 * np.pi - dh)
    return float(dh / np.pi + 0.3 * abs(chroma_a - chroma_b) / 100.0 + (0.5 if chroma_a < 12.0 else 0.0))


def _known_size(words: Sequence[str]) -> np.ndarray | None:
    """Sorted edge lengths (m) of a known object the label names (all of its name's words in the label; the
    longest such name wins)."""

    best = None
    for name, size in {**TYPICAL_SIZES_M, **YCB_SIZES_M}.items():
        key = label_words(name)
        if set(key) <= set(words) and (best is None or len(key) > best[0]):
            best = (len(key), np.sort(np.asarray(size, dtype=np.float64)))
    return None if best is None else best[1]


def _label_kind(label: str) -> str | None:

    return kind_from_label(label)[0]


#: A label's match to a region is kept only when its cost (colour, size, shape mismatch) is at most this; its
#: confidence is ``exp(-cost)`` (so at least 0.20; a label with no cue, matched by size order, at most one
#: over the number of regions). Worse matches leave the label "not found" and the region "unlabelled" rather
#: than forcing one onto the other.
MAX_MATCH_COST = 1.6


def _assign_by_hints(
    clusters: Sequence[Cluster], labels: Sequence[str], confidence: dict[int, float] | None = None
) -> dict[int, str]:
    """Hungarian matching of clusters to labels by colour words, size words, the size of objects the label
    names (:data:`TYPICAL_SIZES_M`, :data:`real2sim.datasets.YCB_SIZES_M`), shape words against the outline,
    then size order. ``confidence`` receives each match's ``exp(-cost)``, at most 1 / (number of clusters) for
    a label with none of those cues (matched by size order alone)."""

    n_c, n_l = len(clusters), len(labels)
    if n_c == 0 or n_l == 0:
        return {}
    order = np.argsort([-c.size_m3 for c in clusters], kind="stable")
    rank = np.empty(n_c)
    rank[order] = np.arange(n_c) / max(n_c - 1, 1)  # 0 = largest, 1 = smallest
    cost = np.zeros((n_c, n_l))
    plain = 0
    guessed = set()  # the labels matched by size order alone
    for j, label in enumerate(labels):
        words = label_words(label)
        colours = [w for w in words if w in COLOURS]
        hinted = False
        if colours:
            hinted = True
            for i, c in enumerate(clusters):
                cost[i, j] += 2.0 * min(_colour_cost(c.colour_rgb, w) for w in colours)
        if _SMALL.intersection(words):
            hinted = True
            cost[:, j] += 1.0 - rank
        elif _LARGE.intersection(words):
            hinted = True
            cost[:, j] += rank
        known = _known_size(words)
        if known is not None:
            hinted = True
            for i, c in enumerate(clusters):
                # What is seen may be smaller than the object (occlusion, the far side), hardly larger.
                dims = np.sort([c.footprint_m[0], c.footprint_m[1], c.height_m])
                ratio = np.log(np.maximum(dims, 1e-3) / known)
                mismatch = float(np.mean(2.0 * np.maximum(ratio, 0.0) + 0.5 * np.maximum(-ratio, 0.0)))
                cost[i, j] += 1.5 * min(mismatch, 1.5)
        kind = _label_kind(label)
        if kind is not None:
            for i, c in enumerate(clusters):
                wrong = "round" if kind == "box" else "rectangular" if kind == "revolution" else None
                if c.outline == wrong:
                    cost[i, j] += 0.3
        if not hinted:  # the k-th plain label prefers the k-th largest cluster
            cost[:, j] += 0.05 + 0.5 * np.abs(rank - plain / max(n_c - 1, 1))
            plain += 1  # (the 0.05: a label with a cue wins a contested region over one without)
            guessed.add(j)
        cost[:, j] += 1e-3 * rank  # tie-break towards larger clusters
    rows, cols = linear_sum_assignment(cost)
    kept = {int(i): int(j) for i, j in zip(rows, cols) if cost[i, j] <= MAX_MATCH_COST}
    if confidence is not None:  # a label matched by size order alone is a guess among the regions
        confidence.update(
            {
                i: round(float(min(np.exp(-cost[i, j]), 1.0 / n_c if j in guessed else 1.0)), 3)
                for i, j in kept.items()
            }
        )
    return {i: labels[j] for i, j in kept.items()}


def _numbered_copies(labels: Sequence[str]) -> list[str]:
    """The labels naming numbered copies of one object (``bean_00``, ``bean_01``, ...): at least two labels
    that differ only in a trailing number; those of the largest such group, in their order."""
    groups: dict[str, list[str]] = {}
    for lab in labels:
        m = re.fullmatch(r"(.*?)[_ ]?\d+", lab.strip())
        if m and m.group(1):
            groups.setdefault(_normalise(m.group(1)), []).append(lab)
    best = max(groups.values(), key=len, default=[])
    return best if len(best) >= 2 else []


def _split_into_pieces(
    masks: Sequence[np.ndarray], n: int, frame: Frame, table: TablePlane, cell_m: float = 0.002
) -> list[np.ndarray]:
    """Cut regions into ``n`` pieces of about equal top-view footprint: each region gets pieces in proportion
    to its footprint (occupied ``cell_m`` cells), found by k-means on those cells (each counts once, however
    many pixels see it); every pixel goes to the nearest piece."""

    if not masks or n <= 0:
        return []
    pts, valid = camera_points(frame, 1)
    T = table.T_world_cam
    xys, cells = [], []
    for mask in masks:
        xy = pts[mask & valid] @ T[:2, :3].T + T[:2, 3]
        xys.append(xy)
        cells.append((np.unique(np.floor(xy / cell_m).astype(np.int64), axis=0) + 0.5) * cell_m)
    share = n * np.array([len(c) for c in cells], dtype=np.float64) / sum(len(c) for c in cells)
    k = np.maximum(np.floor(share).astype(int), 1)
    for i in np.argsort(-(share - k), kind="stable")[: max(n - int(k.sum()), 0)]:
        k[i] += 1  # largest remainders first
    while k.sum() > n and (k > 1).any():
        k[int(np.argmax(k))] -= 1
    out = []
    for mask, xy, c, k_i in zip(masks, xys, cells, k):
        if k_i <= 1 or len(c) < 2 * k_i:
            out.append(mask)
            continue
        best = None  # k-means from a few seeded starts, the tightest kept
        for seed in range(5):
            centres, near = kmeans2(c, int(k_i), minit="++", seed=seed)
            inertia = float(np.sum((c - centres[near]) ** 2))
            if best is None or inertia < best[0]:
                best = (inertia, centres)
        assert best is not None
        centres = best[1]
        nearest = np.argmin(np.linalg.norm(xy[:, None, :] - centres[None], axis=2), axis=1)
        rows, cols = np.nonzero(mask & valid)  # pixels without depth have no place on the table: left out
        for j in range(int(k_i)):
            piece = np.zeros_like(mask)
            piece[rows[nearest == j], cols[nearest == j]] = True
            if piece.any():
                out.append(piece)
    return out


def _from_cluster(label: str, cluster: Cluster, score: float) -> Segment:
    return Segment(label, cluster.mask, score, "geometric", cluster.silhouette, cluster.support_m)


def _segment_geometric(
    frame: Frame,
    table: TablePlane,
    labels: Sequence[str],
    *,
    assign: AssignFn | None = None,
    unlabelled: list[np.ndarray] | None = None,
    **options: Any,
) -> list[Segment]:
    try:
        clusters = find_clusters(frame, table, **options)
    except TypeError as err:
        raise SegmentationError(f"segmenter 'geometric': bad option ({err})") from None
    if not labels:
        return [_from_cluster(f"object_{i}", c, 0.5) for i, c in enumerate(clusters)]
    flat = [lab for lab in labels if FLAT_WORDS.intersection(label_words(lab))]
    solid = [lab for lab in labels if lab not in flat]
    confidence: dict[int, float] = {}
    if assign is not None:
        mapping = dict(assign(frame.rgb, clusters, list(labels)))
        bad = {i: lab for i, lab in mapping.items() if not (0 <= int(i) < len(clusters)) or lab not in labels}
        if bad:
            raise SegmentationError(
                f"assign returned {bad}: keys must be cluster indices 0..{len(clusters) - 1} and values "
                f"among the labels {list(labels)}"
            )
        score = 0.9
    else:
        copies = _numbered_copies(solid)
        others = [lab for lab in solid if lab not in copies]
        mapping = _assign_by_hints(clusters, others, confidence)
        rest = [i for i in range(len(clusters)) if i not in mapping]
        if copies and len(rest) < len(copies):
            # Numbered copies of one small object (bean_00 ... bean_19) touching each other come out as a
            # few regions: cut what the other labels left into as many pieces of equal footprint.
            pieces = _split_into_pieces([clusters[i].mask for i in rest], len(copies), frame, table)
            for lab, piece in zip(copies, pieces):
                clusters.append(Cluster(piece, int(piece.sum()), 0.0, (0.0, 0.0), (0, 0, 0)))
                mapping[len(clusters) - 1] = lab
        else:
            mapping.update(
                {
                    rest[i]: lab
                    for i, lab in _assign_by_hints([clusters[i] for i in rest], copies, None).items()
                }
            )
        score = 0.5
    in_piles = _gather_piles(clusters, mapping, frame, table)
    found: dict[str, Segment] = {}
    for i, lab in sorted(mapping.items()):
        if lab not in found:
            found[lab] = _from_cluster(lab, clusters[int(i)], confidence.get(int(i), score))
    if unlabelled is not None:  # regions no label matched well enough
        unlabelled.extend(c.seen for i, c in enumerate(clusters) if i not in mapping and i not in in_piles)
    for lab in flat:
        if lab not in found:
            mask = _flat_by_colour(frame, table, lab)
            if mask is not None:
                found[lab] = Segment(lab, mask, 0.4, "geometric")
    return [found[label] for label in labels if label in found]


def _gather_piles(
    clusters: list[Cluster], mapping: Mapping[int, str], frame: Frame, table: TablePlane
) -> set[int]:
    """Each region matched to a granular label (sand, rice) takes back the pieces of its pile the cuts
    split off (:func:`real2sim.piles.grow_pile`). Returns the unmatched regions now part of a pile."""
    absorbed: set[int] = set()
    for i, lab in mapping.items():
        if not is_granular(lab):
            continue
        claimed = np.zeros(frame.depth.shape, bool)
        for j in mapping:
            if j != i:
                claimed |= clusters[j].mask
        pile = grow_pile(clusters[i].mask, claimed, frame, table)
        clusters[i] = dataclasses.replace(clusters[i], mask=pile, silhouette=pile | clusters[i].seen)
        for j, c in enumerate(clusters):
            if j not in mapping and (c.mask & pile).sum() >= 0.5 * c.mask.sum():
                absorbed.add(j)
    return absorbed


def _flat_by_colour(frame: Frame, table: TablePlane, label: str, min_pixels: int = 80) -> np.ndarray | None:
    """The largest patch of table pixels in the colour the label names (a flat marker, a mat), or None."""
    import cv2

    colours = [w for w in label_words(label) if w in COLOURS]
    if not colours:
        return None
    lab = cv2.cvtColor(frame.rgb.astype(np.float32) / 255.0, cv2.COLOR_RGB2Lab).astype(np.float64)
    chroma = np.hypot(lab[..., 1], lab[..., 2])
    hue = np.arctan2(lab[..., 2], lab[..., 1])
    best = np.zeros(frame.rgb.shape[:2], bool)
    for word in colours:
        ref = _lab(COLOURS[word])
        ref_chroma = float(np.hypot(ref[1], ref[2]))
        if ref_chroma < 10.0:  # white, grey, black: lightness and low chroma
            match = (chroma < 12.0) & (np.abs(lab[..., 0] - ref[0]) < 15.0)
        else:
            dh = np.abs(hue - np.arctan2(ref[2], ref[1]))
            match = (np.minimum(dh, 2 * np.pi - dh) < np.deg2rad(20.0)) & (chroma > 0.4 * ref_chroma)
        best |= match
    best &= table.inliers
    best = cv2.morphologyEx(best.astype(np.uint8), cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
    count, labels_img, stats, _ = cv2.connectedComponentsWithStats(best, connectivity=8)
    if count <= 1:
        return None
    k = 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))
    if stats[k, cv2.CC_STAT_AREA] < min_pixels:
        return None
    return np.asarray(labels_img == k)


# --- GroundingDINO + SAM 2 ---------------------------------------------------------------------------------

SEGMENTERS: dict[str, Callable[..., list[Segment]]] = {
    "geometric": _segment_geometric,
    "masks": _segment_masks,
    "grounded_sam2": segment_grounded_sam2,
}


def segmenter(name: str) -> Callable[..., list[Segment]]:
    """The segmenter called ``name``; a :class:`SegmentationError` naming the known ones if there is none."""
    if name not in SEGMENTERS:
        raise SegmentationError(f"unknown segmenter {name!r}; expected one of {sorted(SEGMENTERS)}")
    return SEGMENTERS[name]


def segment(
    frame: Frame,
    table: TablePlane,
    labels: Sequence[str],
    backend: str = "geometric",
    *,
    assign: AssignFn | None = None,
    unlabelled: list[np.ndarray] | None = None,
    **options: Any,
) -> list[Segment]:
    """Segment the objects named by ``labels`` (in that order) with the back-end ``backend``.

    ``assign`` (``geometric`` only) maps the found regions to labels; ``options`` go to the back-end. Labels
    that are not found are left out. An empty ``labels`` returns every region the back-end finds. The
    ``geometric`` back-end appends the masks of regions no label matched to ``unlabelled`` when given; each
    segment's ``score`` is its match confidence.
    """
    run = segmenter(backend)
    if backend == "geometric":
        return _segment_geometric(frame, table, labels, assign=assign, unlabelled=unlabelled, **options)
    if assign is not None:
        raise SegmentationError(f"assign applies to the 'geometric' segmenter, not {backend!r}")
    return run(frame, table, labels, **options)
