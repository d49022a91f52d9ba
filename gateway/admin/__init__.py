"""The admin API (``/admin/*``, admin keys only) and the operator console (``/console``).

Their routes are declared in ``gateway.routes.table``; ``create_app`` mounts them behind
``Middleware(AdminAuthMiddleware, keys=keys)``.
"""

from __future__ import annotations

from gateway.admin.auth import AdminAuthMiddleware

__all__ = ["AdminAuthMiddleware"]
