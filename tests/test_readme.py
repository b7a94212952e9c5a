"""Every command and Python block of README.md runs, in order, in one fresh directory.

Fenced blocks without a language (or ``sh``, ``bash``, ``shell``) are shell commands, run one line at a
time; ``python`` blocks run whole; other blocks are shown, not run. A block right after the HTML
comment ``<!-- not run in tests -->``, and a line ending in ``# not run in tests``, are skipped (installs,
clusters). The console scripts run the package under test (whatever ``import bnpvi`` finds), through
small wrappers put first on PATH.
"""
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SKIP_BLOCK = "<!-- not run in tests -->"
SKIP_LINE = "# not run in tests"
SHELL = {"", "sh", "bash", "shell"}
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.M | re.S)


def sections(text: str) -> list[tuple[str, list[tuple[str, str]]]]:
    """(heading, [(kind, code), ...]) of every ``##`` section, its runnable blocks in order."""
    out = []
    for part in re.split(r"^## ", text, flags=re.M)[1:]:
        heading = part.splitlines()[0].strip()
        blocks = []
        for match in FENCE.finditer(part):
            if part[:match.start()].rstrip().endswith(SKIP_BLOCK):
                continue
            lang, code = match.group(1), match.group(2)
            if lang == "python":
                blocks.append(("python", code))
            elif lang in SHELL:
                blocks += [("shell", line) for line in code.splitlines()
                           if line.strip() and not line.rstrip().endswith(SKIP_LINE)]
        if blocks:
            out.append((heading, blocks))
    return out


SECTIONS = sections((ROOT / "README.md").read_text())


def console_scripts() -> dict[str, str]:
    """name -> "module:function" of the ``[project.scripts]`` table of pyproject.toml."""
    table = (ROOT / "pyproject.toml").read_text().split("[project.scripts]", 1)[1].split("\n[", 1)[0]
    return dict(re.findall(r'^([\w-]+)\s*=\s*"([\w.]+:\w+)"', table, flags=re.M))


def test_the_readme_has_a_walk_per_data_kind_and_keeps_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert "\npip install . && bnpvi-train\n" in text and "\npip install '.[test]' && pytest\n" in text
    headings = [heading for heading, _ in SECTIONS]
    for kind in ("Points", "Documents", "Sequences"):
        assert any(h.startswith(kind) for h in headings), headings


def test_the_console_scripts_are_found():
    assert {"bnpvi-train", "bnpvi-data", "bnpvi-apply", "bnpvi-report"} <= set(console_scripts())


def test_the_marks_skip_what_they_mark():
    text = "## A\n\n<!-- not run in tests -->\n```\npip install .\n```\n\n```\nls  # not run in tests\nls -a\n```\n"
    assert sections(text) == [("A", [("shell", "ls -a")])]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """The directory the README runs in, with wrappers for the console scripts on PATH."""
    work = tmp_path_factory.mktemp("readme")
    bin_dir = work / ".bin"
    bin_dir.mkdir()
    for name, target in console_scripts().items():
        module, func = target.split(":")
        wrapper = bin_dir / name
        # guarded as pip's console scripts are: worker processes (alg.workers) import the main module again
        wrapper.write_text(f"#!{sys.executable}\nimport sys\nfrom {module} import {func}\n"
                           f"if __name__ == '__main__':\n    sys.exit({func}())\n")
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "BNPVI_CACHE": str(work / ".cache"),
           "PYTHONWARNINGS": "ignore", "MPLBACKEND": "Agg"}
    return work, env


@pytest.mark.parametrize("heading, blocks", SECTIONS, ids=[heading for heading, _ in SECTIONS])
def test_readme_section_runs(workdir, heading, blocks):
    work, env = workdir
    for kind, code in blocks:
        command = [sys.executable, "-c", code] if kind == "python" else ["bash", "-c", code]
        proc = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"README ({heading}) failed:\n{code}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
