"""Datasets as normalised graphs.

Every loader returns a ``torch_geometric.data.Data`` with ``x`` (float n×f), ``edge_index``
(undirected: both directions present, coalesced, no self-loops), ``y`` and boolean
``train_mask``/``val_mask``/``test_mask``.

=============  =======  ============  =====  =======  ==========================================
name           nodes    undirected e  feats  classes  source
=============  =======  ============  =====  =======  ==========================================
``csbm``       600      ≈2,400        32     3        generated (contextual SBM), seed-determined;
                                                  ``csbm:n=1000000`` draws 10⁶ nodes sparsely
``chain-s``    48       42            5      2        CARIBOU chains (L=8, 3 chains per class)
``chain-m``    60       54            5      2        L=10, 3 per class
``chain-l``    90       84            5      2        L=15, 3 per class
``chain-x``    150      140           5      2        L=15, 5 per class
``opposed-rows`` 181    1             256    2        crafted (graphs.small.opposed_rows): 180 equal
                                                  rows, one labelled 1; DP-SGD's shuffled-batch pair
``cora``       2,708    5,278         1,433  7        Planetoid (public split)
``citeseer``   3,327    4,552         3,703  6        Planetoid (public split)
``computers``  13,752   245,861       767    10       Amazon (seeded stratified split)
``photo``      7,650    119,081       745    8        Amazon
``actor`` ...  see ``PYG_DATASETS``
=============  =======  ============  =====  =======  ==========================================

Root resolution for PyG datasets: ``root`` argument, else ``$AUDIT_DATA_DIR`` (a folder laid out
like ``shared/datasets``; read-only: raw files are linked into a writable cache), else PyG's cache
with its normal download.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.utils import coalesce, remove_self_loops, to_undirected

from graphs.memory import available_memory
from graphs.small import opposed_rows
from graphs.ops import (GraphStats, add_directed_edge, add_edge, degrees, drop_isolated,  # noqa: F401
                        graph_stats, has_edge, remove_edge)


class DatasetError(ValueError):
    """A dataset cannot be found or loaded (a user error, reported without a traceback)."""


# name → (PyG class, kwargs, source folder inside a shared/datasets-like root, root suffix)
PYG_DATASETS: dict[str, tuple[str, dict, str, str]] = {
    "cora": ("Planetoid", {"name": "Cora"}, "Cora", ""),
    "citeseer": ("Planetoid", {"name": "CiteSeer"}, "CiteSeer", ""),
    "computers": ("Amazon", {"name": "Computers"}, "Computers", ""),
    "photo": ("Amazon", {"name": "Photo"}, "Photo", ""),
    "cs": ("Coauthor", {"name": "CS"}, "Coauthor", "Coauthor"),
    "physics": ("Coauthor", {"name": "Physics"}, "Coauthor", "Coauthor"),
    "actor": ("Actor", {}, "Actor", "Actor"),
    "chameleon": ("WikipediaNetwork", {"name": "chameleon", "geom_gcn_preprocess": True}, "chameleon", ""),
    "squirrel": ("WikipediaNetwork", {"name": "squirrel", "geom_gcn_preprocess": True}, "squirrel", ""),
    "cornell": ("WebKB", {"name": "Cornell"}, "cornell", ""),
    "texas": ("WebKB", {"name": "Texas"}, "texas", ""),
    "wisconsin": ("WebKB", {"name": "Wisconsin"}, "wisconsin", ""),
    "tolokers": ("HeterophilousGraphDataset", {"name": "Tolokers"}, "tolokers", ""),
    "minesweeper": ("HeterophilousGraphDataset", {"name": "Minesweeper"}, "minesweeper", ""),
}

#: graphs.small.opposed_rows: every training row's two-class linear gradient is ±C·u (``opposed-rows:n_train=180``)
OPPOSED = "opposed-rows"

# CARIBOU's chains (specs/caribou.md §6.1): (chain length, chains per class, train, val)
CHAINS: dict[str, tuple[int, int, int, int]] = {
    "chain-s": (8, 3, 8, 8),
    "chain-m": (10, 3, 10, 10),
    "chain-l": (15, 3, 15, 15),
    "chain-x": (15, 5, 25, 25),
}


def names() -> list[str]:
    return ["csbm", *CHAINS, OPPOSED, *PYG_DATASETS, "witness:FILE"]


def load(name: str, root: str | os.PathLike | None = None, seed: int = 0,
         split: tuple[float, float, float] | None = None) -> Data:
    """Load dataset `name` as a normalised graph (see module docstring).

    `split` = (train, val, test) fractions replaces the dataset's own masks with a seeded
    stratified split (e.g. CARIBOU's 10/10/20, GAP's 75/10/15).
    """
    key = name.lower()
    if key.startswith("witness:"):  # a sensitivity witness's base graph (canaries.witness)
        graph = load_witness_graph(name.split(":", 1)[1])
    elif key == "csbm" or key.startswith("csbm:"):
        kwargs = _parse_kwargs(key)  # csbm:seed=S fixes the graph whatever the run's seed
        graph = csbm(seed=kwargs.pop("seed", seed), **kwargs)
    elif key in CHAINS:
        graph = chain(key, seed=seed)
    elif key == OPPOSED or key.startswith(OPPOSED + ":"):  # deterministic: no seed
        graph = opposed_rows(**_parse_kwargs(key))
    elif key in PYG_DATASETS:
        graph = _load_pyg(key, root, seed)
    else:
        raise DatasetError(f"unknown dataset {name!r}; known: {', '.join(names())}")
    if split is not None:
        if len(split) != 3 or min(split) < 0 or sum(split) > 1 + 1e-9:
            raise ValueError(f"split must be three fractions summing to at most 1, got {split!r}")
        graph.train_mask, graph.val_mask, graph.test_mask = stratified_split(graph.y, *split, seed=seed)
    return graph


def _parse_kwargs(key: str) -> dict:
    """``csbm:n=200,classes=2`` → ``{"n": 200, "classes": 2}``."""
    if ":" not in key:
        return {}
    out = {}
    for part in key.split(":", 1)[1].split(","):
        k, _, v = part.partition("=")
        out[k] = float(v) if "." in v else int(v)
    return out


# ---------------------------------------------------------------------------------------------
# normalisation
# ---------------------------------------------------------------------------------------------
def normalise(data: Data, *, seed: int = 0, split: tuple[float, float] = (0.1, 0.1),
              test: float = 0.2) -> Data:
    """Undirected, coalesced, no self-loops; float features; boolean masks (public split kept)."""
    n = data.num_nodes
    ei, _ = remove_self_loops(data.edge_index)
    ei = coalesce(to_undirected(ei, num_nodes=n), num_nodes=n)
    y = data.y.view(-1).long()
    out = Data(x=data.x.float(), edge_index=ei, y=y)
    masks = [getattr(data, m, None) for m in ("train_mask", "val_mask", "test_mask")]
    if all(m is not None for m in masks):
        if masks[0].dim() == 2:  # geom-gcn style: several fixed splits, keep the first
            masks = [m[:, 0] for m in masks]
        out.train_mask, out.val_mask, out.test_mask = (m.bool().clone() for m in masks)
    else:
        out.train_mask, out.val_mask, out.test_mask = stratified_split(y, split[0], split[1], test, seed)
    return out


def stratified_split(y: torch.Tensor, train: float, val: float, test: float, seed: int
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random split with round(f·n) nodes per part, stratified by class (rest unlabelled).

    Nodes are shuffled within each class and interleaved by their relative rank in the class,
    so every prefix of the order holds the classes in proportion. Deterministic by `seed`.
    """
    rng = np.random.default_rng(seed)
    y_np = y.numpy()
    n = y_np.size
    rank = np.empty(n)
    for c in np.unique(y_np):
        idx = np.flatnonzero(y_np == c)
        rank[rng.permutation(idx)] = (np.arange(idx.size) + rng.random()) / idx.size
    order = np.argsort(rank, kind="stable")
    sizes = [int(round(f * n)) for f in (train, val, test)]
    masks = []
    start = 0
    for size in sizes:
        m = np.zeros(n, dtype=bool)
        m[order[start:start + size]] = True
        masks.append(torch.from_numpy(m))
        start += size
    return tuple(masks)  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------
