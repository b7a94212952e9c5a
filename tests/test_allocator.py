"""The allocator settings of batch work (bnpvi.learn.allocator)."""
import ctypes
import sys

import pytest

from bnpvi.learn import allocator


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt is Linux's")
def test_glibc_takes_every_setting():
    assert allocator.reuse_freed_memory() is True


def test_a_libc_without_mallopt_is_left_alone(monkeypatch):
    def no_libc(name):
        raise OSError("no C library here")

    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(ctypes, "CDLL", no_libc)
    assert allocator.reuse_freed_memory() is False


def test_other_systems_are_left_alone(monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(ctypes, "CDLL", lambda name: pytest.fail("no C library is opened off Linux"))
    assert allocator.reuse_freed_memory() is False


def test_the_settings_stay_within_what_glibc_accepts():
    thresholds = dict(allocator.SETTINGS)
    assert thresholds[allocator.M_MMAP_THRESHOLD] <= 4 * 1024 * 1024 * ctypes.sizeof(ctypes.c_long)
    assert all(0 < value < 2**31 for value in thresholds.values())
