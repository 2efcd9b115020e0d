"""Peak Python allocations of a call: how tests show that a change holds less at once."""

import tracemalloc


def peak_allocations(read):
    """``(peak bytes of Python allocations while read() ran, what it returned)``."""
    tracemalloc.start()
    try:
        kept = read()
        return tracemalloc.get_traced_memory()[1], kept
    finally:
        tracemalloc.stop()
