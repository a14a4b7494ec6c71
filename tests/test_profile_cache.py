"""The TRex loader's answers kept across processes (xenobench.traffic.profiles.DISK_CACHE): a load
is reused only for the very profile, tunables and directory it was made from."""

import shutil
import subprocess

import pytest

from xenobench import REPO_ROOT
from xenobench.traffic import profiles

TUN = {"payload": 22}


class LoaderRan(Exception):
    pass


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """A profile directory of its own (a copy of the stock profiles and their helpers), an empty
    cache, and no in-process answers."""
    d = tmp_path / "profiles"
    shutil.copytree(REPO_ROOT / "trex_profiles", d)
    monkeypatch.setattr(profiles, "DISK_CACHE", tmp_path / "cache")
    monkeypatch.setattr(profiles, "_cache", {})
    return d


def _keep(prof, tun, streams) -> None:
    """What a load of `prof` with `tun` would have left on disk."""
    profiles._disk_write(profiles._disk_key(prof, profiles._key(prof, profiles.tunables_argv(tun))), streams)


def _loader_refused(monkeypatch):
    def refuse(*a, **k):
        raise LoaderRan(a[0])
    monkeypatch.setattr(subprocess, "run", refuse)


def test_a_second_process_reads_the_kept_load_without_the_loader(fresh, monkeypatch):
    prof = fresh / "udp_payload.py"
    _, first = profiles.load_streams(prof, TUN)  # the TRex client's loader, for real
    assert len(list(profiles.DISK_CACHE.glob("*.json"))) == 1
    monkeypatch.setattr(profiles, "_cache", {})  # as a new process starts
    _loader_refused(monkeypatch)
    _, again = profiles.load_streams(prof, TUN)
    assert again == first


@pytest.mark.parametrize("change", ["tunables", "profile", "sibling", "broken"])
def test_a_kept_load_is_not_reused_for_anything_else(fresh, monkeypatch, change):
    prof, tun = fresh / "udp_payload.py", TUN
    _keep(prof, TUN, [{"kept": 1}])
    _loader_refused(monkeypatch)
    assert profiles.load_streams(prof, TUN)[1] == [{"kept": 1}]
    monkeypatch.setattr(profiles, "_cache", {})
    if change == "tunables":
        tun = {"payload": 64}
    elif change == "profile":
        prof.write_text(prof.read_text() + "\n# edited\n")
    elif change == "sibling":  # a file the profile may import, beside it
        (fresh / "helper_of_mine.py").write_text("X = 1\n")
    else:  # a kept file cut short
        (kept,) = profiles.DISK_CACHE.glob("*.json")
        kept.write_text('[{"kept"')
    with pytest.raises(LoaderRan):
        profiles.load_streams(prof, tun)
