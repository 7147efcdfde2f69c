"""Shared helpers for the warmarena Python tests."""

import gc

import numpy as np
import pytest

import warmarena as wa


@pytest.fixture(autouse=True)
def _collect():
    """Start and end each test with no garbage holding leases."""
    gc.collect()
    yield
    gc.collect()


def image_for(session, seed):
    """A float32 input for `session`, C-contiguous (so it is borrowed)."""
    return session.example_input(seed)


@pytest.fixture
def tiny():
    return wa.Session("tiny")


def both_stats(session):
    return session.exec_arena.stats(), session.io_arena.stats()


def state(stats):
    """An arena's stats without `locked_operations`, which every call
    (reading the stats included) moves whether or not it changes anything."""
    return {k: v for k, v in stats.items() if k != "locked_operations"}


__all__ = ["np", "image_for", "both_stats", "state"]
