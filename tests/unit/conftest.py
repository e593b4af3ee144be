"""Unit tests share one process, and bringup's masker is the run's one (bringup.secrets.MASK): a secret a test's
inventory taught it ("1" of a file encrypted whole) would mask every standing-alone 1 in later tests' lines
("PID ******** is process_api"). Each test gets the masker back as it found it."""
import pytest

from bringup.secrets import MASK


@pytest.fixture(autouse=True)
def _masker_as_found():
    texts, short, generation = set(MASK._texts), dict(MASK._short), MASK.generation
    yield
    with MASK._lock:
        MASK._texts.clear()
        MASK._texts.update(texts)
        MASK._short.clear()
        MASK._short.update(short)
        MASK.generation = max(MASK.generation, generation) + 1