# synthetic graphs
# ---------------------------------------------------------------------------------------------
# csbm graphs up to this many nodes are drawn by the original dense sampler (every stored result's
# graph is one of them, bit for bit); larger ones by the sparse sampler (the same model)
DENSE_CSBM_MAX_N = 4096


def csbm(n: int = 600, classes: int = 3, features: int = 32, avg_degree: float = 8.0,
         homophily: float = 0.8, signal: float = 0.35, seed: int = 0, connect_isolated: bool = True,
         sparse: bool | None = None) -> Data:
    """Contextual stochastic block model (Deshpande et al. 2018), deterministic by `seed`.

    Each node gets a class; an intra-class pair is joined with probability p_in and an inter-class
    pair with p_out, chosen so the expected degree is `avg_degree` and the expected fraction of
    intra-class edges is `homophily`. Features are the class centroid (a random unit vector times
    `signal`·sqrt(f)/sqrt(f)) plus standard Gaussian noise per coordinate / sqrt(f). Isolated nodes
    are joined to a random node of their class so that every degree is ≥ 1, unless
    `connect_isolated` is false (``csbm:avg_degree=0.05,connect_isolated=0``: a graph where most
    nodes are isolated, for samplers that treat isolated nodes specially). Split: 30/20/50.

    `sparse` (default: n > ``DENSE_CSBM_MAX_N``) draws the same model in memory that grows with
    the edges (:func:`_csbm_edges_sparse`; ``csbm:n=1000000,sparse=1``); the dense sampler draws
    an n×n uniform matrix and keeps the graphs of every n ≤ ``DENSE_CSBM_MAX_N`` as they were.
    A graph too large for the free memory is refused with one line (:class:`DatasetError`).
    """
    sparse = n > DENSE_CSBM_MAX_N if sparse is None else bool(sparse)
    _check_csbm_fits(n, features, avg_degree, sparse)
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, size=n)
    counts = np.bincount(y, minlength=classes)
    n_same = (int((counts.astype(np.int64) ** 2).sum()) - n) / 2
    n_diff = n * (n - 1) / 2 - n_same
    m = avg_degree * n / 2
    p_in = min(1.0, homophily * m / max(n_same, 1))
    p_out = min(1.0, (1 - homophily) * m / max(n_diff, 1))
    draw = _csbm_edges_sparse if sparse else _csbm_edges_dense
    src, dst = draw(y, classes, p_in, p_out, rng, connect_isolated)
    centroids = rng.standard_normal((classes, features))
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    if sparse:  # float32 draws: half the memory of the dense sampler's float64 ones
        x = rng.standard_normal((n, features), dtype=np.float32)
        x *= np.float32(1 / np.sqrt(features))
        x += (signal * centroids).astype(np.float32)[y]
    else:
        x = signal * centroids[y] + rng.standard_normal((n, features)) / np.sqrt(features)
    data = Data(x=torch.as_tensor(x, dtype=torch.float32),
                edge_index=torch.as_tensor(np.stack([src, dst]), dtype=torch.long),
                y=torch.as_tensor(y, dtype=torch.long))
    data.num_nodes = n
    return normalise(data, seed=seed, split=(0.3, 0.2), test=0.5)


