"""The JSON API (REST-proxy style): ``routes.py`` (aiohttp handlers over the broker's actors),
``model.py`` (pure request parsing and answer shaping), ``schema.py`` (the OpenAPI document
served at ``/openapi.json``).
"""
