"""results/utility.md is shared by the papers' presets: each owns one marked section."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _utility():
    spec = importlib.util.spec_from_file_location("utility_bench", ROOT / "benchmarks" / "utility.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_section_is_appended_then_replaced_and_the_rest_kept(tmp_path):
    utility = _utility()
    out = tmp_path / "utility.md"
    out.write_text("# CARIBOU\n\n<!-- analysis -->\nhand-written\n")
    utility.write_section(out, "gap", "## GAP\nfirst")
    utility.write_section(out, "gcon", "## GCON\nonly")
    utility.write_section(out, "gap", "## GAP\nsecond")
    text = out.read_text()
    assert text.startswith("# CARIBOU\n\n<!-- analysis -->\nhand-written\n")
    assert "first" not in text and text.count("<!-- begin gap -->") == 1
    assert text.index("second") < text.index("## GCON")


def test_dpdgc_rows_selected_on_validation_never_on_test():
    import sys
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import utility_dpdgc
    fit = lambda val, test: {"val": val, "test": test, "secs": 1.0, "code": "x"}  # noqa: E731
    cache = {"cora|edge|0": fit(0.70, 0.90), "cora|edge-c8|0": fit(0.75, 0.60),
             "cora|edge|1": fit(0.80, 0.50), "cora|edge-c8|1": fit(0.80, 0.99),  # a tie: the first candidate
             "cora|edge|2": fit(0.90, 0.90)}  # seed 2 lacks a candidate: not selected
    picks = utility_dpdgc.selected_runs(cache, "cora", ["edge", "edge-c8"])
    assert [(row, f["test"]) for row, f in picks] == [("edge-c8", 0.60), ("edge", 0.50)]


def test_committed_utility_md_has_each_section_once_under_its_own_heading():
    """Each preset's section is present once and opens with its own title: one preset's run must
    never overwrite another's section (GCON's figures were once replaced by its ceiling)."""
    import re
    text = (ROOT / "results" / "utility.md").read_text()
    names = re.findall(r"<!-- begin (\S+) -->", text)
    assert len(names) == len(set(names)) and {"gap", "dpdgc", "heterpoisson", "gcon", "gcon-ceiling"} <= set(names)
    titles = {}
    for name in names:
        body = text[text.index(f"<!-- begin {name} -->"):text.index(f"<!-- end {name} -->")]
        titles[name] = next(line for line in body.splitlines() if line.startswith("# "))
    assert len(set(titles.values())) == len(titles), titles
    assert "figures" in titles["gcon"] and "ceiling" in titles["gcon-ceiling"]
