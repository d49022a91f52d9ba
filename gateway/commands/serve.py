"""``syntic serve --config PATH [--host H] [--port P] [--workers N]``: run the gateway."""

from __future__ import annotations

import argparse
import importlib.util
import os
from typing import Any

import uvicorn

from gateway.observability.logs import configure_logging, log_format_from_env
from gateway.observability.multiprocess import ENV as MULTIPROC_ENV
from gateway.observability.multiprocess import worker_metrics_dir
from gateway.server.process import freeze_startup_heap
from gateway.server.protocol import serve_options
from gateway.settings import load_settings
from gateway.upstream.connection import Connections


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("serve", help="run the HTTP gateway")
    parser.add_argument("--config", help="TOML config file (default: $SYNTIC_CONFIG)")
    parser.add_argument("--host", help="bind address (default: config or 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port (default: config or 8080)")
    parser.add_argument("--workers", type=int, default=1, help="worker processes")
    parser.add_argument(
        "--log-level",
        default="info",
        help="info logs one JSON line per request (format: $SYNTIC_LOG_FORMAT json|text)",
    )
    parser.set_defaults(func=run)


def _fast(module: str, name: str) -> str:
    return name if importlib.util.find_spec(module) is not None else "auto"


def run(args: argparse.Namespace) -> int:
    settings = load_settings(args.config)
    # Unreadable CA bundles or certificates: a config error now, not a failed startup.
    Connections(settings.env).prepare(settings.models)
    configure_logging(args.log_level, log_format_from_env(os.environ))
    host = args.host or settings.host
    port = settings.port if args.port is None else args.port
    options: dict[str, Any] = {
        "host": host,
        "port": port,
        "loop": _fast("uvloop", "uvloop"),
        "log_level": args.log_level,
        "log_config": None,  # keep gateway.observability.logs' handler (JSON, redacting)
        "access_log": False,  # the gateway writes its own line per request
        # No ``server: uvicorn`` header (one header fewer to validate and write, and no
        # version banner); no X-Forwarded-For rewriting of the client address (the
        # gateway never reads it; one ASGI layer fewer per request).
        "server_header": False,
        "proxy_headers": False,
        "lifespan": "on",
        "timeout_graceful_shutdown": 30,
        **serve_options(settings),  # header timeout and size cap, keep-alive
    }
    if args.workers > 1:
        if args.config:
            os.environ["SYNTIC_CONFIG"] = os.path.abspath(args.config)
        os.environ["SYNTIC_LOG_LEVEL"] = args.log_level  # workers configure their own logs
        # Set before the workers spawn: each merges every worker's metrics into /metrics.
        with worker_metrics_dir(os.environ):
            uvicorn.run(
                "gateway.app:create_app_from_env", factory=True, workers=args.workers, **options
            )
    else:
        # One process: the plain in-process registry, whatever the caller's environment
        # says (prometheus_client reads this variable when the app first imports it).
        os.environ.pop(MULTIPROC_ENV, None)
        from gateway.app import create_app

        app = create_app(settings)
        freeze_startup_heap()
        uvicorn.run(app, **options)
    return 0
