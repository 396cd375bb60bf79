"""The web console: read-only pages over the services' gRPC APIs, live over server-sent events.

``views`` renders proto messages as HTML fragments (pure), ``gateway`` asks the services, ``server`` is
the aiohttp application (login, pages, the event stream) and ``cli`` the `suanli console` command.
docs/console.md describes the pages and the authentication model.
"""
