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
