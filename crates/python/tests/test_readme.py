"""The README's "Using it from Python", run as a user runs it: twice, in one directory."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT

EXAMPLE = ROOT / "examples" / "python" / "using_it.py"


def run(cwd) -> str:
    done = subprocess.run([sys.executable, str(EXAMPLE)], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_second_run_reuses_what_the_first_did_after_its_checkpoint(tmp_path):
    assert run(tmp_path) == "model calls: 3, answers reused: 0"
    assert (tmp_path / "actionstate-data").is_dir(), "the log lives where the README says"
    assert run(tmp_path) == "model calls: 0, answers reused: 1"
    assert run(tmp_path) == "model calls: 0, answers reused: 1", "a restart restores the same checkpoint"


def test_the_readme_quotes_the_example_as_it_is():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Using it from Python", 1)[1]
    block = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert block == EXAMPLE.read_text(), "README `Using it from Python` no longer quotes examples/python/using_it.py"
