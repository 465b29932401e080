"""Datasets as normalised graphs: the public face of :mod:`graphs` (``audit.play.data.load`` is the
DESIGN contract). The code lives in the bottom layer so that targets and canaries can use it."""
from graphs.datasets import *  # noqa: F401,F403
from graphs.datasets import CHAINS, PYG_DATASETS, DatasetError, load, names, normalise, stratified_split  # noqa: F401
from graphs.ops import *  # noqa: F401,F403
