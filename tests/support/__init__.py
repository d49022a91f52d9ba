"""Shared test infrastructure: a scripted upstream server and gateway launchers.

- ``tests.support.scripted_upstream``: a real HTTP server on loopback replaying scripted
  model behaviour in a provider's wire format (OpenAI built in; renderers pluggable by path).
- ``tests.support.gateway_proc``: start the gateway as a real server (subprocess, with
  ``syntic migrate`` + ``syntic keys create``) or in process (uvicorn in a thread).
"""
