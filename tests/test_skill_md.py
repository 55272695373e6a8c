"""SKILL.md is followed literally by agents: its commands must exist and accept the flags they use."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SKILL = (ROOT / "SKILL.md").read_text(encoding="utf-8")


def frontmatter() -> dict:
    m = re.match(r"^---\n(.*?)\n---\n", SKILL, re.S)
    assert m, "SKILL.md must start with YAML frontmatter"
    return yaml.safe_load(m.group(1))


def test_frontmatter_follows_agent_skills_format():
    fm = frontmatter()
    assert fm["name"] == "hygon-triton-kernel-optimizer"
    assert 50 < len(fm["description"]) <= 1024
    assert "gfx936" in fm["description"] and "gfx938" in fm["description"]


def commands() -> list[str]:
    """Every `python scripts/...` command in SKILL.md: fenced bash lines and inline code spans."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", SKILL, re.S):
        found += [line.strip() for line in block.splitlines() if line.strip().startswith("python scripts/")]
    inline = " ".join(SKILL.split("\n"))
    found += [m.strip() for m in re.findall(r"`(python scripts/[^`]+)`", inline)]
    return found


def variables() -> dict:
    return dict(re.findall(r"^([A-Z_]+)=(\S+)$", SKILL, re.M))


@lru_cache(maxsize=None)
def help_text(script: str) -> str:
    proc = subprocess.run([sys.executable, str(ROOT / script), "--help"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_skill_md_names_every_step_script():
    used = {shlex.split(c)[1] for c in commands()}
    for name in ("check_env.py", "investigate.py", "profile_kernels.py", "summarize_autotune_log.py",
                 "collect_inductor_artifacts.py", "inspect_triton_meta.py", "scan_amdgcn.py",
                 "probe_compile.py", "run_captured_kernel.py", "make_investigation_report.py",
                 "eager_fallback_ab.py"):
        assert f"scripts/{name}" in used, name


@pytest.mark.parametrize("command", commands())
def test_command_script_exists_and_accepts_its_flags(command):
    words = shlex.split(command)
    script = words[1]
    assert (ROOT / script).is_file(), script
    if "--" in words:
        words = words[:words.index("--")]
    text = help_text(script)
    for word in words[2:]:
        if word.startswith("--"):
            assert re.search(rf"(^|[\s\[,]){re.escape(word)}([\s=\],]|$)", text, re.M), f"{script} has no {word}"


@pytest.mark.parametrize("command", commands())
def test_bundled_paths_in_commands_exist(command):
    subst = variables()
    for word in shlex.split(command):
        for name, value in subst.items():
            word = word.replace(f"${name}", value)
        if word.startswith(("tests/fixtures/", "examples/")):
            assert (ROOT / word).exists(), word


def test_referenced_documents_exist():
    for ref in set(re.findall(r"references/[a-z_]+\.(?:md|yaml)", SKILL)):
        assert (ROOT / ref).is_file(), ref


def manual_chain() -> list[str]:
    """The by-hand commands of SKILL.md sections 2-4, in order."""
    part = SKILL[SKILL.index("## 2. "):SKILL.index("## 5. ")]
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", part, re.S):
        lines += [ln.strip() for ln in block.splitlines() if ln.strip().startswith("python scripts/")]
    return lines


@pytest.mark.slow
def test_manual_chain_gives_the_decision_of_the_one_command(tmp_path):
    subst = variables()
    assert "CAP" in subst and "KERNEL" in subst
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("TKO_PEAKS_FILE", "PYTHONPATH")}
    for command in manual_chain():
        words = []
        for word in shlex.split(command):
            for name, value in subst.items():
                word = word.replace(f"${name}", value)
            words.append(str(ROOT / word) if word.startswith(("scripts/", "examples/", "tests/")) else word)
        proc = subprocess.run([sys.executable, *words[1:]], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=600)
        assert proc.returncode == 0, (command, proc.stderr[-2000:])
    by_hand = __import__("json").loads((tmp_path / "triton_investigation.json").read_text())
    out = tmp_path / "one_command"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "investigate.py"), "--from-capture",
                           str(ROOT / subst["CAP"]), "--out", str(out), "--top", "1"], env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    one = __import__("json").loads((out / "kernels" / subst["KERNEL"] / "report.json").read_text())
    assert by_hand["decision"]["verdict"] == one["decision"]["verdict"]
    assert by_hand["decision"]["rule"] == one["decision"]["rule"]
