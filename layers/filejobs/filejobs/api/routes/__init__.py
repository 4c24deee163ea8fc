"""The status API's routes, one Router per resource (Powertools' split_route_module pattern);
functions/api/app.py includes each in its resolver, in `ROUTERS`' order.

Each route identifies its caller, parses its request into a command (api/parsing.py), hands
both to its use case (api/use_cases.py) and renders the result (api/rendering.py); its OpenAPI
description is api/openapi.py's.
"""

from __future__ import annotations

from filejobs.api.routes import (
    console_page,
    files,
    jobs,
    operations,
    overview,
    presets,
    reference,
    schedules,
    tenants,
    uploads,
    webhooks,
)

ROUTERS = (
    reference.router,
    files.router,
    jobs.router,
    overview.router,
    operations.router,
    schedules.router,
    presets.router,
    tenants.router,
    uploads.router,
    webhooks.router,
    console_page.router,
)