def _csbm_edges_dense(y: np.ndarray, classes: int, p_in: float, p_out: float,
                      rng: np.random.Generator, connect_isolated: bool) -> tuple[np.ndarray, np.ndarray]:
    """Upper-triangle edges from one n×n uniform draw (O(n²) memory: small graphs only)."""
    n = y.size
    same = y[:, None] == y[None, :]
    u = rng.random((n, n))
    adj = np.triu(u < np.where(same, p_in, p_out), k=1)
    deg = adj.sum(0) + adj.sum(1)
    for i in np.flatnonzero(deg == 0) if connect_isolated else ():
        mates = np.flatnonzero((y == y[i]) & (np.arange(n) != i))
        j = int(rng.choice(mates))
        adj[min(i, j), max(i, j)] = True
    return np.nonzero(adj)


def _csbm_edges_sparse(y: np.ndarray, classes: int, p_in: float, p_out: float,
                       rng: np.random.Generator, connect_isolated: bool) -> tuple[np.ndarray, np.ndarray]:
    """The same law as the dense sampler in O(n + m) memory.

    For each block (class a, class b ≥ a) the edge count is Binomial(pairs, p) and the edges are
    that many distinct pairs drawn uniformly (pairs drawn with replacement, duplicates dropped and
    redrawn: a uniform subset of the drawn size), so every pair is present independently with
    probability p given the block's count law. An isolated node is joined to a uniform other
    node of its class, as in the dense sampler.
    """
    members = [np.flatnonzero(y == c) for c in range(classes)]
    src, dst = [], []
    for a in range(classes):
        for b in range(a, classes):
            ca, cb = members[a].size, members[b].size
            pairs = ca * (ca - 1) // 2 if a == b else ca * cb
            if pairs == 0:
                continue
            k = int(rng.binomial(pairs, p_in if a == b else p_out))
            i, j = _distinct_pairs(ca, cb, k, a == b, rng)
            src.append(members[a][i])
            dst.append(members[b][j])
    if connect_isolated:
        deg = np.zeros(y.size, dtype=np.int64)
        for s, d in zip(src, dst):
            deg += np.bincount(s, minlength=y.size) + np.bincount(d, minlength=y.size)
        lonely = np.flatnonzero(deg == 0)
        pos = np.empty(y.size, dtype=np.int64)
        for idx in members:
            pos[idx] = np.arange(idx.size)
        mates = np.full_like(lonely, -1)
        for c, idx in enumerate(members):
            mine = y[lonely] == c
            if idx.size < 2 or not mine.any():
                continue
            r = rng.integers(0, idx.size - 1, size=int(mine.sum()))
            r += r >= pos[lonely[mine]]  # a uniform member other than the node itself
            mates[mine] = idx[r]
        src.append(lonely[mates >= 0])
        dst.append(mates[mates >= 0])
    empty = np.zeros(0, dtype=np.int64)
    return (np.concatenate(src) if src else empty), (np.concatenate(dst) if dst else empty)


