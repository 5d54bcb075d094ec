import io

import matplotlib.image as mpimg

from probekit.similarity import SimilarityConfig, checkpoint_drift, layer_similarity
from probekit.similarity.plots import drift_curve, layer_heatmap
from tests.similarity._helpers import randn


def _image(png: bytes):
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    return mpimg.imread(io.BytesIO(png))


def test_heatmap_and_drift_curve_render():
    reps = [randn(k, 50, 6) for k in range(3)]
    img = _image(layer_heatmap(layer_similarity(reps)))
    assert img.shape[0] > 100 and img.shape[1] > 100
    drift = checkpoint_drift(reps, config=SimilarityConfig(measure="procrustes"))
    img = _image(drift_curve([("resid_post@0", drift)], steps=[0, 10, 20], accuracy={"test": [0, 0.5, 1]}))
    assert img.shape[1] > img.shape[0] > 100
