"""What a failed command said, in the one line an operator reads: cut between lines, the verdict kept."""
import pytest

from bringup.errors import said

WAIT = "Waiting for cache lock: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 77 (python3)... {}s"
VERDICT = ["E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 77 (python3)",
           "E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), is another process using it?"]


@pytest.mark.reliability(item=18, fault="apt errors cut mid-word: the E: verdict behind its lock-wait chatter",
                         checks=("one clear line",))
def test_apt_verdict_survives_its_progress_chatter():
    out = "\n".join([WAIT.format(i) for i in range(60)] + VERDICT + [f"Reading state information... {i}%" for i in range(80)])
    line = said(out)
    assert len(line) <= 500
    assert line.startswith(" | ".join(VERDICT))
    assert "Reading state information... 79%" in line  # the last lines that fit follow


def test_cut_only_between_lines():
    words = [f"line-{i:03d}-" + "w" * 30 for i in range(50)]
    line = said("\n".join(words), 200)
    parts = line.split(" | ")
    assert all(p in words for p in parts)  # no line cut mid-word
    assert parts[-1] == words[-1]


def test_one_long_line_keeps_its_end():
    line = said("x" * 1000 + "END", 100)
    assert len(line) == 100 and line.startswith("…") and line.endswith("END")


def test_repeated_lines_once():
    assert said("a\na\nb\n\n  a  \n") == "a | b"