def _distinct_pairs(ca: int, cb: int, k: int, same: bool, rng: np.random.Generator
                    ) -> tuple[np.ndarray, np.ndarray]:
    """`k` distinct uniform pairs (i < j within one class of `ca` members when `same`, else
    (i, j) in `ca` × `cb`), as member positions."""
    keys = np.zeros(0, dtype=np.int64)
    while keys.size < k:
        need = k - keys.size
        i = rng.integers(0, ca, size=need)
        if same:
            j = rng.integers(0, ca - 1, size=need)
            j += j >= i
            i, j = np.minimum(i, j), np.maximum(i, j)
            fresh = i * ca + j
        else:
            fresh = i * cb + rng.integers(0, cb, size=need)
        keys = np.unique(np.concatenate([keys, fresh]))
    width = ca if same else cb
    return keys // width, keys % width


def _check_csbm_fits(n: int, features: int, avg_degree: float, sparse: bool) -> None:
    """Refuse, in one line, a csbm graph whose generation would not fit in the free memory."""
    if sparse:  # ~6 live copies of 2m directed int64 pairs while normalising, features float32 twice
        need = 6 * 2 * 16 * avg_degree * n / 2 + 2 * 4 * n * features + 64 * n
    else:  # the uniform matrix, its threshold and the boolean masks
        need = 27 * n * n + 8 * n * features
    free = available_memory()
    if need > free:
        hint = "" if sparse else " (the dense sampler is quadratic: add sparse=1)"
        raise DatasetError(f"csbm with n={n:,}, avg_degree={avg_degree:g}, features={features} needs about "
                           f"{need / 2**30:.1f} GiB; {free / 2**30:.1f} GiB is free{hint}")


def chain(name: str, seed: int = 0) -> Data:
    """CARIBOU's chain graphs (IGNN generator, specs/caribou.md §6.1).

    2 classes × c chains per class × L nodes per chain; each chain is a path; features are 5-dim,
    the first node of each chain carries the one-hot of its class in the first 2 coordinates and
    every other feature is 0. Split: stratified random of the stated sizes, seeded.
    """
    length, per_class, n_train, n_val = CHAINS[name]
    n = 2 * per_class * length
    x = torch.zeros(n, 5)
    y = torch.zeros(n, dtype=torch.long)
    src, dst = [], []
    for c in range(2):
        for k in range(per_class):
            start = (c * per_class + k) * length
            y[start:start + length] = c
            x[start, c] = 1.0
            src += list(range(start, start + length - 1))
            dst += list(range(start + 1, start + length))
    data = Data(x=x, edge_index=torch.tensor([src, dst]), y=y)
    data.num_nodes = n
    test_frac = (n - n_train - n_val) / n
    return normalise(data, seed=seed, split=(n_train / n, n_val / n), test=test_frac)


