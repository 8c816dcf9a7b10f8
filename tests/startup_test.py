import os
import subprocess
import sys

import pytest

from keras_bahdanau import startup

QUALIFIES = (
    sys.platform.startswith("linux")
    and startup._glibc_at_least(2, 35)
    and startup._thp_mode() == "madvise"
)
NEEDS_MADVISE = (
    "needs Linux, glibc 2.35 or later and transparent huge pages in madvise "
    "mode, where the command starts again"
)


class Exec:
    """A stand-in for `os.execv` that records its call."""

    def __init__(self):
        self.calls = []

    def __call__(self, path, argv):
        self.calls.append((path, list(argv)))


@pytest.mark.parametrize(
    "setting, mode",
    [
        ("always [madvise] never\n", "madvise"),
        ("[always] madvise never\n", "always"),
        ("always madvise [never]\n", "never"),
        ("garbled\n", None),
    ],
)
def test_thp_mode_reads_the_bracketed_word(tmp_path, setting, mode):
    path = tmp_path / "enabled"
    path.write_text(setting)
    assert startup._thp_mode(path) == mode
    assert startup._thp_mode(tmp_path / "absent") is None


@pytest.mark.parametrize("mode", ["always", "never", None])
def test_no_new_start_unless_thp_is_in_madvise_mode(monkeypatch, mode):
    monkeypatch.setattr(startup, "_thp_mode", lambda: mode)
    monkeypatch.setattr(startup, "_glibc_at_least", lambda *version: True)
    monkeypatch.setattr(sys, "platform", "linux")
    execv, environ = Exec(), {}
    assert startup.use_huge_pages(environ, execv) is False
    assert execv.calls == [] and environ == {}


def test_starts_again_with_the_tunable_added_to_the_user_s(monkeypatch):
    monkeypatch.setattr(startup, "_thp_mode", lambda: "madvise")
    monkeypatch.setattr(startup, "_glibc_at_least", lambda *version: True)
    monkeypatch.setattr(sys, "platform", "linux")
    execv = Exec()
    environ = {"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}
    startup.use_huge_pages(environ, execv)
    assert environ["GLIBC_TUNABLES"] == (
        "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"
    )
    assert execv.calls == [
        (sys.executable, [sys.executable, *sys.orig_argv[1:]])
    ]
    # The new process finds the tunable and goes on (no loop), as it does
    # when the user set it, to 0 or otherwise.
    for tunables in (environ["GLIBC_TUNABLES"], "glibc.malloc.hugetlb=0"):
        again, execv = {"GLIBC_TUNABLES": tunables}, Exec()
        assert startup.use_huge_pages(again, execv) is False
        assert execv.calls == [] and again == {"GLIBC_TUNABLES": tunables}


def test_not_on_other_systems_or_c_libraries(monkeypatch):
    monkeypatch.setattr(startup, "_thp_mode", lambda: "madvise")
    for platform, glibc in (("darwin", True), ("linux", False)):
        monkeypatch.setattr(sys, "platform", platform)
        monkeypatch.setattr(startup, "_glibc_at_least", lambda *v, g=glibc: g)
        execv, environ = Exec(), {}
        assert startup.use_huge_pages(environ, execv) is False
        assert execv.calls == [] and environ == {}


def test_glibc_version_is_compared_as_numbers(monkeypatch):
    for found, expected in (
        ("glibc 2.36", True),
        ("glibc 2.35", True),
        ("glibc 2.9", False),
        ("glibc 3.0", True),
        ("musl 2.40", False),
    ):
        monkeypatch.setattr(os, "confstr", lambda name, f=found: f)
        assert startup._glibc_at_least(2, 35) is expected, found

    def absent(name):
        raise ValueError("unrecognized configuration name")

    monkeypatch.setattr(os, "confstr", absent)
    assert startup._glibc_at_least(2, 35) is False


@pytest.mark.skipif(not QUALIFIES, reason=NEEDS_MADVISE)
def test_the_command_runs_again_as_the_same_process_with_the_tunable():
    # `keras-bahdanau --version` as a program: the process that prints is
    # the one started (same id), after starting again with the tunable.
    code = (
        "import os; print(os.getpid(), os.environ.get('GLIBC_TUNABLES'));"
        "from keras_bahdanau.cli import main; main()"
    )
    environ = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    process = subprocess.Popen(
        [sys.executable, "-c", code, "--version"],
        env=environ,
        stdout=subprocess.PIPE,
        text=True,
    )
    output, _ = process.communicate(timeout=120)
    assert process.returncode == 0
    first, second, version = output.splitlines()
    assert first == f"{process.pid} None"
    assert second == f"{process.pid} glibc.malloc.hugetlb=1"
    assert version.startswith("keras-bahdanau ")
