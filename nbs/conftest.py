"pytest-randomly shuffles test files and notebooks; a notebook's cells still run in order, one after the other."
import pytest


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    "Notebook cells (nbval items) grouped by notebook, in cell order, notebooks in the order the shuffle left them."
    slots = [i for i, it in enumerate(items) if hasattr(it, 'cell_num')]
    rank = {}
    for i in slots: rank.setdefault(items[i].parent.nodeid, len(rank))
    cells = sorted((items[i] for i in slots), key=lambda it: (rank[it.parent.nodeid], it.cell_num))
    for i, it in zip(slots, cells): items[i] = it
