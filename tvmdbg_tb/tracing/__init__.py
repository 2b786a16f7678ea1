"""Instrumentation: captures compiled Relax graphs and traces every Relax VM call.

The only part of tvmdbg that imports TVM eagerly. Public entry points live in `api`.
"""
