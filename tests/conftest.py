"""Root test configuration: shared fixtures live in ``tests.support.fixtures``."""

pytest_plugins = ("tests.support.fixtures",)
