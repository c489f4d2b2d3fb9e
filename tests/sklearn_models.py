"""scikit-learn models converted by skl2onnx (no downloads: trained here on seeded data), the kinds the
issue reports met: a logistic regression, a PCA + SVC pipeline and a k-nearest-neighbours classifier.

``converted(name, zipmap=...)`` gives the model's bytes and a float32 sample. skl2onnx's default for
classifiers ends in ``ZipMap``: the probabilities come out as a sequence of maps (one
``{label: probability}`` per row); ``zipmap=False`` makes them a float tensor.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

pytest.importorskip("sklearn", reason="the converted models need scikit-learn")
skl2onnx = pytest.importorskip("skl2onnx", reason="converting scikit-learn models needs skl2onnx (pip install skl2onnx)")

from sklearn.decomposition import PCA  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.neighbors import KNeighborsClassifier  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.svm import SVC  # noqa: E402

FEATURES = 4


def data(rows: int = 60, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Three separable classes in four features (float32), and their labels."""
    rng = np.random.default_rng(seed)
    labels = np.arange(rows) % 3
    centres = np.array([[0, 0, 0, 0], [3, 3, 0, 0], [0, 3, 3, 3]], np.float32)
    return (centres[labels] + rng.standard_normal((rows, FEATURES)).astype(np.float32) * 0.5), labels


def estimator(name: str) -> object:
    x, y = data()
    made = {"logistic": lambda: LogisticRegression(max_iter=500),
            "svc": lambda: make_pipeline(PCA(n_components=2), SVC(probability=True, random_state=0)),
            "knn": lambda: KNeighborsClassifier(n_neighbors=3)}[name]()
    return made.fit(x, y)


@functools.cache
def converted(name: str, zipmap: bool = False) -> tuple[bytes, np.ndarray]:
    """The ONNX bytes of the fitted ``name`` model (input ``X`` float32[?, 4]) and five sample rows."""
    from skl2onnx import to_onnx

    model = estimator(name)
    final = model.steps[-1][1] if hasattr(model, "steps") else model
    x = data(5, seed=1)[0]
    onnx_model = to_onnx(model, x[:1], options={id(final): {"zipmap": zipmap}}, target_opset={"": 17, "ai.onnx.ml": 3})
    return onnx_model.SerializeToString(), x
