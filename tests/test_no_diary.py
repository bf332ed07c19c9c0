"""The repository speaks of the project only: no work-round, issue or session numbers in any tracked text file.

Why something is as it is belongs in ``docs/decisions.md``; when it happened, and in which round of work, is
git's. What counts as a diary reference (case-insensitive):

* a numbered or ordinal work session: an ordinal (or ``this``, ``last``, ``previous``, ``next``, ``earlier``,
  ``later``) right before the word session, or the word followed by a number. A session of a browser, of pytest,
  of IPython or of a process (``the session``, ``a session``, ``/api/sessions``) is not one;
* an issue number: the word issue followed by a number N (also ``issue_N``, ``issue #N``, ``Issue N:``), unless a
  unit follows the number: a TMA load's *issue* cost is a figure (``issue N cycles``);
* a numbered round of work: the word round followed by a number from 1 up (``round_2``, ``round-4``), or ``rounds``
  and a range of them. Round 0 is left alone: a barrier ring's first trip round is how the teaching notebooks
  count (``round 0 passes at once``); timing rounds are counted the other way round (``5 interleaved rounds``,
  ``--rounds 5``);
* a folder or file of a round's results: ``r15/``, ``goals_r12/``, ``side_by_side_r6.json``.

This file holds the patterns and their examples, so it is not scanned itself.
"""
from __future__ import annotations

import pathlib
import re
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SELF = pathlib.Path(__file__).resolve().relative_to(ROOT).as_posix()

_ORDINALS = ("first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|"
             r"fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth|\d+(?:st|nd|rd|th)")
_UNITS = r"cycles?|ns|us|µs|ms|instructions?|slots?|%"

DIARY = re.compile(rf"""
    \b(?:{_ORDINALS}|this|last|previous|next|earlier|later)\s+session\b     # an ordinal or "this" before session
  | \bsessions?\s+\d+                                                      # "session 9"
  | \bissue[\s_#-]*\d+(?![\d.]*\s*(?:{_UNITS})\b)                          # the word issue, then a number
  | (?<![-\w])rounds?[\s_-]?[1-9]\d*\b                                     # "round 4", "round_2", "round-6"
  | \brounds\s+[1-9]\d*\s*(?:-|–|and|to)\s*\d                              # "rounds 2-4"
  | (?<![\w.])r\d{{1,2}}/                                                  # "r15/"
  | _r\d{{1,2}}(?=[/.])                                                    # "goals_r12/", "side_by_side_r6.json"
""", re.X | re.I)


#: a notebook's stored picture: base64 bytes, not words ("r8/" can occur in them)
_PICTURE = re.compile(r'^\s*"image/(?:png|jpeg|gif)"\s*:')


def diary_refs(text: str) -> list[tuple[int, str]]:
    """(line number, the words) of every diary reference in ``text``."""
    return [(i, m.group(0)) for i, line in enumerate(text.splitlines(), 1) if not _PICTURE.match(line)
            for m in DIARY.finditer(line)]


@pytest.mark.parametrize("text", [
    "## Ninth session (2026-12-02)", "measured in this session", "the fourteenth session's two runs",
    "as the 9th session found", "see session 12", "(issue 19)", "Issue 22's goals", "issue_22_goals.sh",
    "issue #17", "attention round 4", "side_by_side_gemm_r6.json", "GEMM round 6: clusters", "round_2.json", "round-3 default",
    "rounds 2-4", "benchmarks/kernels_h200/r15/tile/", "goals_r13/s1", "bwd_split_tail_r10/log.txt",
])
def test_a_diary_reference_is_found(text):
    assert diary_refs(text), text


def test_a_stored_picture_is_not_words():
    assert not diary_refs('      "image/png": "iVBORw0KGgoAAAr8/AAA="')
    assert diary_refs('"see benchmarks/r8/log"')


@pytest.mark.parametrize("text", [
    "The session's state: the offline target, the torch mapping", "for a session (enable/disable)",
    "fetch('/api/sessions')", "start_new_session=True", "a TMA issue 47 cycles, expect 20", "issue 30 cycles per wgmma",
    "round 0 passes at once", "5 interleaved rounds, best round shown", "vendor_ratios.py --rounds 5", "round(x, 2)", "the rounds' range",
    "it issues 8 wgmmas", "r = rng.random(); arr[r/2]", "a_r2 = acc", "x_r = 3",
])
def test_legitimate_words_are_not_diary(text):
    assert not diary_refs(text), diary_refs(text)


def _tracked_text_files():
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files are git's list")
    for name in out.decode().split("\0"):
        path = ROOT / name
        if not name or name == SELF or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue                      # binary
        try:
            yield name, data.decode("utf-8")
        except UnicodeDecodeError:
            continue


def test_no_tracked_file_keeps_a_diary():
    hits = [f"{name}:{line}: {words!r}" for name, text in _tracked_text_files() for line, words in diary_refs(text)]
    assert not hits, ("round, issue or session numbers in the repository (say what the project does and why, in "
                      "docs/decisions.md; git keeps when):\n" + "\n".join(hits))
