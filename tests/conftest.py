"""Suite-wide order: with pytest-xdist (scripts/test.sh runs `-n auto --dist loadscope
--no-loadscope-reorder`), each module runs in one worker, its module-scoped fixtures (compiled
models, dumps, servers) built once, and modules start in collection order. Modules holding a
test marked `slow` go first, so that the longest ones do not start last and leave one core
idle at the end; the order inside a module is kept.

Tiers: `pytest -m "not slow and not browser"` is the fast tier a developer runs on every
change; a module that drives Chromium (it holds test_dashboard_e2e's Browser) is marked
`browser` here, so no such test can slip into the fast tier unmarked.
"""

from __future__ import annotations


def pytest_collection_modifyitems(config, items):
    import pytest

    for item in items:
        module = getattr(item, "module", None)
        if module is not None and getattr(getattr(module, "Browser", None), "__name__", "") == "Browser":
            item.add_marker(pytest.mark.browser)
    slow = {item.nodeid.split("::", 1)[0] for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.nodeid.split("::", 1)[0] not in slow)  # stable: modules stay whole
