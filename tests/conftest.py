"""Root test configuration: shared fixtures live in ``tests.support.fixtures``.

Hypothesis: under CI (``CI=true``) the property tests run derandomized, so a green main
stays green and a red one reproduces; locally they explore new examples on every run (and
found real bugs that way, e.g. float-oracle limits in the differential test).
"""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI", "").lower() in ("1", "true"):
    settings.load_profile("ci")

pytest_plugins = ("tests.support.fixtures",)
