"""The admin API (``/admin/*``, admin keys only) and the operator console (``/console``).

Wiring (in ``gateway.app.create_app``)::

    routes = [..., *admin_routes(), *console_routes()]
    middleware = [..., Middleware(AdminAuthMiddleware, keys=keys)]
"""

from __future__ import annotations

from gateway.admin.api import admin_routes
from gateway.admin.auth import AdminAuthMiddleware
from gateway.admin.console import console_routes

__all__ = ["AdminAuthMiddleware", "admin_routes", "console_routes"]
