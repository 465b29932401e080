"""results/tightness.md's generated table and figure (issue #32): ε_lb / claim against ε for each published
system at its defaults (results/campaign-default, csbm) and at its binding configuration
(results/tightness, `python -m audit campaign tightness`), with the exact ε of the played pair.

    python benchmarks/tightness_report.py
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from canaries.witness import load as load_witness  # noqa: E402
from targets.caribou.linear_chain import chain_law, pair_mu  # noqa: E402
from targets.common.accounting import gdp_epsilon, gdp_mu  # noqa: E402

DEFAULTS = ROOT / "results" / "campaign-default" / "campaign.json"
BINDING = ROOT / "results" / "tightness" / "campaign.json"
FIGURE = ROOT / "results" / "figures" / "tightness.png"
REPORT = ROOT / "results" / "tightness.md"
BEGIN, END = "<!-- begin generated -->", "<!-- end generated -->"
#: the defaults line of each published system: (label, target, params) of campaign-default's csbm rows
SYSTEMS = [("CARIBOU", "caribou", {}), ("GCON", "gcon", {}), ("DPDGC", "dpdgc", {}),
           ("GAP-NDP", "gap", {"unit": "node", "encoder_epochs": "1", "epochs": "1"})]


def defaults_line(rows: list[dict], target: str, params: dict) -> dict[float, float]:
    """ε → the best ε_lb / claim over the attacks of that configuration's csbm rows."""
    out: dict[float, float] = {}
    for r in rows:
        if r["target"] == target and r["params"] == params and r["dataset"] == "csbm" and r.get("tightness") is not None:
            out[r["epsilon"]] = max(out.get(r["epsilon"], 0.0), r["tightness"])
    return dict(sorted(out.items()))


def gap_joint_exact(row: dict) -> float:
    """The exact ε of GAP-NDP's joint pair: T Poisson(q)-subsampled Gaussian steps (the canary at the
    clip norm, multiplier σ) composed with one Gaussian hop of μ = √D/(σ√D) (dp-accounting's PLD)."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    from audit.data import load
    from targets.base import build

    params = {k: (int(v) if v.isdigit() else v) for k, v in row["params"].items()}
    claim = build("gap", epsilon=row["epsilon"], **params).claim(load(row["dataset"]))
    d = claim.details
    sigma, q, steps = d["noise_multiplier"], d["sampling_rate"], d["steps_encoder"]
    trace = pld.from_gaussian_mechanism(sigma, sampling_prob=q, value_discretization_interval=1e-3).self_compose(steps)
    hops = pld.from_gaussian_mechanism(sigma, value_discretization_interval=1e-3).self_compose(int(d["hops"]))
    return trace.compose(hops).get_epsilon_for_delta(claim.delta)


def exact_ratio(witness: str) -> float:
    """The binding pair's exact μ over the claim's (the linear chain, world 0's covariance)."""
    doc = load_witness(ROOT / witness)
    c = doc["config"]
    laws = [chain_law(g, doc["x"], c["hops"], c["contraction"], c["alpha1"], c["beta"]) for g in (doc["g0"], doc["g1"])]
    return pair_mu(laws[0], laws[1], 1.0)["mu_0"] / doc["claimed"]


def _binding_lines(ax, label: str, colour: str, rows: list[dict], exact: list[float], table: list[str]) -> None:
    eps = [r["epsilon"] for r in rows]
    ax.plot(eps, [r["tightness"] for r in rows], marker="s", ls="--", color=colour, label=f"{label}, binding: ε_lb")
    ax.plot(eps, [x / r["claimed_epsilon"] for x, r in zip(exact, rows)], ls=":", color=colour,
            label=f"{label}, binding: exact ε of the pair")
    for r, x in zip(rows, exact):
        table.append(f"| {label} binding | {r['epsilon']:g} | {r['claimed_epsilon']:.3f} | {x:.3f} "
                     f"({x / r['claimed_epsilon']:.3f}) | {r['eps_lb']:.3f} | **{r['tightness']:.3f}** | "
                     f"{r['auc']:.4f} | {r['trials']} |")


def main() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    defaults = json.loads(DEFAULTS.read_text())["rows"]
    binding = json.loads(BINDING.read_text())
    rows = sorted((r for r in binding["rows"] if r.get("tightness") is not None), key=lambda r: r["epsilon"])
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, target, params in SYSTEMS:
        line = defaults_line(defaults, target, params)
        ax.plot(list(line), list(line.values()), marker="o", label=f"{label}, defaults (csbm)")
    table = []
    caribou = [r for r in rows if r["target"].endswith("CaribouGivenInput")]
    gap = [r for r in rows if r["target"] == "gap"]
    if caribou:
        ratio = exact_ratio(caribou[0]["dataset"].split(":", 1)[1])
        exact = [gdp_epsilon(ratio * gdp_mu(r["claimed_epsilon"], r["claimed_delta"]), r["claimed_delta"]) for r in caribou]
        _binding_lines(ax, "CARIBOU", "C0", caribou, exact, table)
    if gap:
        _binding_lines(ax, "GAP-NDP", "C3", gap, [gap_joint_exact(r) for r in gap], table)
    ax.axhline(0.8, color="grey", lw=0.8, ls="--")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("claimed ε")
    ax.set_ylabel("ε_lb / claimed ε")
    ax.set_ylim(-0.03, 1.05)
    ax.legend(fontsize=7, loc="center right")
    ax.set_title("Tight or loose: each accounting at its defaults and where it binds")
    FIGURE.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(FIGURE, dpi=130)
    head = ("| row | ε | claim | exact ε of the played pair (/ claim) | ε_lb (95%) | ε_lb / claim | AUC | trials |\n"
            "|---|---|---|---|---|---|---|---|")
    lines = [f"Binding campaign: `{binding.get('command')}`, {binding.get('date')}, commit "
             f"{(binding.get('git') or {}).get('commit', '')[:10]}; defaults: results/campaign-default (`{json.loads(DEFAULTS.read_text())['command']}`).",
             "", head, *table, "", "Defaults lines (csbm, best ε_lb / claim over each configuration's attacks):", ""]
    for label, target, params in SYSTEMS:
        line = defaults_line(defaults, target, params)
        lines.append(f"* {label}: " + ", ".join(f"ε = {e:g}: {t:.3f}" for e, t in line.items()))
    text = REPORT.read_text()
    start, stop = text.index(BEGIN) + len(BEGIN), text.index(END)
    REPORT.write_text(text[:start] + "\n" + "\n".join(lines) + "\n" + text[stop:])
    print("\n".join(lines))


if __name__ == "__main__":
    main()
