"""Everything below ASGI: the HTTP/1.1 edge protocol, its deadlines, draining and serve options."""
