"""Upstream model providers behind one small Protocol (see ``base``)."""
