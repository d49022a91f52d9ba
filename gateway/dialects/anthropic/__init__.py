"""The Anthropic Messages dialect (``POST /v1/messages``).

``decode`` (wire -> canonical, with ``param`` on every shape error), ``encode`` (canonical ->
``message`` JSON), ``stream`` (canonical events -> Messages SSE), ``endpoint`` and
``stream_endpoint`` (the route). Never imports the openai dialect.
"""