# ---------------------------------------------------------------------------------------------
# PyG datasets read offline
# ---------------------------------------------------------------------------------------------
def _cache_dir() -> Path:
    base = os.environ.get("AUDIT_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "dpgnn-audit", "pyg")
    return Path(base)


def _link_tree(src: Path, dst: Path) -> None:
    """Mirror the folders of `src` under `dst`, linking each `raw` folder (never writing to `src`)."""
    for dirpath, dirnames, _ in os.walk(src):
        rel = Path(dirpath).relative_to(src)
        if rel.name == "raw":
            target = dst / rel
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    target.symlink_to(Path(dirpath).resolve(), target_is_directory=True)
                except OSError:
                    shutil.copytree(dirpath, target)
            dirnames[:] = []


def _load_pyg(key: str, root: str | os.PathLike | None, seed: int) -> Data:
    import torch_geometric.datasets as pyg_datasets

    cls_name, kwargs, folder, suffix = PYG_DATASETS[key]
    source = root if root is not None else os.environ.get("AUDIT_DATA_DIR")
    if source is not None:
        source = Path(source).expanduser()
        if not (source / folder).is_dir():
            raise DatasetError(
                f"dataset {key!r} not found: expected the folder {source / folder} "
                f"(set --data-root or AUDIT_DATA_DIR to a folder laid out like shared/datasets)")
        cache = _cache_dir()
        _link_tree(source / folder, cache / folder)
    else:
        cache = _cache_dir()
    pyg_root = cache / suffix if suffix else cache
    try:
        dataset = getattr(pyg_datasets, cls_name)(root=str(pyg_root), **kwargs)
    except Exception as err:  # download failures, corrupt files
        raise DatasetError(f"could not load dataset {key!r} from {pyg_root}: {err}") from err
    return normalise(dataset[0], seed=seed)



# ---------------------------------------------------------------------------------------------
# graphs as JSON (sensitivity witnesses, canaries.witness)
# ---------------------------------------------------------------------------------------------
_JSON_TENSORS = ("x", "edge_index", "y", "train_mask", "val_mask", "test_mask", "public_outdeg")


def graph_to_dict(graph: Data) -> dict:
    """A graph as plain JSON values (float32 features round-trip exactly through Python floats)."""
    out: dict = {"num_nodes": int(graph.num_nodes)}
    for key in _JSON_TENSORS:
        t = getattr(graph, key, None)
        if t is not None:
            out[key] = {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
                        "data": t.detach().cpu().reshape(-1).tolist()}
    return out


def graph_from_dict(d: dict) -> Data:
    """The inverse of :func:`graph_to_dict`."""
    graph = Data()
    for key in _JSON_TENSORS:
        if key in d:
            spec = d[key]
            dtype = getattr(torch, spec["dtype"])
            t = torch.tensor(spec["data"], dtype=torch.float64 if dtype.is_floating_point else torch.long)
            t = t.to(dtype) if dtype != torch.bool else t.bool()
            setattr(graph, key, t.reshape(spec["shape"]))
    graph.num_nodes = int(d["num_nodes"])
    return graph


def load_witness_graph(path: str | os.PathLike) -> Data:
    """``load("witness:FILE")``: the base graph of a sensitivity witness (the world the game starts
    from; the witness canary turns it into the witness pair)."""
    import json

    p = Path(path).expanduser()
    if not p.is_file():
        raise DatasetError(f"witness file {str(p)!r} not found")
    with open(p) as fh:
        doc = json.load(fh)
    if "graph" not in doc:
        raise DatasetError(f"{str(p)!r} is not a sensitivity witness (no 'graph')")
    return graph_from_dict(doc["graph"])


def tensor_from_dict(spec: dict) -> torch.Tensor:
    """A tensor stored as ``{"dtype", "shape", "data"}`` (a witness's input X)."""
    return torch.tensor(spec["data"], dtype=getattr(torch, spec["dtype"])).reshape(spec["shape"])


def load_witness_input(path: str | os.PathLike) -> torch.Tensor | None:
    """The held-fixed input X a sensitivity witness stores (None where it stores none)."""
    import json

    p = Path(path).expanduser()
    if not p.is_file():
        raise DatasetError(f"witness file {str(p)!r} not found")
    spec = (json.loads(p.read_text()).get("input") or {}).get("x")
    return None if spec is None else tensor_from_dict(spec)
