"""The default state directory's whole path is checked (issue 23): ``/tmp/numalign-$UID`` can
be created first by another user in a shared ``/tmp`` - mode 0777, a symlink, or owned by them
- and numalign used it silently, checking only the last directory. The base and every
directory below it on the way to the state directory are now held to the last one's rule
(a directory, not a symlink, the user's, not writable by group or others), with a one-line
error; a missing one is created 0700."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from numalign.errors import StateError
from numalign.launcher import runs
from numalign.node import store


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    b = tmp_path / "numalign-1000"
    monkeypatch.setattr(store, "default_state_base", lambda: b)
    return b


def target(base: Path) -> Path:
    return base / "machines" / "spec_abc"


def test_the_default_path_is_created_private(base: Path) -> None:
    store.check_directory(target(base))
    for d in (base, base / "machines", target(base)):
        assert stat.S_IMODE(os.lstat(d).st_mode) == 0o700


@pytest.mark.parametrize("level", ["base", "machines"])
def test_a_world_writable_directory_on_the_way_is_refused(base: Path, level: str) -> None:
    (base / "machines").mkdir(parents=True, mode=0o700)
    os.chmod(base, 0o700)
    os.chmod(base if level == "base" else base / "machines", 0o777)
    with pytest.raises(StateError) as e:
        store.check_directory(target(base))
    where = base if level == "base" else base / "machines"
    assert str(e.value) == f"{where}: writable by group or others (mode 777); refusing it (chmod go-w)"
    assert not target(base).exists()  # nothing created below it


def test_a_symlinked_base_is_refused(base: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "planted"
    elsewhere.mkdir(mode=0o700)
    base.symlink_to(elsewhere)
    with pytest.raises(StateError, match="not a directory \\(a symlink or file is refused\\)"):
        store.check_directory(target(base))
    assert list(elsewhere.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory to another user")
def test_a_base_owned_by_another_user_is_refused(base: Path) -> None:
    base.mkdir(mode=0o700)
    os.chown(base, 4242, -1)
    with pytest.raises(StateError, match=f"owned by uid 4242, not by you \\(uid {os.geteuid()}\\)"):
        store.check_directory(target(base))


def test_run_and_ps_use_the_checked_path(base: Path) -> None:
    base.mkdir(mode=0o777)
    os.chmod(base, 0o777)
    with pytest.raises(StateError, match="writable by group or others"), store.locked(base):
        pass
    assert runs.state_dirs(None) == []  # nothing stored there is read as state


def test_an_explicit_state_dir_outside_the_base_is_checked_as_before(base: Path, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # a parent the user chose: only the state directory is judged
    store.check_directory(shared / "state")
    assert stat.S_IMODE(os.lstat(shared / "state").st_mode) == 0o700


def test_numalign_run_refuses_it_in_one_line(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from numalign.cli import main

    base.mkdir()
    os.chmod(base, 0o777)
    spec = Path(__file__).resolve().parents[1] / "examples" / "fig1.yaml"
    assert main(["run", "-m", str(spec), "--cpus", "1", "--", "true"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("numalign run: error: ") and f"{base}: writable by group or others" in err
