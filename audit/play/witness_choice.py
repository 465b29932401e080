"""``--canary auto`` on the mechanism and trace levels: play the probe's witness where it is worse.

A DP claim holds for every neighbouring pair in its domain, so the auditor may choose the input.
:func:`choose` runs the sensitivity probe (:mod:`canaries.sensitivity`; cached on disk per target
configuration, dataset and seed), takes the step whose best pair has the largest measured/claimed
Δ, and plays that witness when

* the target can take the witness's input through its own pipeline (its ``witness_plan`` hook,
  :func:`canaries.witness.plan`),
* and the witness's ratio beats the given graph's, where the target's own input X is used (the
  given graph's ``realised`` ratio: what a canary on it can reach), by more than float tolerance.

The ratio, not Δ, is compared: the claim's noise scales with its claimed Δ, so the privacy loss of
the step is (measured/claimed) × the claim's μ. Otherwise the game keeps the given graph and the
ordinary auto canary. Either way :attr:`Choice.record` says what was compared and why.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from canaries import sensitivity
from canaries.witness import plan
from targets import base as targets
from targets.base import Level

#: the witness must beat the given graph's ratio by this relative margin to be played
MARGIN = 1e-6


@dataclass
class Choice:
    """What ``--canary auto`` plays: the witness (``play``) or the given graph."""

    play: bool
    record: dict[str, Any]
    target_name: str = ""
    params: dict[str, str] = field(default_factory=dict)
    dataset: str = ""
    canary: str = ""


def probe_key(target: targets.Target, graph: Any, options: dict[str, Any]) -> str:
    """The probe's cache key: the target's class and config, the graph's content, the options, and
    the code of the target and the probe (a probe stored by other code is never reused)."""
    from audit.records import provenance
    from graphs.ops import fingerprint

    config = dataclasses.asdict(target.config)
    code = provenance.code_identity(type(target), sensitivity)["key"]
    text = json.dumps([type(target).__module__, type(target).__qualname__, config, fingerprint(graph), options,
                       code], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


#: this process's probe reports by key (the disk cache lives under each run's --out)
_MEMO: dict[str, dict[str, Any]] = {}


#: probe options ``--canary auto`` uses (the command's defaults)
PROBE_OPTIONS: dict[str, Any] = {"candidates": 32, "max_nodes": 5, "use_families": True}


def cached_probe(target: targets.Target, graph: Any, *, dataset: str, out: str | Path,
                 options: dict[str, Any] | None = None) -> dict[str, Any]:
    """The probe's report (``ProbeReport.to_dict``; probe seed 0: the witness belongs to the
    configuration and the graph, not to a run's seed), from this process's memo or
    ``out/sensitivity/<key>/`` when there."""
    options = dict(PROBE_OPTIONS if options is None else options)
    key = probe_key(target, graph, options)
    folder = Path(out) / "sensitivity" / key
    path = folder / "report.json"
    if path.exists():
        doc = json.loads(path.read_text())
        doc["cached"] = str(path)
        return doc
    if key in _MEMO and all(Path(c).exists() for c in _witnesses(_MEMO[key])):
        return {**_MEMO[key], "cached": "this process"}
    report = sensitivity.probe(target, graph, seed=0, out=folder, dataset=dataset, tight=True, **options)
    doc = report.to_dict()
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, default=str))
    _MEMO[key] = doc
    return {**doc, "cached": None}


def _witnesses(doc: dict[str, Any]) -> list[str]:
    return [s["witness"] for s in doc["steps"] if s.get("witness")] + \
        ([doc["tight"]["witness"]] if (doc.get("tight") or {}).get("witness") else [])


def given_ratio(step: dict[str, Any]) -> float | None:
    """The best ratio a canary on the given graph reaches with the target's own input X."""
    row = step["by_search"].get("given graph [realised X]") or step["by_search"].get("given graph [sampled X]")
    return None if row is None else float(row["ratio"])


def choose(target: targets.Target, graph: Any, *, level: Level, dataset: str, out: str | Path,
           params: dict[str, str] | None = None, options: dict[str, Any] | None = None) -> Choice:
    """Run (or reuse) the probe and decide whether the game plays its witness (module doc)."""
    if level != Level.MECHANISM or not target.takes_witness():
        return Choice(False, {"probe": "skipped", "chosen_by": (
            f"given graph: no witness of {target.name}'s {level}-level steps in this configuration can be "
            "played through its pipeline (Target.witness_plan), so the probe is not run")})
    doc = cached_probe(target, graph, dataset=dataset, out=out, options=options)
    record: dict[str, Any] = {"probe": doc.get("cached") or "run now", "probe_seconds": doc["seconds"]}
    candidates = [{"step": s["step"], "witness": s["witness"], "ratio": s["ratio"], "found_by": s["found_by"],
                   "violation": bool(s["violation"]), "given": given_ratio(s)}
                  for s in doc["steps"] if s.get("witness") and s.get("ratio") is not None]
    tight = doc.get("tight") or {}
    if tight.get("witness") and candidates:
        candidates.append({**candidates[0], "witness": tight["witness"], "ratio": tight["ratio"],
                           "found_by": tight["label"], "violation": False})
    if not candidates:
        record["chosen_by"] = "given graph: " + (doc.get("unprobed") or "the probe found no pair in the claim's domain")
        return Choice(False, record)
    # the largest ratio, and among ratios equal to it within the probe's tolerance one the target can take
    top = max(c["ratio"] for c in candidates)
    tied = [c for c in candidates if c["ratio"] >= top * (1 - sensitivity.RTOL)]
    best = next((c for c in tied if plan(c["witness"], params) is not None), tied[0])
    given = best["given"]
    record.update({"step": best["step"], "witness": best["witness"], "witness_ratio": best["ratio"],
                   "witness_found_by": best["found_by"], "given_ratio": given, "violation": best["violation"]})
    how = plan(best["witness"], params)
    if how is None:
        record["chosen_by"] = (f"given graph: {target.name}'s step cannot take the witness's input "
                               "(Target.witness_plan)")
        return Choice(False, record)
    if given is not None and best["ratio"] <= given * (1 + MARGIN):
        record["chosen_by"] = (f"given graph: the witness's measured/claimed Δ {best['ratio']:.4g} does not beat "
                               f"the given graph's {given:.4g}")
        return Choice(False, record)
    record["chosen_by"] = (f"sensitivity witness: measured/claimed Δ {best['ratio']:.4g} against the given graph's "
                           f"{'—' if given is None else f'{given:.4g}'}; played as {how.how}")
    record["played_as"] = " ".join(how.argv())
    return Choice(True, record, how.target, how.params, how.dataset, how.canary)
