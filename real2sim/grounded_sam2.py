"""The ``grounded_sam2`` segmentation back-end: GroundingDINO boxes for the labels, refined into masks by
SAM 2, loaded from local files named by environment variables (:data:`GROUNDED_SAM2_ENV`); nothing is
downloaded, and a missing setting or package is one clear error naming it."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

from real2sim.types import Segment, SegmentationError, TablePlane, label_words
from real2sim.weights import load_local
from simpact.core.frame import Frame

__all__ = ["GROUNDED_SAM2_ENV", "grounded_sam2_settings", "segment_grounded_sam2"]


#: Environment variables holding the local GroundingDINO and SAM 2 files.
GROUNDED_SAM2_ENV = {
    "dino_config": "SIMPACT_GROUNDING_DINO_CONFIG",
    "dino_checkpoint": "SIMPACT_GROUNDING_DINO_CHECKPOINT",
    "sam2_config": "SIMPACT_SAM2_CONFIG",
    "sam2_checkpoint": "SIMPACT_SAM2_CHECKPOINT",
}


def grounded_sam2_settings(**overrides: str | None) -> dict[str, str]:
    """The four paths the ``grounded_sam2`` back-end needs, from ``overrides`` or the environment
    (:data:`GROUNDED_SAM2_ENV`); raises :class:`SegmentationError` naming the missing setting."""
    out = {}
    for key, env in GROUNDED_SAM2_ENV.items():
        value = overrides.get(key) or os.environ.get(env)
        if not value:
            raise SegmentationError(
                f"segmenter 'grounded_sam2' needs {key}: set ${env} (or pass {key}=...) to a local file"
            )
        if key != "sam2_config" and not os.path.exists(value):
            raise SegmentationError(f"segmenter 'grounded_sam2': {key} {value!r} (${env}) does not exist")
        out[key] = value
    return out


_GSAM2_CACHE: dict[tuple[str, ...], tuple[Any, Any]] = {}


def segment_grounded_sam2(
    frame: Frame,
    table: TablePlane,
    labels: Sequence[str],
    *,
    box_threshold: float = 0.35,
    text_threshold: float = 0.25,
    device: str | None = None,
    **paths: str | None,
) -> list[Segment]:
    """One segment per label found: GroundingDINO's best box for the label, refined into a mask by SAM 2
    (score: the box's logit times SAM's)."""
    if not labels:
        raise SegmentationError("segmenter 'grounded_sam2' needs labels (the text prompts)")
    settings = grounded_sam2_settings(**paths)
    try:
        import torch
        from groundingdino.util.inference import load_model, predict
        from sam2.build_sam import build_sam2
        from sam2.sam2_image_predictor import SAM2ImagePredictor
    except ImportError as err:
        raise SegmentationError(
            f"segmenter 'grounded_sam2' needs the packages groundingdino and sam2 (and torch): {err}"
        ) from None
    import groundingdino.datasets.transforms as gd_transforms

    dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
    key = (
        settings["dino_config"],
        settings["dino_checkpoint"],
        settings["sam2_config"],
        settings["sam2_checkpoint"],
        dev,
    )
    if key not in _GSAM2_CACHE:
        _GSAM2_CACHE[key] = load_local(
            lambda: (
                load_model(settings["dino_config"], settings["dino_checkpoint"], device=dev),
                SAM2ImagePredictor(
                    build_sam2(settings["sam2_config"], settings["sam2_checkpoint"], device=dev)
                ),
            ),
            "segmenter 'grounded_sam2'",
            "$SIMPACT_GROUNDING_DINO_CONFIG/_CHECKPOINT and $SIMPACT_SAM2_CONFIG/_CHECKPOINT",
            SegmentationError,
        )
    dino, sam = _GSAM2_CACHE[key]
    transform = gd_transforms.Compose(
        [
            gd_transforms.RandomResize([800], max_size=1333),
            gd_transforms.ToTensor(),
            gd_transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
        ]
    )
    image, _ = transform(Image.fromarray(frame.rgb), None)
    sam.set_image(frame.rgb)
    h, w = frame.height, frame.width
    out = []
    for label in labels:
        boxes, logits, _ = predict(
            model=dino,
            image=image,
            caption=" ".join(label_words(label)) + ".",
            box_threshold=box_threshold,
            text_threshold=text_threshold,
            device=dev,
        )
        if len(boxes) == 0:
            continue
        best = int(torch.argmax(logits))
        cx, cy, bw, bh = (float(v) for v in boxes[best])
        xyxy = np.array([(cx - bw / 2) * w, (cy - bh / 2) * h, (cx + bw / 2) * w, (cy + bh / 2) * h])
        masks, scores, _ = sam.predict(box=xyxy[None], multimask_output=False)
        mask = np.asarray(masks[0]) > 0.5
        if mask.any():
            out.append(
                Segment(
                    label, mask, float(logits[best]) * float(np.asarray(scores).ravel()[0]), "grounded_sam2"
                )
            )
    return out
