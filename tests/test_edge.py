"""The edge (issue #46): the library's notices go through logging, only the CLI prints, and every exit status
comes from one enum."""
import ast
import logging
from pathlib import Path

from audit.records import log as audit_log
from audit.console.cli import main as cli_main

REPO = Path(__file__).resolve().parents[1]
#: the CLI's output: its tables and its one-line errors
PRINTS_ALLOWED = {"audit/console/cli.py", "audit/console/exit_status.py"}


def test_no_print_in_the_library():
    found = []
    for pkg in ("graphs", "targets", "canaries", "attacks", "audit"):
        for path in sorted((REPO / pkg).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel in PRINTS_ALLOWED:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                    found.append(f"{rel}:{node.lineno}")
    assert not found, f"print() outside the CLI: {found}"


def test_notices_reach_the_current_stderr_and_quiet_silences_them(capsys):
    log = audit_log.get("audit.play.game")
    log.info("reusing 3 of 4 trials")
    assert capsys.readouterr().err == "reusing 3 of 4 trials\n"
    try:
        audit_log.set_verbosity(quiet=True)
        log.info("a notice")
        log.warning("a warning")
        assert capsys.readouterr().err == "a warning\n"
        audit_log.set_verbosity(verbose=True)
        assert log.isEnabledFor(logging.DEBUG)
    finally:
        audit_log.set_verbosity()


def test_the_cli_takes_quiet_and_verbose_before_or_after_the_command(capsys):
    assert cli_main(["--quiet", "list"]) == 0 and audit_log.LOGGER.level == logging.WARNING
    assert cli_main(["list", "-v"]) == 0 and audit_log.LOGGER.level == logging.DEBUG
    assert cli_main(["list"]) == 0 and audit_log.LOGGER.level == logging.INFO
    assert cli_main(["-q", "list", "-v"]) == 2 and "exclude each other" in capsys.readouterr().err


def test_every_exit_status_of_the_cli_comes_from_the_enum():
    """No command returns a bare integer: each status is an ``ExitCode`` member."""
    tree = ast.parse((REPO / "audit" / "console" / "cli.py").read_text())
    bare = [f"line {node.lineno}" for node in ast.walk(tree)
            if isinstance(node, ast.Return) and node.value is not None
            and any(isinstance(c, ast.Constant) and isinstance(c.value, int) for c in ast.walk(node.value))]
    assert not bare, f"bare integer exit statuses in audit/console/cli.py: {bare}"
